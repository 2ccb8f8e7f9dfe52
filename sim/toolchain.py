"""Find a RISC-V C compiler, build firmware with a cache, and load ELF images.

The compiler is ``riscv64-unknown-elf-gcc`` when it is on PATH and has an rv32 libgcc, else the
clang inside the PyPI ``ziglang`` package (``python -m ziglang cc``), which targets riscv32 out of
the box; ``PYARD_TOOLCHAIN=gcc`` or ``=zig`` picks one (an error if it is missing). Builds are
cached under ``$PYARD_BUILD_DIR/fw/`` (default ``build/fw/``) keyed by the compiler, the flags, the
sources, the linker script and every file the compiler read (its ``-MD`` dependency output), so a
test run compiles each program once and a changed header is never missed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sim import children, progress
from sim.paths import build_root

__all__ = [
    "TOOLCHAINS",
    "ElfImage",
    "Firmware",
    "Toolchain",
    "ToolchainError",
    "build",
    "find_toolchain",
    "link",
    "load_elf",
]

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = build_root() / "fw"
DEFAULT_LINKER_SCRIPT = REPO / "firmware" / "link" / "test.ld"
COMMON_FLAGS = ("-nostdlib", "-ffreestanding", "-static", "-fno-pic", "-g")


class ToolchainError(RuntimeError):
    """No usable compiler, or a build failed (the message carries the compiler output)."""


@dataclass(frozen=True)
class Toolchain:
    """How to invoke the compiler driver and objcopy."""

    name: str
    cc: tuple[str, ...]
    objcopy: tuple[str, ...]
    arch_flags: tuple[str, ...]
    libs: tuple[str, ...] = ()  # linked last (the compiler's runtime helpers, e.g. 64-bit division)


TOOLCHAINS = ("gcc", "zig")


def find_toolchain(name: str | None = None) -> Toolchain:
    """``name`` ("gcc" or "zig"), else $PYARD_TOOLCHAIN, else the GNU toolchain when it can build
    rv32 programs, else zig's clang."""
    name = name or os.environ.get("PYARD_TOOLCHAIN") or None
    if name not in (None, *TOOLCHAINS):
        raise ToolchainError(f"PYARD_TOOLCHAIN = {name!r} is invalid: allowed {', '.join(TOOLCHAINS)}")
    gcc = _gcc() if name in (None, "gcc") else None
    if gcc or name == "gcc":
        if not gcc:
            raise ToolchainError("riscv64-unknown-elf-gcc with an rv32 libgcc is not installed (./install.sh)")
        return gcc
    try:
        import ziglang  # noqa: F401  (only probing that the package is installed)
    except ImportError as err:
        raise ToolchainError("no RISC-V compiler: install riscv64-unknown-elf-gcc or `pip install ziglang`") from err
    zig = (sys.executable, "-m", "ziglang")
    arch = ("-target", "riscv32-freestanding-none", "-mcpu=generic_rv32+m+a+zicsr")
    return Toolchain("zig", (*zig, "cc"), (*zig, "objcopy"), arch)


@functools.cache  # one probe per process: it runs the compiler driver
def _gcc() -> Toolchain | None:
    """The GNU toolchain, if it has a libgcc for rv32 without compressed instructions. -march with
    _zicsr matches no multilib (gcc would link its rv64 default), so the library is named by path:
    the rv32im one, whose helpers run on our rv32ima core. Zifencei is named because gcc 12 no
    longer counts fence.i as part of I (the core executes it as a no-op)."""
    gcc = shutil.which("riscv64-unknown-elf-gcc")
    if not gcc:
        return None
    probe = [gcc, "-march=rv32im", "-mabi=ilp32", "-print-libgcc-file-name"]
    libgcc = subprocess.run(probe, capture_output=True, text=True, check=False).stdout.strip()
    if "/rv32i" not in libgcc or not Path(libgcc).is_file():
        return None
    objcopy = shutil.which("riscv64-unknown-elf-objcopy") or "riscv64-unknown-elf-objcopy"
    return Toolchain("gcc", (gcc,), (objcopy,), ("-march=rv32ima_zicsr_zifencei", "-mabi=ilp32"), (libgcc,))


@dataclass(frozen=True)
class Firmware:
    """Outputs of one build."""

    elf: Path
    bin: Path
    hex: Path  # one 32-bit little-endian word per line, from the load address of the image


def _hash_files(paths: Sequence[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _run(cmd: Sequence[str], cwd: Path | None = None) -> None:
    proc = children.run(list(cmd), text=True, cwd=cwd)
    if proc.returncode != 0:
        # The compiler's own message first: that is what the user has to fix.
        message = (proc.stderr + proc.stdout).strip() or f"exit status {proc.returncode}"
        raise ToolchainError(f"{Path(cmd[0]).name} failed:\n{message}")


def read_depfile(text: str, base: Path) -> list[Path]:
    """The prerequisites of a Make dependency file as the compiler writes it (``-MD``)."""
    body = text.replace("\\\n", " ")
    deps: list[Path] = []
    for line in body.splitlines():
        _, sep, rest = line.partition(": ")
        if not sep:
            continue
        for name in re.split(r"(?<!\\) ", rest.strip()):
            if name and not name.endswith(":"):
                deps.append((base / name.replace("\\ ", " ")).resolve())
    return deps


def _cached(out_dir: Path, key: str) -> Path | None:
    """A build of this key whose recorded dependencies all still have the contents it was built from."""
    for candidate in sorted(out_dir.glob(f"{key}-*")):
        manifest = candidate / "deps.json"
        if not manifest.is_file():
            continue
        recorded: dict[str, str] = json.loads(manifest.read_text())
        paths = [Path(p) for p in recorded]
        if all(p.is_file() for p in paths) and _hash_files(paths) == recorded:
            return candidate
    return None


def link(
    tc: Toolchain,
    flags: Sequence[str],
    linker_script: Path,
    sources: Sequence[Path],
    out_dir: Path,
    then: Callable[[Path], None] | None = None,
) -> Path:
    """Compile each of ``sources`` and link them into ``<out_dir>/<key>-<deps>/image.elf`` unless an
    up-to-date build exists; returns its directory. ``then(directory)`` adds more outputs before the
    build is published.

    The cache is keyed on what the compiler actually read: the compiler, the flags, the sources and
    the linker script name a key, and each build of that key records the dependency files the
    compiler wrote (``-MD``: every header, ``.inc`` or other included file, wherever it lives) with
    their contents; a build is reused only while all of them are unchanged. Each build is made in a
    private directory and renamed into place, so parallel test workers never see (or clobber) a
    half-written build.
    """
    key = _digest(tc, tuple(flags), str(linker_script), tuple(map(str, sources)))
    found = _cached(out_dir, key)
    if found is not None:
        return found
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=out_dir))
    try:
        with progress.phase(f"Compiling firmware: {len(sources)} sources with {tc.name}", len(sources), "files") as ph:
            objects = []
            for n, src in enumerate(sources):
                obj = tmp / f"{n}-{src.stem}.o"
                _run([*tc.cc, *flags, "-c", str(src), "-MD", "-MF", f"{obj}.d", "-o", str(obj)])
                objects.append(obj)
                ph.advance()
            _run(
                [*tc.cc, *flags, f"-Wl,-T,{linker_script}", *map(str, objects), "-o", str(tmp / "image.elf"), *tc.libs]
            )
        deps = {Path(linker_script).resolve(), *(Path(s).resolve() for s in sources)}
        for obj in objects:
            deps.update(read_depfile(Path(f"{obj}.d").read_text(), Path.cwd()))
        manifest = _hash_files(sorted(deps))
        (tmp / "deps.json").write_text(json.dumps(manifest, indent=1))
        if then:
            then(tmp)
    except (ToolchainError, OSError):
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    target = out_dir / f"{key}-{_digest(manifest)}"
    try:
        tmp.rename(target)
    except OSError:  # another worker finished the same build first; its result is identical
        shutil.rmtree(tmp)
    return target


def build(
    sources: Sequence[Path | str],
    *,
    flags: Sequence[str] = ("-O2",),
    linker_script: Path = DEFAULT_LINKER_SCRIPT,
    include_dirs: Sequence[Path] = (),
    out_dir: Path = BUILD_DIR,
    toolchain: Toolchain | None = None,
) -> Firmware:
    """Compile and link ``sources`` (C or assembly) into an ELF, a flat binary and a hex file."""
    tc = toolchain or find_toolchain()
    srcs = [Path(s).resolve() for s in sources]
    includes = [Path(d).resolve() for d in include_dirs] + sorted({s.parent for s in srcs})
    all_flags = [*tc.arch_flags, *COMMON_FLAGS, *flags, *(f"-I{d}" for d in includes)]

    def images(directory: Path) -> None:
        binary = directory / "image.bin"
        _run([*tc.objcopy, "-O", "binary", str(directory / "image.elf"), str(binary)])
        data = binary.read_bytes()
        data += bytes(-len(data) % 4)
        words = struct.unpack(f"<{len(data) // 4}I", data)
        (directory / "image.hex").write_text("".join(f"{w:08x}\n" for w in words))

    target = link(tc, all_flags, linker_script, srcs, out_dir, images)
    return Firmware(target / "image.elf", target / "image.bin", target / "image.hex")


@dataclass
class ElfImage:
    """Loadable segments and symbols of a 32-bit little-endian ELF executable."""

    entry: int
    segments: list[tuple[int, bytes]] = field(default_factory=list)  # (address, bytes incl. zero fill)
    symbols: dict[str, int] = field(default_factory=dict)

    def words(self, base: int, size: int) -> list[int]:
        """The image as little-endian words of a memory of ``size`` bytes at ``base``."""
        mem = bytearray(size)
        for addr, data in self.segments:
            if addr < base or addr + len(data) > base + size:
                raise ValueError(f"segment at {addr:#x} (+{len(data)}) is outside memory {base:#x}+{size:#x}")
            mem[addr - base : addr - base + len(data)] = data
        return list(struct.unpack(f"<{size // 4}I", bytes(mem)))


def load_elf(path: Path | str) -> ElfImage:
    """Parse PT_LOAD program headers (the loadable image) and the symbol table (for test results)."""
    raw = Path(path).read_bytes()
    if raw[:4] != b"\x7fELF" or raw[4] != 1 or raw[5] != 1:
        raise ValueError(f"{path}: not a 32-bit little-endian ELF file")
    (entry, phoff, shoff) = struct.unpack_from("<III", raw, 24)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", raw, 42)
    image = ElfImage(entry)
    for n in range(phnum):
        ptype, offset, _vaddr, paddr, filesz, memsz = struct.unpack_from("<IIIIII", raw, phoff + n * phentsize)
        if ptype == 1 and memsz:  # PT_LOAD
            image.segments.append((paddr, raw[offset : offset + filesz] + bytes(memsz - filesz)))
    sections = [struct.unpack_from("<IIIIIIIIII", raw, shoff + n * shentsize) for n in range(shnum)]
    for sh in sections:
        if sh[1] == 2:  # SHT_SYMTAB; sh_link names its string table
            strtab = sections[sh[6]]
            for off in range(sh[4], sh[4] + sh[5], 16):
                name_off, value = struct.unpack_from("<II", raw, off)
                name = raw[strtab[4] + name_off : raw.index(b"\0", strtab[4] + name_off)].decode()
                if name:
                    image.symbols[name] = value
    return image

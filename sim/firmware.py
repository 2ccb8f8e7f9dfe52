"""Build a firmware program for a SoC config: runtime + accelerator driver + the program's sources.

``build_firmware(cfg, sources)`` writes the config's ``pyard_soc.h`` and ``link.ld`` (soc/memmap.py),
then compiles ``firmware/runtime/*``, ``firmware/driver/*`` and the sources with the compiler
sim/toolchain.py finds, into one ELF. Builds are cached under ``build/fw/<hash>/`` keyed by the
compiler, the flags and the contents of every source, header and the linker script, so a test run
compiles each program once. Only an ELF is produced: the SoC's regions are far apart (0x0 ITCM,
0x1000_0000 data RAM), so a flat image would be hundreds of MiB; the simulator loads PT_LOAD
segments instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from sim.paths import build_root
from sim.toolchain import COMMON_FLAGS, Toolchain, ToolchainError, find_toolchain, link
from soc.config import SocConfig
from soc.memmap import write_firmware_files

__all__ = ["BUILD_DIR", "DRIVER_DIR", "RUNTIME_DIR", "build_firmware", "c_bytes", "firmware_dir", "library_sources"]

REPO = Path(__file__).resolve().parent.parent
RUNTIME_DIR = REPO / "firmware" / "runtime"
DRIVER_DIR = REPO / "firmware" / "driver"
BUILD_DIR = build_root() / "fw"
# -O2 for speed; sections + --gc-sections keep unused runtime/driver code out of the ITCM.
OPT_FLAGS = (
    "-O2",
    "-Wall",
    "-Wextra",
    "-ffunction-sections",
    "-fdata-sections",
    "-fno-asynchronous-unwind-tables",
    "-Wl,--gc-sections",
)


def library_sources() -> list[Path]:
    """The runtime and driver sources linked into every program (crt0 first)."""
    runtime = sorted(RUNTIME_DIR.glob("*.[cS]"), key=lambda p: (p.name != "crt0.S", p.name))
    return [*runtime, *sorted(DRIVER_DIR.glob("*.c"))]


def firmware_dir(cfg: SocConfig, out_dir: Path = BUILD_DIR) -> Path:
    """The directory holding the config's generated ``pyard_soc.h`` and ``link.ld`` (written if needed)."""
    key = hashlib.sha256(cfg.to_json().encode()).hexdigest()[:16]
    target = out_dir / f"soc-{cfg.name}-{key}"
    write_firmware_files(cfg, target)
    return target


def _flags(tc: Toolchain, defines: Mapping[str, object], includes: Sequence[Path], extra: Sequence[str]) -> list[str]:
    defs = [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in sorted(defines.items())]
    return [*tc.arch_flags, *COMMON_FLAGS, *OPT_FLAGS, *extra, *defs, *(f"-I{d}" for d in includes)]


def build_firmware(
    cfg: SocConfig,
    sources: Sequence[Path | str],
    *,
    defines: Mapping[str, object] | None = None,
    flags: Sequence[str] = (),
    include_dirs: Sequence[Path | str] = (),
    out_dir: Path = BUILD_DIR,
    toolchain: str | None = None,
) -> Path:
    """Compile and link ``sources`` (C or assembly) with the runtime and driver for ``cfg``; returns the ELF.

    ``defines`` become ``-D`` flags (a value of None defines the name alone), e.g.
    ``{"PYARD_NHARTS_ACTIVE": 2}`` runs the program on two harts of a larger SoC. ``toolchain``
    ("gcc" or "zig") overrides the choice of sim/toolchain.py.
    """
    tc = find_toolchain(toolchain)
    gen = firmware_dir(cfg, out_dir)
    srcs = [Path(s).resolve() for s in sources]
    missing = [str(s) for s in srcs if not s.is_file()]
    if missing:
        raise ToolchainError(f"no such firmware source: {', '.join(missing)}")
    user_dirs = [Path(d).resolve() for d in include_dirs] + sorted({s.parent for s in srcs})
    includes = [gen, RUNTIME_DIR, DRIVER_DIR, *dict.fromkeys(user_dirs)]
    all_flags = _flags(tc, defines or {}, includes, flags)
    all_srcs = [*library_sources(), *srcs]
    return link(tc, all_flags, gen / "link.ld", all_srcs, out_dir) / "image.elf"


def c_bytes(name: str, data: bytes, *, const: bool = True) -> str:
    """A C definition of ``data`` as a word-aligned byte array (padded to whole words), for
    generated test inputs: ``const`` arrays go to .rodata in the data RAM."""
    data = data + bytes(-len(data) % 4)
    rows = (", ".join(str(b) for b in data[i : i + 24]) for i in range(0, len(data), 24))
    body = ",\n  ".join(rows)
    qual = "static const " if const else "static "
    return f"{qual}uint8_t {name}[{len(data)}] __attribute__((aligned(4))) = {{\n  {body}\n}};\n"

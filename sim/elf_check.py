"""Checks that an ELF can run on a SoC config, made before a SoC is built or simulated.

An ELF linked for another config (a bigger data RAM, more harts) would load and then hang or
corrupt memory; a file that is not an RV32 executable would be read as garbage. Each refusal is
one line naming what is wrong and what the target allows.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from soc.config import SocConfig
from soc.memmap import DRAM_BASE, ITCM_BASE, MEM_BASE

EM_RISCV = 243
PF_X = 1
# Symbols of the runtime's link.ld (soc/memmap.py) that must lie in the target's data RAM.
STACK_SYMBOLS = ("__stack_bottom", "__stack_top")


class ElfError(ValueError):
    """The file cannot run on the SoC (message: one line)."""


@dataclass(frozen=True)
class Segment:
    addr: int
    memsz: int
    executable: bool


def regions(cfg: SocConfig) -> dict[str, tuple[int, int]]:
    return {
        "ITCM": (ITCM_BASE, cfg.itcm_bytes),
        "data RAM": (DRAM_BASE, cfg.dram_bytes),
        "main memory": (MEM_BASE, cfg.mem_bytes),
    }


def read_header(raw: bytes, path: Path) -> tuple[int, list[Segment]]:
    """(entry, loadable segments) of an RV32 little-endian executable; ElfError otherwise."""
    if raw[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if len(raw) < 52:
        raise ElfError(f"{path}: truncated ELF file ({len(raw)} bytes, the header alone is 52)")
    if raw[4] != 1 or raw[5] != 1:
        kind = "a 64-bit" if raw[4] == 2 else "a big-endian" if raw[5] == 2 else "an unknown kind of"
        raise ElfError(f"{path}: {kind} ELF; the SoC runs RV32 little-endian executables")
    machine = struct.unpack_from("<H", raw, 18)[0]
    if machine != EM_RISCV:
        raise ElfError(f"{path}: ELF for machine {machine}, not RISC-V ({EM_RISCV})")
    entry, phoff = struct.unpack_from("<II", raw, 24)
    phentsize, phnum = struct.unpack_from("<HH", raw, 42)
    if phoff + phnum * phentsize > len(raw) or (phnum and phentsize < 32):
        raise ElfError(f"{path}: truncated ELF file (its program headers end past byte {len(raw)})")
    segments = []
    for n in range(phnum):
        ptype, offset, _vaddr, paddr, filesz, memsz, flags = struct.unpack_from("<IIIIIII", raw, phoff + n * phentsize)
        if ptype != 1 or not memsz:  # PT_LOAD with contents
            continue
        if offset + filesz > len(raw):
            raise ElfError(f"{path}: truncated ELF file (a segment's data ends past byte {len(raw)})")
        segments.append(Segment(paddr, memsz, bool(flags & PF_X)))
    return entry, segments


def check_elf(cfg: SocConfig, path: Path) -> None:
    """Refuse an ELF the SoC ``cfg`` cannot run: see the module docstring."""
    from sim.toolchain import load_elf

    raw = Path(path).read_bytes()
    entry, segments = read_header(raw, path)
    mem = regions(cfg)
    where = ", ".join(f"{n} {b:#x}-{b + s - 1:#x}" for n, (b, s) in mem.items())
    for seg in segments:
        inside = [n for n, (b, s) in mem.items() if b <= seg.addr and seg.addr + seg.memsz <= b + s]
        if not inside:
            raise ElfError(
                f"{path}: a segment of {seg.memsz} bytes at {seg.addr:#x} does not fit the memories of "
                f"{cfg.name} ({where}); was it linked for another config?"
            )
        if seg.executable and inside != ["ITCM"]:
            raise ElfError(f"{path}: code at {seg.addr:#x} is outside the ITCM, the only memory the harts fetch from")
    if entry != ITCM_BASE:
        raise ElfError(f"{path}: entry point {entry:#x}, but the harts start at {ITCM_BASE:#x} (the ITCM's start)")
    symbols = load_elf(path).symbols
    base, size = mem["data RAM"]
    for name in STACK_SYMBOLS:
        if name in symbols and not base <= symbols[name] <= base + size:
            raise ElfError(
                f"{path}: {name} = {symbols[name]:#x} is outside the data RAM of {cfg.name} "
                f"({base:#x}-{base + size - 1:#x}); was it linked for another config?"
            )

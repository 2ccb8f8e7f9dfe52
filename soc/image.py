"""A program's initial memory contents, for a SoC whose memories start with the program in them.

On an FPGA there is no simulation harness to write the program over the debug bus before the
harts start, so the ELF's loadable segments become the initial contents of the ITCM, the data RAM
and main memory (block RAM ``init``). The words are little-endian, as the harts read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rtl.config import ConfigError
from soc.config import SocConfig
from soc.memmap import DRAM_BASE, ITCM_BASE, MEM_BASE

__all__ = ["MemoryImage"]


@dataclass(frozen=True)
class MemoryImage:
    """Words of each memory from its first word on (trailing words not listed start at zero)."""

    itcm: tuple[int, ...] = ()
    dram: tuple[int, ...] = ()
    mem: tuple[int, ...] = ()

    @classmethod
    def from_segments(cls, cfg: SocConfig, segments: Iterable[tuple[int, bytes]], mem_bytes: int) -> MemoryImage:
        """The image of ``(address, bytes)`` segments; a segment outside the memories is a ConfigError.

        ``mem_bytes`` is the size of the main memory that holds the image (a board's block RAM
        can be smaller than ``cfg.mem_bytes``, the address range the SoC decodes)."""
        regions = {
            "itcm": (ITCM_BASE, cfg.itcm_bytes),
            "dram": (DRAM_BASE, cfg.dram_bytes),
            "mem": (MEM_BASE, mem_bytes),
        }
        images = {name: bytearray() for name in regions}
        for addr, data in segments:
            name = _region_of(regions, addr, len(data))
            offset = addr - regions[name][0]
            image = images[name]
            image.extend(bytes(max(0, offset + len(data) - len(image))))
            image[offset : offset + len(data)] = data
        return cls(**{name: _words(bytes(image)) for name, image in images.items()})


def _region_of(regions: dict[str, tuple[int, int]], addr: int, size: int) -> str:
    for name, (base, length) in regions.items():
        if base <= addr and addr + size <= base + length:
            return name
    where = ", ".join(f"{n} {b:#x}-{b + s - 1:#x}" for n, (b, s) in regions.items())
    raise ConfigError("firmware", f"{size} bytes at {addr:#x}", f"segments inside {where}")


def _words(image: bytes) -> tuple[int, ...]:
    image += bytes(-len(image) % 4)
    return tuple(int.from_bytes(image[i : i + 4], "little") for i in range(0, len(image), 4))

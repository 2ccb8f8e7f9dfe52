"""Reference model of the scratchpad (``rtl/scratchpad.py``): rows, banks, arbitration, masked writes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.scratchpad import sp_geometry

__all__ = ["ScratchpadModel"]


class ScratchpadModel:
    """The scratchpad's state and rules, cycle by cycle: ``grants``, then ``read`` (a read sees
    the rows as they were before this cycle's writes), then ``write``."""

    def __init__(self, cfg: AccelConfig) -> None:
        self.dim = max(cfg.rows, cfg.cols)
        self.rows, self.bank_rows = sp_geometry(cfg)
        self.mem = np.zeros((self.rows, self.dim), dtype=np.uint64)

    def bank(self, addr: int) -> int:
        return addr // self.bank_rows

    def grants(self, requests: Sequence[int | None]) -> list[bool]:
        """Which read requests (a row address, or None for no request) are accepted this cycle:
        per bank, the lowest-numbered port that asks for it."""
        taken: set[int] = set()
        result = []
        for addr in requests:
            ok = addr is not None and self.bank(addr) not in taken
            result.append(ok)
            if addr is not None:
                taken.add(self.bank(addr))
        return result

    def write(self, addr: int, data: npt.ArrayLike, mask: int) -> None:
        enables = [(mask >> k) & 1 == 1 for k in range(self.dim)]
        self.mem[addr] = np.where(enables, np.asarray(data, dtype=np.uint64), self.mem[addr])

    def read(self, addr: int) -> npt.NDArray[np.uint64]:
        return self.mem[addr].copy()

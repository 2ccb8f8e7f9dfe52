"""Reference model of the accumulator (``rtl/accumulator.py``): rows, add-on-write and read-out.

Ordering, as the hardware guarantees it: a write accepted in cycle t is seen by every write and read
accepted in a later cycle. A read accepted in the same cycle as a write does not see it, so a
testbench calls ``read`` for a cycle's reads before ``write`` for that cycle's writes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.accumulator import acc_geometry
from rtl.config import AccelConfig
from rtl.fp_model import fp_add
from rtl.readout_model import readout

__all__ = ["AccumulatorModel", "add_rows"]


def add_rows(cfg: AccelConfig, old: npt.ArrayLike, new: npt.ArrayLike) -> npt.NDArray[np.unsignedinteger]:
    """Element-wise ``old + new`` of accumulator bit patterns: int32 wrapping, or the FP adder
    (``new`` widened to fp32 exactly, the sum rounded at the accumulator precision)."""
    old_u, new_u = np.asarray(old, dtype=np.uint64), np.asarray(new, dtype=np.uint64)
    if cfg.acc_dtype == "int32":
        return ((old_u + new_u) & 0xFFFFFFFF).astype(np.uint32)
    if cfg.acc_dtype == "bf16":
        return fp_add(old_u.astype(np.uint32), new_u.astype(np.uint32) << 16, 7)
    return fp_add(old_u.astype(np.uint32), new_u.astype(np.uint32), 23)


class AccumulatorModel:
    def __init__(self, cfg: AccelConfig) -> None:
        self.cfg = cfg
        self.rows, self.bank_rows = acc_geometry(cfg)
        self.mem = np.zeros((self.rows, cfg.cols), dtype=np.uint64)

    def bank(self, addr: int) -> int:
        return addr // self.bank_rows

    def write(self, addr: int, data: npt.ArrayLike, accumulate: bool, mask: int | None = None) -> None:
        """A mesh write (``mask`` None: every element) or a DMA write (element ``k`` if ``mask`` bit k)."""
        cols = self.cfg.cols
        enables = np.ones(cols, dtype=bool) if mask is None else np.array([(mask >> k) & 1 == 1 for k in range(cols)])
        new = np.asarray(data, dtype=np.uint64)
        value = add_rows(self.cfg, self.mem[addr], new) if accumulate else new
        self.mem[addr] = np.where(enables, np.asarray(value, dtype=np.uint64), self.mem[addr])

    def read(self, addr: int, scale: int, act: int, out: int) -> npt.NDArray[np.uint64]:
        return readout(self.cfg, self.mem[addr], scale, act, out).astype(np.uint64)

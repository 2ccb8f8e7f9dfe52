"""Reference model of the vector engine (``rtl/vector/engine.py``) and the VEC command's encoding.

A VEC command (docs/isa.md, "VEC") computes, for each row ``r < rows`` in order::

    y = lane(op, widen(A[a + r]), widen(B[b + r or b]), scalar, shift)   # first ``elems`` elements
    y = [fold(y)] with reduce: y[0], then ADD (or MAX) of it and y[1], y[2], … in order (the lane's)
    D[d + r or d] = narrow(y)                   # or, accumulating, D[...] = D[...] + narrow(y)

UPDATE (op 16) is the FPTT update unit's (``update_model.update``) over four scratchpad tensors.
REQUANT (op 17, int8 tiles) reads B as two accumulator rows used with every row of A: the
per-column multipliers (row ``b``) and shifts (row ``b + 1``); ``lane_model.requant``.

Accumulator rows are read through the read-out set to the identity (scale 1.0 or shift 0, no
activation, full width), which flushes subnormals and makes NaNs canonical, as the lanes do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rtl.accumulator_model import add_rows
from rtl.config import AccelConfig
from rtl.fp_model import round_bf16
from rtl.readout_model import readout
from rtl.vector import update_model
from rtl.vector.lane_model import lane
from rtl.vector.ops import VecOp

__all__ = ["B_OPERAND_OPS", "OPCODE", "REQUANT_ROWS", "VecCommand", "narrow", "requant_scalar", "run", "widen"]

OPCODE = 0x05
ONE_F32 = 0x3F800000
REQUANT_ROWS = 2  # REQUANT's B: the multipliers' and the shifts' accumulator rows
# Operations that read B; the others ignore its fields and read nothing for it.
B_OPERAND_OPS = frozenset({VecOp.ADD, VecOp.SUB, VecOp.MUL, VecOp.MADDS, VecOp.MAX, VecOp.MIN})


@dataclass(frozen=True)
class VecCommand:
    """One VEC command's fields (docs/isa.md); ``words()`` is what software pushes."""

    op: int
    rows: int
    elems: int
    a: int = 0
    b: int = 0
    d: int = 0
    a_acc: bool = False
    b_acc: bool = False
    d_acc: bool = False
    b_one: bool = False
    d_one: bool = False
    accumulate: bool = False
    reduce: bool = False  # fold each result row into its element 0
    reduce_max: bool = False  # the fold: sum (False) or max
    scalar: int = 0
    shift: int = 0
    deps: int = 0  # bits 8-11 of word 0: WAIT_PREV, WAIT_NEXT, SIGNAL_PREV, SIGNAL_NEXT
    g: int = 0  # UPDATE: first row of the gradient (word 5)
    kappa: int = 0  # UPDATE: 1/(2α) as bf16 bits (word 5); its scalar is η | α << 16 (bf16 bits)

    def words(self) -> list[int]:
        flags = (
            self.a_acc << 12
            | self.b_acc << 13
            | self.d_acc << 14
            | self.b_one << 15
            | self.d_one << 16
            | self.accumulate << 17
            | self.op << 18
            | self.reduce << 23
            | self.reduce_max << 24
        )
        words = [
            OPCODE | self.deps | flags,
            self.scalar & 0xFFFFFFFF,
            self.rows | self.elems << 16,
            self.a | self.b << 16,
            self.d | self.shift << 16,
        ]
        return [*words, self.g | self.kappa << 16] if self.op == VecOp.UPDATE else words


def requant_scalar(zero_point: int, act_min: int, act_max: int, double: bool) -> int:
    """REQUANT's scalar word: the output zero point, the clamp range (int8 each) and the rounding."""
    return (zero_point & 0xFF) | (act_min & 0xFF) << 8 | (act_max & 0xFF) << 16 | int(double) << 24


def widen(cfg: AccelConfig, values: npt.ArrayLike, from_acc: bool) -> npt.NDArray[np.uint32]:
    """Elements of a memory row as 32-bit work values: fp32 bits (a bf16 shifted up) or int32."""
    v = np.asarray(values, dtype=np.uint64)
    bits = cfg.acc_bits if from_acc else cfg.in_bits
    if bits == 16:
        return (v << 16).astype(np.uint32)
    if bits == 8:
        return (v.astype(np.uint8).view(np.int8).astype(np.int32)).view(np.uint32)
    return v.astype(np.uint32)


def narrow(cfg: AccelConfig, work: npt.ArrayLike, to_acc: bool) -> npt.NDArray[np.uint64]:
    """Work values in the destination's element type: as they are, bf16 (RNE, canonical NaN) or
    int8 (saturated)."""
    w = np.asarray(work, dtype=np.uint64)
    bits = cfg.acc_bits if to_acc else cfg.in_bits
    if bits == 32:
        return w
    if bits == 8:
        return (np.clip(w.astype(np.uint32).view(np.int32), -128, 127).astype(np.int64) & 0xFF).astype(np.uint64)
    return round_bf16(w).astype(np.uint64)


def _read(cfg: AccelConfig, mem: np.ndarray, row: int, elems: int, from_acc: bool) -> npt.NDArray[np.uint32]:
    values = mem[row, :elems]
    if from_acc:
        values = readout(cfg, values, 0 if cfg.acc_dtype == "int32" else ONE_F32, 0, 1)
    return widen(cfg, values, from_acc)


def run(cfg: AccelConfig, c: VecCommand, sp: np.ndarray, acc: np.ndarray) -> None:
    """Apply command ``c`` to the memories in place (``sp``: rows × dim, ``acc``: rows × cols, as
    unsigned element bit patterns)."""
    mems = {False: sp, True: acc}
    if c.op == VecOp.UPDATE:
        _update(c, sp)
        return
    for r in range(c.rows):
        a = _read(cfg, mems[c.a_acc], c.a + r, c.elems, c.a_acc)
        shift: npt.ArrayLike = c.shift
        if VecOp(c.op) in B_OPERAND_OPS:
            b = _read(cfg, mems[c.b_acc], c.b + (0 if c.b_one else r), c.elems, c.b_acc)
        elif c.op == VecOp.REQUANT:
            b, shifts = (_read(cfg, acc, c.b + k, c.elems, True) for k in range(REQUANT_ROWS))
            shift = shifts.view(np.int32).astype(np.int64)
        else:
            b = np.zeros_like(a)
        s = np.full_like(a, c.scalar & 0xFFFFFFFF)
        y = lane(cfg.dtype, c.op, a, b, s, shift)
        if c.reduce:
            y = _fold(cfg, y, VecOp.MAX if c.reduce_max else VecOp.ADD)
        out = narrow(cfg, y, c.d_acc)
        row, width = c.d + (0 if c.d_one else r), len(out)
        dst = mems[c.d_acc]
        if c.accumulate:
            out = add_rows(cfg, dst[row, :width], out).astype(np.uint64)
        dst[row, :width] = out


def _fold(cfg: AccelConfig, y: npt.NDArray[np.uint32], op: VecOp) -> npt.NDArray[np.uint32]:
    """A row reduction in element order, each step the lane's ``op`` (one rounding per step)."""
    acc = y[:1]
    for value in y[1:]:
        acc = lane(cfg.dtype, op, acc, np.array([value], dtype=np.uint32), 0, 0)
    return acc


def _update(c: VecCommand, sp: np.ndarray) -> None:
    """UPDATE: θ (A), θ̄ (B), λ (D) updated in place from g, the first ``elems`` of each row."""
    rows = {name: slice(base, base + c.rows) for name, base in (("th", c.a), ("tb", c.b), ("lm", c.d), ("g", c.g))}
    tensors = [sp[rows[name], : c.elems] for name in ("th", "tb", "lm", "g")]
    eta, alpha = c.scalar & 0xFFFF, (c.scalar >> 16) & 0xFFFF
    new = update_model.update(*tensors, eta, alpha, c.kappa)
    for name, value in zip(("th", "tb", "lm"), new, strict=True):
        sp[rows[name], : c.elems] = value

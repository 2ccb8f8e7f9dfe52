"""The hardware contract of the bf16 reference: every operation as a pyard tile computes it.

``Arith("bf16", tile=cfg)`` routes its arithmetic here (docs/fptt.md, "Hardware contract"). Nothing
is re-implemented: each function applies the tile's own bit-exact models to bf16 bit patterns.

* GEMM: ``rtl.gemm_loop_model.loop_result``, the GEMM command's loop: each ``rows``-wide K tile's
  mesh sum (from +0, top PE first) added into the accumulator (fp32 or bf16), then the read-out
  rounding to bf16. A bias is one more row of B, multiplied by a column of ones appended to A, as
  the FPTT firmware keeps it (θ's b_gate follows w_gate in memory): it enters in the last K tile.
* Element-wise steps: one lane op (``rtl.vector.lane_model.lane``) on widened bf16 operands, its fp32
  result narrowed to bf16 by a scratchpad write (``rtl.vector.engine_model.narrow``).
* Functions (sigmoid, tanh, exp, 1/x): the function unit's correctly rounded tables.
* Bias gradients (``ones_sum``): the ones row of the gradient GEMM, i.e. a GEMM of a row of ones
  by the rows; other sums in row order in the accumulator's type (the first row copied, every
  further row added by the accumulator's adder), then one rounding: ``programs.bias_gradient``.
* Softmax over the last axis: max, subtract, EXP, sum, RECIP, multiply, each a VEC step
  (``programs.softmax``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.accumulator_model import add_rows
from rtl.config import AccelConfig, ConfigError
from rtl.gemm_loop_model import loop_result
from rtl.readout_model import readout
from rtl.vector.engine_model import narrow, widen
from rtl.vector.functions import reference
from rtl.vector.lane_model import lane
from rtl.vector.ops import VecOp

__all__ = [
    "Bits16",
    "acc_sum",
    "check_tile",
    "elementwise",
    "fold_sum",
    "function",
    "gemm",
    "ones_sum",
    "softmax",
    "to_bits",
    "to_values",
]

ONE_F32 = 0x3F800000  # the read-out's identity scale; also 1.0 as a lane scalar
OUT_NARROW, OUT_FULL = 0, 1

Bits16 = npt.NDArray[np.uint16]
F32 = npt.NDArray[np.float32]


def check_tile(tile: AccelConfig) -> None:
    """The contract is defined for bf16 tiles only (int8 tiles have no float arithmetic)."""
    if tile.dtype != "bf16":
        raise ConfigError("dtype", tile.dtype, "bf16 (the FPTT hardware contract needs a bf16 tile)")


def to_bits(x: npt.ArrayLike) -> Bits16:
    """bf16 bit patterns of values that are bf16 already (the contract never rounds silently)."""
    f = np.asarray(x, dtype=np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)
    if not np.array_equal(bits.astype(np.uint32) << 16, f.view(np.uint32), equal_nan=False):
        raise ValueError("the hardware contract takes bf16 values; round them first")
    return bits


def to_values(bits: npt.ArrayLike) -> F32:
    """bf16 bit patterns (in the low 16 bits) as float32 values."""
    return ((np.asarray(bits).astype(np.uint32) & 0xFFFF) << 16).view(np.float32)


def _acc_init(cfg: AccelConfig, bits: Bits16) -> npt.NDArray[np.uint32]:
    """bf16 values as accumulator elements (fp32: widened exactly)."""
    return narrow(cfg, widen(cfg, bits, from_acc=False), to_acc=True).astype(np.uint32)


def gemm(cfg: AccelConfig, a: npt.ArrayLike, b: npt.ArrayLike, bias: npt.ArrayLike | None) -> F32:
    """``bf16(A·B + bias)`` as the GEMM command computes ``[A, 1] · [B; bias]`` (bias: a row, or None)."""
    a_bits, b_bits = to_bits(a), to_bits(b)
    if bias is not None:
        one = to_bits(np.float32(1.0))
        a_bits = np.concatenate([a_bits, np.full((a_bits.shape[0], 1), one, np.uint16)], axis=1)
        b_bits = np.concatenate([b_bits, to_bits(bias).reshape(1, -1)])
    return to_values(loop_result(cfg, a_bits, b_bits, None, ONE_F32, 0, OUT_NARROW))


def ones_sum(cfg: AccelConfig, rows: npt.ArrayLike) -> F32:
    """Σ over the leading axis as the ones row of a gradient GEMM: ``1ᵀ · rows`` in the tile's order."""
    flat = np.asarray(rows, dtype=np.float32)
    return gemm(cfg, np.ones((1, flat.shape[0]), np.float32), flat, None)[0]


def elementwise(cfg: AccelConfig, op: VecOp, a: npt.ArrayLike, b: npt.ArrayLike = 0.0, s: float = 0.0) -> F32:
    """One VEC op on bf16 operands (``b`` broadcast, ``s`` a bf16 scalar), written to the scratchpad."""
    wa, wb = (widen(cfg, to_bits(v), from_acc=False) for v in np.broadcast_arrays(a, b))
    ws = int(widen(cfg, to_bits(np.float32(s)), from_acc=False))
    return to_values(narrow(cfg, lane(cfg.dtype, op, wa, wb, ws), to_acc=False))


def _acc_rows(cfg: AccelConfig, rows: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """Rows (leading axis) of bf16 values summed in order in accumulator elements: the first row
    copied in, every further one added by the accumulator's adder (``bias_gradient``)."""
    bits = to_bits(rows)
    acc = _acc_init(cfg, bits[0])
    for row in bits[1:]:
        acc = add_rows(cfg, acc, _acc_init(cfg, row)).astype(np.uint32)
    return acc


def _read_acc(cfg: AccelConfig, acc: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """Accumulator elements as the lanes read them: the read-out set to the identity, widened."""
    return widen(cfg, readout(cfg, acc, ONE_F32, 0, OUT_FULL), from_acc=True)


def acc_sum(cfg: AccelConfig, rows: npt.ArrayLike) -> F32:
    """Σ over the leading axis in row order in the accumulator, rounded once to bf16 (a COPY of the
    sum into the scratchpad: ``bias_gradient_finish``)."""
    return to_values(narrow(cfg, _read_acc(cfg, _acc_rows(cfg, rows)), to_acc=False))


def softmax(cfg: AccelConfig, z: npt.ArrayLike) -> F32:
    """Softmax over the last axis of bf16 logits as ``programs.softmax`` runs it:

    m = max of the row (exact, so its order is free); d = bf16(z − m); e = EXP(d); Σ e in the
    accumulator in element order; r = RECIP(Σ) (the lane rounds Σ to bf16 first); p = bf16(e · r).
    """
    zt = np.moveaxis(np.asarray(z, dtype=np.float32), -1, 0)  # the classes first, as the engine has them
    wz = widen(cfg, to_bits(zt), from_acc=False)
    m = wz[0]
    for row in wz[1:]:
        m = lane(cfg.dtype, VecOp.MAX, m, row, 0)
    d = narrow(cfg, lane(cfg.dtype, VecOp.SUB, wz, m[None], 0), to_acc=False)
    e = narrow(cfg, lane(cfg.dtype, VecOp.EXP, widen(cfg, d, from_acc=False), 0, 0), to_acc=False)
    total = _read_acc(cfg, _acc_rows(cfg, to_values(e)))
    r = narrow(cfg, lane(cfg.dtype, VecOp.RECIP, total, 0, 0), to_acc=False)
    p = lane(cfg.dtype, VecOp.MUL, widen(cfg, e, from_acc=False), widen(cfg, r, from_acc=False)[None], 0)
    return np.moveaxis(to_values(narrow(cfg, p, to_acc=False)), 0, -1)


def function(name: str, z: npt.ArrayLike) -> F32:
    """The function unit's correctly rounded bf16 ``name`` of bf16 values (a SIGMOID, TANH or EXP
    written to the scratchpad: the function's bf16 result is stored as it is)."""
    return to_values(reference(name, to_bits(z)))


def fold_sum(cfg: AccelConfig, a: npt.ArrayLike) -> F32:
    """Σ over the leading axis as the engine sums a tensor held transposed (the summed axis along
    the elements, ``cols`` per block): each block's elements folded in order by fp32 lane adds (a
    row reduction), the blocks' folds added in order in the accumulator, rounded once to bf16."""
    wa = widen(cfg, to_bits(a), from_acc=False)
    acc = None
    for k0 in range(0, wa.shape[0], cfg.cols):
        part = wa[k0]
        for row in wa[k0 + 1 : k0 + cfg.cols]:
            part = lane(cfg.dtype, VecOp.ADD, part, row, 0)
        part = narrow(cfg, part, to_acc=True).astype(np.uint32)
        acc = part if acc is None else add_rows(cfg, acc, part).astype(np.uint32)
    assert acc is not None, "a sum of no rows"
    return to_values(narrow(cfg, _read_acc(cfg, acc), to_acc=False))

"""Bit-exact NumPy model of the vector engine's lane (``rtl/vector/lane.py``), on 32-bit work values.

``lane(dtype, op, a, b, s, shift)`` gives ``y`` for every element; ``op`` (a ``VecOp`` code) and the
operands broadcast against each other, so one call can mix ops. Work values are 32-bit patterns:
fp32 on bf16 tiles (a bf16 operand arrives widened, ``bits << 16``), int32 two's complement on int8
tiles. Ops the tile's dtype does not define (``INT_OPS`` / ``FLOAT_OPS``) give 0.

bf16 tiles (fp32 work values; docs/arithmetic.md's rules: subnormal inputs read as zero of the
same sign, results below 2^-126 → ±0, NaN results are 0x7FC00000, RNE with an unbounded exponent
then ≥ 2^128 → ±Inf):

* COPY: ``a``, its bits unchanged (not flushed, NaN payload kept);
* ADD, SUB, ADDS, RSUBS: ``a + b``, ``a − b``, ``a + s``, ``s − a``, each rounded once (``fp_add``);
  the subtrahend's sign bit is flipped, so ``x − x = +0``;
* MUL, MULS: ``a · b``, ``a · s``, rounded once (``fp32_mul``);
* MADDS: ``a · s`` rounded to fp32 first (range rules included), then ``+ b`` rounded: two roundings;
* NEG: the flushed ``a`` with its sign flipped (``−0`` ↔ ``+0``, ±Inf); NaN → 0x7FC00000;
* MAX, MIN: NaN in either operand → 0x7FC00000; otherwise the larger (smaller) flushed operand,
  ordering ``−0 < +0``, so ``max(+0, −0) = +0`` and ``min(+0, −0) = −0``;
* RELU: ``max(a, +0)``: NaN → 0x7FC00000, negatives, −0 and −Inf → +0;
* SIGMOID, TANH, EXP, RECIP: ``a`` is rounded to bf16 (flushed, RNE, overflow → ±Inf, NaN → 0x7FC0), the
  function unit maps that to a bf16 result (``rtl.vector.functions.reference``), widened exactly.

int8 tiles (int32 work values; "sat" clamps to [−2^31, 2^31 − 1]):

* COPY: ``a``; ADD, SUB, ADDS, RSUBS, NEG: sat(a + b), sat(a − b), sat(a + s), sat(s − a), sat(−a)
  (so ``NEG(−2^31) = 2^31 − 1``);
* MUL, MULS: sat(round_half_even(a · b / 2^shift)) (``a · s`` for MULS) from the exact 64-bit
  product, ``shift`` 0–31, the read-out's rounding shift;
* MADDS: sat(sat(round_half_even(a · s / 2^shift)) + b): the scaled product saturates first;
* MAX, MIN, RELU: ``max(a, b)``, ``min(a, b)``, ``max(a, 0)``;
* REQUANT: TFLite's ``MultiplyByQuantizedMultiplier(a, b, shift)`` (``b`` the multiplier, ``shift``
  clamped to [−31, 30]) plus the zero point ``s[7:0]``, clamped to [``s[15:8]``, ``s[23:16]``] (int8
  fields); ``s[24]`` picks LiteRT 2.3's two-rounding form (CONV_2D, DEPTHWISE_CONV_2D:
  SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT) over the one-rounding form
  (FULLY_CONNECTED: the 64-bit product shifted once, rounding half up). See ``requant``.

The model is written against float64 and integer arithmetic (through ``rtl/fp_model.py`` and
``rtl/readout_model.py``), not against the hardware's structure.
"""

from __future__ import annotations

import importlib

import numpy as np
import numpy.typing as npt

from rtl.fp_model import F32_NAN, _finish, _round_to_precision, f32_bits_to_f64, fp32_mul, fp_add, ftz32
from rtl.readout_model import round_shift
from rtl.vector.ops import FLOAT_OPS, FUNCTION_OPS, INT_OPS, VecOp

__all__ = ["FUNCTION_NAMES", "INT32_MAX", "INT32_MIN", "lane", "to_bf16"]

SIGN = np.uint32(0x80000000)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# The function unit's names, as ``rtl.vector.functions.reference`` takes them.
FUNCTION_NAMES = {VecOp.SIGMOID: "sigmoid", VecOp.TANH: "tanh", VecOp.EXP: "exp", VecOp.RECIP: "recip"}

U32 = npt.NDArray[np.uint32]


def lane(
    cfg_dtype: str,
    op: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    s: npt.ArrayLike,
    shift: npt.ArrayLike = 0,
) -> U32:
    """The lane's result ``y`` (uint32 bit patterns) for a tile of dtype ``cfg_dtype`` ("int8" or "bf16")."""
    assert cfg_dtype in ("int8", "bf16")
    op, a, b, s, shift = np.broadcast_arrays(
        np.asarray(op, dtype=np.int64),
        np.asarray(a, dtype=np.uint64).astype(np.uint32),
        np.asarray(b, dtype=np.uint64).astype(np.uint32),
        np.asarray(s, dtype=np.uint64).astype(np.uint32),
        np.asarray(shift, dtype=np.int64),
    )
    results = _float_ops(op, a, b, s) if cfg_dtype == "bf16" else _int_ops(a, b, s, shift)
    defined = FLOAT_OPS if cfg_dtype == "bf16" else INT_OPS
    y = np.zeros(op.shape, dtype=np.uint32)
    for code, value in results.items():
        if code in defined:
            y = np.where(op == code, value, y)
    return y.astype(np.uint32)


def to_bf16(a: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """fp32 bit patterns rounded to bf16 as the lane feeds the function unit: flushed, RNE,
    overflow → ±Inf, NaN → 0x7FC0 (a normal fp32 never rounds below 2^-126)."""
    value = f32_bits_to_f64(a)
    return _finish(_round_to_precision(value, np.zeros_like(value), 8), np.isnan(value), 7)


def _float_ops(op: npt.NDArray, a: U32, b: U32, s: U32) -> dict[VecOp, npt.ArrayLike]:
    fa, fb = ftz32(a), ftz32(b)
    va, vb = f32_bits_to_f64(a), f32_bits_to_f64(b)
    nan_a, nan_b = np.isnan(va), np.isnan(vb)
    product = fp32_mul(a, s)
    a_wins = _f32_key(fa) > _f32_key(fb)  # total order of the flushed values, −0 below +0
    either_nan = nan_a | nan_b
    return {
        VecOp.COPY: a,
        VecOp.ADD: fp_add(a, b),
        VecOp.SUB: fp_add(a, b ^ SIGN),
        VecOp.MUL: fp32_mul(a, b),
        VecOp.MADDS: fp_add(product, b),
        VecOp.MULS: product,
        VecOp.ADDS: fp_add(a, s),
        VecOp.RSUBS: fp_add(s, a ^ SIGN),
        VecOp.NEG: np.where(nan_a, np.uint32(F32_NAN), fa ^ SIGN),
        VecOp.MAX: np.where(either_nan, np.uint32(F32_NAN), np.where(a_wins, fa, fb)),
        VecOp.MIN: np.where(either_nan, np.uint32(F32_NAN), np.where(a_wins, fb, fa)),
        VecOp.RELU: np.where(nan_a, np.uint32(F32_NAN), np.where((fa & SIGN) != 0, np.uint32(0), fa)),
        **_functions(op, a),
    }


def _f32_key(bits: U32) -> npt.NDArray[np.uint32]:
    """An unsigned key ordered like the (non-NaN) fp32 values, with −0 just below +0."""
    return np.where(bits & SIGN, ~bits, bits | SIGN).astype(np.uint32)


def _functions(op: npt.NDArray, a: U32) -> dict[VecOp, U32]:
    """The function ops' results where ``op`` selects them. The function unit's module is imported
    only when some element needs it, so every other op works without it."""
    wanted = [code for code in FUNCTION_OPS if np.any(op == code)]
    if not wanted:
        return {}
    reference = importlib.import_module("rtl.vector.functions").reference
    x = to_bf16(a)
    results = {}
    for code in wanted:
        y = np.zeros(a.shape, dtype=np.uint32)
        here = op == code
        y[here] = np.asarray(reference(FUNCTION_NAMES[code], x[here]), dtype=np.uint32) << 16
        results[code] = y
    return results


def _int_ops(a: U32, b: U32, s: U32, shift: npt.NDArray) -> dict[VecOp, npt.ArrayLike]:
    ia, ib, is_ = (v.view(np.int32).astype(np.int64) for v in (a, b, s))

    def sat(v: npt.NDArray[np.int64]) -> U32:
        return (np.clip(v, INT32_MIN, INT32_MAX) & 0xFFFFFFFF).astype(np.uint32)

    # |a · s| ≤ 2^62: exact in int64, and so is round_shift's remainder arithmetic.
    scaled = np.clip(round_shift(ia * is_, shift), INT32_MIN, INT32_MAX)
    return {
        VecOp.COPY: a,
        VecOp.ADD: sat(ia + ib),
        VecOp.SUB: sat(ia - ib),
        VecOp.MUL: sat(round_shift(ia * ib, shift)),
        VecOp.MADDS: sat(scaled + ib),
        VecOp.MULS: sat(scaled),
        VecOp.ADDS: sat(ia + is_),
        VecOp.RSUBS: sat(is_ - ia),
        VecOp.NEG: sat(-ia),
        VecOp.MAX: sat(np.maximum(ia, ib)),
        VecOp.MIN: sat(np.minimum(ia, ib)),
        VecOp.RELU: sat(np.maximum(ia, 0)),
        VecOp.REQUANT: sat(requant(ia, ib, shift, is_)),
    }


def requant(x: npt.NDArray[np.int64], m: npt.NDArray[np.int64], shift: npt.ArrayLike, s: npt.ArrayLike) -> npt.NDArray:
    """REQUANT on int32 values held in int64: ``clamp(mbqm(x, m, shift) + zp, lo, hi)``.

    One rounding: ``(x·m + 2^(30 − shift)) >> (31 − shift)`` (|x·m| ≤ 2^62, so it fits int64).
    Two roundings: ``x`` is first shifted left by ``max(shift, 0)`` with int32 wrap-around (the C
    code's ``x * (1 << left)``), then SaturatingRoundingDoublingHighMul, ``(x·m + 2^30) >> 31``
    (its nudge ``1 − 2^30`` for negative products with the truncating division is the same
    round-half-up) with ``INT32_MIN · INT32_MIN → INT32_MAX``, then RoundingDivideByPOT by
    ``max(−shift, 0)``: half away from zero. The value before the zero point cannot leave int32
    except in the one-rounding form with large shifts (LiteRT leaves that undefined); it is exact
    here and the clamp makes the result the same as saturating it first."""
    s = np.asarray(s, np.int64) & 0xFFFFFFFF
    zp, lo, hi = (((s >> k & 0xFF) ^ 0x80) - 0x80 for k in (0, 8, 16))
    return np.clip(mbqm(x, m, shift, (s >> 24 & 1) == 1) + zp, lo, hi)


def mbqm(x: npt.NDArray[np.int64], m: npt.ArrayLike, shift: npt.ArrayLike, double: npt.ArrayLike) -> npt.NDArray:
    """MultiplyByQuantizedMultiplier, one or two roundings (``double``), exact in int64."""
    shift = np.clip(np.asarray(shift, np.int64), -31, 30)
    single = (x * m + (np.int64(1) << (30 - shift))) >> (31 - shift)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    xs = ((x << left) + 2**31) % 2**32 - 2**31
    high = np.minimum((xs * m + (1 << 30)) >> 31, INT32_MAX)  # only INT32_MIN² reaches 2^31
    mask = (np.int64(1) << right) - 1
    twice = (high >> right) + ((high & mask) > (mask >> 1) + (high < 0))
    return np.where(double, twice, single)

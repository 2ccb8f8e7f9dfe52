"""Bit-exact NumPy models of the floating-point units in ``rtl/fp.py``.

Values are passed as raw bit patterns (``uint16`` for bf16, ``uint32`` for fp32) so that signed
zeros and NaNs compare exactly. The rules (docs/arithmetic.md):

* subnormal inputs are read as zero of the same sign (flush to zero);
* a product of two bf16 values is exact in fp32 (8 × 8 significand bits fit in 24), so the only
  effects of the multiplier are overflow to ±Inf and flushing results below 2^-126 to ±0;
* a sum is rounded once, to nearest even, at the output precision (24 bits for fp32, 8 for bf16)
  with an unbounded exponent, then overflow gives ±Inf and a result below 2^-126 gives ±0;
* any NaN result is the canonical quiet NaN (0x7FC00000 / 0x7FC0), and ∞ - ∞ and 0 × ∞ are NaN.

The model is written against float64 arithmetic, not against the hardware's structure: float64
holds every bf16 product and every fp32 product (24 + 24 bits ≤ 53) exactly and, with the exact error
term of Knuth's TwoSum, every fp32 sum.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "BF16_NAN",
    "F32_NAN",
    "bf16_bits_to_f64",
    "bf16_mul",
    "f32_bits_to_f64",
    "f64_to_bf16_bits",
    "fp32_mul",
    "fp_add",
    "ftz32",
    "round_bf16",
]

F32_NAN = 0x7FC00000
BF16_NAN = 0x7FC0
MIN_NORMAL = 2.0**-126
OVERFLOW = 2.0**128

Bits = npt.NDArray[np.unsignedinteger]


def ftz32(bits: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """Flush subnormal fp32 bit patterns to a zero of the same sign."""
    b = np.asarray(bits, dtype=np.uint32)
    return np.where((b >> 23) & 0xFF == 0, b & np.uint32(0x80000000), b).astype(np.uint32)


def f32_bits_to_f64(bits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """fp32 bit patterns as float64 values, subnormals flushed."""
    with np.errstate(invalid="ignore"):  # signalling NaN payloads are quieted, as intended
        return ftz32(bits).view(np.float32).astype(np.float64)


def bf16_bits_to_f64(bits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return f32_bits_to_f64(np.asarray(bits, dtype=np.uint32) << 16)


def f64_to_bf16_bits(values: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Round float64 values to bf16 the way the hardware's inputs are prepared (RNE, via ml_dtypes)."""
    import ml_dtypes

    return np.asarray(values, dtype=np.float64).astype(ml_dtypes.bfloat16).view(np.uint16)


def _finish(value: npt.NDArray[np.float64], nan: npt.NDArray[np.bool_], mant_bits: int) -> Bits:
    """Apply overflow, flush-to-zero and NaN rules to already-rounded values; return bit patterns."""
    v = np.where(np.abs(value) >= OVERFLOW, np.copysign(np.inf, value), value)
    v = np.where(np.abs(v) < MIN_NORMAL, np.copysign(0.0, v), v)
    bits32 = v.astype(np.float32).view(np.uint32)  # exact: v already has at most 24 bits
    if mant_bits == 23:
        return np.where(nan, np.uint32(F32_NAN), bits32).astype(np.uint32)
    return np.where(nan, np.uint16(BF16_NAN), (bits32 >> 16).astype(np.uint16)).astype(np.uint16)


def round_bf16(bits: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """fp32 bit patterns rounded to bf16 at bit 16, nearest even (``rtl.fp.round_bf16``): a carry
    gives the next binade or ±Inf, any NaN the canonical 0x7FC0; nothing is flushed."""
    w = np.asarray(bits, dtype=np.uint64)
    nan = ((w >> 23) & 0xFF == 0xFF) & (w & 0x7FFFFF != 0)
    rne = ((w + 0x7FFF + ((w >> 16) & 1)) >> 16) & 0xFFFF
    return np.where(nan, BF16_NAN, rne).astype(np.uint16)


def bf16_mul(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """bf16 × bf16 → fp32 bit patterns (exact product, then range rules)."""
    x, y = bf16_bits_to_f64(a), bf16_bits_to_f64(b)
    with np.errstate(invalid="ignore"):
        p = x * y
    return _finish(p, np.isnan(p), 23)


def _round_to_precision(
    s: npt.NDArray[np.float64], err: npt.NDArray[np.float64], precision: int
) -> npt.NDArray[np.float64]:
    """Round the exact value ``s + err`` (``s`` = fl64(s + err)) to ``precision`` significant bits, RNE.

    Rounds the float64 bit pattern as an integer; ``err`` only matters when ``s`` lies exactly on a
    rounding midpoint, where its sign says on which side the exact value lies.
    """
    finite = np.isfinite(s) & (s != 0)
    u = np.where(finite, s, 1.0).view(np.int64)
    sign, mag = u & np.int64(-(1 << 63)), u & np.int64((1 << 63) - 1)
    drop = 52 - (precision - 1)
    low, keep = mag & np.int64((1 << drop) - 1), mag >> drop
    half = np.int64(1 << (drop - 1))
    beyond = np.sign(err) * np.sign(s)  # +1: exact magnitude above |s|, -1: below
    tie_up = (beyond > 0) | ((beyond == 0) & (keep & 1 == 1))
    up = (low > half) | ((low == half) & tie_up)
    rounded = ((keep + up.astype(np.int64)) << drop | sign).view(np.float64)
    return np.where(finite, rounded, s)


def fp_add(acc: npt.ArrayLike, x: npt.ArrayLike, acc_mant_bits: int = 23) -> Bits:
    """``acc + x`` where ``acc`` is fp32 (or bf16 when ``acc_mant_bits`` = 7) and ``x`` is fp32.

    Returns bit patterns in the accumulator format, rounded once at its precision.
    """
    acc_bits = np.asarray(acc, dtype=np.uint32)
    a = f32_bits_to_f64(acc_bits << 16 if acc_mant_bits == 7 else acc_bits)
    b = f32_bits_to_f64(x)
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bb = s - a
        err = (a - (s - bb)) + (b - bb)  # TwoSum: s + err == a + b exactly
    err = np.where(np.isfinite(s), err, 0.0)
    return _finish(_round_to_precision(s, err, acc_mant_bits + 1), np.isnan(s), acc_mant_bits)


def fp32_mul(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """fp32 × fp32 → fp32 bit patterns: the exact float64 product rounded once to 24 bits (RNE) with
    an unbounded exponent, then the range rules (≥ 2^128 → ±Inf, < 2^-126 → ±0)."""
    x, y = f32_bits_to_f64(a), f32_bits_to_f64(b)
    with np.errstate(invalid="ignore"):
        p = x * y  # exact: |p| lies in [2^-252, 2^256) or is 0, Inf or NaN
    return _finish(_round_to_precision(p, np.zeros_like(p), 24), np.isnan(p), 23)

"""TFLite's integer arithmetic (tensorflow/lite/kernels/internal/common.h, gemmlowp/fixedpoint), bit for bit.

Vectorized over NumPy int64 arrays that hold int32 values. The requantization of LiteRT 2.3's
reference kernels is the single-rounding ``MultiplyByQuantizedMultiplier`` (one rounding shift of
the 64-bit product, TFLITE_SINGLE_ROUNDING); tests/test_deploy.py checks this against LiteRT on every
model, and the double-rounding form (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT,
TFLite Micro's) is kept to show that it differs.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: ``real`` = m · 2^(shift − 31) with m in [2^30, 2^31) (0, 0 for zero)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    m = _round_away(q * (1 << 31))
    if m == 1 << 31:
        m, shift = m // 2, shift + 1
    if shift < -31:
        return 0, 0
    if shift > 30:  # the single-rounding build's limit
        m, shift = (1 << 31) - 1, 30
    return m, shift


def _round_away(x: float) -> int:
    """std::round: halves away from zero."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def multiply_by_quantized_multiplier(x: I64, m: I64 | int, shift: I64 | int, double: bool) -> I64:
    """MultiplyByQuantizedMultiplier on int32 values in int64 arrays.

    ``double``: two roundings (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT), what
    LiteRT 2.3's reference CONV_2D, DEPTHWISE_CONV_2D, ADD and SOFTMAX do; else one rounding of the
    64-bit product, what its FULLY_CONNECTED does (tests/test_deploy.py pins both)."""
    x, m, shift = np.asarray(x, np.int64), np.asarray(m, np.int64), np.asarray(shift, np.int64)
    if not double:
        # |x·m| < 2^62 and the rounding term ≤ 2^61: the sum fits int64.
        return (x * m + (np.int64(1) << (30 - shift))) >> (31 - shift)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    xs = ((x << left) + 2**31) % 2**32 - 2**31  # int32 wrap-around of x · 2^left
    ab = xs * m
    v = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(v >= 0, v >> 31, -((-v) >> 31))  # the C quotient truncates towards zero
    high = np.where((xs == INT32_MIN) & (m == INT32_MIN), INT32_MAX, high)
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + ((high & mask) > threshold)


def srdhm(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul on int32 scalars (the quotient truncates towards zero)."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = 1 << 30 if ab >= 0 else 1 - (1 << 30)
    v = ab + nudge
    return (abs(v) >> 31) * (1 if v >= 0 else -1)


def rounding_divide_by_pot(x: int, exponent: int) -> int:
    """RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def mbqm_double(x: int, m: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier with two roundings (TFLite Micro; the non-single-rounding build)."""
    left, right = max(shift, 0), max(-shift, 0)
    return rounding_divide_by_pot(srdhm(_wrap(x * (1 << left)), m), right)


def _wrap(x: int) -> int:
    """int32 wrap-around."""
    return (x + 2**31) % 2**32 - 2**31


# ---- gemmlowp fixed point, for the int8 softmax of the reference kernels ---------------------------
def _sat_shl(x: int, exponent: int) -> int:
    """SaturatingRoundingMultiplyByPOT with a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    return INT32_MAX if x > threshold else INT32_MIN if x < -threshold else x << exponent


def _exp_quarter(a: int) -> int:
    """exp_on_interval_between_negative_one_quarter_and_0_excl on an F0 raw value."""
    x = _wrap(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(_wrap(srdhm(_wrap(x4_4 + x3), 715827883) + x2), 1)
    return _wrap(1895147668 + srdhm(1895147668, _wrap(x + poly)))


_EXP_MULTIPLIERS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
                    (3, 720401), (4, 242))  # fmt: skip


def exp_on_negative_values(a: int) -> int:
    """gemmlowp's exp_on_negative_values for FixedPoint<int32, 5> (26 fractional bits) → F0 raw."""
    quarter = 1 << 24
    a_mod = _wrap((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_sat_shl(a_mod, 5))
    remainder = _wrap(a_mod - a)
    for exponent, multiplier in _EXP_MULTIPLIERS:
        if remainder & (1 << (26 + exponent)):
            result = srdhm(result, multiplier)
    return INT32_MAX if a == 0 else result


def _one_over_one_plus_x(a: int) -> int:
    """one_over_one_plus_x_for_x_in_0_1 (F0 raw in, F0 raw out): Newton–Raphson in F2."""
    s = a + INT32_MAX  # RoundingHalfSum(a, One): (s ± 1) / 2, the quotient truncated towards zero
    s += 1 if s >= 0 else -1
    half = abs(s) // 2 * (1 if s >= 0 else -1)
    x = _wrap(1515870810 + srdhm(half, -1010580540))
    for _ in range(3):
        one_minus = _wrap((1 << 29) - srdhm(half, x))
        x = _wrap(x + _sat_shl(srdhm(x, one_minus), 2))
    return _sat_shl(x, 1)


def reciprocal(x: int, integer_digits: int) -> tuple[int, int]:
    """GetReciprocal: (F0 raw of 1/(1+f), num_bits_over_unit) for an F<integer_digits> sum x > 0."""
    headroom_plus_one = 32 - x.bit_length()
    shifted_minus_one = _wrap(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return _one_over_one_plus_x(shifted_minus_one), integer_digits - headroom_plus_one

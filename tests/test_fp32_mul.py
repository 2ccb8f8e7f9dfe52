"""The fp32 multiplier of the read-out scale: hardware against ``fp_model.fp32_mul`` bit for bit, and
the model against NumPy's IEEE float32 multiply and float64 within the documented bounds."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.fp import Bf16ScaleMul, Fp32Mul
from rtl.fp_model import F32_NAN, f32_bits_to_f64, fp32_mul, ftz32, round_bf16
from tb.comb_eval import evaluate

# ±0, ±Inf, NaNs, subnormals, smallest/largest normal, 1 and neighbours, powers of two whose
# products overflow or underflow, and significands whose products are exact rounding ties.
F32_EDGES = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x00000001,
    0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F800001,
    0x3F7FFFFF, 0x5F800000, 0x1F800000, 0x20000000, 0x3FC00000, 0x3F800003, 0x3FFFFFFF, 0x3F000001,
    0x4B000001, 0x34000000, 0x00FFFFFF,
]  # fmt: skip

f32_bits = st.one_of(st.sampled_from(F32_EDGES), st.integers(0, 0xFFFFFFFF), st.integers(0x3F000000, 0x40800000))


def check(a, b, bf16_a: bool = False) -> None:
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    got = evaluate(Fp32Mul(bf16_a), {"a": a, "b": b}, ("p",))["p"]
    np.testing.assert_array_equal(got, fp32_mul(a.astype(np.uint32), b.astype(np.uint32)).astype(np.uint64))


def test_fp32_mul_all_edge_pairs() -> None:
    a, b = zip(*itertools.product(F32_EDGES, F32_EDGES), strict=True)
    check(a, b)


def test_fp32_mul_bf16_a_all_edge_pairs() -> None:
    """The 8 × 24-bit variant (a always bf16, the lanes of a tile with bf16 memories): the same
    products wherever a is a bf16 value, the edges' bf16 truncations against every edge."""
    bf16_edges = sorted({v & 0xFFFF0000 for v in F32_EDGES})
    a, b = zip(*itertools.product(bf16_edges, F32_EDGES), strict=True)
    check(a, b, bf16_a=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(f32_bits.map(lambda v: v & 0xFFFF0000), f32_bits), min_size=64, max_size=64))
def test_fp32_mul_bf16_a_matches_model(pairs) -> None:
    a, b = zip(*pairs, strict=True)
    check(a, b, bf16_a=True)


def test_fp32_mul_ties_and_range_limits() -> None:
    """Products exactly halfway between fp32 neighbours (both roundings), and products at the
    overflow and underflow thresholds after rounding."""
    # (1 + 2^-23)(1 + 2^-1) = 1.5 + 1.5·2^-23: the 2^-24 bit is a tie; odd and even neighbours.
    a = [0x3F800001, 0x3F800001, 0x3F800003, 0x7F7FFFFF, 0x7F7FFFFF, 0x00800001, 0x00FFFFFF, 0x80800001]
    b = [0x3FC00000, 0x3FA00000, 0x3FC00000, 0x3F800001, 0x3F7FFFFF, 0x3F7FFFFE, 0x3F000000, 0x3F7FFFFF]
    check(a, b)
    assert fp32_mul([0x3F800001], [0x3FC00000])[0] == 0x3FC00002  # tie from odd 0x..01 goes up to even
    assert fp32_mul([0x3F800003], [0x3FC00000])[0] == 0x3FC00004
    assert fp32_mul([0x7F7FFFFF], [0x3F800001])[0] == 0x7F800000  # rounds past the largest normal
    assert fp32_mul([0x00FFFFFF], [0x3F000000])[0] == 0  # exactly 2^-127·(2 − 2^-23): flushed
    assert fp32_mul([0x00800001], [0x3F7FFFFE])[0] == 0x00800000  # 2^-126·(1 − 2^-46) rounds up: kept
    assert fp32_mul([0x80800001], [0x3F7FFFFF])[0] == 0x80800000


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(f32_bits, f32_bits), min_size=64, max_size=64))
def test_fp32_mul_matches_model(pairs) -> None:
    a, b = zip(*pairs, strict=True)
    check(a, b)


def test_fp32_mul_model_against_numpy_float32() -> None:
    """NumPy's float32 multiply is IEEE, correctly rounded: wherever the exact product is at least
    2^-126 the flushed, NaN-canonical result must equal the model bit for bit; below, the model
    gives ±0 (or 2^-126 when the rounded product reaches it), with the product's sign."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    b[::2] = (rng.integers(0x3E000000, 0x41000000, 100_000)).astype(np.uint32)  # products in range
    with np.errstate(all="ignore"):
        p = ftz32(a).view(np.float32) * ftz32(b).view(np.float32)
        exact = f32_bits_to_f64(a) * f32_bits_to_f64(b)
    want = np.where(np.isnan(p), np.uint32(F32_NAN), ftz32(p.view(np.uint32)))
    got = fp32_mul(a, b)
    big = np.isnan(exact) | (np.abs(exact) >= 2.0**-126)
    assert big.sum() > 150_000
    np.testing.assert_array_equal(got[big], want[big])
    tiny = got[~big] & np.uint32(0x7FFFFFFF)
    assert np.all((tiny == 0) | (tiny == 0x00800000))
    np.testing.assert_array_equal(got[~big] >> np.uint32(31), (np.signbit(exact[~big])).astype(np.uint32))


def test_fp32_mul_model_error_bound() -> None:
    """A normal result is within half an ulp of the exact (float64) product: |r − ab| ≤ 2^-24 |ab|."""
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(100_000) * 2.0 ** rng.integers(-60, 60, 100_000)).astype(np.float32)
    y = (rng.standard_normal(100_000) * 2.0 ** rng.integers(-60, 60, 100_000)).astype(np.float32)
    got = f32_bits_to_f64(fp32_mul(x.view(np.uint32), y.view(np.uint32)))
    exact = x.astype(np.float64) * y.astype(np.float64)
    normal = (np.abs(exact) >= 2.0**-126) & (np.abs(exact) < 2.0**128)
    assert np.all(np.abs(got[normal] - exact[normal]) <= 2.0**-24 * np.abs(exact[normal]))
    assert np.all(got[np.abs(exact) >= 2.0**128] == np.copysign(np.inf, exact[np.abs(exact) >= 2.0**128]))


# -- the read-out's fused bf16 scale: round_bf16(fp32_mul(a · 2^16, b)) -------------------------


def check_bf16_scale(a, b) -> None:
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    got = evaluate(Bf16ScaleMul(), {"a": a, "b": b}, ("p",))["p"]
    want = round_bf16(fp32_mul((a << np.uint64(16)).astype(np.uint32), b.astype(np.uint32)))
    np.testing.assert_array_equal(got, want.astype(np.uint64))


def test_bf16_scale_mul_all_edge_pairs() -> None:
    bf16_edges = sorted({v >> 16 for v in F32_EDGES})
    a, b = zip(*itertools.product(bf16_edges, F32_EDGES), strict=True)
    check_bf16_scale(a, b)


def double_rounding_cases(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Operands whose significand product puts the 16 bits bf16 drops at the patterns where the fp32
    rounding matters to the bf16 one (all ones, all zeros, half-way, each ± 1), for every bf16
    significand, both normalizations and every guard/sticky state; the exponents put a third of
    the products at the underflow threshold and a third at the overflow one."""
    pairs = []
    for sig_a in range(128, 256):
        for lo in (0x7FFF, 0xFFFF, 0x0000, 0x8000, 0x7FFE, 0xFFFE, 0x0001, 0x8001):
            for top in (0, 1):
                for hi in (int(rng.integers(128, 256)), 255, 254, 128):
                    for low in (0xFF, 0x80, 0x7F, 0x40, 0x00, 0xC0):
                        target = (hi << 24 | lo << 8 | low) if top else (hi << 23 | lo << 7 | low >> 1)
                        for sig_b in (target // sig_a - 1, target // sig_a, target // sig_a + 1):
                            p = sig_a * sig_b
                            got_lo = (p >> 8 if p >> 31 else p >> 7) & 0xFFFF
                            if 1 << 23 <= sig_b < 1 << 24 and got_lo == lo:
                                pairs.append((sig_a, sig_b))
    sig = np.array(pairs, dtype=np.int64)
    n = len(sig)
    ea = rng.integers(1, 255, n)
    at = rng.random(n)
    eb = np.where(at < 1 / 3, 127 - ea, np.where(at < 2 / 3, 127 + 254 - ea, rng.integers(1, 255, n)))
    eb = np.clip(eb + rng.integers(-2, 3, n), 1, 254)
    signs = rng.integers(0, 4, n)
    a = (signs & 1) << 15 | ea << 7 | (sig[:, 0] & 0x7F)
    b = (signs >> 1) << 31 | eb << 23 | (sig[:, 1] & 0x7FFFFF)
    return a.astype(np.uint64), b.astype(np.uint64)


def test_bf16_scale_mul_double_rounding_cases() -> None:
    a, b = double_rounding_cases(np.random.default_rng(13))
    assert len(a) > 10_000
    check_bf16_scale(a, b)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFFFF), f32_bits), min_size=64, max_size=64))
def test_bf16_scale_mul_matches_model(pairs) -> None:
    a, b = zip(*pairs, strict=True)
    check_bf16_scale(a, b)

"""Arithmetic units: hardware (Amaranth simulator) against the bit-exact models, and the models
against independent references (NumPy float32, float64, Python integers) within documented bounds."""

import itertools
import re
from collections import Counter

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.config import AccelConfig
from rtl.fp import ADD_CUTS, PRODUCT_FRAC_BITS, Bf16Add, Bf16Mul, Fp32Mul, FpAdd, RoundProduct
from rtl.fp_model import F32_NAN, bf16_bits_to_f64, bf16_mul, f32_bits_to_f64, fp_add, ftz32
from rtl.mac import IntAdd, IntMul, acc_mant_bits, product_flagged
from rtl.mac_model import accumulate, multiply
from rtl.mesh_model import mesh_tile
from tb.comb_eval import evaluate
from tb.stimulus import accumulators, inputs

INT8 = AccelConfig(dtype="int8")

# ±0, ±Inf, NaNs, smallest/largest subnormal, smallest/largest normal, 1, values whose products
# overflow or underflow, and neighbours that create rounding ties and cancellations.
BF16_EDGES = [
    0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFFF, 0x7F81, 0x0001, 0x807F, 0x0080, 0x8080,
    0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x3F81, 0x3FFF, 0x4000, 0x0100, 0x1F80, 0x6000, 0x3F01,
]  # fmt: skip
F32_EDGES = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00000001,
    0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000,
    0x3F800001, 0xBF7FFFFF, 0x4B800000, 0x33800000, 0x33800001, 0x00800001, 0x01000000,
    0x3F808000, 0x3F818000, 0xBF808000,
]  # fmt: skip

bf16_bits = st.one_of(st.sampled_from(BF16_EDGES), st.integers(0, 0xFFFF))
f32_bits = st.one_of(st.sampled_from(F32_EDGES), st.integers(0, 0xFFFFFFFF), st.integers(0x3F000000, 0x40800000))
BATCH = 48


def _pairs(edges: list[int]) -> tuple[np.ndarray, np.ndarray]:
    a, b = zip(*itertools.product(edges, edges), strict=True)
    return np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64)


# -- hardware against model ---------------------------------------------------------------------


def check_mul(a, b) -> None:
    got = evaluate(Bf16Mul(), {"a": a, "b": b}, ("p",))["p"]
    np.testing.assert_array_equal(got, bf16_mul(a, b).astype(np.uint64))


def check_add(acc, x, mant: int, registers: int = 0, x_frac: int = 23, serial: bool = False) -> None:
    """``x_frac``: the adder's datapath takes only x's top fraction bits; x's others must be zero."""
    x = np.asarray(x, np.uint64)
    assert not (x & np.uint64((1 << (23 - x_frac)) - 1)).any(), "x has fraction bits the adder drops"
    adder = FpAdd(mant, registers, x_frac, serial_normalize=serial)
    got = evaluate(adder, {"acc": acc, "x": x}, ("o",), latency=registers)["o"]
    np.testing.assert_array_equal(got, fp_add(np.asarray(acc, np.uint32), np.asarray(x, np.uint32), mant))


# (acc fraction bits, x fraction bits): fp32 + fp32, bf16 + fp32, and the bf16 PE's bf16 + product.
ADDERS = {"fp32": (23, 23), "bf16": (7, 23), "bf16-product": (7, PRODUCT_FRAC_BITS)}


def test_bf16_mul_all_edge_pairs() -> None:
    check_mul(*_pairs(BF16_EDGES))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(bf16_bits, bf16_bits), min_size=BATCH, max_size=BATCH))
def test_bf16_mul_matches_model(pairs) -> None:
    a, b = np.array(pairs, dtype=np.uint64).T
    check_mul(a, b)


@pytest.mark.parametrize(("registers", "serial"), [*((r, False) for r in sorted(ADD_CUTS)), (0, True)])
@pytest.mark.parametrize("adder", ADDERS)
def test_fp_add_all_edge_pairs(adder: str, registers: int, serial: bool) -> None:
    """Every pipelining of the adder (pe_stages 2 to 5) and the serial normalization compute the
    same sums, one per cycle."""
    mant, x_frac = ADDERS[adder]
    acc, x = _pairs(F32_EDGES)
    if mant == 7:
        acc = acc >> np.uint64(16)
    check_add(acc, _top_fraction(x, x_frac), mant, registers, x_frac, serial)


def _top_fraction(x, bits: int):
    """fp32 values with only their top ``bits`` fraction bits kept."""
    return x & ~np.uint64((1 << (23 - bits)) - 1)


@pytest.mark.parametrize(("registers", "serial"), [(0, False), (0, True), (max(ADD_CUTS), False)])
@pytest.mark.parametrize("adder", ADDERS)
@settings(max_examples=25, deadline=None)
@given(pairs=st.lists(st.tuples(f32_bits, f32_bits, st.integers(0, 2**20)), min_size=BATCH, max_size=BATCH))
def test_fp_add_matches_model(adder: str, registers: int, serial: bool, pairs) -> None:
    mant, x_frac = ADDERS[adder]
    acc, x, flip = (np.array(col, dtype=np.uint64) for col in zip(*pairs, strict=True))
    x = _top_fraction(x, x_frac)
    # Half the pairs are near-cancellations: x is -acc with low bits disturbed.
    acc[::2] = x[::2] ^ flip[::2] ^ np.uint64(0x80000000)
    if mant == 7:
        acc = acc >> np.uint64(16)
    check_add(acc, x, mant, registers, x_frac, serial)


@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("adder", ADDERS)
def test_fp_add_exponent_gaps(adder: str, serial: bool) -> None:
    """Every exponent gap from 0 to past the datapath's width, both ways round, with fractions of
    a few set bits (the low ones too): ties, sticky bits lost at each stage of the alignment
    shifter, and cancellations that the normalization shifts back by any distance."""
    mant, x_frac = ADDERS[adder]
    rng = np.random.default_rng(8)
    # Past the shifter's range too, and gaps whose low bits alone would be a short distance.
    far = np.array([48, 64, 65, 96, 127, 128, 129, 160, 200, 252])
    gaps = np.repeat(np.concatenate([np.arange(-40, 41), far, -far]), 4)
    n = gaps.size

    def sparse(bottom: int) -> np.ndarray:
        bits = rng.integers(bottom, 23, (n, 3))
        keep = rng.random((n, 3)) < 0.6
        return np.bitwise_or.reduce(np.where(keep, np.uint64(1) << bits.astype(np.uint64), np.uint64(0)), axis=1)

    e_acc = rng.integers(np.maximum(1, 1 - gaps), np.minimum(254, 254 - gaps) + 1).astype(np.uint64)
    e_x = (e_acc.astype(np.int64) + gaps).astype(np.uint64)
    sign = rng.integers(0, 2, n).astype(np.uint64) << np.uint64(31)
    flip = np.where(rng.random(n) < 0.75, np.uint64(0x80000000), np.uint64(0))  # mostly subtractions
    acc = sign | e_acc << np.uint64(23) | sparse(23 - mant)
    x = _top_fraction(sign ^ flip | e_x << np.uint64(23) | sparse(23 - x_frac), x_frac)
    if mant == 7:
        acc = acc >> np.uint64(16)
    check_add(acc, x, mant, 0, x_frac, serial)


@pytest.mark.parametrize("serial", [False, True])
def test_pe_adder_on_every_product_of_edge_values(serial: bool) -> None:
    """The bf16 PE's narrowed adder on the products the multiplier makes (its x) of every pair of
    edge values, added to every edge accumulator value and to each product's negation ± 1 ulp."""
    a, b = _pairs(BF16_EDGES)
    products = np.unique(bf16_mul(a, b).astype(np.uint64))
    acc16 = np.array(BF16_EDGES, dtype=np.uint64)
    acc, x = (col.ravel() for col in np.meshgrid(acc16, products))
    near = (products >> np.uint64(16)) ^ np.uint64(0x8000)
    acc = np.concatenate([acc, near, near + np.uint64(1), near - np.uint64(1)]) & np.uint64(0xFFFF)
    x = np.concatenate([x, products, products, products])
    check_add(acc, x, 7, 0, PRODUCT_FRAC_BITS, serial)


@pytest.mark.parametrize("serial", [False, True])
def test_row_adder_bf16_plus_bf16(serial: bool) -> None:
    """The accumulator's row adder, bf16 + bf16 (``FpAdd(7, x_frac_bits=7)``, with the serial
    normalization there): every pair of edge values, then random pairs, half of them each
    other's negation with low bits disturbed (cancellations by every distance)."""
    a, b = _pairs(BF16_EDGES)
    rng = np.random.default_rng(11)
    ra = rng.integers(0, 1 << 16, 20000, dtype=np.uint64)
    rb = rng.integers(0, 1 << 16, 20000, dtype=np.uint64)
    rb[::2] = (ra[::2] ^ np.uint64(0x8000)) ^ rng.integers(0, 1 << 8, 10000, dtype=np.uint64)
    acc, x = np.concatenate([a, ra]), np.concatenate([b, rb]) << np.uint64(16)
    check_add(acc, x, 7, 0, 7, serial)


class _ProductAdder(wiring.Component):
    """A bf16 PE's multiply-add as the PE wires it: ``Bf16Mul``'s fields and flags into
    ``FpAdd(flagged_x=True)``, with ``registers`` in the adder. ``flags`` shows the product's."""

    def __init__(self, mant: int, registers: int, serial: bool = False) -> None:
        self.mant, self.registers, self.serial = mant, registers, serial
        super().__init__({"a": In(16), "b": In(16), "acc": In(mant + 9), "o": Out(mant + 9), "flags": Out(3)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.mul = mul = Bf16Mul(flagged=True)
        m.submodules.add = add = FpAdd(
            self.mant, self.registers, PRODUCT_FRAC_BITS, flagged_x=True, serial_normalize=self.serial
        )
        m.d.comb += [mul.a.eq(self.a), mul.b.eq(self.b), add.acc.eq(self.acc), add.x.eq(mul.p_bits)]
        m.d.comb += [add.x_flags.eq(mul.p_flags), self.o.eq(add.o), self.flags.eq(mul.p_flags.as_value())]
        return m


def check_product_add(a, b, acc, mant: int, registers: int = 0, serial: bool = False) -> None:
    a, b, acc = (np.asarray(v, np.uint64) for v in (a, b, acc))
    unit = _ProductAdder(mant, registers, serial)
    got = evaluate(unit, {"a": a, "b": b, "acc": acc}, ("o",), latency=registers)["o"]
    want = fp_add(np.asarray(acc, np.uint32), bf16_mul(a, b), mant)
    np.testing.assert_array_equal(got, want)


class _RoundedProduct(wiring.Component):
    """A top-row PE's multiply and rounding (``rtl.fp.RoundProduct``), ``acc_dtype``'s width."""

    def __init__(self, acc_dtype: str, pe_stages: int) -> None:
        self.cfg = AccelConfig(dtype="bf16", acc_dtype=acc_dtype, pe_stages=pe_stages)
        super().__init__({"a": In(16), "b": In(16), "o": Out(self.cfg.acc_bits)})

    def elaborate(self, platform) -> Module:
        m = Module()
        flagged = product_flagged(self.cfg)
        m.submodules.mul = mul = Bf16Mul(flagged=flagged)
        m.submodules.round = rnd = RoundProduct(acc_mant_bits(self.cfg), 0, flagged_x=flagged)
        m.d.comb += [mul.a.eq(self.a), mul.b.eq(self.b), self.o.eq(rnd.o)]
        if flagged:
            m.d.comb += [rnd.x.eq(mul.p_bits), rnd.x_flags.eq(mul.p_flags)]
        else:
            m.d.comb += rnd.x.eq(mul.p)
        return m


@pytest.mark.parametrize(("acc_dtype", "pe_stages"), [("bf16", 1), ("bf16", 2), ("fp32", 1)])
def test_top_row_rounding_is_the_add_to_zero(acc_dtype: str, pe_stages: int) -> None:
    """A mesh's top row with a zero ``d`` rounds its products: the model's +0 + product, for every
    pair of edge values and random pairs (ties, overflows, underflows among them)."""
    a, b = _pairs(BF16_EDGES)
    rng = np.random.default_rng(12)
    a = np.concatenate([a, rng.integers(0, 1 << 16, 20000).astype(np.uint64)])
    b = np.concatenate([b, rng.integers(0, 1 << 16, 20000).astype(np.uint64)])
    unit = _RoundedProduct(acc_dtype, pe_stages)
    got = evaluate(unit, {"a": a, "b": b}, ("o",))["o"]
    mant = 7 if acc_dtype == "bf16" else 23
    np.testing.assert_array_equal(got, fp_add(np.zeros(a.size, np.uint32), bf16_mul(a, b), mant))


def test_bf16_mul_flags_and_fields_are_its_product() -> None:
    """``p_flags`` holds at most one special case, and ``p`` is that case's IEEE value, or
    ``p_bits`` where none is set: over every pair of edge values and products near both ends of
    the range (flushed and overflowing ones among them)."""
    a, b = _pairs(BF16_EDGES)
    rng = np.random.default_rng(3)
    ea = rng.integers(1, 255, 4000)
    eb = np.clip(np.where(rng.random(4000) < 0.5, 127, 381) - ea + rng.integers(-3, 4, 4000), 1, 254)
    sign = rng.integers(0, 2, (2, 4000)) << 15
    a = np.concatenate([a, sign[0] | ea << 7 | rng.integers(0, 128, 4000)]).astype(np.uint64)
    b = np.concatenate([b, sign[1] | eb << 7 | rng.integers(0, 128, 4000)]).astype(np.uint64)
    out = evaluate(Bf16Mul(flagged=True), {"a": a, "b": b}, ("p", "p_bits", "p_flags"))
    zero, inf, nan = ((out["p_flags"] >> np.uint64(k)) & np.uint64(1) for k in range(3))
    assert (zero + inf + nan <= 1).all()
    assert zero.any() and inf.any() and nan.any()  # the samples reach every case
    sign32 = out["p_bits"] & np.uint64(0x80000000)
    special = np.where(nan == 1, 0x7FC00000, np.where(inf == 1, sign32 | np.uint64(0x7F800000), sign32))
    np.testing.assert_array_equal(out["p"], np.where(zero + inf + nan == 1, special, out["p_bits"]))
    np.testing.assert_array_equal(out["p"], bf16_mul(a, b).astype(np.uint64))


@pytest.mark.parametrize(("registers", "serial"), [(0, False), (0, True), (max(ADD_CUTS), False)])
@pytest.mark.parametrize("mant", [7, 23])
def test_flagged_adder_on_every_product_of_edge_values(mant: int, registers: int, serial: bool) -> None:
    """The PE's adder, taking the product as fields and flags, against the model's add of the
    product's IEEE value: every pair of edge values, added to every edge accumulator value and to
    each product's negation ± 1 ulp (exact cancellations, whose sign rules read x's sign)."""
    a, b = _pairs(BF16_EDGES)
    products = bf16_mul(a, b).astype(np.uint64)
    edges = np.array(BF16_EDGES if mant == 7 else F32_EDGES, dtype=np.uint64)
    ia, ie = (col.ravel() for col in np.meshgrid(np.arange(a.size), np.arange(edges.size)))
    near = products ^ np.uint64(0x80000000)
    if mant == 7:
        near >>= np.uint64(16)
    mask = np.uint64((1 << (mant + 9)) - 1)
    acc = np.concatenate([edges[ie], near, (near + np.uint64(1)) & mask, (near - np.uint64(1)) & mask])
    pick = np.concatenate([ia, *[np.arange(a.size)] * 3])
    check_product_add(a[pick], b[pick], acc, mant, registers, serial)


@pytest.mark.parametrize("mant", [7, 23])
@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(bf16_bits, bf16_bits, f32_bits, st.integers(-30, 30)), min_size=BATCH, max_size=BATCH))
def test_flagged_adder_matches_model(mant: int, cases) -> None:
    """Random operands, the accumulator's exponent within a few dozen of the product's (so the
    two overlap and cancel), and products that flush or overflow."""
    a, b, acc, gap = (np.array(col, dtype=np.int64) for col in zip(*cases, strict=True))
    e_p = ((a >> 7) & 0xFF) + ((b >> 7) & 0xFF) - 127
    acc = (acc & ~(0xFF << 23)) | (np.clip(e_p + gap, 0, 255) << 23)
    if mant == 7:
        acc >>= 16
    check_product_add(a, b, acc.astype(np.uint64), mant)


def test_int8_mul_exhaustive() -> None:
    a, b = (g.ravel().astype(np.uint64) for g in np.meshgrid(np.arange(256), np.arange(256)))
    got = evaluate(IntMul(), {"a": a, "b": b}, ("p",))["p"]
    np.testing.assert_array_equal(got, multiply(INT8, a, b))
    # -128 × -128 = 16384 is the one product that needs all 16 bits
    assert int(multiply(INT8, [0x80], [0x80])[0]) == 16384


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**15), 2**15 - 1)), min_size=32))
def test_int_add_matches_model(pairs) -> None:
    acc, x = (np.array(c, dtype=np.int64) for c in zip(*pairs, strict=True))
    acc_bits, x_bits = acc.astype(np.uint32), x.astype(np.uint16)
    got = evaluate(IntAdd(), {"acc": acc_bits, "x": x_bits}, ("o",))["o"]
    np.testing.assert_array_equal(got, accumulate(INT8, acc_bits, x_bits))


# -- models against independent references ------------------------------------------------------


def test_int_model_against_python_integers() -> None:
    rng = np.random.default_rng(3)
    acc = rng.integers(-(2**31), 2**31, 1000)
    a, b = rng.integers(-128, 128, 1000), rng.integers(-128, 128, 1000)
    p = multiply(INT8, a.astype(np.uint8), b.astype(np.uint8))
    got = accumulate(INT8, acc.astype(np.uint32), p).view(np.int32)
    want = [((int(x) + int(y) * int(z) + 2**31) % 2**32) - 2**31 for x, y, z in zip(acc, a, b, strict=True)]
    assert got.tolist() == want


def test_fp32_add_model_against_numpy_float32() -> None:
    """IEEE float32 addition in NumPy is correctly rounded to nearest even: with subnormal inputs
    and outputs flushed, and NaN made canonical, it must equal the model bit for bit."""
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    b = a ^ rng.integers(0, 2**22, a.size, dtype=np.uint64).astype(np.uint32) ^ np.uint32(0x80000000)
    b[::2] = rng.integers(0, 2**32, a.size // 2, dtype=np.uint64).astype(np.uint32)
    with np.errstate(all="ignore"):
        s = ftz32(a).view(np.float32) + ftz32(b).view(np.float32)
    want = np.where(np.isnan(s), np.uint32(F32_NAN), ftz32(s.view(np.uint32)))
    np.testing.assert_array_equal(fp_add(a, b), want)


def test_bf16_mul_model_is_exact_in_range() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**16, 100_000).astype(np.uint16)
    b = rng.integers(0, 2**16, 100_000).astype(np.uint16)
    exact = bf16_bits_to_f64(a) * bf16_bits_to_f64(b)
    got = f32_bits_to_f64(bf16_mul(a, b))
    normal = np.isfinite(exact) & (np.abs(exact) >= 2.0**-126) & (np.abs(exact) < 2.0**128)
    np.testing.assert_array_equal(got[normal], exact[normal])
    tiny = np.abs(exact) < 2.0**-126
    assert np.all(got[tiny] == 0) and np.all(np.signbit(got[tiny]) == np.signbit(exact[tiny]))
    big = np.isfinite(exact) & (np.abs(exact) >= 2.0**128)
    assert np.all(np.isinf(got[big]))


@pytest.mark.parametrize("mant", [23, 7], ids=["fp32", "bf16"])
def test_fp_add_model_error_bound(mant: int) -> None:
    """A normal result is within half an ulp: |r - (a+b)| <= 2^-(p) |a+b| for precision p."""
    rng = np.random.default_rng(6)
    a = (rng.standard_normal(200_000) * 2.0 ** rng.integers(-30, 30, 200_000)).astype(np.float32)
    b = (rng.standard_normal(200_000) * 2.0 ** rng.integers(-30, 30, 200_000)).astype(np.float32)
    acc = a.view(np.uint32) >> np.uint32(16) if mant == 7 else a.view(np.uint32)
    acc_value = bf16_bits_to_f64(acc) if mant == 7 else a.astype(np.float64)
    out = fp_add(acc, b.view(np.uint32), mant)
    got = bf16_bits_to_f64(out) if mant == 7 else f32_bits_to_f64(out)
    exact = acc_value + b.astype(np.float64)  # two fp32 values 2^60 apart at most: exact in float64
    assert np.all(np.abs(got - exact) <= 2.0 ** -(mant + 1) * np.abs(exact))


@pytest.mark.parametrize("acc_dtype", ["fp32", "bf16"])
def test_mesh_model_dot_product_bound(acc_dtype: str) -> None:
    """Sequential accumulation of K exact products: |c - exact| <= γ_K (|d| + Σ|a·w|), γ_K = K·u/(1-K·u)."""
    cfg = AccelConfig(rows=16, cols=8, dtype="bf16", acc_dtype=acc_dtype)
    rng = np.random.default_rng(7)
    a = inputs(cfg, rng, (64, cfg.rows), special=0.0)
    w = inputs(cfg, rng, (cfg.rows, cfg.cols), special=0.0)
    d = accumulators(cfg, rng, (64, cfg.cols))
    c = mesh_tile(cfg, a, w, d)
    to64 = bf16_bits_to_f64 if acc_dtype == "bf16" else f32_bits_to_f64
    af, wf, df = bf16_bits_to_f64(a), bf16_bits_to_f64(w), to64(d)
    exact = df + af @ wf
    u = 2.0 ** -(8 if acc_dtype == "bf16" else 24)
    k = cfg.rows
    gamma = k * u / (1 - k * u)
    assert np.all(np.abs(to64(c) - exact) <= gamma * (np.abs(df) + np.abs(af) @ np.abs(wf)))


FP_UNITS = {
    **{f"add-{name}-r{registers}": (FpAdd, (mant, registers, x_frac)) for name, (mant, x_frac) in ADDERS.items()
       for registers in ADD_CUTS},
    **{f"add-flagged-{mant}": (lambda mant: FpAdd(mant, 0, PRODUCT_FRAC_BITS, flagged_x=True), (mant,))
       for mant in (7, 23)},
    **{f"add-serial-{name}": (lambda mant, x_frac: FpAdd(mant, 0, x_frac, serial_normalize=True), (mant, x_frac))
       for name, (mant, x_frac) in ADDERS.items()},
    "bf16-mul": (Bf16Mul, ()),
    "fp32-mul": (Fp32Mul, ()),
    "fp32-mul-bf16-a": (Fp32Mul, (True,)),
    "bf16-add": (Bf16Add, ()),
}  # fmt: skip


@pytest.mark.parametrize("unit", FP_UNITS)
def test_fp_unit_verilog_writes_no_expression_out_many_times(unit: str) -> None:
    """Amaranth writes an expression out again at every use, so an intermediate that each step of
    a chain reads more than once must be a signal, or the Verilog grows exponentially with the
    chain (the adder's shifter and leading-zero tree once made the 4x4-bf16 mesh 23,159 lines, and
    Verilator took 71 s to lint it instead of 0.6). A few reads of one operand are fine; a repeat
    count past that is the blow-up coming back."""
    make, args = FP_UNITS[unit]
    text = verilog.convert(make(*args), name="top")
    expressions = Counter(
        re.sub(r"\(\*.*?\*\)", "", rhs).strip() for rhs in re.findall(r"assign \S+\s*=\s*(.*);", text)
    )
    repeated = {rhs: n for rhs, n in expressions.items() if n > 3 and not re.fullmatch(r"\d+'h[0-9a-f]+", rhs)}
    assert not repeated

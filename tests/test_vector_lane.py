"""The vector engine's lane: hardware against ``lane_model.lane`` bit for bit (every op, both dtypes,
edge pairs and hypothesis batches, one vector per cycle), and the model against NumPy float32 and
Python integer arithmetic."""

import itertools
import sys
import types
from fractions import Fraction
from unittest import mock

import ml_dtypes
import numpy as np
import numpy.typing as npt
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.fp_model import F32_NAN, f64_to_bf16_bits, ftz32
from rtl.vector.engine_model import requant_scalar
from rtl.vector.lane import LATENCY, VectorLane
from rtl.vector.lane_model import INT32_MAX, INT32_MIN, lane, mbqm, to_bf16
from rtl.vector.ops import FLOAT_OPS, FUNCTION_OPS, INT_OPS, SCALAR_OPS, VecOp
from tb.comb_eval import evaluate

# ±0, ±Inf, NaNs (with payloads, signalling), subnormals, smallest and largest normals, 1 and its
# neighbours, powers of two whose products overflow or underflow, significands whose products are
# rounding ties, sums at ties (2^24 + 1, 1 + 2^-24, max + half its ulp), near-cancellations
# (2^-126 · (1 + 2^-23) − 2^-126 is subnormal) and bf16 rounding ties for the function unit's input.
F32_EDGES = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x00000001,
    0x807FFFFF, 0x00800000, 0x80800000, 0x00800001, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000,
    0x3F800001, 0xBF800001, 0x3F7FFFFF, 0x5F800000, 0x1F800000, 0x20000000, 0x3FC00000, 0x3F800003,
    0x3FFFFFFF, 0x4B800000, 0x4B800001, 0x33800000, 0xB3800001, 0x73000000, 0xF3000000, 0x3F808000,
    0x3F818000, 0xBF818000, 0x7F7F8000, 0x00FFFFFF,
]  # fmt: skip
# 0, ±1, the int32 and int8 extremes, small odd values (ties of a shift by 1), and values whose
# products are ties at larger shifts (3 · 2^15, 2^30 + 2^15) or overflow int32.
I32_EDGES = [
    0, 1, -1, 2, -2, 3, -3, 5, -5, 127, -128, 255, INT32_MAX, INT32_MIN, INT32_MIN + 1, 0x18000, -0x18000,
    0x40008000, 0x10000, 0x7FFF, -0x8000, 0x55555555,
]  # fmt: skip
SHIFTS = (0, 1, 2, 8, 15, 16, 31)

# A stand-in for the function unit (the real one is a colleague's): each function is the bf16
# input XOR a key, registered like the real unit (its value of a cycle's fn_x arrives the next
# cycle), so the lane's timing and widening are checked on any input.
STAND_IN_KEYS = {"sigmoid": 0x1357, "tanh": 0xA5A5, "exp": 0x00FF, "recip": 0x5A3C}
FN_OF = {VecOp.SIGMOID: "sigmoid", VecOp.TANH: "tanh", VecOp.EXP: "exp", VecOp.RECIP: "recip"}


def _stand_in_reference(name: str, x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    return (np.asarray(x, dtype=np.uint16) ^ np.uint16(STAND_IN_KEYS[name])).astype(np.uint16)


STAND_IN = types.ModuleType("rtl.vector.functions")
STAND_IN.reference = _stand_in_reference  # type: ignore[attr-defined]


def model(dtype: str, op, a, b, s, shift=0) -> npt.NDArray[np.uint32]:
    """The lane model with the stand-in function unit in place of ``rtl.vector.functions``."""
    with mock.patch.dict(sys.modules, {"rtl.vector.functions": STAND_IN}):
        return lane(dtype, op, a, b, s, shift)


class LaneWithStandIn(wiring.Component):
    """The lane with the stand-in function unit wired as the engine would wire the real one."""

    op: In(5)
    a: In(32)
    b: In(32)
    s: In(32)
    shift: In(6)
    fn_x: Out(16)
    y: Out(32)

    def __init__(self, dtype: str, bf16_a: bool = False) -> None:
        self.dtype, self.bf16_a = dtype, bf16_a
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        lane_ = m.submodules.lane = VectorLane(self.dtype, self.bf16_a)
        m.d.comb += [lane_.op.eq(self.op), lane_.a.eq(self.a), lane_.b.eq(self.b), lane_.s.eq(self.s)]
        m.d.comb += [lane_.shift.eq(self.shift), self.fn_x.eq(lane_.fn_x)]
        # The function select is the op of the same cycle as fn_x, as the engine derives it; the
        # value is registered (FunctionUnit.latency = 1 cycle).
        with m.Switch(self.op):
            for code, name in FN_OF.items():
                with m.Case(code):
                    m.d.sync += lane_.fn_y.eq(lane_.fn_x ^ STAND_IN_KEYS[name])
            with m.Default():
                m.d.sync += lane_.fn_y.eq(0)
        m.d.comb += self.y.eq(lane_.y)
        return m


MASKS = (0x1F, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 63)


def _describe(op, a, b, s, shift, got, want) -> str:
    name = VecOp(int(op)).name if op < len(VecOp) else str(op)
    return f"{name} a={int(a):#x} b={int(b):#x} s={int(s):#x} shift={int(shift)}: {int(got):#x} != {int(want):#x}"


def check(dtype: str, op, a, b, s, shift=0, bf16_a: bool = False) -> None:
    """Run the vectors through the hardware, one per cycle, and compare ``y`` (and ``fn_x``) with the model."""
    columns = (np.asarray(v, dtype=np.int64) & mask for v, mask in zip((op, a, b, s, shift), MASKS, strict=True))
    op, a, b, s, shift = np.broadcast_arrays(*columns)
    inputs = {"op": op, "a": a, "b": b, "s": s, "shift": shift}
    got = evaluate(LaneWithStandIn(dtype, bf16_a), inputs, ("y", "fn_x"), latency=LATENCY[dtype])
    want = model(dtype, op, a, b, s, (shift ^ 32) - 32).astype(np.uint64)  # the port's 6 bits are signed
    bad = np.nonzero(got["y"] != want)[0]
    assert bad.size == 0, [_describe(op[i], a[i], b[i], s[i], shift[i], got["y"][i], want[i]) for i in bad[:8]]
    if dtype == "bf16":
        # fn_x is combinational: the value read with the result of vector k belongs to the vector
        # presented LATENCY cycles later (the last one is held after the end).
        later = np.minimum(np.arange(a.size) + LATENCY[dtype], a.size - 1)
        np.testing.assert_array_equal(got["fn_x"], to_bf16(a[later].astype(np.uint32)).astype(np.uint64))


def _edge_vectors(dtype: str) -> tuple[list[int], ...]:
    """Every op (int8: and the undefined function codes) on every ordered pair (x, y) of the dtype's edge values:
    binary ops get a = x, b = y; scalar ops a = x, s = y; MADDS also a = x, s = 1, b = y (the add on
    edge pairs); int MUL, MULS and MADDS take every shift of ``SHIFTS``."""
    edges = F32_EDGES if dtype == "bf16" else [v & 0xFFFFFFFF for v in I32_EDGES]
    one = 0x3F800000 if dtype == "bf16" else 1
    rows: list[tuple[int, int, int, int, int]] = []
    pairs = list(itertools.product(edges, edges))
    for code in range(16):
        shifts = SHIFTS if dtype == "int8" and code in (VecOp.MUL, VecOp.MULS, VecOp.MADDS) else (0,)
        for shift, (k, (x, y)) in itertools.product(shifts, enumerate(pairs)):
            third = edges[(7 * k) % len(edges)]  # the operand the op leaves free, varied
            if code in SCALAR_OPS:
                rows.append((code, x, third, y, shift))
            else:
                rows.append((code, x, y, third, shift))
        if code == VecOp.MADDS:
            rows += [(code, x, y, one, 0) for x, y in pairs]
    return tuple(list(column) for column in zip(*rows, strict=True))


@pytest.mark.parametrize("dtype", ["bf16", "int8"])
def test_lane_all_edge_pairs(dtype: str) -> None:
    check(dtype, *_edge_vectors(dtype))


def test_lane_bf16_operands_all_edge_pairs() -> None:
    """The lane of a tile with bf16 memories (its multiplier 8 × 24 bits): every op on the edge
    pairs with a, b as the memories give them (bf16), the fp32 scalar as it comes."""
    op, a, b, s, shift = _edge_vectors("bf16")
    bf16 = [v & 0xFFFF0000 for v in a], [v & 0xFFFF0000 for v in b]
    check("bf16", op, *bf16, s, shift, bf16_a=True)


def test_lane_int_rounding_ties() -> None:
    """Products exactly halfway between integers after the shift (both directions of the even rule,
    both signs), for every shift, through MUL, MULS and MADDS."""
    shift = np.repeat(np.arange(1, 32), 4)
    odd = np.tile([1, 3, -1, -3], 31)
    a = odd << (shift - 1)  # a · 1 / 2^shift = odd / 2 exactly
    for code in (VecOp.MUL, VecOp.MULS, VecOp.MADDS):
        check("int8", code, a, 1 if code == VecOp.MUL else 7, 1, shift)
    assert list(model("int8", VecOp.MULS, np.array([1, 3, -1, -3]) & 0xFFFFFFFF, 0, 1, 1).view(np.int32)) == [
        0,
        2,
        0,
        -2,
    ]


# Values near ±1 as well as anywhere: their sums and differences cancel and their products round.
f32_bits = st.one_of(
    st.sampled_from(F32_EDGES),
    st.integers(0, 0xFFFFFFFF),
    st.integers(0x3F000000, 0x40800000),
    st.integers(0xBF000000, 0xC0800000),
)
i32_bits = st.one_of(st.sampled_from(I32_EDGES), st.integers(INT32_MIN, INT32_MAX), st.integers(-(2**16), 2**16)).map(
    lambda v: v & 0xFFFFFFFF
)


def _vector(values: st.SearchStrategy[int], ops: frozenset[VecOp]) -> st.SearchStrategy[tuple]:
    return st.tuples(st.sampled_from(sorted(ops)), values, values, values, st.integers(0, 31))


@settings(max_examples=10, deadline=None)
@given(st.lists(_vector(f32_bits, FLOAT_OPS), min_size=256, max_size=256))
def test_lane_bf16_matches_model(vectors) -> None:
    check("bf16", *zip(*vectors, strict=True))


@settings(max_examples=10, deadline=None)
@given(st.lists(_vector(f32_bits, FLOAT_OPS), min_size=256, max_size=256))
def test_lane_bf16_operands_match_model(vectors) -> None:
    op, a, b, s, shift = zip(*vectors, strict=True)
    check("bf16", op, [v & 0xFFFF0000 for v in a], [v & 0xFFFF0000 for v in b], s, shift, bf16_a=True)


@settings(max_examples=10, deadline=None)
@given(st.lists(_vector(i32_bits, INT_OPS), min_size=256, max_size=256))
def test_lane_int8_matches_model(vectors) -> None:
    check("int8", *zip(*vectors, strict=True))


def test_lane_undefined_ops_give_zero() -> None:
    assert not np.any(model("int8", [12, 13, 14, 15], 5, 6, 7))


def test_model_needs_no_function_unit_for_other_ops() -> None:
    """The function unit's module is imported only for the function ops."""
    with mock.patch.dict(sys.modules, {"rtl.vector.functions": None}):
        ops = sorted(FLOAT_OPS - FUNCTION_OPS)
        lane("bf16", ops, 0x3F800000, 0x40000000, 0x40400000)
        with pytest.raises(ImportError):
            lane("bf16", VecOp.TANH, 0x3F800000, 0, 0)


def test_op_codes_are_fixed() -> None:
    codes = [
        "COPY",
        "ADD",
        "SUB",
        "MUL",
        "MADDS",
        "MULS",
        "ADDS",
        "RSUBS",
        "NEG",
        "MAX",
        "MIN",
        "RELU",
        "SIGMOID",
        "TANH",
        "EXP",
        "RECIP",
    ]
    lane_ops = [op for op in VecOp if op < VecOp.UPDATE]  # 16: the update unit's, not a lane op
    assert [op.name for op in lane_ops] == codes and [int(op) for op in lane_ops] == list(range(16))
    assert VecOp.REQUANT == 17 and len(VecOp) == 18
    functions = {VecOp.SIGMOID, VecOp.TANH, VecOp.EXP, VecOp.RECIP}
    assert set(FLOAT_OPS) == set(lane_ops) and set(INT_OPS) == set(lane_ops) - functions | {VecOp.REQUANT}


# The model against independent references.


def _normal_f32(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    """Random fp32 values with exponents in [2^-57, 2^53): sums, differences and products of two
    (and a product plus a third) stay normal, away from overflow and the flush threshold."""
    bits = rng.integers(0, 2**23, n, dtype=np.uint32) | (rng.integers(70, 180, n, dtype=np.uint32) << np.uint32(23))
    bits |= rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    return bits.view(np.float32)


def _bits(x: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    return x.view(np.uint32)


def test_float_model_against_numpy_float32() -> None:
    """In the normal range the model is IEEE float32 arithmetic: one rounding for the adds and
    multiplies, and for MADDS the float32 product then the float32 sum (two roundings)."""
    rng = np.random.default_rng(21)
    n = 100_000
    a, b, s = _normal_f32(rng, n), _normal_f32(rng, n), _normal_f32(rng, n)
    b[: n // 4] = a[: n // 4] * np.float32(-1.0000001)  # near-cancellations
    expected = {
        VecOp.ADD: a + b,
        VecOp.SUB: a - b,
        VecOp.MUL: a * b,
        VecOp.MADDS: a * s + b,  # NumPy float32: the product is rounded before the add
        VecOp.MULS: a * s,
        VecOp.ADDS: a + s,
        VecOp.RSUBS: s - a,
        VecOp.NEG: -a,
        VecOp.MAX: np.maximum(a, b),
        VecOp.MIN: np.minimum(a, b),
        VecOp.RELU: np.maximum(a, np.float32(0)),
    }
    for code, want in expected.items():
        want_bits = ftz32(_bits(want.astype(np.float32)))  # +0 for x − x in NumPy too
        np.testing.assert_array_equal(lane("bf16", code, _bits(a), _bits(b), _bits(s)), want_bits, err_msg=code.name)


def test_float_model_special_values() -> None:
    nan, pinf, ninf, pz, nz, one = F32_NAN, 0x7F800000, 0xFF800000, 0, 0x80000000, 0x3F800000
    sub, nsub = 0x00000001, 0x807FFFFF

    def f(code: VecOp, a: int, b: int = 0, s: int = 0) -> int:
        return int(lane("bf16", code, a, b, s))

    assert f(VecOp.MAX, pz, nz) == pz and f(VecOp.MAX, nz, pz) == pz
    assert f(VecOp.MIN, pz, nz) == nz and f(VecOp.MIN, nz, pz) == nz
    assert f(VecOp.MAX, 0xFFC00001, one) == nan and f(VecOp.MIN, one, 0x7F800001) == nan
    assert f(VecOp.MAX, nsub, sub) == pz and f(VecOp.MIN, nsub, sub) == nz  # flushed first
    assert f(VecOp.RELU, nz) == pz and f(VecOp.RELU, ninf) == pz and f(VecOp.RELU, 0xFFC00001) == nan
    assert f(VecOp.RELU, pinf) == pinf and f(VecOp.RELU, sub) == pz
    assert f(VecOp.NEG, pz) == nz and f(VecOp.NEG, pinf) == ninf and f(VecOp.NEG, 0xFFC00001) == nan
    assert f(VecOp.NEG, nsub) == pz
    assert f(VecOp.COPY, 0xFFC00001) == 0xFFC00001 and f(VecOp.COPY, sub) == sub
    assert f(VecOp.SUB, one, one) == pz and f(VecOp.SUB, pinf, pinf) == nan and f(VecOp.RSUBS, one, 0, one) == pz
    assert f(VecOp.MULS, pz, 0, pinf) == nan and f(VecOp.MUL, 0x7F7FFFFF, 0x40000000) == pinf
    # MADDS rounds twice: (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46 rounds to 1 + 2^-22 before −(1 + 2^-22).
    assert f(VecOp.MADDS, 0x3F800001, 0xBF800002, 0x3F800001) == pz
    # The product overflows to Inf before the add, so max · 2 − max is Inf, not max.
    assert f(VecOp.MADDS, 0x7F7FFFFF, 0xFF7FFFFF, 0x40000000) == pinf


def test_to_bf16_against_ml_dtypes() -> None:
    rng = np.random.default_rng(22)
    a = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    a[::3] = (a[::3] & np.uint32(0xFFFF0000)) | np.uint32(0x8000)  # exact ties
    a[1::3] = ftz32(a[1::3]) | np.uint32(0x7F7F0000)  # near the top: some round to Inf
    flushed = ftz32(a)
    with np.errstate(invalid="ignore"):
        want = f64_to_bf16_bits(flushed.view(np.float32).astype(np.float64))
    want = np.where(np.isnan(flushed.view(np.float32)), np.uint16(0x7FC0), want)
    np.testing.assert_array_equal(to_bf16(a), want)


def _sat(v: int) -> int:
    return min(max(v, INT32_MIN), INT32_MAX)


def _scaled(x: int, shift: int) -> int:
    return _sat(round(Fraction(x, 2**shift)))  # Python rounds a Fraction half to even


INT_REFERENCE = {
    VecOp.COPY: lambda a, b, s, sh: a,
    VecOp.ADD: lambda a, b, s, sh: _sat(a + b),
    VecOp.SUB: lambda a, b, s, sh: _sat(a - b),
    VecOp.MUL: lambda a, b, s, sh: _scaled(a * b, sh),
    VecOp.MADDS: lambda a, b, s, sh: _sat(_scaled(a * s, sh) + b),
    VecOp.MULS: lambda a, b, s, sh: _scaled(a * s, sh),
    VecOp.ADDS: lambda a, b, s, sh: _sat(a + s),
    VecOp.RSUBS: lambda a, b, s, sh: _sat(s - a),
    VecOp.NEG: lambda a, b, s, sh: _sat(-a),
    VecOp.MAX: lambda a, b, s, sh: max(a, b),
    VecOp.MIN: lambda a, b, s, sh: min(a, b),
    VecOp.RELU: lambda a, b, s, sh: max(a, 0),
}


def test_int_model_against_python_ints() -> None:
    rng = np.random.default_rng(23)
    n = 4000
    values = [rng.integers(INT32_MIN, INT32_MAX + 1, n), rng.integers(-(2**16), 2**16, n), rng.choice(I32_EDGES, n)]
    a, b, s = (np.where(rng.random(n) < 0.5, values[k % 3], values[(k + 1) % 3]) for k in range(3))
    shift = rng.integers(0, 32, n)
    for code, reference in INT_REFERENCE.items():
        got = lane("int8", code, a & 0xFFFFFFFF, b & 0xFFFFFFFF, s & 0xFFFFFFFF, shift).view(np.int32)
        want = [reference(*(int(v) for v in row)) for row in zip(a, b, s, shift, strict=True)]
        assert got.tolist() == want, code.name


def test_recip_model_against_float64() -> None:
    """RECIP with the real function unit: ``a`` rounded to bf16 (ml_dtypes), then 1/x in float64
    rounded to 8 significant bits by hand (no ties exist), flushed below 2^-126; ±0 → ±Inf."""
    rng = np.random.default_rng(15)
    a = np.concatenate([_normal_f32(rng, 4000), np.float32([0.0, -0.0, 1.0, -2.0, 3.0, 2.0**-126, 2.0**126])])
    x = a.astype(ml_dtypes.bfloat16).astype(np.float64)
    with np.errstate(divide="ignore"):
        v = 1.0 / x
    mant, exp = np.frexp(v)
    finite = np.isfinite(v)
    r = np.where(finite, np.ldexp(np.round(np.where(finite, mant, 0.5) * 256) / 256, exp), v)
    r = np.where(np.abs(r) < 2.0**-126, np.copysign(0.0, r), r)
    got = lane("bf16", VecOp.RECIP, _bits(a), 0, 0)
    np.testing.assert_array_equal(got, r.astype(np.float32).view(np.uint32))


# REQUANT: the edges of TFLite's requantization, hardware and model against deploy/quant.py.

RQ_X = [0, 1, -1, 2, -2, 3, -3, INT32_MAX, INT32_MIN, INT32_MIN + 1, 1 << 30, (1 << 30) + 1, -(1 << 30),
        0x40008000, -0x40008000, 12345, -98765, 1 << 16, -(1 << 16) + 1, 0x7FFF, -0x8000]  # fmt: skip
# 2^30 and 2^31 − 1 (QuantizeMultiplier's range ends), 0, a typical value, and the negative ones
# (INT32_MIN with x = INT32_MIN is SaturatingRoundingDoublingHighMul's saturation).
RQ_M = [0, 1, 1 << 30, INT32_MAX, (1 << 30) + 12345, 1518500250, INT32_MIN, -1]
RQ_SHIFTS = [-31, -30, -17, -16, -1, 0, 1, 2, 15, 29, 30]


def _requant_vectors(scalars: list[int], shifts: list[int]) -> tuple[list[int], ...]:
    rows = [
        (VecOp.REQUANT, x & 0xFFFFFFFF, m & 0xFFFFFFFF, s, sh)
        for s in scalars
        for x, m, sh in itertools.product(RQ_X, RQ_M, shifts)
    ]
    return tuple(list(c) for c in zip(*rows, strict=True))


def test_lane_requant_edges() -> None:
    """Every edge accumulator × multiplier × shift at the documented limits (−31 … 30, and −32, 31
    clamped to them), both roundings, the full int8 clamp range and narrow ones with zero points."""
    scalars = [requant_scalar(zp, lo, hi, d) for zp, lo, hi in ((0, -128, 127), (-128, -128, 127), (5, 0, 6))
               for d in (False, True)]  # fmt: skip
    check("int8", *_requant_vectors(scalars, [*RQ_SHIFTS, -32, 31]))


def test_lane_requant_clamp_edges() -> None:
    """Values that land on and beside the clamp's bounds less the zero point (±255, ±256) and the
    edges of the hardware's 10-bit compares (±512, ±1024), before and after the second rounding's
    carry, with ties: the multiplier 2^30 halves ``a``, so ``a = 2·(v·2^k + d)`` gives ``v`` and the
    remainder ``d`` after a right shift of ``k`` (two roundings)."""
    ends = [0, 1, 127, 128, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 1 << 20]
    values = sorted({sign * v + step for v in ends for sign in (1, -1) for step in (-1, 0, 1)})
    rows = []
    for k in (0, 1, 3):
        rests = sorted({0, 1, (1 << k) - 1, 1 << max(k - 1, 0)} & set(range(1 << k)))
        rows += [(2 * ((v << k) + d), -k) for v in values for d in rests]
    x, shift = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    scalars = [requant_scalar(zp, -128, 127, d) for zp in (-128, 0, 127) for d in (False, True)]
    scalars += [requant_scalar(0, 1, 0, True)]  # minimum above maximum: the maximum wins
    for s in scalars:
        check("int8", VecOp.REQUANT, x & 0xFFFFFFFF, 1 << 30, s, shift)


@pytest.mark.parametrize("double", [False, True])
def test_requant_model_against_tflite(double: bool) -> None:
    """The model's requantization (before the zero point) is deploy/quant.py's, which LiteRT pins:
    one rounding (FULLY_CONNECTED) and two (CONV_2D: SaturatingRoundingDoublingHighMul, then
    RoundingDivideByPOT, scalar by scalar in ``mbqm_double``), including INT32_MIN · INT32_MIN."""
    quant = pytest.importorskip("deploy.quant")
    rows = list(itertools.product(RQ_X, RQ_M, RQ_SHIFTS))
    x, m, sh = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    got = mbqm(x, m, sh, double)
    if double:
        want = np.array([quant.mbqm_double(int(a), int(b), int(c)) for a, b, c in rows])
        assert got[(x == INT32_MIN) & (m == INT32_MIN) & (sh == 0)].tolist() == [INT32_MAX]
    else:
        want = quant.multiply_by_quantized_multiplier(x, m, sh, False)
    np.testing.assert_array_equal(got, want)
    # The zero point and the clamp, and the two roundings' ties: −4 · 2^-3 = −0.5 rounds half up
    # once (0) and half away from zero the second time (−1); 0.5 rounds to 1 either way.
    s = requant_scalar(-3, -4, 9, double)
    got = lane("int8", VecOp.REQUANT, np.array([-4, 4, 1000]) & 0xFFFFFFFF, 1 << 30, s, -2).view(np.int32)
    assert got.tolist() == [-4 if double else -3, -2, 9]

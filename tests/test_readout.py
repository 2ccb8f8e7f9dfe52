"""The read-out pipeline against ``readout_model`` bit for bit (edge cases and hypothesis batches,
every act/out combination, idle gaps, exact latency), and the model against integer and float64
references (NumPy rounding, IEEE float32 multiply, ml_dtypes bfloat16 rounding)."""

import itertools

import ml_dtypes
import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.config import AccelConfig
from rtl.fp_model import F32_NAN, f32_bits_to_f64, ftz32
from rtl.readout import READOUT_LATENCY, Readout
from rtl.readout_model import readout, round_shift
from sim.verilator import lint

INT = AccelConfig(dtype="int8")
FP32 = AccelConfig(dtype="bf16", acc_dtype="fp32")
BF16 = AccelConfig(dtype="bf16", acc_dtype="bf16")
WIDTH = 8  # elements per row in these tests
CONTROLS = list(itertools.product(range(4), range(4)))  # every (act, out), reserved values included

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
F32_EDGES = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x00000001,
    0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F808000,
    0x3F818000, 0xBF808000, 0x3F80FFFF, 0x477FFF00, 0x3F7FFFFF, 0x00FFFFFF,
]  # fmt: skip
# 1, 0.5, −1, ±0, ±Inf, NaN, a subnormal, 2^100 (overflows most rows), 2^-100 (underflows them),
# and two with long significands (products that need rounding).
F32_SCALES = [0x3F800000, 0x3F000000, 0xBF800000, 0x00000000, 0x80000000, 0x7F800000, 0xFF800000,
              0x7FC00000, 0x00000005, 0x71800000, 0x0D800000, 0x3FC00001, 0x3FAAAAAB]  # fmt: skip


def int_edges() -> list[int]:
    """int32 extremes, values near the int8 bounds, and exact rounding ties for s = 1, 2, 31."""
    values = [I32_MIN, I32_MIN + 1, I32_MAX, I32_MAX - 1, 0, 1, -1, 2, -2, 3, -3, 127, 128, -128, -129, 255, 256]
    values += [
        (2 * k + 1) * 2 ** (s - 1) for s in (1, 2, 8, 31) for k in (-3, -2, -1, 0, 1, 2) if s < 31 or k in (-1, 0)
    ]
    values += [int(127.5 * 2**8), int(-128.5 * 2**8), 127 * 2**8 + 128, -129 * 2**8 + 128]
    return [v for v in values if I32_MIN <= v <= I32_MAX]


def run_readout(cfg: AccelConfig, x: np.ndarray, scale, act, out, seed: int = 0) -> np.ndarray:
    """Push rows through the pipeline (with random idle cycles); each result must leave exactly
    READOUT_LATENCY cycles after its row entered."""
    dut = Readout(cfg, WIDTH)
    n = len(x)
    rng = np.random.default_rng(seed)
    results: list[list[int]] = []

    async def bench(ctx) -> None:
        entered: list[int] = []
        row, cycle = 0, 0
        while len(results) < n:
            send = row < n and rng.random() < 0.8
            ctx.set(dut.inp.valid, send)
            if send:
                payload = {"data": [int(v) for v in x[row]], "scale": int(scale[row])}
                ctx.set(dut.inp.payload, payload | {"act": int(act[row]), "out": int(out[row])})
                entered.append(cycle)
                row += 1
            await ctx.tick()
            cycle += 1
            if ctx.get(dut.result.valid):
                assert entered[len(results)] + READOUT_LATENCY == cycle
                results.append([ctx.get(dut.result.payload.data[k]) for k in range(WIDTH)])
            else:
                assert len(results) == len(entered) or entered[len(results)] + READOUT_LATENCY > cycle
            assert cycle < 4 * n + 20

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(results, dtype=np.uint64)


def check(cfg: AccelConfig, values, scales, seed: int = 0) -> None:
    """Every value × every scale × every (act, out), WIDTH values per row."""
    values = np.asarray(values, dtype=np.uint64)
    pad = (-len(values)) % WIDTH
    rows = np.concatenate([values, values[:pad]]).reshape(-1, WIDTH)
    combos = list(itertools.product(range(len(rows)), scales, CONTROLS))
    x = rows[[r for r, _, _ in combos]]
    scale = np.array([s for _, s, _ in combos], dtype=np.uint64)
    act = np.array([c[0] for _, _, c in combos])
    out = np.array([c[1] for _, _, c in combos])
    got = run_readout(cfg, x, scale, act, out, seed)
    want = readout(cfg, x, scale[:, None], act[:, None], out[:, None]).astype(np.uint64)
    np.testing.assert_array_equal(got, want)


# -- hardware against model ---------------------------------------------------------------------


def test_int_edges_all_shifts() -> None:
    values = np.array(int_edges(), dtype=np.int64).astype(np.uint32)
    check(INT, values, scales=[0, 1, 2, 8, 30, 31, 32 + 3, 0xFFFFFFE1])  # the shift is scale & 31


def test_int_sticky_from_every_bit() -> None:
    """Just above a half (2^(s-1) + 2^j, and its negation) for every shift and every bit j below
    the guard bit: only the sticky bit j tells it from a tie, which rounds to even (0) instead
    of away (1)."""
    values, shifts = [], []
    for s in range(2, 32):
        row = [sign * ((1 << (s - 1)) + (1 << j)) for j in range(s - 1) for sign in (1, -1)]
        row += [row[k % len(row)] for k in range((-len(row)) % WIDTH)]
        values += row
        shifts += [s] * (len(row) // WIDTH)
    x = np.array(values, dtype=np.int64).astype(np.uint32).astype(np.uint64).reshape(-1, WIDTH)
    scale = np.array(shifts, dtype=np.uint64)
    act, out = np.zeros(len(x), dtype=np.uint64), np.ones(len(x), dtype=np.uint64)  # full int32
    got = run_readout(INT, x, scale, act, out)
    np.testing.assert_array_equal(got, readout(INT, x, scale[:, None], act[:, None], out[:, None]))
    assert set(got[:, 0].tolist()) == {1}  # every row starts with +(2^(s-1) + 1): rounds up to 1


@pytest.mark.parametrize("cfg", [FP32, BF16], ids=["fp32", "bf16"])
def test_fp_edges_all_scales(cfg: AccelConfig) -> None:
    values = np.array(F32_EDGES, dtype=np.uint64)
    if cfg.acc_bits == 16:
        values = np.unique(values >> np.uint64(16))
    check(cfg, values, scales=F32_SCALES)


int_rows = st.lists(st.integers(I32_MIN, I32_MAX), min_size=WIDTH, max_size=WIDTH)
f32_any = st.one_of(st.integers(0, 2**32 - 1), st.sampled_from(F32_EDGES), st.integers(0x3C000000, 0x44000000))


@settings(max_examples=12, deadline=None)
@given(st.lists(st.tuples(int_rows, st.integers(0, 2**32 - 1), st.integers(0, 3), st.integers(0, 3)), min_size=24))
def test_int_matches_model(batch) -> None:
    x = np.array([r for r, *_ in batch], dtype=np.int64).astype(np.uint32).astype(np.uint64)
    scale, act, out = (np.array(c, dtype=np.uint64) for c in list(zip(*batch, strict=True))[1:])
    got = run_readout(INT, x, scale, act, out)
    np.testing.assert_array_equal(got, readout(INT, x, scale[:, None], act[:, None], out[:, None]))


@pytest.mark.parametrize("cfg", [FP32, BF16], ids=["fp32", "bf16"])
@settings(max_examples=12, deadline=None)
@given(batch=st.lists(st.tuples(st.lists(f32_any, min_size=WIDTH, max_size=WIDTH), f32_any, st.integers(0, 3),
                                st.integers(0, 3)), min_size=24))  # fmt: skip
def test_fp_matches_model(cfg: AccelConfig, batch) -> None:
    x = np.array([r for r, *_ in batch], dtype=np.uint64) >> np.uint64(32 - cfg.acc_bits)
    scale, act, out = (np.array(c, dtype=np.uint64) for c in list(zip(*batch, strict=True))[1:])
    got = run_readout(cfg, x, scale, act, out)
    np.testing.assert_array_equal(got, readout(cfg, x, scale[:, None], act[:, None], out[:, None]))


@pytest.mark.parametrize("cfg", [INT, FP32, BF16], ids=["int32", "fp32", "bf16"])
def test_readout_lints_clean(cfg: AccelConfig, tmp_path) -> None:
    path = tmp_path / "readout.v"
    path.write_text(verilog.convert(Readout(cfg, 2), name="readout", emit_src=False))
    assert lint(path, "readout") == []


# -- model against independent references -------------------------------------------------------


def test_round_shift_ties_go_to_even() -> None:
    assert round_shift([5, 7, -5, -7, 6, -6, 1, -1], 1).tolist() == [2, 4, -2, -4, 3, -3, 0, 0]
    assert round_shift([I32_MIN, I32_MAX, -(2**30), 2**30, 3 * 2**30], 31).tolist() == [-1, 1, 0, 0, 2]
    assert round_shift([I32_MIN, I32_MAX, -1], 0).tolist() == [I32_MIN, I32_MAX, -1]


def test_int_model_against_float64_rounding() -> None:
    """x / 2^s is exact in float64 for int32 x, and np.round rounds half to even."""
    rng = np.random.default_rng(21)
    x = rng.integers(I32_MIN, I32_MAX + 1, 200_000)
    x[::4] = (rng.integers(-(2**20), 2**20, x[::4].size) * 2 + 1) << rng.integers(0, 10, x[::4].size)  # ties
    s = rng.integers(0, 32, x.size)
    y = np.round(x / 2.0**s).astype(np.int64)
    bits = x.astype(np.uint32)
    np.testing.assert_array_equal(readout(INT, bits, s, 0, 1).view(np.int32), y)
    np.testing.assert_array_equal(readout(INT, bits, s, 1, 1).view(np.int32), np.maximum(y, 0))
    np.testing.assert_array_equal(readout(INT, bits, s, 0, 0), np.clip(y, -128, 127).astype(np.uint8))
    np.testing.assert_array_equal(readout(INT, bits, s, 1, 0), np.clip(y, 0, 127).astype(np.uint8))


def _fp_reference(x32: np.ndarray, scale: np.ndarray, relu: bool) -> tuple[np.ndarray, np.ndarray]:
    """IEEE float32 multiply, subnormals flushed and NaN canonical; then ReLU; then ml_dtypes bf16."""
    with np.errstate(all="ignore"):
        p = ftz32(x32).view(np.float32) * ftz32(scale).view(np.float32)
    y = np.where(np.isnan(p), np.uint32(F32_NAN), ftz32(p.view(np.uint32))).astype(np.uint32)
    if relu:
        y = np.where((y >> 31 == 1) & ~np.isnan(y.view(np.float32)), np.uint32(0), y).astype(np.uint32)
    bf = y.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    return y, np.where(np.isnan(y.view(np.float32)), np.uint16(0x7FC0), bf)


@pytest.mark.parametrize("relu", [False, True])
def test_fp_model_against_float32_and_ml_dtypes(relu: bool) -> None:
    """Wherever the exact product is at least 2^-126 (IEEE float32 then rounds exactly as the model),
    the model equals the float32/ml_dtypes reference bit for bit, for fp32 and bf16 accumulators."""
    rng = np.random.default_rng(22)
    x = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32)
    x[::2] = (rng.standard_normal(50_000) * 1000).astype(np.float32).view(np.uint32)
    scale = rng.choice(np.array([*F32_SCALES, 0x3DCCCCCD, 0x42C80000], dtype=np.uint32), x.size)
    scale[1::3] = rng.integers(0, 2**32, scale[1::3].size, dtype=np.uint64).astype(np.uint32)
    act = int(relu)
    with np.errstate(invalid="ignore"):
        exact = f32_bits_to_f64(x) * f32_bits_to_f64(scale)
    ok = np.isnan(exact) | (np.abs(exact) >= 2.0**-126)
    y, bf = _fp_reference(x, scale, relu)
    np.testing.assert_array_equal(readout(FP32, x, scale, act, 1)[ok], y[ok])
    np.testing.assert_array_equal(readout(FP32, x, scale, act, 0)[ok], bf[ok])
    x16 = x >> np.uint32(16)
    with np.errstate(invalid="ignore"):
        ok16 = np.isnan(f32_bits_to_f64(x16 << 16) * f32_bits_to_f64(scale))
        ok16 |= np.abs(f32_bits_to_f64(x16 << 16) * f32_bits_to_f64(scale)) >= 2.0**-126
    _, bf16 = _fp_reference(x16 << 16, scale, relu)
    for out in (0, 1):  # a bf16 accumulator always reads out bf16
        np.testing.assert_array_equal(readout(BF16, x16, scale, act, out)[ok16], bf16[ok16])


def test_fp_model_error_bound() -> None:
    """Normal results: |y − x·scale| ≤ 2^-24 |x·scale| (fp32 out) and ≤ (2^-24 + 2^-8 + 2^-32) |x·scale|
    (bf16 out: two roundings)."""
    rng = np.random.default_rng(23)
    x = (rng.standard_normal(100_000) * 2.0 ** rng.integers(-40, 40, 100_000)).astype(np.float32)
    s = (rng.standard_normal(100_000) * 2.0 ** rng.integers(-40, 40, 100_000)).astype(np.float32)
    exact = x.astype(np.float64) * s.astype(np.float64)
    normal = (np.abs(exact) >= 2.0**-120) & (np.abs(exact) < 2.0**120)
    y32 = f32_bits_to_f64(readout(FP32, x.view(np.uint32), s.view(np.uint32), 0, 1))
    y16 = f32_bits_to_f64(readout(FP32, x.view(np.uint32), s.view(np.uint32), 0, 0).astype(np.uint32) << 16)
    err = np.abs(exact[normal])
    assert np.all(np.abs(y32[normal] - exact[normal]) <= 2.0**-24 * err)
    assert np.all(np.abs(y16[normal] - exact[normal]) <= (2.0**-24 + 2.0**-8 + 2.0**-32) * err)

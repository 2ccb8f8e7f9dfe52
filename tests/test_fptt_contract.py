"""The FPTT reference's hardware contract (``Arith("bf16", tile=cfg)``, tb/fptt/hardware.py) against
independent definitions of the tile's order: GEMMs summed K tile by K tile (rows-wide, each from
+0, top row first) into an fp32 or bf16 accumulator after the bias, sums in row order in the
accumulator's precision, and the plain bf16 mode where the two agree."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.config import AccelConfig, ConfigError
from tb.fptt import hardware
from tb.fptt.arith import BF16, Arith

CONFIGS = {
    "4x4": AccelConfig(rows=4, cols=4, dtype="bf16"),
    "8x4": AccelConfig(rows=8, cols=4, dtype="bf16"),
    "4x4-acc-bf16": AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16"),
}


def rne(x: np.ndarray, bits: int) -> np.ndarray:
    """float64 values rounded to ``bits`` significant bits, nearest even (np.round is half-even);
    inputs here stay far from overflow and the flush threshold."""
    mant, exp = np.frexp(np.asarray(x, np.float64))
    return np.ldexp(np.round(mant * 2.0**bits) / 2.0**bits, exp)


def tile_order_gemm(cfg: AccelConfig, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """bf16(A·B + bias) in the tile's order, written from docs/tile.md rather than the models: the
    bias as a last K row of B times a column of ones (docs/fptt.md); per K tile of ``rows`` a mesh
    sum from 0, products exact, each add rounded to the accumulator's precision; the tile's sum
    added into the accumulator; one read-out rounding."""
    p = 24 if cfg.acc_dtype == "fp32" else 8
    if bias is not None:
        a = np.concatenate([a, np.ones((a.shape[0], 1), a.dtype)], axis=1)
        b = np.concatenate([b, bias.reshape(1, -1)])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    acc = None
    for k0 in range(0, a.shape[1], cfg.rows):
        part = np.zeros((a.shape[0], b.shape[1]))
        for k in range(k0, min(k0 + cfg.rows, a.shape[1])):
            part = rne(part + np.outer(a64[:, k], b64[k]), p)
        acc = part if acc is None else rne(acc + part, p)
    return rne(acc, 8).astype(np.float32)


def bf16_values(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(BF16).astype(np.float32)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(sorted(CONFIGS)),
    m=st.integers(1, 9),
    k=st.one_of(st.integers(1, 19), st.sampled_from([4, 8, 16, 129])),
    n=st.integers(1, 11),
    with_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_contract_gemm_is_the_tiles_order(name: str, m: int, k: int, n: int, with_bias: bool, seed: int) -> None:
    """Random shapes, K a multiple of rows or not (the last K tile partial), both accumulators."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(seed)
    a, b = bf16_values(rng, (m, k)), bf16_values(rng, (k, n))
    bias = bf16_values(rng, (n,)) if with_bias else None
    got = Arith("bf16", tile=cfg).gemm(a, b, "t", bias=bias)
    np.testing.assert_array_equal(got.view(np.uint32), tile_order_gemm(cfg, a, b, bias).view(np.uint32))


def test_contract_gemm_order_by_hand() -> None:
    """1·(2^24 + 1 + 1 + 1 + 1 − 2^24) = 4, worked out by hand in the tile's order. rows = 4: the
    first K tile rounds 2^24 + 1 back to 2^24 three times; the second tile is 1 − 2^24 = −(2^24 − 1),
    exact; the accumulator adds them: 1. rows = 8, one K tile: 2^24 stays through four +1, then
    − 2^24 gives 0. A bf16 accumulator rounds the second tile to −2^24: 0. The order decides the
    result, and plain float32 a @ b leaves it to NumPy, which is why the contract exists."""
    a = np.ones((1, 6), np.float32)
    b = np.float32([[2.0**24], [1], [1], [1], [1], [-(2.0**24)]])
    got = {name: float(Arith("bf16", tile=cfg).gemm(a, b, "t")[0, 0]) for name, cfg in CONFIGS.items()}
    assert got == {"4x4": 1.0, "8x4": 0.0, "4x4-acc-bf16": 0.0}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_contract_sums_in_row_order_in_the_accumulator(name: str) -> None:
    """sum_axis0 (and the bias_gradient program, hardware.acc_sum): in row order at the
    accumulator's precision, one bf16 rounding; sum_rows (bias gradients): the ones row of a GEMM,
    in the tile's order; hardware.fold_sum: fp32 adds in order within each ``cols`` chunk, chunks
    in the accumulator."""
    cfg = CONFIGS[name]
    p = 24 if cfg.acc_dtype == "fp32" else 8
    rng = np.random.default_rng(2)
    x = bf16_values(rng, (13, 7), 0.01) + bf16_values(rng, (13, 7))  # mixed magnitudes: order matters
    x = x.astype(BF16).astype(np.float32)
    ar = Arith("bf16", tile=cfg)
    acc = x[0].astype(np.float64)
    for row in x[1:]:
        acc = rne(acc + row, p)
    np.testing.assert_array_equal(ar.sum_axis0(x), rne(acc, 8).astype(np.float32))
    np.testing.assert_array_equal(hardware.acc_sum(cfg, x), rne(acc, 8).astype(np.float32))
    ones = tile_order_gemm(cfg, np.ones((1, len(x)), np.float32), x, None)[0]
    np.testing.assert_array_equal(ar.sum_rows(x), ones)
    total = None
    for k0 in range(0, len(x), cfg.cols):
        part = x[k0].astype(np.float64)
        for row in x[k0 + 1 : k0 + cfg.cols]:
            part = rne(part + row, 24)
        part = rne(part, p)
        total = part if total is None else rne(total + part, p)
    np.testing.assert_array_equal(hardware.fold_sum(cfg, x), rne(total, 8).astype(np.float32))


def test_contract_elementwise_and_functions_equal_plain_bf16_on_normal_values() -> None:
    """Away from the flush threshold a VEC lane op then a bf16 write is the plain mode's float32 op
    then round_bf16, and the tables are correctly rounded functions."""
    rng = np.random.default_rng(3)
    a, b = bf16_values(rng, (64, 9), 3.0), bf16_values(rng, (64, 9), 3.0)
    hw, plain = Arith("bf16", tile=CONFIGS["4x4"]), Arith("bf16")
    c = hw.const(0.3)
    for op in ("mul", "add", "sub"):
        np.testing.assert_array_equal(getattr(hw, op)(a, b), getattr(plain, op)(a, b), err_msg=op)
    np.testing.assert_array_equal(hw.scale(a, c), plain.scale(a, c))
    np.testing.assert_array_equal(hw.one_minus(a), plain.one_minus(a))
    np.testing.assert_array_equal(hw.sigmoid(a), plain.sigmoid(a))
    np.testing.assert_array_equal(hw.tanh(a), plain.tanh(a))


def test_contract_flushes_like_the_lanes() -> None:
    """Where they differ: a difference just below 2^-126 is flushed by the lane before the bf16
    rounding (docs/vector.md), the plain mode rounds the float32 subnormal up to 2^-126."""
    a = np.float32([2.0**-125])
    b = np.float32([2.0**-125 - 2.0**-133])  # bf16: 1.1111111b · 2^-126
    b = b.astype(BF16).astype(np.float32)
    diff = np.float32(a - b)
    assert 0 < diff < 2.0**-126
    assert Arith("bf16", tile=CONFIGS["4x4"]).sub(a, b)[0] == 0.0


def test_contract_refuses_other_tiles_and_precisions() -> None:
    with pytest.raises(ConfigError, match="dtype = 'int8' is invalid"):
        Arith("bf16", tile=AccelConfig(rows=4, cols=4, dtype="int8"))
    with pytest.raises(ValueError, match="needs precision bf16"):
        Arith("fp32", tile=CONFIGS["4x4"])
    with pytest.raises(ValueError, match="takes bf16 values"):
        Arith("bf16", tile=CONFIGS["4x4"]).mul(np.float32([0.1]), np.float32([1.0]))


def test_contract_trains_like_plain_bf16() -> None:
    """Twenty FPTT-4 passes on one learnable batch (T = 16, H = 8, trunc_h = 2, so steps past the
    window too) with the contract and with plain bf16: both losses fall from 0.99 to about 0.016 and
    stay within 0.01 of each other at every pass, and the runs are not bit-identical (the contract
    changes the roundings, not the maths)."""
    from tb.fptt.model import init_params, init_state
    from tb.fptt.tensors import Dims, Hyper
    from tb.fptt.train import train_sequence

    dims = Dims(inputs=1, hidden=8, classes=3, batch=4)
    rng = np.random.default_rng(4)
    y = np.array([0, 1, 2, 1])
    x = ((y[:, None, None] - 1.0) + 0.3 * rng.standard_normal((4, 16, 1))).astype(np.float32)
    hp = Hyper(0.5, 0.1, 4, trunc_h=2)
    runs = {}
    for name, ar in (("plain", Arith("bf16")), ("contract", Arith("bf16", tile=CONFIGS["4x4"]))):
        state = init_state(init_params(dims, np.random.default_rng(0)), BF16)
        losses = []
        for _ in range(20):
            result = train_sequence(state, x, y, hp, ar)
            state, losses = result.state, [*losses, result.loss]
        runs[name] = (np.array(losses), state)
    (plain, plain_state), (hw, hw_state) = runs["plain"], runs["contract"]
    assert hw[-1] < 0.05 * hw[0] and plain[-1] < 0.05 * plain[0]
    np.testing.assert_allclose(hw, plain, atol=0.01)
    assert not np.array_equal(np.asarray(hw_state.theta.w_gate), np.asarray(plain_state.theta.w_gate))

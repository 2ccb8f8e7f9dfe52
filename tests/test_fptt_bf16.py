"""bf16 mode: rounding helper, storage dtypes, the documented operation order, distance to fp32."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tb.fptt.arith import Arith, round_bf16
from tb.fptt.model import backward, forward, fptt_update, head, init_params, init_state
from tb.fptt.tensors import Dims, FpttState, Hyper
from tb.fptt.train import train_sequence

BF16 = ml_dtypes.bfloat16


def _bf(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32).astype(BF16)


def _f(v) -> np.ndarray:
    return np.asarray(v).astype(np.float32)


def test_round_bf16_is_nearest_even_with_flush_to_zero() -> None:
    one = np.float32(1.0)
    ulp = np.float32(2.0**-7)
    ties = np.array([one + ulp / 2, one + 3 * ulp / 2, -(one + ulp / 2)], dtype=np.float32)
    np.testing.assert_array_equal(round_bf16(ties), [1.0, 1.0 + 2 * ulp, -1.0])  # to even
    assert round_bf16(one + ulp / 2 + np.float32(2.0**-20)) == one + ulp  # just above a tie
    tiny = np.array([2.0**-127, -(2.0**-130), 2.0**-126], dtype=np.float32)
    out = round_bf16(tiny)
    np.testing.assert_array_equal(out, [0.0, 0.0, 2.0**-126])
    assert np.signbit(out[1])
    rng = np.random.default_rng(0)
    x = (rng.normal(size=10_000) * 10.0 ** rng.integers(-20, 20, size=10_000)).astype(np.float32)
    np.testing.assert_array_equal(round_bf16(x), x.astype(BF16).astype(np.float32))


def _setup(seed: int = 0, n: int = 4):
    dims = Dims(inputs=2, hidden=8, classes=5, batch=4)
    rng = np.random.default_rng(seed)
    theta = init_params(dims, rng)
    x = rng.uniform(0, 1, size=(dims.batch, n, dims.inputs))
    y = rng.integers(0, dims.classes, size=dims.batch)
    return dims, theta, x, y


def test_bf16_tensors_are_stored_as_bfloat16() -> None:
    dims, theta, x, y = _setup()
    ar = Arith("bf16")
    state = init_state(theta, ar.storage)
    zeros = np.zeros((dims.batch, dims.hidden), dtype=BF16)
    st = forward(state.theta, x, zeros, zeros, ar)
    out = head(state.theta, st.h_last, y, ar)
    bw = backward(state.theta, st, out, y, ar)
    new, reg = fptt_update(state, bw.grads, 0.1, 0.1, ar)
    tensors = [st.xc, st.gates, st.s, st.ts, st.h_last, out.logits, out.probs, bw.dz, bw.dlogits]
    for params in (bw.grads, new.theta, new.theta_bar, new.lam, reg):
        tensors += [a for _, a in params.items()]
    assert all(t.dtype == BF16 for t in tensors)


def test_bf16_forward_step_follows_documented_order() -> None:
    """docs/fptt.md, forward: one rounding per GEMM output and after every element-wise op."""
    dims, theta, x, _y = _setup(1, n=1)
    hid = dims.hidden
    ar = Arith("bf16")
    t = theta.astype(BF16)
    rng = np.random.default_rng(7)
    h0, s0 = _bf(rng.normal(size=(4, hid))), _bf(rng.normal(size=(4, hid)))
    st = forward(t, x, h0, s0, ar)
    xc = np.concatenate([_f(_bf(x[:, 0])), _f(h0)], axis=1)
    z = _bf(xc @ _f(t.w_gate) + _f(t.b_gate))  # 1
    sig = _bf(1.0 / (1.0 + np.exp(-_f(z[:, : 3 * hid]))))  # 2
    g = _bf(np.tanh(_f(z[:, 3 * hid :])))  # 3
    i, f, o = np.split(_f(sig), 3, axis=1)
    fs, ig = _bf(f * _f(s0)), _bf(i * _f(g))  # 4, 5
    s1 = _bf(_f(fs) + _f(ig))  # 6
    ts = _bf(np.tanh(_f(s1)))  # 7
    h1 = _bf(o * _f(ts))  # 8
    for got, want in [
        (st.gates[0, :, : 3 * hid], sig),
        (st.gates[0, :, 3 * hid :], g),
        (st.s[1], s1),
        (st.ts[0], ts),
        (st.h_last, h1),
    ]:
        np.testing.assert_array_equal(_f(got), _f(want))


def test_bf16_update_follows_documented_order() -> None:
    """docs/fptt.md, update: bf16 constants, one rounding after every operation, in this order."""
    _dims, theta, _, _ = _setup(2)
    rng = np.random.default_rng(3)
    t = theta.astype(BF16)
    tb = t.map(lambda a: _bf(_f(a) + rng.normal(scale=0.05, size=a.shape)))
    lm = t.map(lambda a: _bf(rng.normal(scale=0.05, size=a.shape)))
    gr = t.map(lambda a: _bf(rng.normal(size=a.shape)))
    eta, alpha = 0.1, 0.3
    new, _ = fptt_update(FpttState(t, tb, lm), gr, eta, alpha, Arith("bf16"))
    c_eta, c_alpha, c_half, c_inv = (_f(_bf(c)) for c in (eta, alpha, 0.5, 1 / (2 * alpha)))
    T, TB, L, G = (_f(p.w_gate) for p in (t, tb, lm, gr))
    r = _bf(_f(_bf(_f(_bf(T - TB)) * c_alpha)) - L)
    t1 = _bf(T - _f(_bf(_f(_bf(G + _f(r))) * c_eta)))
    l1 = _bf(L - _f(_bf(_f(_bf(_f(t1) - TB)) * c_alpha)))
    b1 = _bf(_f(_bf(_f(_bf(TB + _f(t1))) * c_half)) - _f(_bf(_f(l1) * c_inv)))
    for got, want in [(new.theta.w_gate, t1), (new.lam.w_gate, l1), (new.theta_bar.w_gate, b1)]:
        np.testing.assert_array_equal(_f(got), _f(want))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bf16_stays_within_stated_bounds_of_fp32(seed: int) -> None:
    """Bounds stated in docs/fptt.md: one 16-step partition (H = 16, B = 8): |Δh| <= 2^-7,
    gradient error <= 2 % (norm), loss within 2e-3; 20 FPTT-4 steps: loss within 0.03 and the
    parameter difference <= 30 % of the distance the parameters moved."""
    dims = Dims(inputs=1, hidden=16, classes=10, batch=8)
    rng = np.random.default_rng(seed)
    theta = init_params(dims, rng)
    x = rng.uniform(0, 1, size=(8, 16, 1))
    y = rng.integers(0, 10, size=8)
    one, trained = {}, {}
    for prec in ("fp32", "bf16"):
        ar = Arith(prec)
        t = theta.astype(ar.storage)
        z = np.zeros((8, 16), dtype=ar.storage)
        st = forward(t, x, z, z, ar)
        out = head(t, st.h_last, y, ar)
        one[prec] = (_f(st.h_last), backward(t, st, out, y, ar).grads.flat(), out.loss)
        state = init_state(theta, ar.storage)
        for _ in range(20):
            res = train_sequence(state, x, y, Hyper(0.1, 0.1, K=4), ar)
            state = res.state
        trained[prec] = (res.loss, state.theta.flat())
    assert np.abs(one["fp32"][0] - one["bf16"][0]).max() <= 2.0**-7
    g32, g16 = one["fp32"][1], one["bf16"][1]
    assert np.linalg.norm(g32 - g16) <= 0.02 * np.linalg.norm(g32)
    assert abs(one["fp32"][2] - one["bf16"][2]) <= 2e-3
    assert abs(trained["fp32"][0] - trained["bf16"][0]) <= 0.03
    moved = np.linalg.norm(trained["fp32"][1] - theta.flat())
    assert np.linalg.norm(trained["fp32"][1] - trained["bf16"][1]) <= 0.3 * moved
    assert not np.array_equal(g32, g16)  # bf16 mode really rounds

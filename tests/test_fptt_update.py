"""FPTT update and training flow: plain truncated-BPTT SGD as the α = 0 limit, eqs. 4.17-4.21, and
K that does not divide T."""

from __future__ import annotations

import numpy as np
import pytest

from tb.fptt.arith import Arith
from tb.fptt.model import fptt_update, init_params, init_state, partition_bounds
from tb.fptt.tensors import Dims, FpttState, Hyper, Params
from tb.fptt.train import train_sequence

DIMS = Dims(inputs=2, hidden=4, classes=3, batch=3)


def _sig(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _plain_bptt_grads(w, b, w_out, b_out, x, y, h0, c0):
    """Textbook LSTM BPTT over a whole segment, written independently of tb.fptt: separate x and h
    weight blocks per gate, gates kept in a dict, loss = batch-mean cross-entropy at the end."""
    bsz, steps, n_in = x.shape
    wx = {k: w[k][:n_in] for k in w}
    wh = {k: w[k][n_in:] for k in w}
    h, c, cache = h0, c0, []
    for t in range(steps):
        pre = {k: x[:, t] @ wx[k] + h @ wh[k] + b[k] for k in w}
        gate = {k: (np.tanh(pre[k]) if k == "g" else _sig(pre[k])) for k in w}
        c_new = gate["f"] * c + gate["i"] * gate["g"]
        cache.append((x[:, t], h, c, gate, c_new))
        h, c = gate["o"] * np.tanh(c_new), c_new
    logits = h @ w_out + b_out
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dlog = (p - np.eye(w_out.shape[1])[y]) / bsz
    gw = {k: np.zeros_like(w[k]) for k in w}
    gb = {k: np.zeros_like(b[k]) for k in w}
    dh, dc = dlog @ w_out.T, np.zeros_like(h)
    for xt, h_prev, c_prev, gate, c_new in reversed(cache):
        tc = np.tanh(c_new)
        dc = dc + dh * gate["o"] * (1 - tc**2)
        dpre = {
            "o": dh * tc * gate["o"] * (1 - gate["o"]),
            "i": dc * gate["g"] * gate["i"] * (1 - gate["i"]),
            "f": dc * c_prev * gate["f"] * (1 - gate["f"]),
            "g": dc * gate["i"] * (1 - gate["g"] ** 2),
        }
        dh = np.zeros_like(dh)
        for k in w:
            gw[k] += np.concatenate([xt, h_prev], axis=1).T @ dpre[k]
            gb[k] += dpre[k].sum(0)
            dh += dpre[k] @ wh[k].T
        dc = dc * gate["f"]
    return gw, gb, h.T @ dlog, dlog.sum(0), h, c


def _split(theta: Params):
    hid = theta.w_out.shape[0]
    cols = {k: slice(j * hid, (j + 1) * hid) for j, k in enumerate("ifog")}
    w = {k: theta.w_gate[:, s].copy() for k, s in cols.items()}
    b = {k: theta.b_gate[s].copy() for k, s in cols.items()}
    return w, b, theta.w_out.copy(), theta.b_out.copy(), cols


def _sgd_reference(theta: Params, x, y, eta: float, K: int) -> Params:
    """Plain truncated BPTT with SGD: one update per partition, states carried across."""
    w, b, w_out, b_out, cols = _split(theta)
    h = c = np.zeros((x.shape[0], theta.w_out.shape[0]))
    for a, e in partition_bounds(x.shape[1], K):
        gw, gb, gwo, gbo, h, c = _plain_bptt_grads(w, b, w_out, b_out, x[:, a:e], y, h, c)
        w = {k: w[k] - eta * gw[k] for k in w}
        b = {k: b[k] - eta * gb[k] for k in b}
        w_out, b_out = w_out - eta * gwo, b_out - eta * gbo
    w_gate = np.zeros_like(theta.w_gate)
    b_gate = np.zeros_like(theta.b_gate)
    for k, s in cols.items():
        w_gate[:, s], b_gate[s] = w[k], b[k]
    return Params(w_gate=w_gate, b_gate=b_gate, w_out=w_out, b_out=b_out)


def _data(seed: int, steps: int):
    rng = np.random.default_rng(seed)
    theta = init_params(DIMS, rng)
    x = rng.uniform(0, 1, size=(DIMS.batch, steps, DIMS.inputs))
    y = rng.integers(0, DIMS.classes, size=DIMS.batch)
    return theta, x, y


@pytest.mark.parametrize("K", [1, 4])
def test_alpha_zero_equals_plain_truncated_bptt_sgd(K: int) -> None:
    theta, x, y = _data(10, steps=8)
    res = train_sequence(init_state(theta, np.float64), x, y, Hyper(eta=0.3, alpha=0.0, K=K), Arith("fp64"))
    ref = _sgd_reference(theta, x, y, eta=0.3, K=K)
    moved = np.abs(ref.flat() - theta.flat()).max()
    assert moved > 1e-3  # the step is large enough to tell a missing term
    np.testing.assert_allclose(res.state.theta.flat(), ref.flat(), rtol=1e-10, atol=1e-12)


def test_alpha_positive_departs_from_sgd_after_the_first_partition() -> None:
    """With λ = 0 and θ̄ = θ the first update is plain SGD whatever α; later ones are not."""
    theta, x, y = _data(11, steps=8)
    ar = Arith("fp64")
    one = train_sequence(init_state(theta, np.float64), x[:, :4], y, Hyper(0.3, 0.5, K=1), ar)
    np.testing.assert_allclose(one.state.theta.flat(), _sgd_reference(theta, x[:, :4], y, 0.3, 1).flat(), rtol=1e-10)
    two = train_sequence(init_state(theta, np.float64), x, y, Hyper(0.3, 0.5, K=2), ar)
    assert np.abs(two.state.theta.flat() - _sgd_reference(theta, x, y, 0.3, 2).flat()).max() > 1e-4


def test_update_follows_equations_4_17_to_4_21() -> None:
    rng = np.random.default_rng(12)
    theta = init_params(DIMS, rng)
    bar = theta.map(lambda a: a + rng.normal(scale=0.1, size=a.shape))
    lam = theta.map(lambda a: rng.normal(scale=0.1, size=a.shape))
    grad = theta.map(lambda a: rng.normal(size=a.shape))
    eta, alpha = 0.05, 0.7
    new, reg = fptt_update(FpttState(theta, bar, lam), grad, eta, alpha, Arith("fp64"))
    t, tb, lm, g = theta.flat(), bar.flat(), lam.flat(), grad.flat()
    r = alpha * (t - tb) - lm
    t1 = t - eta * (g + r)
    l1 = lm - alpha * (t1 - tb)
    b1 = 0.5 * (tb + t1) - l1 / (2 * alpha)
    for got, want in [(reg, r), (new.theta, t1), (new.lam, l1), (new.theta_bar, b1)]:
        np.testing.assert_allclose(got.flat(), want, rtol=1e-12, atol=1e-15)


def test_alpha_zero_update_keeps_lambda_and_averages_theta_bar() -> None:
    rng = np.random.default_rng(13)
    theta = init_params(DIMS, rng)
    state = init_state(theta, np.float64)
    grad = theta.map(lambda a: rng.normal(size=a.shape))
    new, _ = fptt_update(state, grad, 0.1, 0.0, Arith("fp64"))
    np.testing.assert_array_equal(new.lam.flat(), 0.0)
    np.testing.assert_allclose(new.theta_bar.flat(), 0.5 * (theta.flat() + new.theta.flat()), rtol=1e-15)


# -- K that does not divide T ----------------------------------------------------------------


def test_partition_bounds_remainder_is_one_more_part() -> None:
    """Thesis 2.3.2: T = 100, K = 6 gives six parts of 16 and one of 4."""
    bounds = partition_bounds(100, 6)
    assert [b - a for a, b in bounds] == [16] * 6 + [4]
    assert bounds[0][0] == 0 and bounds[-1][1] == 100
    assert all(bounds[k][1] == bounds[k + 1][0] for k in range(len(bounds) - 1))
    assert [b - a for a, b in partition_bounds(12, 4)] == [3, 3, 3, 3]


def test_k_not_dividing_t_trains_on_the_documented_parts() -> None:
    """T = 8, K = 3: floor(8/3) = 2, so four parts of 2 steps, the same schedule as K = 4."""
    theta, x, y = _data(14, steps=8)
    ar = Arith("fp64")
    got = train_sequence(init_state(theta, np.float64), x, y, Hyper(0.2, 0.3, K=3), ar)
    same = train_sequence(init_state(theta, np.float64), x, y, Hyper(0.2, 0.3, K=4), ar)
    other = train_sequence(init_state(theta, np.float64), x, y, Hyper(0.2, 0.3, K=2), ar)
    assert len(got.partition_losses) == 4
    np.testing.assert_array_equal(got.state.theta.flat(), same.state.theta.flat())
    assert np.abs(got.state.theta.flat() - other.state.theta.flat()).max() > 1e-6


@pytest.mark.parametrize("K", [0, 9, -1])
def test_k_outside_one_to_t_is_refused(K: int) -> None:
    with pytest.raises(ValueError, match="partition factor K must be between 1 and the sequence length 8"):
        partition_bounds(8, K)

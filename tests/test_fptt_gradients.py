"""Gradients of one FPTT partition against finite differences, PyTorch autograd and a path-by-path
re-implementation of Algorithm 3 (for the truncations), with the cell-state gradient running past
the window's edge as Algorithm 3 line 15 does (the default) and cut there (``cut_s_at_window``)."""

from __future__ import annotations

import numpy as np
import pytest

from tb.fptt.arith import Arith
from tb.fptt.model import backward, forward, head, init_params
from tb.fptt.tensors import Dims, Params

DIMS = Dims(inputs=2, hidden=3, classes=4, batch=2)


def _problem(seed: int, dims: Dims = DIMS, n: int = 5, dtype: type = np.float64):
    rng = np.random.default_rng(seed)
    theta = init_params(dims, rng).astype(dtype)
    x = rng.normal(size=(dims.batch, n, dims.inputs)).astype(dtype)
    y = rng.integers(0, dims.classes, size=dims.batch)
    h0 = (0.5 * rng.normal(size=(dims.batch, dims.hidden))).astype(dtype)
    s0 = (0.5 * rng.normal(size=(dims.batch, dims.hidden))).astype(dtype)
    return theta, x, y, h0, s0


def _grads(theta, x, y, h0, s0, ar, trunc_h=None, trunc_s=None, cut=False) -> Params:
    st = forward(theta, x, h0, s0, ar)
    return backward(theta, st, head(theta, st.h_last, y, ar), y, ar, trunc_h, trunc_s, cut_s_at_window=cut).grads


def test_gradient_matches_central_differences_fp64() -> None:
    ar = Arith("fp64")
    theta, x, y, h0, s0 = _problem(1)
    grads = _grads(theta, x, y, h0, s0, ar)

    def loss(th: Params) -> float:
        return head(th, forward(th, x, h0, s0, ar).h_last, y, ar).loss

    eps = 1e-6
    for name, a in theta.items():
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            old = a[idx]
            a[idx] = old + eps
            up = loss(theta)
            a[idx] = old - eps
            down = loss(theta)
            a[idx] = old
            numeric[idx] = (up - down) / (2 * eps)
        np.testing.assert_allclose(getattr(grads, name), numeric, rtol=1e-6, atol=1e-9, err_msg=name)


# -- PyTorch ---------------------------------------------------------------------------------


def _torch_perm(h: int) -> np.ndarray:
    """Columns of our [i|f|o|g] gate block in PyTorch's [i|f|g|o] order."""
    return np.concatenate([np.arange(0, 2 * h), np.arange(3 * h, 4 * h), np.arange(2 * h, 3 * h)])


def _torch_grads(
    theta, x, y, h0, s0, detach_before: int = 0, detach_cell: bool = False, keep_cell: bool = False
) -> Params:
    """Autograd through nn.LSTMCell; states entering step ``detach_before`` and before (and, with
    ``detach_cell``, every cell state entering a step) are cut from the graph; with ``keep_cell``
    only h is cut there, so the cell state carries the gradient on into the earlier steps."""
    torch = pytest.importorskip("torch")
    dims_i = x.shape[2]
    hid = theta.w_out.shape[0]
    perm = _torch_perm(hid)
    cell = torch.nn.LSTMCell(dims_i, hid)
    out = torch.nn.Linear(hid, theta.w_out.shape[1])
    with torch.no_grad():
        cell.weight_ih.copy_(torch.from_numpy(theta.w_gate[:dims_i][:, perm].T.copy()))
        cell.weight_hh.copy_(torch.from_numpy(theta.w_gate[dims_i:][:, perm].T.copy()))
        cell.bias_ih.copy_(torch.from_numpy(theta.b_gate[perm].copy()))
        cell.bias_hh.zero_()
        out.weight.copy_(torch.from_numpy(theta.w_out.T.copy()))
        out.bias.copy_(torch.from_numpy(theta.b_out.copy()))
    h, c = torch.from_numpy(h0), torch.from_numpy(s0)
    for j in range(x.shape[1]):
        if j <= detach_before:
            h, c = h.detach(), c if keep_cell else c.detach()
        h, c = cell(torch.from_numpy(x[:, j].copy()), (h, c.detach() if detach_cell else c))
    loss = torch.nn.functional.cross_entropy(out(h), torch.from_numpy(y))
    loss.backward()
    inv = np.argsort(perm)
    w_gate = np.concatenate([cell.weight_ih.grad.numpy().T, cell.weight_hh.grad.numpy().T])[:, inv]
    return Params(
        w_gate=w_gate,
        b_gate=cell.bias_ih.grad.numpy()[inv],
        w_out=out.weight.grad.numpy().T,
        b_out=out.bias.grad.numpy(),
    )


def _assert_close_to(ours: Params, ref: Params, rtol: float) -> None:
    for name, a in ours.items():
        b = getattr(ref, name)
        scale = np.abs(b).max()
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=rtol, atol=rtol * scale, err_msg=name)
        assert np.linalg.norm(np.asarray(a, np.float64) - b) <= rtol * np.linalg.norm(b), name


def test_gradient_matches_torch_autograd_fp32() -> None:
    pytest.importorskip("torch")
    dims = Dims(inputs=3, hidden=8, classes=5, batch=4)
    theta, x, y, h0, s0 = _problem(2, dims, n=7, dtype=np.float32)
    ours = _grads(theta, x, y, h0, s0, Arith("fp32"))
    _assert_close_to(ours, _torch_grads(theta, x, y, h0, s0), rtol=1e-5)


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize(("trunc_h", "trunc_s"), [(2, None), (0, None), (6, 0), (3, 0)])
def test_truncations_match_torch_detach_fp32(trunc_h: int, trunc_s: int | None, cut: bool) -> None:
    """trunc_h = m cuts h before the last m+1 steps, and s too with ``cut`` (without it the cell
    state carries the gradient into the earlier steps' gates); trunc_s = 0 cuts every s -> s edge."""
    pytest.importorskip("torch")
    dims = Dims(inputs=2, hidden=6, classes=3, batch=3)
    n = 7
    theta, x, y, h0, s0 = _problem(3, dims, n=n, dtype=np.float32)
    ours = _grads(theta, x, y, h0, s0, Arith("fp32"), trunc_h, trunc_s, cut)
    ref = _torch_grads(theta, x, y, h0, s0, detach_before=n - 1 - trunc_h, detach_cell=trunc_s == 0, keep_cell=not cut)
    _assert_close_to(ours, ref, rtol=1e-5)


# -- Algorithm 3, one (hs, ss) pair at a time ---------------------------------------------------


def _pathwise_reference(theta: Params, st, probs, y, trunc_h, trunc_s, cut=False) -> Params:
    """Algorithm 3's double loop (outer over h steps, inner over cell-state steps), with its
    sigmoid'/tanh' slip on lines 19 and 21 fixed and the h-gradient of every (hs, ss) pair
    accumulated instead of only ss = hs, so that with no truncation it is exact BPTT. The inner
    loop runs down to max(0, hs − trunc_s) as line 15 says, or with ``cut`` to the window's edge."""
    n, bsz, width = st.xc.shape
    hid = st.s.shape[-1]
    w_h = theta.w_gate[width - hid :]
    onehot = np.eye(probs.shape[1])[y]
    dl = (probs - onehot) / bsz
    lo = 0 if trunc_h is None else max(0, n - 1 - trunc_h)
    dh_acc = np.zeros((n, bsz, hid))
    dh_acc[n - 1] = dl @ theta.w_out.T
    dw, db = np.zeros_like(theta.w_gate), np.zeros_like(theta.b_gate)

    def take(dz: np.ndarray, step: int) -> None:
        nonlocal dw, db
        dw += st.xc[step].T @ dz
        db += dz.sum(axis=0)
        if step - 1 >= lo:
            dh_acc[step - 1] += dz @ w_h.T

    for hs in range(n - 1, lo - 1, -1):
        i, f, o, g = np.split(st.gates[hs], 4, axis=1)
        dh, ts = dh_acc[hs], st.ts[hs]
        dz_o = np.zeros((bsz, 4 * hid))
        dz_o[:, 2 * hid : 3 * hid] = dh * ts * o * (1 - o)
        take(dz_o, hs)
        ds = dh * o * (1 - ts**2)
        floor = lo if cut else 0
        stop = floor if trunc_s is None else max(floor, hs - trunc_s)
        for ss in range(hs, stop - 1, -1):
            i, f, o, g = np.split(st.gates[ss], 4, axis=1)
            dz = np.zeros((bsz, 4 * hid))
            dz[:, :hid] = ds * g * i * (1 - i)
            dz[:, hid : 2 * hid] = ds * st.s[ss] * f * (1 - f)
            dz[:, 3 * hid :] = ds * i * (1 - g**2)
            take(dz, ss)
            ds = ds * f
    return Params(w_gate=dw, b_gate=db, w_out=st.h_last.T @ dl, b_out=dl.sum(axis=0))


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize(
    ("trunc_h", "trunc_s"),
    [(None, None), (None, 1), (None, 2), (3, 1), (4, 0), (2, None), (5, 3), (0, 2), (1, 5), (2, 3)],
)
def test_truncations_match_pathwise_algorithm3_fp64(trunc_h: int | None, trunc_s: int | None, cut: bool) -> None:
    ar = Arith("fp64")
    dims = Dims(inputs=2, hidden=4, classes=3, batch=3)
    theta, x, y, h0, s0 = _problem(4, dims, n=8)
    st = forward(theta, x, h0, s0, ar)
    out = head(theta, st.h_last, y, ar)
    ours = backward(theta, st, out, y, ar, trunc_h, trunc_s, cut_s_at_window=cut).grads
    ref = _pathwise_reference(theta, st, out.probs, y, trunc_h, trunc_s, cut)
    for name, a in ours.items():
        np.testing.assert_allclose(a, getattr(ref, name), rtol=1e-12, atol=1e-14, err_msg=name)


def test_truncation_changes_the_gradient() -> None:
    """Guards the tests above against truncation options that are silently ignored."""
    ar = Arith("fp64")
    theta, x, y, h0, s0 = _problem(5, n=6)
    full = _grads(theta, x, y, h0, s0, ar).w_gate
    for th, ts in [(2, None), (None, 1), (None, 0)]:
        cut = _grads(theta, x, y, h0, s0, ar, th, ts).w_gate
        assert np.abs(full - cut).max() > 1e-6 * np.abs(full).max()
    # the two readings of line 15 differ whenever trunc_h is shorter than the part and trunc_s > 0
    for th, ts in [(2, None), (2, 1), (0, 3)]:
        thesis, at_window = (_grads(theta, x, y, h0, s0, ar, th, ts, cut).w_gate for cut in (False, True))
        assert np.abs(thesis - at_window).max() > 1e-6 * np.abs(full).max()

"""LSTM + Linear + softmax: forward pass, loss head, backward pass (Algorithm 3) and FPTT update.

Each function takes and returns the tensors the hardware holds (:mod:`tb.fptt.tensors`), stored in
the precision's storage dtype, and does its arithmetic through an :class:`~tb.fptt.arith.Arith`,
whose rounding rules are the contract in docs/fptt.md. The operation order written here *is* that
contract: change one and the other together.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .arith import Arith, Array
from .tensors import BackwardOut, Dims, FpttState, HeadOut, Params, PartitionStates

Carry = Array | tuple[Array, int]  # "carry" mode: ds·f; "ages": (the parts by age, the first's age)


def init_params(dims: Dims, rng: np.random.Generator, forget_bias: float = 1.0) -> Params:
    """Uniform(-1/sqrt(H), 1/sqrt(H)) weights as PyTorch's LSTM; forget-gate bias raised so early
    training keeps the cell state (a common LSTM choice that helps the 64-step pixel stream)."""
    h, bound = dims.hidden, 1.0 / np.sqrt(dims.hidden)

    def u(*shape: int) -> npt.NDArray[np.float64]:
        return rng.uniform(-bound, bound, size=shape)

    b_gate = u(4 * h)
    b_gate[h : 2 * h] += forget_bias
    return Params(w_gate=u(dims.xc_width, 4 * h), b_gate=b_gate, w_out=u(h, dims.classes), b_out=u(dims.classes))


def init_state(theta: Params, precision_dtype: npt.DTypeLike) -> FpttState:
    """θ in the storage dtype, θ̄ = θ and λ = 0 (Algorithm 4, lines 7-8)."""
    t = theta.astype(precision_dtype)
    return FpttState(theta=t, theta_bar=t.copy(), lam=t.map(np.zeros_like))


def partition_bounds(T: int, K: int) -> list[tuple[int, int]]:
    """Step ranges [a, b) of the partitions of a length-T sequence for partition factor K.

    As the thesis describes (section 2.3.2): K parts of floor(T/K) steps, then, when K does not
    divide T, one more part with the remaining T mod K steps (so K+1 updates per sequence).
    """
    if not 1 <= K <= T:
        raise ValueError(f"partition factor K must be between 1 and the sequence length {T}, got {K}")
    stride = T // K
    bounds = [(p * stride, (p + 1) * stride) for p in range(K)]
    if K * stride < T:
        bounds.append((K * stride, T))
    return bounds


# -- forward ---------------------------------------------------------------------------------


def forward(theta: Params, x: Array, h0: Array, s0: Array, ar: Arith) -> PartitionStates:
    """Run the LSTM over one partition. x: (B, n, I); h0, s0: (B, H) carried in from before."""
    bsz, n, inputs = x.shape
    hid = s0.shape[-1]
    w, b = ar.load(theta.w_gate), ar.load(theta.b_gate)
    xs = ar.rnd(ar.load(x))  # inputs are quantised to the storage precision like any stored tensor
    xc = np.empty((n, bsz, inputs + hid), dtype=ar.compute)
    gates = np.empty((n, bsz, 4 * hid), dtype=ar.compute)
    s = np.empty((n + 1, bsz, hid), dtype=ar.compute)
    ts = np.empty((n, bsz, hid), dtype=ar.compute)
    h = ar.load(h0)
    s[0] = ar.load(s0)
    for j in range(n):
        xc[j, :, :inputs] = xs[:, j]
        xc[j, :, inputs:] = h
        h = _lstm_step(xc[j], w, b, s, ts, gates, j, ar)
    return PartitionStates(xc=ar.store(xc), gates=ar.store(gates), s=ar.store(s), ts=ar.store(ts), h_last=ar.store(h))


def _lstm_step(xc: Array, w: Array, b: Array, s: Array, ts: Array, gates: Array, j: int, ar: Arith) -> Array:
    """Equations 4.3-4.8 for step j; writes gates[j], s[j+1], ts[j] and returns h_j."""
    hid = s.shape[-1]
    ar.phase = "forward"
    z = ar.gemm(xc, w, "fwd_gate", bias=b)
    gates[j, :, : 3 * hid] = ar.sigmoid(z[:, : 3 * hid])
    gates[j, :, 3 * hid :] = ar.tanh(z[:, 3 * hid :])
    i, f, o, g = (gates[j, :, k * hid : (k + 1) * hid] for k in range(4))
    s[j + 1] = ar.add(ar.mul(f, s[j]), ar.mul(i, g))
    ts[j] = ar.tanh(s[j + 1])
    return ar.mul(o, ts[j])


def head(theta: Params, h: Array, labels: npt.NDArray[np.integer], ar: Arith) -> HeadOut:
    """Equations 4.9-4.10 at the loss step, and the mean cross-entropy over the batch."""
    ar.phase = "head"
    logits = ar.gemm(ar.load(h), ar.load(theta.w_out), "fwd_out", bias=ar.load(theta.b_out))
    probs = ar.softmax(logits)
    return HeadOut(logits=ar.store(logits), probs=ar.store(probs), loss=cross_entropy(logits, labels))


def cross_entropy(logits: npt.ArrayLike, labels: npt.NDArray[np.integer]) -> float:
    """Mean cross-entropy from logits, in float64 (a reported figure, not a hardware tensor)."""
    z = np.asarray(logits, dtype=np.float64)
    zmax = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - zmax).sum(axis=1)) + zmax[:, 0]
    return float(np.mean(lse - z[np.arange(len(labels)), labels]))


# -- backward --------------------------------------------------------------------------------


def window_start(n: int, trunc_h: int | None) -> int:
    """Oldest step the backward pass visits: trunc_h steps before the loss step, clipped at 0."""
    return 0 if trunc_h is None else max(0, n - 1 - trunc_h)


def s_window_start(n: int, trunc_h: int | None, trunc_s: int | None, cut_s_at_window: bool = False) -> int:
    """Oldest step the cell-state gradient reaches. Algorithm 3 line 15 runs ss from each window
    step hs down to max(0, hs − trunc_s), so past the window's oldest step by up to trunc_s steps
    (to the partition's first with trunc_s = None); ``cut_s_at_window`` stops it at the window."""
    lo = window_start(n, trunc_h)
    if cut_s_at_window or trunc_s == 0:
        return lo
    return 0 if trunc_s is None else max(0, lo - trunc_s)


def carry_mode(n: int, trunc_h: int | None, trunc_s: int | None, cut_s_at_window: bool = False) -> str:
    """How the cell-state gradient is carried between the steps it visits.

    "none": trunc_s = 0, no carry. "carry": trunc_s never cuts a path, one running carry (exact
    BPTT inside the window). "ages": the carry is kept split by how many steps it has travelled
    along the cell state, and parts older than trunc_s steps are dropped.
    """
    span = n - s_window_start(n, trunc_h, trunc_s, cut_s_at_window) - 1
    if trunc_s == 0 and span > 0:
        return "none"
    if trunc_s is None or trunc_s >= span:
        return "carry"
    return "ages"


def backward(
    theta: Params,
    st: PartitionStates,
    out: HeadOut,
    labels: npt.NDArray[np.integer],
    ar: Arith,
    trunc_h: int | None = None,
    trunc_s: int | None = None,
    weight: float = 1.0,
    cut_s_at_window: bool = False,
) -> BackwardOut:
    """NormalGrad of the mean cross-entropy at the partition's last step (Algorithm 3).

    The result is the exact gradient of the loss over all paths whose h steps stay inside the
    window (the last trunc_h + 1 steps) and that never follow the cell state s for more than
    trunc_s consecutive steps; with no truncation it is the exact BPTT gradient of the partition.
    As Algorithm 3 line 15, a path may leave the window along s (down to trunc_s steps past its
    oldest step, ``s_window_start``) and end in a gate of a step there; ``cut_s_at_window`` keeps
    whole paths inside the window instead. ``weight`` scales the loss (the β = t/T ramp); it is
    folded into the 1/B constant, so it costs no operation.
    """
    ar.phase = "backward"
    n, bsz, _ = st.xc.shape
    hid = st.s.shape[-1]
    w_gate = ar.load(theta.w_gate)
    w_h_t = np.ascontiguousarray(w_gate[-hid:].T)  # (4H, H): only the h rows feed back in time
    dlogits, g_out, dh = _head_backward(theta, st, out, labels, weight, ar)
    lo = s_window_start(n, trunc_h, trunc_s, cut_s_at_window)
    h_lo = window_start(n, trunc_h) - lo  # the window's oldest step, counted from lo
    mode = carry_mode(n, trunc_h, trunc_s, cut_s_at_window)
    gates, s, ts = ar.load(st.gates[lo:]), ar.load(st.s[lo:]), ar.load(st.ts[lo:])
    dz = np.empty((n - lo, bsz, 4 * hid), dtype=ar.compute)
    carry: Carry | None = None
    for r in range(n - lo - 1, -1, -1):
        if r >= h_lo:
            ds0: Array | None = _ds_from_h(dh, gates[r], ts[r], dz[r], ar)
        else:  # past the window, reached along s only: no h gradient, so none for o
            ds0, dz[r, :, 2 * hid : 3 * hid] = None, 0.0
        ds, carry = _cell_carry(ds0, carry, gates[r, :, hid : 2 * hid], mode, trunc_s, r == 0, ar)
        _gate_grads(ds, gates[r], s[r], dz[r], ar)
        if r > h_lo:
            dh = ar.gemm(dz[r], w_h_t, "bwd_rec")
    xc = ar.load(st.xc[lo:]).reshape(-1, st.xc.shape[-1])
    dzf = dz.reshape(-1, 4 * hid)
    dw = ar.gemm(np.ascontiguousarray(xc.T), dzf, "bwd_gate_w")
    db = ar.sum_rows(dzf)
    grads = Params(w_gate=dw, b_gate=db, w_out=g_out[0], b_out=g_out[1])
    return BackwardOut(grads=grads.astype(ar.storage), dz=ar.store(dz), dlogits=ar.store(dlogits), window_start=lo)


def cell_backward(
    dh: Array, carry: Array | None, gates: Array, ts: Array, s_prev: Array, ar: Arith, hand_on: bool = True
) -> tuple[Array, Array | None]:
    """One step of Algorithm 3 inside the window with one running cell-state carry (``carry_mode``
    "carry"), as ``backward`` runs it: dh (B, H) from the step after, ``carry`` ds·f handed back
    from it (None at the loss step), the step's gates (B, 4H), tanh(s) and s_{t-1}. Returns dz
    (B, 4H) and, with ``hand_on``, the carry for the step before (else None). A step of the tile
    (tb/fptt_tile_cases.py) is checked against this; it uses the helpers ``backward`` uses."""
    ar.phase = "backward"
    hid = ts.shape[-1]
    dz = np.empty(np.shape(gates), dtype=ar.compute)
    ds0 = _ds_from_h(dh, gates, ts, dz, ar)
    ds, carry_out = _cell_carry(ds0, carry, gates[:, hid : 2 * hid], "carry", None, not hand_on, ar)
    _gate_grads(ds, gates, s_prev, dz, ar)
    assert carry_out is None or not isinstance(carry_out, tuple)
    return dz, carry_out


def _head_backward(
    theta: Params, st: PartitionStates, out: HeadOut, labels: npt.NDArray[np.integer], weight: float, ar: Arith
) -> tuple[Array, tuple[Array, Array], Array]:
    """Lines 5-8 of Algorithm 3, with the weight/B of the weighted batch-mean loss applied to dlogits."""
    bsz, classes = out.probs.shape
    onehot = np.zeros((bsz, classes), dtype=ar.compute)
    onehot[np.arange(bsz), labels] = 1.0
    dlogits = ar.scale(ar.sub(ar.load(out.probs), onehot), ar.const(weight / bsz))
    h = ar.load(st.h_last)
    dw_out = ar.gemm(np.ascontiguousarray(h.T), dlogits, "bwd_out_w")
    db_out = ar.sum_rows(dlogits)
    dh = ar.gemm(dlogits, np.ascontiguousarray(ar.load(theta.w_out).T), "bwd_out_h")
    return dlogits, (dw_out, db_out), dh


def _ds_from_h(dh: Array, gates: Array, ts: Array, dz: Array, ar: Arith) -> Array:
    """Gradient reaching s_j through h_j; stores d(o) in the o block of dz for _gate_grads."""
    hid = ts.shape[-1]
    o = gates[:, 2 * hid : 3 * hid]
    dz[:, 2 * hid : 3 * hid] = ar.mul(dh, ts)  # d o
    dts = ar.mul(dh, o)
    return ar.mul(dts, ar.one_minus(ar.mul(ts, ts)))  # tanh'(s) = 1 - tanh(s)^2


def _cell_carry(
    ds0: Array | None, carry: Carry | None, f: Array, mode: str, trunc_s: int | None, last: bool, ar: Arith
) -> tuple[Array, Carry | None]:
    """Total ds_j and the carry handed to step j-1 (ds_j * f_j). ``ds0`` is None at a step past
    the window, which only the carry reaches."""
    if mode == "none":
        assert ds0 is not None
        return ds0, None
    if mode == "carry":
        assert ds0 is not None or carry is not None
        ds = carry if ds0 is None else ds0 if carry is None else ar.add(ds0, carry)
        return ds, None if last else ar.mul(ds, f)
    # "ages": the carry (parts, age): parts[a] has followed s for age + a steps, all ≤ trunc_s
    assert trunc_s is not None
    if carry is None:
        assert ds0 is not None
        parts, age = ds0[None], 0
    else:
        parts, age = carry if ds0 is None else (np.concatenate([ds0[None], carry[0]]), 0)
    ds = parts[0] if len(parts) == 1 else ar.sum_axis0(parts)
    keep = parts[: trunc_s - age]  # the parts that may follow s one more step
    return ds, None if last or len(keep) == 0 else (ar.mul(keep, f[None]), age + 1)


def _gate_grads(ds: Array, gates: Array, s_prev: Array, dz: Array, ar: Arith) -> None:
    """Pre-activation gradients of the four gates at one step, written into dz in [i|f|o|g] order."""
    hid = ds.shape[-1]
    i, g = gates[:, :hid], gates[:, 3 * hid :]
    d_sig = np.concatenate([ar.mul(ds, g), ar.mul(ds, s_prev), dz[:, 2 * hid : 3 * hid]], axis=1)
    a_sig = gates[:, : 3 * hid]
    dz[:, : 3 * hid] = ar.mul(d_sig, ar.mul(a_sig, ar.one_minus(a_sig)))  # sigmoid' = a (1 - a)
    dg = ar.mul(ds, i)
    dz[:, 3 * hid :] = ar.mul(dg, ar.one_minus(ar.mul(g, g)))  # tanh' = 1 - g^2


# -- FPTT parameter update -------------------------------------------------------------------


def fptt_update(state: FpttState, grads: Params, eta: float, alpha: float, ar: Arith) -> tuple[FpttState, Params]:
    """Equations 4.17-4.21 element by element; returns the new state and R'.

    With alpha = 0 the regulariser vanishes, λ stays at its initial 0 and the λ/(2α) term of 4.21
    is taken as 0 (θ̄ then no longer influences θ, so the choice only affects θ̄ itself).
    """
    ar.phase = "update"
    c_eta, c_alpha, c_half = ar.const(eta), ar.const(alpha), ar.const(0.5)
    c_inv2a = ar.const(0.0 if alpha == 0 else 1.0 / (2.0 * alpha))
    theta, theta_bar, lam, reg = {}, {}, {}, {}
    for name, t_s in state.theta.items():
        t = ar.load(t_s)
        tb = ar.load(getattr(state.theta_bar, name))
        lm = ar.load(getattr(state.lam, name))
        gr = ar.load(getattr(grads, name))
        r = ar.sub(ar.scale(ar.sub(t, tb), c_alpha), lm)  # 4.17
        t_new = ar.sub(t, ar.scale(ar.add(gr, r), c_eta))  # 4.19
        lm_new = ar.sub(lm, ar.scale(ar.sub(t_new, tb), c_alpha))  # 4.20
        tb_new = ar.sub(ar.scale(ar.add(tb, t_new), c_half), ar.scale(lm_new, c_inv2a))  # 4.21
        theta[name], theta_bar[name], lam[name], reg[name] = (
            ar.store(t_new),
            ar.store(tb_new),
            ar.store(lm_new),
            ar.store(r),
        )
    return FpttState(theta=Params(**theta), theta_bar=Params(**theta_bar), lam=Params(**lam)), Params(**reg)

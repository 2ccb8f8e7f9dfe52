"""FPTT-K training flow (Algorithm 4), evaluation and an epoch loop over a data set."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .arith import Arith
from .model import backward, cross_entropy, forward, fptt_update, head, partition_bounds
from .tensors import FpttState, HeadOut, Hyper, Params

Labels = npt.NDArray[np.integer]


@dataclass
class SequenceResult:
    """State after one batch of sequences, the loss at the last step and every partition's loss."""

    state: FpttState
    loss: float
    partition_losses: list[float] = field(default_factory=list)


def train_sequence(
    state: FpttState,
    x: npt.NDArray[np.floating],
    y: Labels,
    hp: Hyper,
    ar: Arith,
    on_part: Callable[[int, FpttState, HeadOut], None] | None = None,
) -> SequenceResult:
    """One FPTT-K pass over a batch x (B, T, I) with class labels y (B,): K forward / backward /
    update rounds, the states carried from one partition to the next (Algorithm 4). ``on_part``
    sees each part's index, the state after its update and its output layer."""
    bsz, steps, _ = x.shape
    hid = state.theta.w_out.shape[0]
    h = np.zeros((bsz, hid), dtype=ar.storage)
    s = np.zeros((bsz, hid), dtype=ar.storage)
    losses = []
    for a, b in partition_bounds(steps, hp.K):
        st = forward(state.theta, x[:, a:b], h, s, ar)
        out = head(state.theta, st.h_last, y, ar)
        weight = b / steps if hp.ramp else 1.0
        bw = backward(state.theta, st, out, y, ar, hp.trunc_h, hp.trunc_s, weight, hp.cut_s_at_window)
        state, _ = fptt_update(state, bw.grads, hp.eta, hp.alpha, ar)
        h, s = st.h_last, st.s[-1]
        losses.append(out.loss)
        if on_part is not None:
            on_part(len(losses) - 1, state, out)
    return SequenceResult(state=state, loss=losses[-1], partition_losses=losses)


def predict_logits(theta: Params, x: npt.NDArray[np.floating], ar: Arith) -> npt.NDArray[np.float64]:
    """Logits at the last step of the whole sequence (inference: no partitioning, no update)."""
    bsz, _, _ = x.shape
    hid = theta.w_out.shape[0]
    zeros = np.zeros((bsz, hid), dtype=ar.storage)
    st = forward(theta, x, zeros, zeros, ar)
    logits = ar.gemm(ar.load(st.h_last), ar.load(theta.w_out), "fwd_out", bias=ar.load(theta.b_out))
    return np.asarray(logits, dtype=np.float64)


def evaluate(theta: Params, x: npt.NDArray[np.floating], y: Labels, ar: Arith) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of the prediction at the last step."""
    logits = predict_logits(theta, x, ar)
    return float(np.mean(logits.argmax(axis=1) == y)), cross_entropy(logits, y)


def train_epoch(
    state: FpttState,
    x: npt.NDArray[np.floating],
    y: Labels,
    hp: Hyper,
    batch: int,
    rng: np.random.Generator,
    ar: Arith,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[FpttState, float]:
    """One pass over the shuffled training set in batches of ``batch`` sequences.

    The last incomplete batch is dropped so every hardware run sees the same batch size; with a new
    shuffle each epoch a different handful of samples sits out. Returns the state and the mean of
    the batches' last-step losses.
    """
    order = rng.permutation(len(y))
    n_batches = len(y) // batch
    if n_batches == 0:
        raise ValueError(f"batch size {batch} is larger than the training set ({len(y)} samples)")
    losses = []
    for k in range(n_batches):
        idx = order[k * batch : (k + 1) * batch]
        res = train_sequence(state, x[idx], y[idx], hp, ar)
        state = res.state
        losses.append(res.loss)
        if progress is not None:
            progress(k + 1, n_batches)
    return state, float(np.mean(losses))

"""Memory and operation accounting against what a real run allocates and executes, and the memory
figures against the thesis (19.7 MB at K = 1 FP32, 0.87 MB at K = 28 BF16)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tb.fptt.accounting import longest_partition, memory, op_counts
from tb.fptt.arith import Arith
from tb.fptt.model import backward, forward, fptt_update, head, init_params, init_state
from tb.fptt.tensors import Dims, Hyper
from tb.fptt.train import train_sequence

DIMS = Dims(inputs=2, hidden=3, classes=4, batch=2)


@pytest.mark.parametrize(
    ("T", "K", "trunc_h", "trunc_s"),
    [(12, 1, None, None), (12, 5, None, None), (12, 2, 3, 1), (12, 1, None, 0), (12, 1, 8, 3), (7, 7, None, None),
     (12, 1, 4, None), (12, 1, 2, 5), (12, 2, 0, 2)],
)  # fmt: skip
@pytest.mark.parametrize("cut", [False, True])
def test_op_counts_equal_an_instrumented_run(
    T: int, K: int, trunc_h: int | None, trunc_s: int | None, cut: bool
) -> None:
    """Both readings of Algorithm 3 line 15: the cell-state gradient past the window or cut there."""
    ar = Arith("fp32", count=True)
    state = init_state(init_params(DIMS, np.random.default_rng(0)), np.float32)
    x = np.random.default_rng(1).uniform(size=(DIMS.batch, T, DIMS.inputs))
    hyper = Hyper(0.1, 0.1, K, trunc_h, trunc_s, cut_s_at_window=cut)
    train_sequence(state, x, np.array([0, 1]), hyper, ar)
    expected = op_counts(T, DIMS, K, trunc_h, trunc_s, cut)
    assert ar.counts is not None
    assert dict(ar.counts.gemm_calls) == dict(expected.gemm_calls)
    assert dict(ar.counts.elementwise) == dict(expected.elementwise)


def test_forward_gate_gemm_has_the_thesis_shape() -> None:
    """B = 4, I = 1, H = 128: the thesis' 4 x 129 x 512 gate GEMM, once per time step."""
    oc = op_counts(784, Dims(1, 128, 10, 4), 28)
    gate = {key: n for key, n in oc.gemm_calls.items() if key[0] == "fwd_gate"}
    assert gate == {("fwd_gate", 4, 129, 512): 784}


@pytest.mark.parametrize(("precision", "K"), [("fp32", 3), ("bf16", 4), ("bf16", 5)])
def test_pyard_memory_equals_the_bytes_of_the_tensors_a_run_holds(precision: str, K: int) -> None:
    T = 12
    ar = Arith(precision)
    state = init_state(init_params(DIMS, np.random.default_rng(2)), ar.storage)
    n = longest_partition(T, K)
    x = np.zeros((DIMS.batch, n, DIMS.inputs))
    zeros = np.zeros((DIMS.batch, DIMS.hidden), dtype=ar.storage)
    st = forward(state.theta, x, zeros, zeros, ar)
    y = np.array([1, 2])
    out = head(state.theta, st.h_last, y, ar)
    bw = backward(state.theta, st, out, y, ar)
    new, _ = fptt_update(state, bw.grads, 0.1, 0.1, ar)
    mem = memory(T, DIMS, K, precision)
    held = sum(a.nbytes for p in (new.theta, new.theta_bar, new.lam) for _, a in p.items())
    assert mem.params == held
    assert mem.grads == sum(a.nbytes for _, a in bw.grads.items())
    assert mem.states == st.xc.nbytes + st.gates.nbytes + st.s.nbytes + st.ts.nbytes + st.h_last.nbytes
    assert st.xc.shape[0] == n


def test_thesis_layout_reproduces_the_thesis_memory_figures() -> None:
    dims = Dims(1, 128, 10, 4)
    k1 = memory(784, dims, 1, "fp32", layout="thesis").total / 2**20
    k28 = memory(784, dims, 28, "bf16", layout="thesis").total / 2**20
    assert abs(k1 - 19.7) / 19.7 < 0.01
    assert abs(k28 - 0.87) / 0.87 < 0.02


def test_memory_falls_with_k_and_halves_in_bf16() -> None:
    dims = Dims(1, 128, 10, 4)
    totals = [memory(784, dims, k, "fp32").total for k in (1, 2, 7, 28, 784)]
    assert all(a > b for a, b in itertools.pairwise(totals))
    for k in (1, 28):
        assert memory(784, dims, k, "bf16").total * 2 == memory(784, dims, k, "fp32").total


def test_update_share_grows_with_k() -> None:
    """Table 4.4's trend: the element-wise (FPTT update) share of the work rises with K."""
    dims = Dims(1, 128, 10, 4)
    shares = []
    for k in (1, 28, 784):
        oc = op_counts(784, dims, k)
        ew = sum(oc.elementwise.values())
        shares.append(ew / (ew + sum(oc.gemm_macs().values())))
    assert shares[0] < shares[1] < shares[2]

"""Memory footprint and operation counts of one FPTT-K training pass, computed from the sizes.

The counts mirror :mod:`tb.fptt.model` operation by operation (tests/test_fptt_accounting.py
checks them against an instrumented run), so they are the numbers a hardware run of the same
workload is divided by.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arith import OpCounts
from .model import carry_mode, partition_bounds, s_window_start, window_start
from .tensors import Dims

THESIS_KS = (1, 2, 7, 14, 28, 56, 112, 392, 784)
BYTES = {"fp64": 8, "fp32": 4, "bf16": 2}
LAYOUTS = ("pyard", "thesis")
# element-wise operations per parameter element in one FPTT update (eqs. 4.17, 4.19-4.21)
UPDATE_ADDS, UPDATE_MULS = 8, 5


@dataclass(frozen=True)
class Memory:
    """Bytes held during training: θ, θ̄ and λ; the gradient; stored network states; work buffers."""

    params: int
    grads: int
    states: int
    work: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.states + self.work


def longest_partition(T: int, K: int) -> int:
    return max(b - a for a, b in partition_bounds(T, K))


def memory(
    T: int,
    dims: Dims,
    K: int,
    precision: str,
    trunc_h: int | None = None,
    trunc_s: int | None = None,
    layout: str = "pyard",
    cut_s_at_window: bool = False,
) -> Memory:
    """Static memory of one FPTT-K pass, with the states of the longest partition.

    ``pyard``: what :func:`tb.fptt.model.forward` stores (PartitionStates) plus the backward pass's
    buffers; gate gradients are written over the gate activations. ``thesis``: the thesis' C
    program, which keeps stride + 1 full state blocks (xc, gate pre-activations and activations,
    s, tanh(s), h, logits and softmax output for every step).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    bpe = BYTES[precision]
    n = longest_partition(T, K)
    b, h, c = dims.batch, dims.hidden, dims.classes
    p = dims.param_count()
    if layout == "thesis":
        block = dims.xc_width + 4 * h + 4 * h + 3 * h + 2 * c
        return Memory(params=3 * p * bpe, grads=p * bpe, states=(n + 1) * b * block * bpe, work=0)
    states = n * b * (dims.xc_width + 4 * h + h) + (n + 1) * b * h + b * h  # xc, gates, ts; s; h_last
    carried = _carry_parts(n, trunc_h, trunc_s, cut_s_at_window)
    work = 3 * b * c + b * h * (2 + carried)  # logits, probs, dlogits; dh, ds, carry parts
    return Memory(params=3 * p * bpe, grads=p * bpe, states=states * bpe, work=work * bpe)


def _carry_parts(n: int, trunc_h: int | None, trunc_s: int | None, cut_s_at_window: bool) -> int:
    mode = carry_mode(n, trunc_h, trunc_s, cut_s_at_window)
    if mode == "none":
        return 0
    return 1 if mode == "carry" else int(trunc_s or 0)


def op_counts(
    T: int,
    dims: Dims,
    K: int,
    trunc_h: int | None = None,
    trunc_s: int | None = None,
    cut_s_at_window: bool = False,
) -> OpCounts:
    """GEMM calls by (tag, M, K, N) and element-wise operations by (phase, kind) for one batch."""
    oc = OpCounts()
    b, h, c = dims.batch, dims.hidden, dims.classes
    bh = b * h
    ew = oc.elementwise
    for lo_hi in partition_bounds(T, K):
        n = lo_hi[1] - lo_hi[0]
        oc.gemm_calls[("fwd_gate", b, dims.xc_width, 4 * h)] += n
        ew[("forward", "sigmoid")] += 3 * bh * n
        ew[("forward", "tanh")] += 2 * bh * n
        ew[("forward", "mul")] += 3 * bh * n
        ew[("forward", "add")] += bh * n
        oc.gemm_calls[("fwd_out", b, h, c)] += 1
        ew[("head", "softmax")] += b * c
        _backward_counts(oc, dims, n, (trunc_h, trunc_s, cut_s_at_window))
        p = dims.param_count()
        ew[("update", "add")] += UPDATE_ADDS * p
        ew[("update", "mul")] += UPDATE_MULS * p
    return oc


def _backward_counts(oc: OpCounts, dims: Dims, n: int, trunc: tuple[int | None, int | None, bool]) -> None:
    """Algorithm 3 on a partition of n steps; ``trunc``: trunc_h, trunc_s, cut_s_at_window."""
    trunc_h, trunc_s, cut = trunc
    b, h, c = dims.batch, dims.hidden, dims.classes
    bh = b * h
    ew = oc.elementwise
    ew[("backward", "add")] += b * c  # probs - onehot
    ew[("backward", "mul")] += b * c  # x 1/B
    ew[("backward", "sum")] += b * c
    oc.gemm_calls[("bwd_out_w", h, b, c)] += 1
    oc.gemm_calls[("bwd_out_h", b, c, h)] += 1
    nw = n - window_start(n, trunc_h)
    ns = n - s_window_start(n, trunc_h, trunc_s, cut)  # steps visited, past the window included
    mode = carry_mode(n, trunc_h, trunc_s, cut)
    for q in range(ns):  # q: steps back from the loss step
        last, inside = q == ns - 1, q < nw
        ew[("backward", "mul")] += (15 if inside else 11) * bh  # 4 for ds via h, 11 for the gate gradients
        ew[("backward", "add")] += (5 if inside else 4) * bh  # the (1 - x)
        if mode == "carry":
            ew[("backward", "add")] += bh if 0 < q < nw else 0
            ew[("backward", "mul")] += 0 if last else bh
        elif mode == "ages":
            assert trunc_s is not None
            parts = min(q, nw - 1) - max(0, q - trunc_s) + 1  # the window steps' parts still ≤ trunc_s old
            kept = min(q, nw - 1) - max(0, q - trunc_s + 1) + 1
            ew[("backward", "sum")] += parts * bh if parts > 1 else 0
            ew[("backward", "mul")] += 0 if last else kept * bh
        if q < nw - 1:
            oc.gemm_calls[("bwd_rec", b, 4 * h, h)] += 1
    oc.gemm_calls[("bwd_gate_w", dims.xc_width, ns * b, 4 * h)] += 1
    ew[("backward", "sum")] += ns * b * 4 * h


def ops_summary(oc: OpCounts) -> dict[str, object]:
    """GEMM MACs by tag, element-wise counts by kind (training pass) and the FPTT update count."""
    shapes = {tag: f"{m}x{k}x{n}" for (tag, m, k, n) in oc.gemm_calls}
    calls: dict[str, int] = {}
    for (tag, *_), cnt in oc.gemm_calls.items():
        calls[tag] = calls.get(tag, 0) + cnt
    macs = oc.gemm_macs()
    kinds = oc.by_kind(("forward", "head", "backward"))
    update = sum(oc.by_kind(("update",)).values())
    ew_total = sum(kinds.values()) + update
    total_macs = sum(macs.values())
    return {
        "gemm": {t: {"shape_MxKxN": shapes[t], "calls": calls[t], "macs": macs[t]} for t in sorted(macs)},
        "gemm_macs": total_macs,
        "elementwise": dict(sorted(kinds.items())),
        "fptt_update": update,
        "elementwise_total": ew_total,
        "elementwise_share": ew_total / (ew_total + total_macs),
    }

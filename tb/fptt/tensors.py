"""The named tensors the FPTT hardware holds, as plain dataclasses of NumPy arrays.

Layout (row-major, the same in every precision; docs/fptt.md):

* ``w_gate``: (I+H) x 4H. Rows 0..I-1 multiply the input x, rows I..I+H-1 the previous hidden
  state h; columns are the four gates in the order [i | f | o | g], so the three sigmoid gates are
  one contiguous block of 3H columns and the tanh candidate the last H. The forward gate GEMM is
  then one product xc (B x (I+H)) . w_gate ((I+H) x 4H) with xc = [x, h_prev].
* ``b_gate``: 4H, same column order. ``w_out``: H x C. ``b_out``: C.

The running average θ̄, the running estimate λ and the gradients use the same layout as θ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.generic]
GATE_ORDER = ("i", "f", "o", "g")


@dataclass(frozen=True)
class Dims:
    """Network and batch sizes: input I, hidden H, classes C, batch B."""

    inputs: int
    hidden: int
    classes: int
    batch: int

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 1:
                raise ValueError(f"{f.name} must be at least 1, got {getattr(self, f.name)}")

    @property
    def xc_width(self) -> int:
        return self.inputs + self.hidden

    def param_count(self) -> int:
        h = self.hidden
        return self.xc_width * 4 * h + 4 * h + h * self.classes + self.classes


@dataclass
class Params:
    """θ, θ̄, λ or a gradient: gate weights and biases, output layer weights and biases."""

    w_gate: Array
    b_gate: Array
    w_out: Array
    b_out: Array

    def items(self) -> Iterator[tuple[str, Array]]:
        for f in fields(self):
            yield f.name, getattr(self, f.name)

    def map(self, fn: Callable[..., Array], *others: Params) -> Params:
        """Apply ``fn`` tensor by tensor to this and the other parameter sets."""
        return Params(**{name: fn(a, *(getattr(o, name) for o in others)) for name, a in self.items()})

    def astype(self, dtype: npt.DTypeLike) -> Params:
        return self.map(lambda a: np.asarray(a).astype(dtype))

    def copy(self) -> Params:
        return self.map(np.copy)

    def size(self) -> int:
        return sum(a.size for _, a in self.items())

    def flat(self) -> npt.NDArray[np.float64]:
        """All elements in field order as float64, for comparisons."""
        return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for _, a in self.items()])


@dataclass
class FpttState:
    """The three parameter sets FPTT keeps: θ, the running average θ̄ and the running estimate λ."""

    theta: Params
    theta_bar: Params
    lam: Params


@dataclass
class PartitionStates:
    """Network states stored by the forward pass of one partition of n steps (batch B).

    ``xc[j]`` = [x_j, h_{j-1}] (n, B, I+H): the GEMM input, which also holds every hidden state but
    the last. ``gates[j]`` (n, B, 4H): activations in [i | f | o | g] order. ``s`` (n+1, B, H):
    ``s[0]`` is the cell state carried in, ``s[j+1]`` the cell state after step j. ``ts[j]``
    (n, B, H) = tanh(s[j+1]). ``h_last`` (B, H): the hidden state after the last step.
    """

    xc: Array
    gates: Array
    s: Array
    ts: Array
    h_last: Array

    @property
    def steps(self) -> int:
        return int(self.xc.shape[0])


@dataclass
class HeadOut:
    """The output layer at the loss step: logits (B, C), softmax probabilities (B, C), mean loss."""

    logits: Array
    probs: Array
    loss: float


@dataclass
class BackwardOut:
    """NormalGrad plus the intermediate gradients a firmware run can be compared with.

    ``dz`` (w, B, 4H): gradients of the gate pre-activations for the w steps the backward pass
    visits (the window, and the steps past it that the cell-state gradient reaches), oldest first
    (the firmware writes them over the gate activations). ``dlogits`` (B, C). ``window_start``:
    index of the oldest of those steps.
    """

    grads: Params
    dz: Array
    dlogits: Array
    window_start: int


@dataclass(frozen=True)
class Hyper:
    """FPTT hyper-parameters. A truncation of None means "the whole partition".

    ``ramp``: weight the loss of the partition ending at step t by t/T (the β of the thesis' eq.
    2.16 without the distillation term), so early partitions, which have seen little of the
    sequence, pull less on the weights. False follows Algorithm 3 (every partition weight 1).
    """

    eta: float
    alpha: float
    K: int
    trunc_h: int | None = None
    trunc_s: int | None = None
    ramp: bool = False
    cut_s_at_window: bool = False  # stop the cell-state gradient at the window's edge (docs/fptt.md)

    def __post_init__(self) -> None:
        if self.eta <= 0:
            raise ValueError(f"learning rate must be positive, got {self.eta}")
        if self.alpha < 0:
            raise ValueError(f"alpha must be zero or positive, got {self.alpha}")
        if self.K < 1:
            raise ValueError(f"K must be at least 1, got {self.K}")
        for name in ("trunc_h", "trunc_s"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name} must be zero or positive, got {v}")

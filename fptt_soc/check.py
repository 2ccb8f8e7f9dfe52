"""A firmware pass against the bf16 reference under the hardware contract, bit for bit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from tb.fptt.arith import Arith
from tb.fptt.model import init_state
from tb.fptt.tensors import FpttState, HeadOut, Params
from tb.fptt.train import train_sequence

from .host import FpttResult
from .layout import FpttProblem

__all__ = ["Mismatch", "compare", "reference_pass"]


@dataclass(frozen=True)
class Reference:
    states: list[FpttState]  # after every part
    logits: list[npt.NDArray[np.float32]]  # (B, C) per part


@dataclass(frozen=True)
class Mismatch:
    """The first difference: where (part, tensor set, parameter), how many elements differ."""

    part: int
    what: str
    count: int
    total: int

    def __str__(self) -> str:
        return f"part {self.part}: {self.what} differs in {self.count} of {self.total} elements"


def reference_pass(
    cfg: AccelConfig, problem: FpttProblem, state: FpttState, x: npt.ArrayLike, labels: npt.ArrayLike
) -> Reference:
    """The reference's pass under the hardware contract of ``cfg``, recording every part."""
    states: list[FpttState] = []
    logits: list[npt.NDArray[np.float32]] = []

    def keep(_: int, st: FpttState, out: HeadOut) -> None:
        states.append(FpttState(st.theta.copy(), st.theta_bar.copy(), st.lam.copy()))
        logits.append(np.asarray(out.logits, np.float32))

    ar = Arith("bf16", tile=cfg)
    train_sequence(state, np.asarray(x, np.float32), np.asarray(labels), problem.hyper, ar, on_part=keep)
    return Reference(states, logits)


def initial_state(theta: Params) -> FpttState:
    return init_state(theta, theta.w_gate.dtype)


def _bits(a: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    return np.asarray(a, np.float32).view(np.uint32)


def compare(ref: Reference, got: FpttResult) -> list[Mismatch]:
    """Every part's logits, and θ, θ̄, λ after every part (after the last only without snapshots)."""
    out: list[Mismatch] = []
    for p, want in enumerate(ref.logits):
        diff = int(np.count_nonzero(_bits(want) != _bits(got.logits[p])))
        if diff:
            out.append(Mismatch(p, "logits", diff, want.size))
    parts = range(len(ref.states)) if got.snapshots else [len(ref.states) - 1]
    for p in parts:
        have = got.snapshots[p] if got.snapshots else got.state
        for set_name in ("theta", "theta_bar", "lam"):
            for name, want in getattr(ref.states[p], set_name).items():
                diff = int(np.count_nonzero(_bits(want) != _bits(getattr(getattr(have, set_name), name))))
                if diff:
                    out.append(Mismatch(p, f"{set_name}.{name}", diff, want.size))
    return out

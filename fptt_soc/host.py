"""Build the FPTT firmware for a problem, fill main memory, run it on the SoC and read it back.

The host's part is data only: it writes θ, θ̄ and λ, the input sequences (into the x
columns of each step's GEMM input, with the constant 1 that multiplies the bias row), the labels as
one-hot columns and each part's bounds and loss scale; the firmware does the rest. Results: each
part's logits (so the loss), θ, θ̄, λ at the end (and after every part with ``snapshots``), the
cycles of each phase and the tile's counters.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rtl.vector.c_lane import write_headers
from rtl.vector.programs import bf16_scalar
from sim.firmware import BUILD_DIR, build_firmware
from sim.run import RunResult, run_elf
from sim.toolchain import load_elf
from soc.config import SocConfig
from tb.fptt.arith import BF16
from tb.fptt.model import cross_entropy
from tb.fptt.tensors import FpttState, Params

from .layout import FpttProblem, Layout

__all__ = ["PHASES", "FpttResult", "build", "run"]

FIRMWARE = Path(__file__).resolve().parent.parent / "firmware" / "fptt" / "fptt.c"
# The firmware's phase_cycles entries, in order (fptt.c, T_FWD_GEMM ...).
PHASES = ("fwd_gemm", "fwd_cell", "softmax", "bwd_cell", "bwd_dh", "bwd_dw", "update", "fwd_act", "snapshot")
ONE_BF16 = 0x3F80


@dataclass
class FpttResult:
    """What one pass left in main memory, and how long it took."""

    logits: npt.NDArray[np.float32]  # (parts, B, C)
    losses: list[float]
    state: FpttState
    snapshots: list[FpttState]  # after every part, when asked for
    phase_cycles: dict[str, int]
    run: RunResult

    @property
    def cycles(self) -> int:
        """The pass's cycles: the run's, less the snapshot copies made for ``--check``."""
        return self.run.cycles - self.phase_cycles["snapshot"]

    @property
    def phases(self) -> dict[str, int]:
        """Cycles per phase of the pass, and ``other``: start-up and whatever lies between phases."""
        out = {k: v for k, v in self.phase_cycles.items() if k != "snapshot"}
        return {**out, "other": self.cycles - sum(out.values())}


def build(
    cfg: SocConfig, problem: FpttProblem, snapshots: bool, cores: int | None = None, elementwise: str = "engine"
) -> Path:
    """The firmware's ELF for ``problem`` (cached by the generated headers and every source);
    ``elementwise`` "cores": the software-only mode, the element-wise steps on the harts."""
    header = Layout(cfg.accel, problem).c_header(snapshots, elementwise)
    key = hashlib.sha256(header.encode()).hexdigest()[:16]
    inc = BUILD_DIR / "fptt" / key
    inc.mkdir(parents=True, exist_ok=True)
    path = inc / "fptt_layout.h"
    if not path.is_file() or path.read_text() != header:
        path.write_text(header)
    write_headers(inc)  # the lane's arithmetic and functions in C, for the software-only mode
    defines = {} if cores is None else {"PYARD_NHARTS_ACTIVE": cores}
    return build_firmware(cfg, [FIRMWARE], include_dirs=[inc], defines=defines)


def flatten(p: Params) -> npt.NDArray[np.uint16]:
    """θ in the firmware's order (w_gate, b_gate, w_out, b_out), bf16 bit patterns."""
    return np.concatenate([np.asarray(a, dtype=BF16).ravel() for _, a in p.items()]).view(np.uint16)


def unflatten(bits: npt.NDArray[np.uint16], like: Params) -> Params:
    out, k = {}, 0
    for name, a in like.items():
        out[name] = bits[k : k + a.size].view(BF16).reshape(a.shape).copy()
        k += a.size
    return Params(**out)


def _inputs(problem: FpttProblem, state: FpttState, x: npt.ArrayLike, labels: npt.ArrayLike) -> dict[str, bytes]:
    d, t = problem.dims, problem.steps
    x = np.asarray(x, dtype=np.float32)
    if x.shape != (d.batch, t, d.inputs):
        raise ValueError(f"x must be (batch, T, inputs) = {(d.batch, t, d.inputs)}, not {x.shape}")
    labels = np.asarray(labels)
    xc = np.zeros((t + 1, d.batch, problem.xc_width), dtype=np.uint16)
    xc[:t, :, : d.inputs] = x.astype(BF16).view(np.uint16).transpose(1, 0, 2)
    xc[:, :, -1] = ONE_BF16
    onehot = np.zeros((d.classes, d.batch), dtype=np.uint16)
    onehot[labels, np.arange(d.batch)] = ONE_BF16
    parts = problem.parts
    weight = [(b / t if problem.hyper.ramp else 1.0) / d.batch for _, b in parts]
    return {
        "theta": flatten(state.theta).tobytes(),
        "theta_bar": flatten(state.theta_bar).tobytes(),
        "lam": flatten(state.lam).tobytes(),
        "xc": xc.tobytes(),
        "onehot": onehot.tobytes(),
        "part_a": np.array([a for a, _ in parts], np.uint32).tobytes(),
        "part_b": np.array([b for _, b in parts], np.uint32).tobytes(),
        "part_scale": np.array([bf16_scalar(w) for w in weight], np.uint32).tobytes(),
    }


def run(
    cfg: SocConfig,
    problem: FpttProblem,
    state: FpttState,
    x: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    snapshots: bool = False,
    cores: int | None = None,
    elementwise: str = "engine",
    max_cycles: int = 2_000_000_000,
) -> FpttResult:
    """One pass of ``problem`` from ``state`` (θ, θ̄, λ) on the SoC ``cfg``, the element-wise steps
    on the tile's vector engine or (``elementwise`` "cores") on the harts."""
    elf = build(cfg, problem, snapshots, cores, elementwise)
    symbols = load_elf(elf).symbols
    loads = {symbols[name]: data for name, data in _inputs(problem, state, x, labels).items()}
    d, parts, n = problem.dims, len(problem.parts), problem.params
    dumps = {
        "theta": (symbols["theta"], 2 * n),
        "theta_bar": (symbols["theta_bar"], 2 * n),
        "lam": (symbols["lam"], 2 * n),
        "logits": (symbols["logits"], 2 * parts * d.classes * d.batch),
        "phase_cycles": (symbols["phase_cycles"], 8 * len(PHASES)),
        "status": (symbols["fptt_status"], 8),
    }
    if snapshots:
        dumps["snapshots"] = (symbols["snapshots"], 2 * parts * 3 * n)
    res = run_elf(cfg, elf, max_cycles=max_cycles, dumps=dumps, loads=loads)
    return _result(problem, state.theta, np.asarray(labels), res, snapshots)


def _result(problem: FpttProblem, like: Params, labels: npt.NDArray, res: RunResult, snapshots: bool) -> FpttResult:
    d, parts = problem.dims, len(problem.parts)
    status = np.frombuffer(res.dumps["status"], np.uint32)
    if res.exit_code != 0 or status[0] != 1:
        raise RuntimeError(
            f"the FPTT firmware did not finish (exit {res.exit_code}, tile status {res.tile_error or 'ok'}):\n"
            + res.console[-2000:]
        )
    lg = np.frombuffer(res.dumps["logits"], np.uint16).view(BF16).reshape(parts, d.classes, d.batch)
    logits = np.ascontiguousarray(lg.astype(np.float32).transpose(0, 2, 1))

    def state(bits: npt.NDArray[np.uint16]) -> FpttState:
        n = problem.params
        return FpttState(*(unflatten(bits[k * n : (k + 1) * n], like) for k in range(3)))

    final = state(np.concatenate([np.frombuffer(res.dumps[k], np.uint16) for k in ("theta", "theta_bar", "lam")]))
    snaps = []
    if snapshots:
        allbits = np.frombuffer(res.dumps["snapshots"], np.uint16)
        per = 3 * problem.params
        snaps = [state(allbits[p * per : (p + 1) * per]) for p in range(parts)]
    cyc = np.frombuffer(res.dumps["phase_cycles"], np.uint64)
    return FpttResult(
        logits=logits,
        losses=[cross_entropy(lg, labels) for lg in logits],
        state=final,
        snapshots=snaps,
        phase_cycles={k: int(v) for k, v in zip(PHASES, cyc, strict=True)},
        run=res,
    )

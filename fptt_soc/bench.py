"""``pyard bench fptt-pass``: cycles of an FPTT-K training pass on the SoC for a set of K, beside the
thesis' Appendix C totals for the same design point.

Every part of a pass whose K divides T does the same work (its steps, its backward, one update),
so a pass of K parts costs K times a part. ``--parts P`` simulates the first P parts only (P of the
T / K steps each, from the same data) and scales by K / P; ``--parts 0`` simulates whole passes.
The JSON says which it did for each K (``parts_simulated``)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.arg_types import int_list, integer
from tb.fptt.accounting import THESIS_KS

__all__ = ["FpttPass", "fptt_pass", "register"]


def register(kinds: argparse._SubParsersAction) -> None:
    from sim.soc_args import add_soc_args

    p = kinds.add_parser(
        "fptt-pass", help="cycles per FPTT-K training pass on the SoC, for a set of K, beside the thesis"
    )
    add_soc_args(p)
    p.add_argument("--T", type=integer(1), default=784, help="sequence length (default 784, the thesis')")
    p.add_argument("--hidden", type=integer(1), default=128, help="LSTM hidden size H (default 128)")
    p.add_argument("--batch", type=integer(1), default=4, help="sequences per pass B (default 4)")
    p.add_argument("--K", type=int_list(1), default=list(THESIS_KS), help="comma-separated K (default: Appendix C's)")
    p.add_argument(
        "--parts", type=integer(0), default=2, help="parts simulated per K, scaled by K / parts (0: whole passes)"
    )
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="initialisation and data seed")
    p.add_argument(
        "--elementwise",
        default="engine",
        metavar="{engine,cores}",
        help="element-wise steps on the vector engine (default) or the cores (the software-only baseline)",
    )
    p.add_argument(
        "--resident-weights",
        action="store_true",
        help="keep the gate weights in the scratchpad for each part's forward steps where they fit "
        "(default: streamed by every gate GEMM, faster at small batches; docs/fptt.md)",
    )
    p.add_argument("--max-cycles", type=integer(1), default=2_000_000_000, help="cycle budget per run")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.set_defaults(func=bench_fptt)


def _plan(T: int, K: int, parts: int) -> tuple[int, int]:
    """(steps, parts) to simulate for partition factor ``K`` of ``T`` steps."""
    if K > T:
        raise ValueError(f"--K = {K} is invalid for --T {T}: allowed 1 to {T}")
    if parts == 0 or parts >= K:
        return T, K
    if T % K:
        raise ValueError(f"--K = {K} does not divide --T {T}: parts differ, allowed only with --parts 0")
    return parts * (T // K), parts


def bench_fptt(args: argparse.Namespace) -> int:
    from sim.cli import UsageError
    from sim.soc_args import soc_config_from_args

    try:
        cfg = soc_config_from_args(args)
    except ValueError as err:
        raise UsageError(str(err)) from None
    problem = FpttPass(args.T, args.hidden, args.batch, args.parts, args.seed, args.elementwise, args.resident_weights)
    for K in args.K:
        problem.check(cfg, K)  # refuses what the firmware cannot hold, before building anything
    results = []
    for K in args.K:
        results.append(fptt_pass(cfg, problem, K, args.max_cycles))
        if not args.json:
            r = results[-1]
            vs = f", thesis {r['thesis_cycles_per_pass']:,.0f} ({r['speedup_over_thesis']}x)" if vs_thesis(r) else ""
            print(
                f"K={K}: {r['cycles_per_pass']:,} cycles per pass ({r['parts_simulated']} of {K} parts simulated){vs}",
                file=sys.stderr,
            )
    payload: dict[str, Any] = {
        "bench": "fptt-pass",
        "config": cfg.name,
        "cores": cfg.cores,
        "elementwise": args.elementwise,
        "resident_weights": args.resident_weights,
        "problem": {"T": args.T, "inputs": 1, "hidden": args.hidden, "classes": 10, "batch": args.batch},
        "results": results,
    }
    print(json.dumps(payload, indent=None if args.json else 2))
    return 0


def vs_thesis(result: dict[str, Any]) -> bool:
    return result["thesis_cycles_per_pass"] is not None


@dataclass(frozen=True)
class FpttPass:
    """The training problem of an FPTT pass measurement: sequence length, hidden size, batch, the
    parts simulated per K (0: whole passes), the data seed, and where the element-wise steps run
    (the vector engine, or the cores: the software-only baseline), and whether the gate weights stay
    resident in the scratchpad where they fit."""

    T: int = 784
    hidden: int = 128
    batch: int = 4
    parts: int = 2
    seed: int = 0
    elementwise: str = "engine"
    resident_weights: bool = False

    def problem(self, K: int) -> tuple[Any, int]:
        """(the firmware's FpttProblem, parts simulated) for partition factor ``K``."""
        from tb.fptt.tensors import Dims, Hyper

        from .layout import FpttProblem

        steps, parts = _plan(self.T, K, self.parts)
        dims = Dims(inputs=1, hidden=self.hidden, classes=10, batch=self.batch)
        return FpttProblem(dims, steps, Hyper(0.1, 0.1, parts), self.resident_weights), parts

    def check(self, cfg: Any, K: int) -> None:
        """Refuse (UsageError, one line) a K or problem the firmware cannot hold on ``cfg``."""
        from sim.cli import UsageError

        from .layout import Layout, check_elementwise

        try:
            check_elementwise(self.elementwise, cfg.accel)
            Layout(cfg.accel, self.problem(K)[0])
        except ValueError as err:
            raise UsageError(str(err)) from None


def fptt_pass(cfg: Any, spec: FpttPass, K: int, max_cycles: int = 2_000_000_000) -> dict[str, Any]:
    """Cycles of one FPTT-K pass on the SoC ``cfg`` (simulated parts scaled by K / parts), per
    phase, with the MAC utilization and the thesis' total for its design point where it has one."""
    from sim.cli import UsageError
    from sim.run import LoadError
    from tb.fptt.arith import BF16
    from tb.fptt.model import init_params

    from . import check, host
    from .cli import THESIS_ROWS, thesis_cycles

    spec.check(cfg, K)
    problem, parts = spec.problem(K)
    dims = problem.dims
    rng = np.random.default_rng(spec.seed)
    state = check.initial_state(init_params(dims, rng).astype(BF16))
    x = rng.random((spec.batch, spec.T, 1), dtype=np.float32)
    y = rng.integers(0, dims.classes, spec.batch)
    try:
        res = host.run(
            cfg,
            problem,
            state,
            x[:, : problem.steps],
            y,
            snapshots=False,
            elementwise=spec.elementwise,
            max_cycles=max_cycles,
        )
    except (LoadError, RuntimeError) as err:
        raise UsageError(str(err)) from None
    scale = K / parts
    thesis_point = (spec.T, spec.hidden, spec.batch) == (784, 128, 4)
    thesis = thesis_cycles(cfg.accel.name, cfg.cores, K) if thesis_point else None
    # "other" is the run's own setup, paid once however many parts run: scaled by K it would charge
    # every unsimulated part with it.
    once = res.phases["other"]
    total = round((res.cycles - once) * scale + once)
    macs = res.run.counters["macs"] * scale
    return {
        "K": K,
        "parts_simulated": parts,
        "steps_simulated": problem.steps,
        "cycles_per_pass": total,
        "cycles_per_part": round(total / K),
        "phases_per_pass": {key: round(res.phases[key] * (1 if key == "other" else scale)) for key, *_ in THESIS_ROWS},
        "mac_utilization": round(macs / (total * cfg.accel.rows * cfg.accel.cols), 4),
        "thesis_cycles_per_pass": thesis["total cycles"] if thesis else None,
        "speedup_over_thesis": round(thesis["total cycles"] / total, 2) if thesis else None,
        "sim_seconds": round(res.run.sim_seconds, 1),
    }

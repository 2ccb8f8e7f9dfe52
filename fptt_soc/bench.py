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
from typing import Any

import numpy as np

from sim.arg_types import int_list, integer
from tb.fptt.accounting import THESIS_KS

__all__ = ["register"]


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
    from sim.run import LoadError
    from sim.soc_args import soc_config_from_args
    from tb.fptt.arith import BF16
    from tb.fptt.model import init_params
    from tb.fptt.tensors import Dims, Hyper

    from . import check, host
    from .cli import THESIS_ROWS, thesis_cycles
    from .layout import FpttProblem, Layout, check_elementwise

    dims = Dims(inputs=1, hidden=args.hidden, classes=10, batch=args.batch)
    try:
        cfg = soc_config_from_args(args)
        check_elementwise(args.elementwise)
        plans = {K: _plan(args.T, K, args.parts) for K in args.K}
        problems = {K: FpttProblem(dims, steps, Hyper(0.1, 0.1, parts)) for K, (steps, parts) in plans.items()}
        for problem in problems.values():
            Layout(cfg.accel, problem)  # refuses what the firmware cannot hold, before building anything
    except ValueError as err:
        raise UsageError(str(err)) from None
    rng = np.random.default_rng(args.seed)
    state = check.initial_state(init_params(dims, rng).astype(BF16))
    x = rng.random((args.batch, args.T, 1), dtype=np.float32)
    y = rng.integers(0, dims.classes, args.batch)
    thesis_point = (args.T, args.hidden, args.batch) == (784, 128, 4)
    results = []
    for K, problem in problems.items():
        steps, parts = plans[K]
        try:
            res = host.run(
                cfg,
                problem,
                state,
                x[:, :steps],
                y,
                snapshots=False,
                elementwise=args.elementwise,
                max_cycles=args.max_cycles,
            )
        except (LoadError, RuntimeError) as err:
            raise UsageError(str(err)) from None
        scale = K / parts
        thesis = thesis_cycles(cfg.accel.name, cfg.cores, K) if thesis_point else None
        total = round(res.cycles * scale)
        macs = res.run.counters["macs"] * scale
        results.append(
            {
                "K": K,
                "parts_simulated": parts,
                "steps_simulated": steps,
                "cycles_per_pass": total,
                "cycles_per_part": round(res.cycles / parts),
                "phases_per_pass": {key: round(res.phases[key] * scale) for key, _, _ in THESIS_ROWS},
                "mac_utilization": round(macs / (total * cfg.accel.rows * cfg.accel.cols), 4),
                "thesis_cycles_per_pass": thesis["total cycles"] if thesis else None,
                "speedup_over_thesis": round(thesis["total cycles"] / total, 2) if thesis else None,
                "sim_seconds": round(res.run.sim_seconds, 1),
            }
        )
        if not args.json:
            r = results[-1]
            vs = f", thesis {r['thesis_cycles_per_pass']:,.0f} ({r['speedup_over_thesis']}x)" if thesis else ""
            print(f"K={K}: {total:,} cycles per pass ({parts} of {K} parts simulated){vs}", file=sys.stderr)
    payload: dict[str, Any] = {
        "bench": "fptt-pass",
        "config": cfg.name,
        "cores": cfg.cores,
        "elementwise": args.elementwise,
        "problem": {"T": args.T, "inputs": 1, "hidden": args.hidden, "classes": dims.classes, "batch": args.batch},
        "results": results,
    }
    print(json.dumps(payload, indent=None if args.json else 2))
    return 0

"""``pyard segment run`` and ``pyard segment curve`` (docs/segment.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from sim.arg_types import int_list, integer

__all__ = ["register"]

CURVE_SIZES = {"fc": (16, 24, 32, 36, 40, 44, 48, 56, 64, 72, 80, 96), "conv": (8, 12, 16, 20, 24)}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("segment", help="split a synthetic model over tiles and pipeline it (multi-TPU)")
    ssub = parser.add_subparsers(dest="segment_command", required=True, metavar="SUBCOMMAND")
    run = ssub.add_parser("run", help="segment a model over 1-4 tiles, run the pipeline, check it bit for bit")
    _model_args(run)
    run.add_argument("--size", type=integer(4, 1024), default=48, help="layer width n (fc) or filters f (default 48)")
    run.add_argument("--tiles", type=integer(1, 4), default=2, help="pipeline stages, one hart and tile each (1-4)")
    run.add_argument(
        "--strategy", choices=("equal", "profiled", "exhaustive"), default="profiled", help="split strategy"
    )
    run.add_argument("--batch", type=integer(1, 256), default=8, help="inferences through the pipeline (default 8)")
    run.add_argument(
        "--threshold", type=float, default=0.1, help="profiled: stop when segments are within this share (0.1)"
    )
    run.set_defaults(func=_run)
    curve = ssub.add_parser("curve", help="cycles per inference on one tile as the model outgrows the scratchpad")
    _model_args(curve)
    sizes = int_list(4, 1024)
    curve.add_argument("--sizes", type=sizes, default=None, help="comma-separated widths (default: a fixed sweep)")
    curve.add_argument("--batch", type=integer(1, 256), default=4, help="inferences per point (default 4)")
    curve.set_defaults(func=_curve)
    wolt = ssub.add_parser("wolt", help="WOLT: applications x tiles throughput, round robin against static binding")
    wolt.add_argument("--apps", type=int_list(1, 4), default=(1, 2, 3, 4), help="applications (harts), e.g. 1,2,4")
    wolt.add_argument("--tiles", type=int_list(1, 4), default=(1, 2, 3, 4), help="tiles, e.g. 1,2,3,4")
    wolt.add_argument("--iters", type=integer(1, 1000), default=6, help="jobs per application (default 6)")
    wolt.add_argument("--cpu-iters", type=integer(0, 10**6), default=300, help="CPU work rounds per job (default 300)")
    wolt.add_argument("--json", action="store_true", help="print the table as JSON")
    wolt.set_defaults(func=_wolt)


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=("fc", "conv"), default="fc", help="synthetic model (default fc)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--mem-latency", type=integer(4, 1024), default=32, help="main memory read latency in cycles (default 32)"
    )


def _run(args: argparse.Namespace) -> int:
    from segment.api import run_segmented, segment_soc
    from segment.model import ModelSpec

    spec = ModelSpec(args.model, args.size)
    report = run_segmented(segment_soc(args.mem_latency), spec, args.tiles, args.strategy, args.batch, args.threshold)
    print(json.dumps(report, indent=1) if args.json else _run_text(report))
    return 0


def _run_text(r: dict[str, Any]) -> str:
    lines = [
        f"{r['model']} n={r['size']}: {r['weights_bytes']} weight bytes, {r['macs_per_inference']} MACs an inference",
        f"{r['strategy']} on {r['tiles']} tiles: segments {r['bounds']}, batch {r['batch']}: "
        f"{r['cycles']} cycles, {r['cycles_per_inference']:.0f} per inference, output bit-exact",
    ]
    for s in r["stages"]:
        a, b = s["layers"]
        lines.append(
            f"  stage {s['stage']}: layers {a}-{b - 1}, resident {s['resident_bytes']} B, streamed "
            f"{s['streamed_bytes']} B, busy {s['busy_cycles']}, waiting {s['wait_cycles']} cycles"
        )
    return "\n".join(lines)


def _curve(args: argparse.Namespace) -> int:
    from segment.api import curve_point, segment_soc
    from segment.model import ModelSpec

    sizes = args.sizes or CURVE_SIZES[args.model]
    specs = [ModelSpec(args.model, s) for s in sizes]  # every size is checked before the first run
    points = [curve_point(segment_soc(args.mem_latency), spec, args.batch) for spec in specs]
    return _table(
        points,
        args.json,
        "size  weights  resident  streamed  MACs/inf  cycles/inf",
        lambda p: (
            f"{p['size']:4}  {p['weights_bytes']:7}  {p['resident_bytes']:8}  {p['streamed_bytes']:8}  "
            f"{p['macs_per_inference']:8}  {p['cycles_per_inference']:10.0f}"
        ),
    )


def _wolt(args: argparse.Namespace) -> int:
    from segment.api import segment_soc
    from segment.wolt import WoltJob, run_wolt

    job = WoltJob(iters=args.iters, cpu_iters=args.cpu_iters)
    cfg = segment_soc()
    rows = [
        run_wolt(cfg, apps, tiles, static, job)
        for apps in args.apps
        for tiles in args.tiles
        for static in (False, True)
    ]
    return _table(
        rows,
        args.json,
        "apps  tiles  policy       jobs  cycles  jobs/Mcycle  hart0 cpu/gemm/wait",
        lambda r: (
            f"{r['apps']:4}  {r['tiles']:5}  {r['policy']:11}  {r['jobs']:4}  {r['cycles']:6}  "
            f"{r['jobs_per_mcycle']:11.0f}  {r['hart0_cpu_cycles']}/{r['hart0_gemm_cycles']}/{r['hart0_wait_cycles']}"
        ),
    )


def _table(rows: list[dict[str, Any]], as_json: bool, header: str, line: Callable[[dict[str, Any]], str]) -> int:
    """The rows as JSON, or as a header and one formatted line each."""
    print(json.dumps(rows, indent=1) if as_json else "\n".join([header, *map(line, rows)]))
    return 0

"""``pyard sweep``: measure every design point of a sweep file or of the command line's lists."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sim.arg_types import integer, output_dir

__all__ = ["register"]

# Command-line lists → (section, key) of the sweep file; each replaces the file's value.
LIST_OPTIONS = {
    "arrays": ("design", "arrays", "array shapes, e.g. 4x4,8x8"),
    "dtype": ("design", "dtype", "input types: int8, bf16"),
    "acc_dtype": ("design", "acc_dtype", "accumulator types: int32 (int8), fp32 or bf16 (bf16)"),
    "cores": ("design", "cores", "core counts of the SoC workloads, e.g. 1,2,4"),
    "sp_kib": ("design", "sp_kib", "scratchpad sizes in KiB"),
    "acc_kib": ("design", "acc_kib", "accumulator sizes in KiB"),
    "dma_bits": ("design", "dma_bits", "DMA widths in bits"),
    "gemm": ("workloads", "gemm", "GEMM shapes MxKxN, e.g. 64x64x64,256x256x256"),
    "conv": ("workloads", "conv", "Conv2D layers BxHxWxCIN-COUT-KHxKW[-sS][-pP]"),
    "program": ("workloads", "program", "firmware programs (C sources or ELFs)"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="design-space sweep: cycles, utilization and area per design point (docs/sweep.md)"
    )
    p.add_argument("file", nargs="?", type=Path, help="a sweep file (TOML); the options below replace its values")
    for dest, (_, _, what) in LIST_OPTIONS.items():
        p.add_argument("--" + dest.replace("_", "-"), dest=dest, default=None, help=f"comma-separated {what}")
    p.add_argument("--fptt-k", default=None, help="FPTT passes with these K (comma-separated), the thesis' problem")
    p.add_argument("--area", default=None, metavar="FAMILY", help="also synthesize each tile for FAMILY (xc7, ecp5)")
    p.add_argument("--fmax", action="store_true", help="with --area ecp5: place and route for the fmax")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--serial", action="store_true", help="run the points one after the other, without Dask")
    run.add_argument("--scheduler", default=None, metavar="ADDRESS", help="an existing Dask cluster (tcp://HOST:8786)")
    p.add_argument(
        "--workers", type=integer(1, 256), default=None, help="LocalCluster worker processes (default: cores)"
    )
    p.add_argument("--cache-dir", type=output_dir, default=None, help="the point cache (default <build>/sweep/points)")
    p.add_argument("-o", "--output", type=output_dir, default=None, help="write results.csv and results.json here")
    p.add_argument("--report", type=output_dir, default=None, help="write the results, plots and report.md here")
    p.add_argument("--json", action="store_true", help="print only the results as JSON")
    p.set_defaults(func=sweep)


def _value(text: str) -> Any:
    """A list item from the command line: an integer where it is one, else the text."""
    try:
        return int(text)
    except ValueError:
        return text


def _items(text: str) -> list[Any]:
    return [_value(v.strip()) for v in text.split(",") if v.strip()]


def overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The sweep-file tables the command line's options give."""
    out: dict[str, dict[str, Any]] = {"design": {}, "workloads": {}}
    for dest, (section, key, _) in LIST_OPTIONS.items():
        if getattr(args, dest) is not None:
            out[section][key] = _items(getattr(args, dest))
    if args.fptt_k is not None:
        out["workloads"]["fptt"] = {"K": _items(args.fptt_k)}
    if args.area is not None or args.fmax:
        out["area"] = {"family": args.area or "ecp5", "fmax": args.fmax}
    return {k: v for k, v in out.items() if v}


def sweep(args: argparse.Namespace) -> int:
    from sim.cli import UsageError
    from sweep.execute import run_sweep, summary, warn_failures
    from sweep.plots import write_plots, write_report
    from sweep.results import format_table, rows, write_results
    from sweep.spec import load_spec, parse_spec

    if args.file is not None:
        if not args.file.is_file():
            raise UsageError(f"sweep file = {str(args.file)!r} is invalid: allowed an existing TOML file")
        spec = load_spec(args.file, overrides(args))
    else:
        spec = parse_spec(overrides(args))
    outcomes = run_sweep(
        spec, scheduler=args.scheduler, serial=args.serial, workers=args.workers, directory=args.cache_dir
    )
    table = rows(outcomes)
    for where in {args.output, args.report} - {None}:
        write_results(table, where)
    if args.report is not None:
        title = spec.source if args.file is None else Path(spec.source).name
        write_report(table, args.report, title, write_plots(table, args.report))
    if args.json:
        print(json.dumps(table, indent=1))
    else:
        print(format_table(table))
        print(summary(outcomes), file=sys.stderr)
    warn_failures(outcomes)
    return 1 if any(o.status != "ok" for o in outcomes) else 0

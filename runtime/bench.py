"""``pyard bench runtime``: one GPTPU application (runtime/apps.py) on N simulated devices: its
error against float64 (MAPE, RMSE), the device cycles it took and the host link's transfer time
for the bytes it moved (runtime/link.py)."""

from __future__ import annotations

import argparse
import json
import time

from sim.arg_types import integer
from sim.config_args import add_config_args, config_from_args

__all__ = ["register"]


def register(kinds: argparse._SubParsersAction) -> None:
    from runtime.api import MAX_DEVICES, SCALINGS
    from runtime.apps import APPS
    from runtime.link import add_link_args

    p = kinds.add_parser("runtime", help="a GPTPU application on the host runtime: error vs float64, device cycles")
    add_config_args(p)
    p.add_argument("--app", choices=sorted(APPS), default="gemm", help="the application (default gemm)")
    p.add_argument("--devices", type=integer(1, MAX_DEVICES), default=1, help="simulated devices (default 1)")
    p.add_argument("--size", type=integer(1, 65535), default=None, help="problem size (default: the app's)")
    p.add_argument("--block", type=integer(1, 65535), default=None, help="the tensorizer's largest block edge")
    p.add_argument(
        "--scaling",
        choices=SCALINGS,
        default="balanced",
        help="int8 GEMM / conv2D factors: per row/column after balancing K (default), or per tensor (GPTPU)",
    )
    p.add_argument(
        "--digits",
        type=int,
        choices=(1, 2),
        default=None,
        help="GEMM operands as 1 or 2 digits (gemm, pagerank: 1; blackscholes: 2 by default)",
    )
    p.add_argument("--seed", type=integer(0, 2**32 - 1), default=0, help="data seed")
    add_link_args(p)
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.set_defaults(func=bench_runtime)


def bench_runtime(args: argparse.Namespace) -> int:
    from runtime.api import DEFAULT_BLOCK, Runtime
    from runtime.apps import DIGIT_APPS, run_app
    from runtime.link import transfer_report
    from sim.cli import UsageError

    if args.digits is not None and args.app not in DIGIT_APPS:  # before any device starts
        raise UsageError(
            f"--digits = {args.digits} is invalid for --app {args.app}: allowed only with {', '.join(DIGIT_APPS)}"
        )
    cfg = config_from_args(args)
    with Runtime(cfg, devices=args.devices, block=args.block or DEFAULT_BLOCK, scaling=args.scaling) as rt:
        start = time.monotonic()
        result = run_app(rt, args.app, args.size, args.seed, digits=args.digits)
        seconds = time.monotonic() - start
    out = {"bench": "runtime", "config": cfg.name, "devices": args.devices, "scaling": args.scaling, **vars(result)}
    out |= transfer_report(result.device_cycles, result.bytes_written, result.bytes_read, args.link, args.clock_mhz)
    out["wall_seconds"] = round(seconds, 2)
    print(json.dumps(out, indent=None if args.json else 2))
    return 0

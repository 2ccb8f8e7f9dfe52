"""``pyard bench``: benchmarks that print JSON (speed is measured here, never in timed tests)."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from sim.config_args import add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (JSON output)")
    kinds = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    mesh = kinds.add_parser("mesh", help="mesh timing for one weight tile, Verilog generation and build time")
    add_config_args(mesh)
    mesh.add_argument("--fresh", action="store_true", help="build in a temporary directory to time a cold build")
    mesh.add_argument("--json", action="store_true", help="print only the JSON result")
    mesh.set_defaults(func=bench_mesh)

    gemm = kinds.add_parser("gemm", help="one GEMM command on the tile: cycles end to end, utilization, counters")
    add_config_args(gemm)
    for dim in ("m", "k", "n"):
        gemm.add_argument(f"--{dim}", type=int, default=256)
    gemm.add_argument("--latency", type=int, default=32, help="main-memory read latency in cycles (default 32)")
    gemm.add_argument("--trans-a", action="store_true")
    gemm.add_argument("--trans-b", action="store_true")
    gemm.add_argument("--json", action="store_true", help="print only the JSON result")
    gemm.set_defaults(func=bench_gemm)


def bench_mesh(args: argparse.Namespace) -> int:
    from sim.build import build, run_cocotb

    cfg = config_from_args(args)
    with tempfile.TemporaryDirectory() as tmp:
        b = build("mesh", cfg, root=Path(tmp) if args.fresh else None)
        result_path = Path(tmp) / "result.json"
        run_cocotb(b, "tb.mesh_tb", testcase="mesh_one_tile", env={"PYARD_RESULT": str(result_path)}, name="bench")
        timing = json.loads(result_path.read_text())
    result = {
        "bench": "mesh",
        "config": cfg.name,
        "pe_stages": cfg.pe_stages,
        "verilog_generation_s": round(b.generate_seconds, 2),
        "verilator_build_s": round(b.verilate_seconds, 2),
        "build_was_cached": b.cached,
        **timing,
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def bench_gemm(args: argparse.Namespace) -> int:
    import time

    from sim.build import build, run_cocotb
    from sim.cli import UsageError

    cfg = config_from_args(args)
    for dim in ("m", "k", "n"):
        if not 1 <= getattr(args, dim) <= 65535:
            raise UsageError(f"--{dim} = {getattr(args, dim)} is invalid: allowed an integer from 1 to 65535")
    b = build("tile", cfg)
    case = {"m": args.m, "k": args.k, "n": args.n, "trans_a": int(args.trans_a), "trans_b": int(args.trans_b)}
    case["max_cycles"] = 40 * args.m * args.k * args.n // (cfg.rows * cfg.cols) + 100_000
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "result.json"
        env = {
            "PYARD_RESULT": str(result_path),
            "PYARD_TB_ARGS": json.dumps({"bench": case, "latency": args.latency}),
        }
        start = time.monotonic()
        run_cocotb(b, "tb.tile_tb", testcase="tile_bench_gemm", env=env, name="bench-gemm")
        wall = time.monotonic() - start
        measured = json.loads(result_path.read_text())
    result = {
        "bench": "gemm",
        "config": cfg.name,
        "dma_bits": cfg.dma_bits,
        "read_latency": args.latency,
        **{k: v for k, v in measured.items()},
        "utilization": round(measured["utilization"], 4),
        "sim_seconds": round(wall, 1),
        "sim_cycles_per_second": round(measured["cycles"] / wall),
    }
    print(json.dumps(result, indent=None if args.json else 2))
    return 0

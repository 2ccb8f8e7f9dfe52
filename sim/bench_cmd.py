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

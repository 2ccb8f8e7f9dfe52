"""``pyard verilog``: generate Verilog, ``config.json`` and a C header for a config."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sim.config_args import add_config_args, config_from_args
from sim.generate import SOC_TOPS, TOPS, write_outputs, write_soc_outputs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verilog", help="generate Verilog, config.json and pyard_params.h")
    add_config_args(p)
    p.add_argument("--top", default="mesh", help="which block: " + ", ".join([*TOPS, *SOC_TOPS]))
    p.add_argument("-o", "--out", type=Path, default=Path("build"), help="output directory (default build/)")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall on the result")
    p.add_argument("--cores", type=int, default=1, help="harts of --top soc / soc_sim (1 to 16)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    start = time.monotonic()
    if args.top in SOC_TOPS:
        from soc.config import SocConfig

        soc_cfg = SocConfig(accel=cfg, cores=args.cores)
        cfg_name, paths = soc_cfg.name, write_soc_outputs(args.top, soc_cfg, args.out)
    else:
        cfg_name, paths = cfg.name, write_outputs(args.top, cfg, args.out)
    print(f"{cfg_name} {args.top}: generated in {time.monotonic() - start:.1f} s")
    for kind, path in paths.items():
        print(f"  {kind:8s} {path}")
    if args.lint:
        from sim.verilator import lint

        problems = lint(paths["verilog"], args.top, extra=paths.get("sim_ram"))
        for line in problems:
            print(line)
        print(f"  lint     {'clean' if not problems else f'{len(problems)} messages'}")
        return 1 if problems else 0
    return 0

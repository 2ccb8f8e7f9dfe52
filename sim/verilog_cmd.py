"""``pyard verilog``: generate Verilog, ``config.json`` and a C header for a config."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rtl.config import read_config_json
from sim.arg_types import output_dir
from sim.config_args import config_from_args
from sim.generate import SOC_TOPS, TOPS, write_outputs, write_soc_outputs
from sim.soc_args import add_soc_args, soc_config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verilog", help="generate Verilog, config.json and pyard_params.h")
    add_soc_args(p)  # the SoC options apply to --top soc / soc_sim
    p.add_argument(
        "--top",
        default=None,
        help="which block: " + ", ".join([*TOPS, *SOC_TOPS]) + " (default: a --config .json's top, else mesh)",
    )
    p.add_argument("-o", "--out", type=output_dir, default=Path("build"), help="output directory (default build/)")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall on the result")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.top is None:
        recorded = read_config_json(args.config).get("top") if (args.config or "").endswith(".json") else None
        args.top = recorded if isinstance(recorded, str) else "mesh"
    start = time.monotonic()
    if args.top in SOC_TOPS:
        soc_cfg = soc_config_from_args(args)
        cfg_name, paths = soc_cfg.name, write_soc_outputs(args.top, soc_cfg, args.out)
    else:
        cfg = config_from_args(args)
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

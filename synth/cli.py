"""``pyard synth``: FPGA resources per block and clock rate of a generated design (JSON)."""

from __future__ import annotations

import argparse
import json

from sim.arg_types import integer, real
from sim.config_args import add_config_args, config_from_args
from synth.flow import FAMILIES, Options

TOPS = ("tile", "mesh", "soc")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synth",
        help="synthesize with Yosys (and place and route with nextpnr-ecp5): LUT/FF/BRAM/DSP per block, fmax",
    )
    add_config_args(p)
    p.add_argument("--top", default="tile", help="which design: " + ", ".join(TOPS))
    p.add_argument("--family", default="xc7", help="FPGA family: " + ", ".join(FAMILIES) + " (default xc7)")
    p.add_argument("--pnr", action="store_true", help="place and route (ecp5 only) and report fmax")
    levels = p.add_mutually_exclusive_group()
    levels.add_argument("--depth", type=integer(1, 4), default=1, help="levels of blocks reported (1 to 4, default 1)")
    levels.add_argument(
        "--flat", action="store_true", help="one Yosys run of the whole design, all of it flattened: the total only"
    )
    p.add_argument("--freq", type=real(1.0), default=100.0, help="nextpnr's target clock in MHz (default 100)")
    p.add_argument("--seed", type=integer(0, 2**31 - 1), default=1, help="nextpnr's placement seed (default 1)")
    p.add_argument(
        "--seeds",
        type=integer(1, 16),
        default=1,
        help="with --pnr: place and route the one netlist with this many seeds, --seed on (1 to 16, "
        "default 1): each one's fmax, their median and their minimum",
    )
    p.add_argument("--cores", type=integer(1, 16), default=1, help="harts of --top soc (1 to 16)")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> Options:
    from rtl.config import check_choice, check_int
    from sim.cli import UsageError

    check_choice("top", args.top, TOPS)
    check_choice("family", args.family, FAMILIES)
    check_int("depth", args.depth, 1, 4)
    check_int("seed", args.seed, 0, 2**31 - 1)
    check_int("seeds", args.seeds, 1, 16)
    if args.seeds > 1 and not args.pnr:
        raise UsageError(f"--seeds {args.seeds} needs --pnr: the seeds are nextpnr's placements")
    if args.seed + args.seeds > 2**31:
        raise UsageError(f"--seeds {args.seeds} is invalid with --seed {args.seed}: allowed 1 to {2**31 - args.seed}")
    if not 1 <= args.freq <= 1000:
        raise UsageError(f"--freq = {args.freq} is invalid: allowed a clock from 1 to 1000 MHz")
    if args.pnr and args.family != "ecp5":
        raise UsageError(f"--pnr needs --family ecp5 (nextpnr-ecp5); --family {args.family} has no place and route")
    depth = 0 if args.flat else args.depth
    return Options(family=args.family, pnr=args.pnr, depth=depth, freq_mhz=args.freq, seed=args.seed, seeds=args.seeds)


def run(args: argparse.Namespace) -> int:
    from sim.build import BUILD_ROOT
    from sim.cli import UsageError
    from sim.generate import top_component
    from synth.flow import SynthError, synthesize

    opts = options(args)
    cfg = config_from_args(args)
    if args.top == "soc":
        from soc.config import SocConfig
        from soc.soc import Soc

        soc_cfg = SocConfig(accel=cfg, cores=args.cores)
        name, verilog = soc_cfg.name, _convert(lambda: Soc(soc_cfg), "soc", soc_cfg.name)
    else:
        name, verilog = cfg.name, _convert(lambda: top_component(args.top, cfg), args.top, cfg.name)
    try:
        result = synthesize(verilog, args.top, name, opts, BUILD_ROOT)
    except SynthError as err:
        raise UsageError(str(err)) from None
    result = {"bench": "synth", "top": args.top, "config": name, "family": opts.family} | result
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


def _convert(make, top: str, name: str) -> str:
    from rtl import shared
    from sim import progress

    with progress.phase(f"Generating Verilog: {top} {name}"):
        return shared.convert(make(), top)

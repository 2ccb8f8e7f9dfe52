"""``pyard build --board B``: a bitstream (or a Vivado project) of the SoC with its firmware."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from boards.boards import BOARDS
from sim.arg_types import integer, output_dir
from sim.config_args import add_config_args, config_from_args

if TYPE_CHECKING:
    from soc.config import SocConfig

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "firmware" / "examples"
# A board's memories are block RAM: smaller than the simulation's defaults, so that the SoC with a
# 4x4 tile fits an ECP5-85F's 208 DP16KD (docs/boards.md). An option given on the command line wins.
BOARD_ACCEL = {"sp_kib": 64, "acc_kib": 16}
BOARD_SOC = {"itcm_kib": 16, "dram_kib": 32}
MEM_KIB = 32


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build the SoC for an FPGA board: bitstream, timing and utilization")
    p.add_argument("--board", required=True, help="the board: " + ", ".join(BOARDS))
    add_config_args(p)
    p.add_argument("--cores", type=integer(1, 16), default=1, help="harts (1 to 16, default 1)")
    p.add_argument("--itcm-kib", dest="itcm_kib", type=int, default=None, help="ITCM per hart (default 16)")
    p.add_argument("--dram-kib", dest="dram_kib", type=int, default=None, help="data RAM (default 32)")
    p.add_argument("--mem-kib", dest="mem_kib", type=integer(1, 1024), default=MEM_KIB, help="main memory in block RAM")
    fw = p.add_mutually_exclusive_group()
    fw.add_argument("--firmware", type=Path, help="an ELF linked for this SoC (pyard's runtime)")
    fw.add_argument("--program", help="a program of firmware/examples: " + ", ".join(program_names()))
    p.add_argument("-o", "--out", type=output_dir, required=True, help="the directory for the build's files")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.set_defaults(func=run)


def program_names() -> list[str]:
    return sorted(p.stem for p in PROGRAMS.glob("*.c"))


def soc_config(args: argparse.Namespace) -> SocConfig:
    from soc.config import SocConfig

    given = {k: v for k, v in vars(args).items() if v is not None}
    accel = config_from_args(args)
    accel = accel.replace(**{k: v for k, v in BOARD_ACCEL.items() if k not in given})
    fields = {k: given.get(k, v) for k, v in BOARD_SOC.items()}
    return SocConfig(accel=accel, cores=args.cores, **fields)


def firmware(args: argparse.Namespace, cfg: SocConfig) -> Path:
    from rtl.config import check_choice
    from sim.cli import UsageError
    from sim.elf_check import check_elf

    if args.firmware is not None:
        if not args.firmware.is_file():
            raise UsageError(f"firmware = {str(args.firmware)!r} is invalid: allowed an existing ELF file")
        elf = args.firmware
    else:
        from sim.firmware import build_firmware

        name = args.program or "hello"
        check_choice("program", name, tuple(program_names()))
        elf = build_firmware(cfg, [PROGRAMS / f"{name}.c"])
    check_elf(cfg, elf)
    return elf


def run(args: argparse.Namespace) -> int:
    from boards.boards import board_named
    from boards.build import build_board
    from rtl.config import check_pow2
    from sim.build import BUILD_ROOT
    from sim.cli import UsageError
    from sim.toolchain import load_elf
    from soc.image import MemoryImage
    from synth.flow import SynthError

    board = board_named(args.board)
    check_pow2("mem_kib", args.mem_kib, 1, 1024)
    cfg = soc_config(args)
    elf = firmware(args, cfg)
    image = MemoryImage.from_segments(cfg, load_elf(elf).segments, args.mem_kib * 1024)
    try:
        result = build_board(board, cfg, image, args.mem_kib * 1024, args.out, BUILD_ROOT)
    except SynthError as err:  # a tool failed: its last lines, in one line, as `pyard synth` does
        raise UsageError(str(err)) from None
    summary = {
        "board": board.name,
        "config": cfg.name,
        "firmware": str(elf),
        "out": str(args.out),
        "flow": board.flow,
        "clock_mhz": board.clock_hz / 1e6,
        "seconds": result.seconds,
        "cached": result.cached,
        "timing": result.timing,
        "utilization": result.utilization,
        "files": sorted(p.name for p in result.files),
    }
    if board.flow == "vivado":
        summary["note"] = f"Vivado not run: run `sh build_top.sh` in {args.out} (Vivado on PATH) for top.bit"
    print(json.dumps(summary, indent=None if args.json else 2))
    if not result.timing_met:
        t = result.timing
        print(
            f"pyard: timing not met: fmax {t['fmax_mhz']} MHz < the board clock {t['target_mhz']} MHz", file=sys.stderr
        )
        return 1
    return 0

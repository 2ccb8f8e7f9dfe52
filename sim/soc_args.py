"""Command-line options of the commands that take a SoC config (``pyard run``, ``pyard bench sim-speed``)."""

from __future__ import annotations

import argparse

from sim.config_args import add_config_args, config_from_args
from soc.config import SocConfig

# option → SocConfig field, on top of the accelerator options of sim/config_args.py.
SOC_OPTIONS = ("cores", "itcm_kib", "dram_kib", "dram_banks", "mem_mib", "mem_latency", "stack_kib")


def add_soc_args(parser: argparse.ArgumentParser, *, cores_default: int | None = 1) -> None:
    add_config_args(parser)
    for name in SOC_OPTIONS:
        default = cores_default if name == "cores" else None
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=default)


def soc_config_from_args(args: argparse.Namespace, **overrides: int) -> SocConfig:
    fields = {name: getattr(args, name) for name in SOC_OPTIONS if getattr(args, name, None) is not None}
    return SocConfig(accel=config_from_args(args), **(fields | overrides))

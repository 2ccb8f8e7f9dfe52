"""Command-line options of the commands that take a SoC config (``pyard run``, ``pyard verilog``,
``pyard bench sim-speed``): the accelerator's, and the SoC's (``--cores``, ``--tiles`` …)."""

from __future__ import annotations

import argparse

from rtl.config import read_config_json
from sim.config_args import add_config_args, config_from_args
from soc.config import SocConfig

# option → SocConfig field, on top of the accelerator options of sim/config_args.py.
SOC_OPTIONS = ("cores", "tiles", "itcm_kib", "dram_kib", "dram_banks", "mem_mib", "mem_latency", "stack_kib")


def add_soc_args(parser: argparse.ArgumentParser) -> None:
    """The accelerator options and the SoC's; one not given keeps the --config file's value or the
    default (one core)."""
    add_config_args(parser)
    for name in SOC_OPTIONS:
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=int, default=None)


def soc_config_from_args(args: argparse.Namespace, **overrides: int) -> SocConfig:
    """The SoC of the options; a SoC's config.json given as --config is the base they change."""
    fields = {name: getattr(args, name) for name in SOC_OPTIONS if getattr(args, name, None) is not None}
    base = soc_config_file(args.config)
    if base is None:
        return SocConfig(accel=config_from_args(args), **(fields | overrides))
    return base.replace(accel=config_from_args(args, base.accel), **(fields | overrides))


def soc_config_file(spec: str | None) -> SocConfig | None:
    """The SoC config a ``config.json`` written for a SoC top holds, else None."""
    if not spec or not spec.endswith(".json"):
        return None
    values = read_config_json(spec)
    return SocConfig.from_dict(values) if isinstance(values.get("accel"), dict) else None

"""Command-line options shared by every command that takes an accelerator config."""

from __future__ import annotations

import argparse

from rtl.config import AccelConfig, load_config

SWITCH = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def switch(text: str) -> bool:
    """An on/off option value (argparse reports the error and exits 2)."""
    if text.lower() not in SWITCH:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed on, off (or true, false)")
    return SWITCH[text.lower()]


# option → config field; every field can be overridden on top of --config.
OVERRIDES = {
    "rows": int,
    "cols": int,
    "dtype": str,
    "acc_dtype": str,
    "pe_stages": int,
    "sp_kib": int,
    "sp_banks": int,
    "acc_kib": int,
    "acc_banks": int,
    "dma_bits": int,
    "lanes": int,
    "update_lanes": int,
    "vector": switch,
}


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=None,
        help="a config name ({rows}x{cols}-{int8|bf16}, thesis-4x4, thesis-8x8) or a config.json",
    )
    for name, kind in OVERRIDES.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=None)


def config_from_args(args: argparse.Namespace, base: AccelConfig | None = None) -> AccelConfig:
    """The accelerator of the options: ``--config`` (or ``base``) changed by the field options."""
    cfg = base or (load_config(args.config) if args.config else AccelConfig())
    changes = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    return cfg.replace(**changes) if changes else cfg

"""The ``pyard`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``; this file only wires
them together and turns user errors into one line and exit status 2 (no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rtl.config import ConfigError
from sim import progress
from sim.toolchain import ToolchainError

# Modules that contribute sub-commands, in the order `pyard --help` lists them.
COMMAND_MODULES = ("sim.verilog_cmd", "sim.run", "sim.bench_cmd", "synth.cli", "sim.fptt_cli")


class UsageError(Exception):
    """A user mistake that is not a config field (missing file, bad combination of options)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyard", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _add_quiet(parser)
    return parser


def _add_quiet(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` on every command (before or after the command name): no progress display."""
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_quiet(child)


QUIET_HELP = "no progress display on stderr (also off under --json and when stderr is not a terminal)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    progress.set_quiet(getattr(args, "quiet", False) or bool(getattr(args, "json", False)))
    try:
        return int(args.func(args) or 0)
    except (ConfigError, UsageError, ToolchainError) as err:  # a compile error is the user's program
        print(f"pyard: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

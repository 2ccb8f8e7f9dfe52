"""The ``pyard`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``; this file only wires
them together and turns user errors into one line and exit status 2 (no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from rtl.config import ConfigError
from sim import progress
from sim.toolchain import ToolchainError

# Modules that contribute sub-commands, in the order `pyard --help` lists them.
COMMAND_MODULES = (
    "sim.verilog_cmd",
    "sim.run",
    "sim.bench_cmd",
    "synth.cli",
    "boards.cli",
    "sim.fptt_cli",
    "sweep.cli",
    "deploy.cli",
    "segment.cli",
)


class UsageError(Exception):
    """A user mistake that is not a config field (missing file, bad combination of options)."""


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other error of pyard (no usage block):
    ``pyard: error: <command>: argument --x: ...``."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("pyard").strip()
        self.exit(2, f"pyard: error: {command + ': ' if command else ''}{message}\n")


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that ``finally`` blocks (child processes, temporary
    folders) run before pyard exits."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pyard", description=__doc__.splitlines()[0])
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
    """Run one command; user mistakes are one line and exit status 2, Ctrl-C exits 130 and SIGTERM
    143 after the command's child processes and temporary files are cleaned up."""
    previous = _on_sigterm()
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as done:  # --help, or a bad argument already reported in one line
            return int(done.code or 0)
        progress.set_quiet(getattr(args, "quiet", False) or bool(getattr(args, "json", False)))
        return int(args.func(args) or 0)
    except (ConfigError, UsageError, ToolchainError) as err:  # a compile error is the user's program
        print(f"pyard: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a file the user named cannot be read or written
        where = f": {err.filename}" if err.filename else ""
        print(f"pyard: error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\npyard: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("\npyard: terminated", file=sys.stderr)
        return 143
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _on_sigterm():
    """Make SIGTERM raise :class:`Terminated` and SIGINT :class:`KeyboardInterrupt` in the main
    thread; the SIGTERM handler it replaces. SIGINT is set explicitly because Python leaves it
    ignored when pyard was started with it ignored (a parent's ``SIG_IGN`` is inherited across
    exec, as under some test runners and job controls), and then Ctrl-C would not stop a build."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def raise_terminated(signum, frame) -> None:
        raise Terminated

    signal.signal(signal.SIGINT, signal.default_int_handler)
    return signal.signal(signal.SIGTERM, raise_terminated)


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy's: the commands raise sim.cli's
    # UsageError, which this copy's main would not know as its own and would let through.
    from sim import cli

    sys.exit(cli.main())

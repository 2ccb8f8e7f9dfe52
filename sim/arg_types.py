"""Argument types of the ``pyard`` command line: each refuses a bad value with one line naming
the allowed values (argparse reports it as ``pyard <command>: error: argument --x: ...``, exit 2)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["int_list", "integer", "output_dir", "output_file", "positive_real", "real"]


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    allowed = f"an integer from {low} to {high}" if high is not None else f"an integer of at least {low}"

    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid: allowed {allowed}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is invalid: allowed {allowed}")
        return value

    parse.__name__ = "integer"
    return parse


def int_list(low: int, high: int | None = None) -> Callable[[str], list[int]]:
    """Comma-separated integers in range, at least one."""
    one = integer(low, high)

    def parse(text: str) -> list[int]:
        items = [v.strip() for v in text.split(",") if v.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid: allowed comma-separated integers, at least one")
        return [one(v) for v in items]

    parse.__name__ = "integer list"
    return parse


def real(low: float, *, low_open: bool = False) -> Callable[[str], float]:
    """A finite number of at least ``low`` (above it with ``low_open``)."""
    allowed = f"a finite number {'above' if low_open else 'of at least'} {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is invalid: allowed {allowed}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"{text} is invalid: allowed {allowed}")
        return value

    parse.__name__ = "number"
    return parse


def positive_real(text: str) -> float:
    return real(0.0, low_open=True)(text)


def _writable_dir(path: Path) -> bool:
    """``path`` or, if it does not exist yet, its nearest existing ancestor is a writable directory."""
    while not path.exists():
        if path.parent == path:
            return False
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def output_dir(text: str) -> Path:
    """A directory to write into: existing, or creatable under a writable one."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is invalid: it is a file; allowed a directory to write into")
    if not _writable_dir(path):
        raise argparse.ArgumentTypeError(f"{text!r} is invalid: allowed a directory that can be written or created")
    return path


def output_file(text: str) -> Path:
    """A file to write: not a directory, in a directory that exists and can be written."""
    path = Path(text)
    if path.is_dir() or not path.parent.is_dir() or not os.access(path.parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is invalid: allowed a file in an existing, writable directory")
    return path

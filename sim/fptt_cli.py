"""``pyard fptt``: FPTT-K LSTM training reference (placeholder until the FPTT issue lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    del sub

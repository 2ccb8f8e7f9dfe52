"""The code base stays ruff-clean (lint and format), as the project's standards require."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREES = [
    "rtl",
    "soc",
    "sim",
    "synth",
    "tb",
    "boards",
    "sweep",
    "runtime",
    "byoc",
    "fptt_soc",
    "deploy",
    "segment",
    "tests",
]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *TREES], cwd=REPO, capture_output=True, text=True)


def test_ruff_lint() -> None:
    proc = ruff("check", "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = ruff("format", "--check", "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr

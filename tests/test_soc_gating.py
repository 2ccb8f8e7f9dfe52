"""The simulation top stops the tile's clock while the tile is idle (soc/soc.py, ``Tile.active``).

That is only a speed-up if nothing can tell: the same program on a build whose tile is clocked on
every cycle must give the same console (which carries the examples' cycle counts and their checks
against a reference), exit code, cycle count, retired instructions and accelerator counters.
The programs cover GEMM and Conv2D with polling, an interrupt wait, and every error path of the
driver (queue drains after an error), with long CPU-only stretches in between.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.cli import main as pyard
from sim.firmware import build_firmware
from sim.run import run_elf
from soc.config import SocConfig

CFG = SocConfig.from_name("4x4-int8", cores=2)  # the build test_soc_system.py uses
FIRMWARE = Path(__file__).resolve().parent.parent / "firmware"
PROGRAMS = {
    "gemm": ([FIRMWARE / "examples" / "gemm.c"], None),
    "conv2d": ([FIRMWARE / "examples" / "conv2d.c"], None),
    "driver_errors": ([FIRMWARE / "tests" / "soc" / "driver_errors.c"], {"PYARD_NHARTS_ACTIVE": 1}),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_gated_tile_is_invisible(name: str) -> None:
    sources, defines = PROGRAMS[name]
    elf = build_firmware(CFG, sources, defines=defines)
    gated = run_elf(CFG, elf, max_cycles=5_000_000)
    free = run_elf(CFG, elf, max_cycles=5_000_000, gate_tile=False)
    assert gated.exit_code == free.exit_code == 0, gated.console
    assert gated.console == free.console
    assert (gated.cycles, gated.instret, gated.counters) == (free.cycles, free.instret, free.counters)
    assert free.counters["cycles_busy"] > 0  # the accelerator did work
    # The ungated tile runs on every cycle; the gated one stopped for most of the CPU-only stretches.
    assert free.tile_cycles == free.cycles
    assert gated.tile_cycles < 0.8 * gated.cycles, (gated.tile_cycles, gated.cycles)


def test_pyard_run_reports_the_tile_clock(capsys) -> None:
    """`pyard run` says how long the tile was clocked; `--no-clock-gate` clocks it on every cycle."""
    example = str(FIRMWARE / "examples" / "gemm.c")
    args = ["run", "--config", "4x4-int8", "--cores", "2", example]
    assert pyard(args) == 0
    gated = capsys.readouterr().err
    assert pyard([*args, "--no-clock-gate"]) == 0
    free = capsys.readouterr().err
    cycles = [int(re.search(r"^cycles (\d+)$", err, re.M).group(1)) for err in (gated, free)]
    clocked = [int(re.search(r"accelerator clocked (\d+) cycles", err).group(1)) for err in (gated, free)]
    assert cycles[0] == cycles[1] == clocked[1] > clocked[0] > 0

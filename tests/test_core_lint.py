"""The core's generated Verilog passes ``verilator --lint-only -Wall`` with the project's waivers
(rtl/lint.vlt: only classes that come from how Amaranth/Yosys print a netlist)."""

from pathlib import Path

from amaranth.back import verilog

from sim.verilator import lint
from soc.rv32 import Core, CoreConfig


def test_core_verilog_lints_clean(tmp_path: Path) -> None:
    src = tmp_path / "rv32_core.v"
    src.write_text(verilog.convert(Core(CoreConfig(hart_id=3)), name="rv32_core"))
    assert lint(src, "rv32_core") == []

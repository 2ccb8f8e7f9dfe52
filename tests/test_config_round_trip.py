"""A config.json written by ``pyard verilog`` gives back the same design: for every top, the file
records its top, and ``--config`` of it (with no other option) regenerates identical Verilog and an
identical config.json; a SoC's config.json is also taken by the SoC commands (``pyard run``)."""

import json

import pytest

from sim.cli import build_parser, main
from sim.generate import SOC_TOPS, TOPS
from sim.soc_args import soc_config_from_args
from soc.config import SocConfig

SMALL = ["--rows", "2", "--cols", "3", "--dtype", "bf16", "--sp-kib", "4", "--acc-kib", "4"]
SOC_SMALL = ["--cores", "2", "--dram-kib", "16", "--mem-mib", "2", "--mem-latency", "7"]


@pytest.mark.parametrize("top", [*TOPS, *SOC_TOPS])
def test_config_json_regenerates_the_same_design(top: str, tmp_path, capsys) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    extra = SOC_SMALL if top in SOC_TOPS else []
    assert main(["verilog", "-q", "--top", top, *SMALL, *extra, "-o", str(first)]) == 0
    recorded = json.loads((first / "config.json").read_text())
    assert recorded["top"] == top
    assert main(["verilog", "-q", "--config", str(first / "config.json"), "-o", str(second)]) == 0
    assert (second / f"{top}.v").read_text() == (first / f"{top}.v").read_text()
    assert (second / "config.json").read_text() == (first / "config.json").read_text()
    capsys.readouterr()


def test_soc_config_json_is_taken_by_pyard_run(tmp_path) -> None:
    assert main(["verilog", "-q", "--top", "soc", *SMALL, *SOC_SMALL, "-o", str(tmp_path)]) == 0
    written = SocConfig.from_dict(json.loads((tmp_path / "config.json").read_text()))
    assert written.cores == 2 and written.mem_latency == 7 and written.accel.cols == 3
    args = build_parser().parse_args(["run", "--config", str(tmp_path / "config.json"), "prog.c"])
    assert soc_config_from_args(args) == written
    args = build_parser().parse_args(["run", "--config", str(tmp_path / "config.json"), "--cores", "1", "prog.c"])
    assert soc_config_from_args(args) == written.replace(cores=1)

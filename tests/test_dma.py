"""DMA regressions in Verilator (top ``dma_top``: the DMA with stand-in local memories), checked
exactly against the NumPy model of tb/dma_tb.py; plus lint of the generated Verilog."""

import json

import pytest

from rtl.config import AccelConfig
from sim import verilator
from sim.build import build, run_cocotb
from sim.generate import to_verilog

# Few builds, many scenarios each: int8 and bf16 (fp32 and bf16 accumulators), 64- and 128-bit
# buses, a non-square mesh, and a 32-bit bus with 5-element rows (rows never a whole number of beats).
CONFIGS = [
    AccelConfig(rows=4, cols=16, dtype="int8", dma_bits=64, sp_kib=16, acc_kib=8),
    AccelConfig(rows=8, cols=8, dtype="bf16", dma_bits=128, sp_kib=16, acc_kib=8),
    AccelConfig(rows=3, cols=5, dtype="bf16", acc_dtype="bf16", dma_bits=32, sp_kib=4, acc_kib=4),
]


def _id(cfg: AccelConfig) -> str:
    return f"{cfg.name}-{cfg.dma_bits}b"


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_dma_matches_model(cfg: AccelConfig) -> None:
    b = build("dma_top", cfg)
    args = {"seed": 7, "transfers": 48, "latency": 32, "min_throughput": 0.9}
    run_cocotb(b, "tb.dma_tb", env={"PYARD_TB_ARGS": json.dumps(args)}, name="seed7")


@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=_id)
def test_dma_verilog_lints_clean(cfg: AccelConfig, tmp_path) -> None:
    path = tmp_path / "dma_top.v"
    path.write_text(to_verilog("dma_top", cfg))
    assert verilator.lint(path, "dma_top") == []

"""The tile through its AXI ports in Verilator: GEMMs from LOAD/EXEC/STORE commands with
dependency tokens against the NumPy model, and every error path followed by a correct run."""

import json

import pytest

from rtl.config import AccelConfig
from sim.build import build, run_cocotb

CONFIGS = [AccelConfig(rows=4, cols=4, dtype="int8"), AccelConfig(rows=4, cols=4, dtype="bf16")]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_tile(cfg: AccelConfig) -> None:
    b = build("tile", cfg)
    args = {"shapes": [[1, 1, 1], [3, 5, 7], [9, 11, 6], [17, 9, 5]], "seed": 3}
    run_cocotb(b, "tb.tile_tb", env={"PYARD_TB_ARGS": json.dumps(args)})

"""The tile through its AXI ports in Verilator (32-cycle memory): GEMMs from LOAD/EXEC/STORE commands
with dependency tokens, the GEMM loop command over shapes and options, and every error path followed
by a correct run; all against the NumPy models, exactly."""

import json

import pytest

from rtl.config import AccelConfig
from sim.build import build, run_cocotb

SHAPES = [[1, 1, 1], [3, 5, 7], [9, 11, 6], [17, 9, 5]]
LOOP_CASES = [
    {"m": 1, "k": 1, "n": 1},
    {"m": 3, "k": 5, "n": 7},
    {"m": 17, "k": 33, "n": 9},
    {"m": 40, "k": 8, "n": 8},
    {"m": 4, "k": 129, "n": 12, "trans_b": 1},
    {"m": 13, "k": 7, "n": 6, "trans_a": 1},
    {"m": 9, "k": 10, "n": 11, "bias": 1, "out": 0, "act": 1},
    {"m": 9, "k": 10, "n": 11, "bias": 2, "out": 0},
    {"m": 5, "k": 9, "n": 7, "acc_c": 1},
]
# Memories of 1 KiB force the loop to split M into blocks (A halves, B reloaded) and, with one step
# per block, to move the dependency token from the weight load to the A load.
SMALL_CASES = [
    {"m": 40, "k": 33, "n": 7},
    {"m": 300, "k": 4, "n": 4},
    {"m": 37, "k": 9, "n": 10, "trans_a": 1, "bias": 1},
    {"m": 70, "k": 3, "n": 9, "trans_b": 1, "acc_c": 1},
]


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_tile(dtype: str) -> None:
    b = build("tile", AccelConfig(rows=4, cols=4, dtype=dtype))
    args = {"shapes": SHAPES, "cases": LOOP_CASES, "seed": 3}
    run_cocotb(b, "tb.tile_tb", env={"PYARD_TB_ARGS": json.dumps(args)})


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_tile_gemm_loop_blocks(dtype: str) -> None:
    b = build("tile", AccelConfig(rows=4, cols=4, dtype=dtype, sp_kib=1, acc_kib=1))
    run_cocotb(b, "tb.tile_tb", testcase="tile_gemm_loop", env={"PYARD_TB_ARGS": json.dumps({"cases": SMALL_CASES})})


def test_tile_lint(tmp_path) -> None:
    from sim.generate import write_outputs
    from sim.verilator import lint

    paths = write_outputs("tile", AccelConfig(rows=4, cols=8, dtype="bf16"), tmp_path)
    assert lint(paths["verilog"], "tile") == []

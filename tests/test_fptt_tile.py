"""FPTT training on the tile through its AXI ports (Verilator): Python plays the host and issues one
LSTM time step (forward, backward) and one FPTT update as the firmware's command streams, and every
tensor is compared bit for bit with the reference under the hardware contract (tb/fptt_tile_tb.py)."""

import json

from rtl.config import AccelConfig
from sim.build import build, run_cocotb

TILE = AccelConfig(rows=4, cols=4, dtype="bf16")  # the build tests/test_tile.py and others share


def test_fptt_tile_step() -> None:
    """Three random LSTMs (I = 1, 2, 3; H = 8, B = 2, 4 classes); the update of their 356-420
    parameters in chunks of 16 rows, six or seven chunks, so its buffers are reused under tokens."""
    b = build("tile", TILE)
    run_cocotb(b, "tb.fptt_tile_tb", env={"PYARD_TB_ARGS": json.dumps({"seeds": [1, 2, 3], "chunk": 16})})

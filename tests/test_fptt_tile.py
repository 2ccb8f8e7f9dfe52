"""FPTT training on the tile through its AXI ports (Verilator): Python plays the host and issues one
LSTM time step (forward, backward) and one FPTT update as the firmware's command streams, and every
tensor is compared bit for bit with the reference under the hardware contract (tb/fptt_tile_tb.py);
and the reference's one-step backward that it is compared with, against the whole backward pass."""

import json

import numpy as np
import pytest

from rtl.config import AccelConfig
from sim.build import build, run_cocotb
from tb.fptt.arith import BF16, Arith, round_bf16
from tb.fptt.model import backward, cell_backward, forward, head, init_params
from tb.fptt.tensors import Dims

TILE = AccelConfig(rows=4, cols=4, dtype="bf16")  # the build tests/test_tile.py and others share


def test_fptt_tile_step() -> None:
    """Four random LSTMs (I = 2, 3, 1, 2; H = 8, B = 2, 4 classes), whose backward steps are the
    four variants inside the window (carry in or not, carry out or not); the update of their
    356-420 parameters in chunks of 16 rows, six or seven chunks, so buffers are reused under tokens."""
    b = build("tile", TILE)
    run_cocotb(b, "tb.fptt_tile_tb", env={"PYARD_TB_ARGS": json.dumps({"seeds": [1, 2, 3, 4], "chunk": 16})})


@pytest.mark.slow
def test_fptt_tile_step_8x8() -> None:
    """Rows of 8 on the 8x8-bf16 tile (the build tests/test_tile.py's large tiles use): H = 16, two
    blocks per batch row, and an odd batch of 3."""
    b = build("tile", AccelConfig(rows=8, cols=8, dtype="bf16"))
    args = {"seeds": [3, 4], "chunk": 8, "hidden": 16, "batch": 3}
    run_cocotb(b, "tb.fptt_tile_tb", env={"PYARD_TB_ARGS": json.dumps(args)})


def test_cell_backward_is_a_step_of_backward() -> None:
    """``cell_backward`` chained over a two-step part, from the head's dh, with the carry between
    the steps and dh through W_hᵀ, gives the dz of ``backward`` for both steps, bit for bit."""
    ar = Arith("bf16", tile=TILE)
    d = Dims(inputs=2, hidden=8, classes=4, batch=3)
    rng = np.random.default_rng(4)
    theta = init_params(d, rng).astype(BF16)
    x = round_bf16(rng.random((d.batch, 2, d.inputs)))
    h0, s0 = round_bf16(rng.uniform(-1, 1, (2, d.batch, d.hidden)))
    st = forward(theta, x, h0, s0, ar)
    labels = np.array([0, 3, 1])
    ref = backward(theta, st, head(theta, st.h_last, labels, ar), labels, ar)
    w_out_t = np.ascontiguousarray(ar.load(theta.w_out).T)
    w_h_t = np.ascontiguousarray(ar.load(theta.w_gate)[d.inputs :].T)
    gates, ts, s = ar.load(st.gates), ar.load(st.ts), ar.load(st.s)
    dz1, carry = cell_backward(ar.gemm(ar.load(ref.dlogits), w_out_t, "bwd_out_h"), None, gates[1], ts[1], s[1], ar)
    dz0, none = cell_backward(ar.gemm(dz1, w_h_t, "bwd_rec"), carry, gates[0], ts[0], s[0], ar, hand_on=False)
    assert none is None and carry is not None
    want = ar.load(ref.dz).view(np.uint32)
    assert np.array_equal(dz1.view(np.uint32), want[1]) and np.array_equal(dz0.view(np.uint32), want[0])

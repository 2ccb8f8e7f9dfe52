"""The vector engine in the tile through its AXI ports (Verilator): random VEC command streams over
the scratchpad and the accumulator, chains with the mesh through tokens, and every bad VEC command,
against rtl/vector/engine_model.py bit for bit; the engine's model against the lane model."""

import json

import numpy as np
import pytest

from rtl.config import AccelConfig, ConfigError
from rtl.vector import engine_model
from rtl.vector.engine_model import VecCommand
from rtl.vector.lane_model import lane
from rtl.vector.ops import VecOp
from sim.build import build, run_cocotb


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_tile_vector(dtype: str) -> None:
    b = build("tile", AccelConfig(rows=4, cols=4, dtype=dtype))
    run_cocotb(b, "tb.vector_tb", env={"PYARD_TB_ARGS": json.dumps({"seed": 7, "batches": 3})})


def test_tile_vector_beats() -> None:
    """Rows wider than the lanes (several beats per row, the last one partial) and accumulator rows
    narrower than scratchpad rows (8x4: scratchpad rows of 8, accumulator rows of 4); three update
    units (UPDATE rows of 8 parameters in beats of 3, 3 and 2)."""
    b = build("tile", AccelConfig(rows=8, cols=4, dtype="bf16", lanes=3, update_lanes=3, sp_kib=16, acc_kib=4))
    run_cocotb(b, "tb.vector_tb", env={"PYARD_TB_ARGS": json.dumps({"seed": 11, "batches": 2})})


def test_tile_vector_bf16_memories() -> None:
    """Scratchpad and accumulator both bf16 (the configuration of the area figure, docs/tile.md): the
    operand buffers hold bf16 bits and widen them after the buffers; reductions fold on lane 0 and
    UPDATE runs on the lanes' adders and multipliers."""
    b = build("tile", AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16"))
    run_cocotb(b, "tb.vector_tb", env={"PYARD_TB_ARGS": json.dumps({"seed": 5, "batches": 3})})


def test_lanes_config_limits() -> None:
    assert AccelConfig(rows=8, cols=4).lanes == 4
    assert AccelConfig(rows=8, cols=4, lanes=8).lanes == 8
    for bad in (0.5, 9, -1, True):
        with pytest.raises(ConfigError, match="lanes"):
            AccelConfig(rows=8, cols=4, lanes=bad)


def test_update_lanes_config_limits() -> None:
    """Derived from the DMA bus (θ, θ̄, λ, g: 64 bits per parameter), at most a row; none on int8."""
    assert AccelConfig(rows=4, cols=4, dtype="bf16").update_lanes == 1
    assert AccelConfig(rows=16, cols=16, dtype="bf16").update_lanes == 2  # 128-bit bus
    assert AccelConfig(rows=4, cols=4, dtype="bf16", dma_bits=512).update_lanes == 4  # at most dim
    assert AccelConfig(rows=4, cols=4, dtype="int8").update_lanes == 0
    assert AccelConfig(rows=4, cols=4, dtype="bf16", update_lanes=0).update_lanes == 0
    assert AccelConfig(rows=4, cols=4, dtype="bf16").replace(dma_bits=128).update_lanes == 2
    for dtype, bad in (("bf16", 5), ("bf16", -2), ("bf16", True), ("int8", 1)):
        with pytest.raises(ConfigError, match="update_lanes"):
            AccelConfig(rows=4, cols=4, dtype=dtype, update_lanes=bad)


def test_update_command_words() -> None:
    """UPDATE's encoding (docs/isa.md): op 16, η | α << 16 in word 1, g | κ << 16 in word 5."""
    c = VecCommand(op=VecOp.UPDATE, rows=9, elems=4, a=1, b=2, d=3, g=4, scalar=0x3F003D4D, kappa=0x3F80)
    assert c.words() == [0x05 | 16 << 18, 0x3F003D4D, 9 | 4 << 16, 1 | 2 << 16, 3, 4 | 0x3F80 << 16]


def test_model_rows_in_order() -> None:
    """The model's contract, checked against the lane model row by row: B broadcast, D one row
    accumulated in row order (a column sum), in-place update, narrowing to the destination."""
    cfg = AccelConfig(rows=4, cols=4, dtype="bf16")
    rng = np.random.default_rng(0)
    sp = (np.float32(rng.normal(size=(16, 4))).view(np.uint32) >> 16).astype(np.uint64)
    acc = np.zeros((16, 4), dtype=np.uint64)
    sums = VecCommand(op=VecOp.COPY, rows=6, elems=4, a=0, d=10, d_acc=True, d_one=True, accumulate=True)
    engine_model.run(cfg, sums, sp, acc)
    want = np.zeros(4, dtype=np.float32)
    for r in range(6):  # fp32 sums of bf16 values, in row order, each rounded once
        want = want + (sp[r].astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(acc[10].astype(np.uint32), want.view(np.uint32))

    before = sp.copy()
    scale = VecCommand(op=VecOp.MUL, rows=3, elems=2, a=0, b=8, b_one=True, d=0)
    engine_model.run(cfg, scale, sp, acc)
    products = lane("bf16", VecOp.MUL, before[:3, :2] << 16, np.broadcast_to(before[8, :2] << 16, (3, 2)), 0)
    want_bf16 = ((products.astype(np.uint64) + 0x7FFF + ((products >> 16) & 1)) >> 16) & 0xFFFF
    assert np.array_equal(sp[:3, :2], want_bf16)
    assert np.array_equal(sp[:3, 2:], before[:3, 2:]) and np.array_equal(sp[3:], before[3:])


def test_model_row_reductions() -> None:
    """A row sum is fp32 additions in element order (NumPy float32, sequential), a row max the
    largest element; the fold lands in element 0 of D, the rest of the row untouched."""
    cfg = AccelConfig(rows=8, cols=8, dtype="bf16")
    rng = np.random.default_rng(1)
    sp = (np.float32(rng.normal(size=(4, 8))).view(np.uint32) >> 16).astype(np.uint64)
    acc = np.zeros((4, 8), dtype=np.uint64)
    engine_model.run(cfg, VecCommand(op=VecOp.COPY, rows=2, elems=7, a=0, d=0, d_acc=True, reduce=True), sp, acc)
    engine_model.run(cfg, VecCommand(op=VecOp.COPY, rows=2, elems=7, a=0, d=2, d_acc=True, reduce=True,
                                     reduce_max=True), sp, acc)  # fmt: skip
    for r in range(2):
        values = (sp[r, :7].astype(np.uint32) << 16).view(np.float32)
        total = values[0]
        for v in values[1:]:
            total = np.float32(total + v)
        assert acc[r, 0] == total.view(np.uint32) and acc[2 + r, 0] == values.max().view(np.uint32)
        assert not acc[r, 1:].any() and not acc[2 + r, 1:].any()


def test_command_words() -> None:
    """The encoding docs/isa.md gives for VEC."""
    c = VecCommand(op=VecOp.MADDS, rows=300, elems=7, a=1, b=2, d=65535, a_acc=True, d_acc=True,
                   accumulate=True, scalar=-1, shift=31, deps=1 << 11)  # fmt: skip
    assert c.words() == [0x05 | 1 << 11 | 1 << 12 | 1 << 14 | 1 << 17 | 4 << 18, 0xFFFFFFFF, 300 | 7 << 16,
                         1 | 2 << 16, 65535 | 31 << 16]  # fmt: skip


def test_model_requant_rows() -> None:
    """REQUANT's contract: B's two accumulator rows (multipliers, shifts) serve every row of A; the
    result is TFLite's requantization per column (deploy/quant.py), plus the zero point, clamped,
    narrowed to int8 in the scratchpad; shifts past [−31, 30] are clamped to it."""
    quant = pytest.importorskip("deploy.quant")
    cfg = AccelConfig(rows=4, cols=4, dtype="int8")
    rng = np.random.default_rng(3)
    acc = np.zeros((16, 4), dtype=np.uint64)
    x = rng.integers(-(2**31), 2**31, (5, 4))
    x[0] = [-(2**31), 2**31 - 1, -(2**31), 0]
    mult, shift = np.array([-(2**31), 1 << 30, 2**31 - 1, 1518500250]), np.array([0, -31, 30, -40])
    acc[2:7], acc[0], acc[1] = x & 0xFFFFFFFF, mult & 0xFFFFFFFF, shift & 0xFFFFFFFF
    for double in (False, True):
        sp = np.zeros((16, 4), dtype=np.uint64)
        scalar = engine_model.requant_scalar(-5, -100, 120, double)
        cmd = VecCommand(op=VecOp.REQUANT, rows=5, elems=4, a=2, a_acc=True, b=0, b_acc=True, d=8, scalar=scalar)
        assert cmd.words()[1] == (0xFB | 0x9C << 8 | 120 << 16 | double << 24)
        engine_model.run(cfg, cmd, sp, acc)
        clamped = np.clip(shift, -31, 30)
        if double:
            terms = [zip(row, mult, clamped, strict=True) for row in x]
            raw = np.array([[quant.mbqm_double(int(v), int(m), int(s)) for v, m, s in row] for row in terms])
        else:
            raw = quant.multiply_by_quantized_multiplier(x, mult, clamped, False)
        want = np.clip(raw - 5, -100, 120)
        assert np.array_equal(sp[8:13].astype(np.uint8).view(np.int8), want), double
        assert not sp[:8].any() and not sp[13:].any()
    assert want[0, 0] == min(2**31 - 1 - 5, 120)  # INT32_MIN · INT32_MIN saturates

"""The tile through its AXI ports in Verilator (32-cycle memory): GEMMs from LOAD/EXEC/STORE commands
with dependency tokens, the GEMM loop command over shapes and options, and every error path followed
by a correct run; all against the NumPy models, exactly."""

import json
import os

import pytest

from rtl.config import PE_STAGES, AccelConfig
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
CONV_CASES = [
    {"batch": 1, "h": 8, "w": 8, "cin": 3, "cout": 16, "kh": 3, "kw": 3, "pad": 1},
    {"batch": 2, "h": 9, "w": 9, "cin": 8, "cout": 8, "kh": 3, "kw": 3, "stride": 2},
    {"batch": 1, "h": 16, "w": 16, "cin": 16, "cout": 32, "kh": 1, "kw": 1},
    {"batch": 1, "h": 7, "w": 7, "cin": 4, "cout": 5, "kh": 5, "kw": 5, "pad": 2, "bias": 2, "act": 1, "out": 0},
    {"batch": 1, "h": 6, "w": 5, "cin": 5, "cout": 3, "kh": 2, "kw": 4, "stride": 3, "pad": 2, "bias": 2},
    {"batch": 1, "h": 3, "w": 9, "cin": 2, "cout": 3, "kh": 7, "kw": 7, "pad": 3},
]
# Memories of 1 KiB force the loop to split M into blocks (A halves, B reloaded, one step per block),
# and K slices beyond half the A region (K > 384 for int8, 192 for bf16) to stream A with each step.
SMALL_CASES = [
    {"m": 40, "k": 33, "n": 7},
    {"m": 300, "k": 4, "n": 4},
    {"m": 37, "k": 9, "n": 10, "trans_a": 1, "bias": 1},
    {"m": 70, "k": 3, "n": 9, "trans_b": 1, "acc_c": 1},
    {"m": 20, "k": 600, "n": 9},
    {"m": 37, "k": 700, "n": 5, "trans_a": 1, "bias": 1},
    {"m": 9, "k": 500, "n": 6, "trans_b": 1, "acc_c": 1, "act": 1},
    # B resident in the scratchpad (flag [21]), K and N not multiples of the array: ending at the A
    # region's last row (A below it), or starting as low as allowed (A streamed, one row a slot).
    {"m": 9, "k": 10, "n": 7, "bias": 1, "sp_b": 1, "sp_b_at": "top", "sp_b_stride": 10},
    {"m": 40, "k": 9, "n": 6, "trans_a": 1, "sp_b": 1, "sp_b_at": "low", "sp_b_stride": 11},
    {"m": 70, "k": 3, "n": 9, "acc_c": 1, "sp_b": 1, "sp_b_at": "top", "sp_b_stride": 5},
]
SMALL_CONV_CASES = [
    {"batch": 2, "h": 8, "w": 8, "cin": 6, "cout": 5, "kh": 3, "kw": 3, "pad": 1, "bias": 2},
    {"batch": 1, "h": 11, "w": 10, "cin": 3, "cout": 9, "kh": 3, "kw": 2, "stride": 2, "pad": 1},
    {"batch": 2, "h": 5, "w": 5, "cin": 48, "cout": 7, "kh": 3, "kw": 3, "pad": 1, "bias": 2},  # streams A
    # Weights resident in the scratchpad (flag [21]), two or three N tiles further apart than K:
    # C_in slices per kernel position ending at the A region's last row (A below them), and
    # packed kernel positions (C_in < rows) as low as allowed (A streamed, one row a slot).
    {"batch": 2, "h": 6, "w": 5, "cin": 8, "cout": 6, "kh": 2, "kw": 2, "pad": 1, "bias": 2,
     "sp_b": 1, "sp_b_at": "top", "sp_b_stride": 35},
    {"batch": 1, "h": 11, "w": 10, "cin": 3, "cout": 9, "kh": 3, "kw": 2, "stride": 2, "pad": 1,
     "sp_b": 1, "sp_b_at": "low", "sp_b_stride": 20},
]  # fmt: skip
# Each command at its documented limits (docs/isa.md) on the 1 KiB memories: the largest K, M and N
# of a GEMM, C_in·kh·kw whose flat weight index passes 16 bits, the largest C_in, and more output
# pixels than 16 bits count.
LIMIT_CASES = [
    {"m": 2, "k": 65535, "n": 3},
    {"m": 65535, "k": 3, "n": 2, "out": 0},
    {"m": 3, "k": 2, "n": 65535, "out": 0},
]
LIMIT_CONV_CASES = [
    {"batch": 1, "h": 3, "w": 3, "cin": 8192, "cout": 1, "kh": 3, "kw": 3},
    {"batch": 1, "h": 1, "w": 1, "cin": 65535, "cout": 2, "kh": 1, "kw": 1},
    {"batch": 1, "h": 257, "w": 256, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "out": 0},
    {"batch": 65535, "h": 1, "w": 1, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "out": 0},
    {"batch": 1, "h": 65535, "w": 1, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "out": 0},
    {"batch": 1, "h": 1, "w": 65535, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "out": 0},
    {"batch": 1, "h": 1, "w": 1, "cin": 3, "cout": 65535, "kh": 1, "kw": 1, "out": 0},
    {"batch": 1, "h": 2, "w": 3, "cin": 5, "cout": 2, "kh": 7, "kw": 7, "stride": 255, "pad": 255},
]


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_tile(dtype: str) -> None:
    b = build("tile", AccelConfig(rows=4, cols=4, dtype=dtype))
    args = {"shapes": SHAPES, "cases": LOOP_CASES, "conv_cases": CONV_CASES, "seed": 3}
    run_cocotb(b, "tb.tile_tb", env={"PYARD_TB_ARGS": json.dumps(args)})


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_tile_gemm_loop_blocks(dtype: str) -> None:
    """1 KiB memories split the loops into blocks; the PEs are pipelined (the deepest bf16 PE), so
    the EXEC unit and the accumulator must follow the mesh's longer latency through its output
    valid for every block to come out bit for bit."""
    stages = max(PE_STAGES) if dtype == "bf16" else 2
    b = build("tile", AccelConfig(rows=4, cols=4, dtype=dtype, sp_kib=1, acc_kib=1, pe_stages=stages))
    env = {"PYARD_TB_ARGS": json.dumps({"cases": SMALL_CASES, "conv_cases": SMALL_CONV_CASES})}
    run_cocotb(b, "tb.tile_tb", testcase="tile_gemm_loop", env=env)
    run_cocotb(b, "tb.tile_tb", testcase="tile_conv", env=env, name="conv")
    run_cocotb(b, "tb.tile_tb", testcase="tile_loop_errors", name="loop-errors")
    env = {"PYARD_TB_ARGS": json.dumps({"shapes": SHAPES[:3], "seed": 5})}
    run_cocotb(b, "tb.tile_tb", testcase="tile_gemm", env=env, name="gemm")


def test_tile_lint(tmp_path) -> None:
    from sim.generate import write_outputs
    from sim.verilator import lint

    paths = write_outputs("tile", AccelConfig(rows=4, cols=8, dtype="bf16"), tmp_path)
    assert lint(paths["verilog"], "tile") == []


def _command(dtype: str = "int8"):
    from hypothesis import strategies as st

    cfg = AccelConfig(rows=4, cols=4, dtype=dtype)
    small, addr = st.integers(0, 20), st.integers(0, 0x20000)
    deps = st.integers(0, 15).map(lambda d: d << 8)
    local = st.one_of(st.integers(0, 64), st.integers(cfg.sp_rows - 20, cfg.sp_rows + 2), st.integers(0, 0xFFFF))
    dma = st.tuples(
        st.sampled_from([0x01, 0x02]),
        deps,
        st.integers(0, 0b11111),
        addr,
        st.integers(0, 300),
        small,
        st.integers(0, 3 * cfg.dim + 2),  # past a local row: split transfers of up to 4 blocks
        local,
    )
    dma = dma.map(lambda t: [t[0] | t[1] | t[2] << 12, t[3], t[4], t[5] | t[6] << 16, t[7], 0])
    ex = st.tuples(deps, st.integers(0, 3), local, local, small, st.integers(0, cfg.acc_rows + 4))
    ex = ex.map(lambda t: [0x03 | t[0] | t[1] << 12, t[2], t[3], t[4], t[5]])
    gemm = st.tuples(st.integers(0, 0x3FF), small, small, small, addr, st.integers(0, 64), addr, st.integers(0, 64))
    gemm = gemm.map(
        lambda t: [0x10 | t[0] << 12, t[1], t[2], t[3], t[4], t[5], t[6], t[7], 0x30000, 64, 0x38000, 64, 0]
    )
    tiny = st.integers(0, 9)
    conv = st.tuples(st.integers(0, 0x1FF), tiny, tiny, tiny, tiny, tiny, tiny, tiny, st.integers(0, 3), addr, addr)
    conv = conv.map(
        lambda t: [
            0x11 | t[0] << 12, t[1] | t[2] << 16, t[3] | t[4] << 16, t[5] | t[6] << 16 | t[7] << 24,
            1 + t[8] % 3 | (t[8] // 2) << 8, t[9], t[10], 0x30000, 0x38000, 0,
        ]
    )  # fmt: skip
    # VEC: any flags (its token bits with EXEC, STORE and LOAD included), ops 0-31, rows near the
    # memories' ends; and token bits 28-29 on the other commands.
    side = st.integers(0, 3).map(lambda d: d << 28)
    vec = st.tuples(deps, side, st.integers(0, 0x7FF), st.integers(0, 2**32 - 1), small, st.integers(0, cfg.dim + 1),
                    local, local, local, st.integers(0, 31))  # fmt: skip
    vec = vec.map(
        lambda t: [0x05 | t[0] | t[1] | t[2] << 12, t[3], t[4] | t[5] << 16, t[6] | t[7] << 16, t[8] | t[9] << 16]
    )
    # UPDATE (op 16): any other flags, rows near the memories' ends, any scalars, g | κ in word 5.
    update = st.tuples(vec, local, st.integers(0, 0xFFFF), st.integers(0, 0x7F))
    update = update.map(lambda t: [t[0][0] & ~(0x1F << 18) | 16 << 18 | t[3] << 12, *t[0][1:], t[1] | t[2] << 16])
    with_side = st.tuples(st.one_of(dma, ex), side).map(lambda t: [t[0][0] | t[1], *t[0][1:]])
    junk = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=16)
    return st.one_of(dma, dma, ex, ex, vec, vec, update, with_side, gemm, conv, st.just([0x04]), junk)


def test_tile_random_command_streams() -> None:
    """Never hangs: random streams end in idle or an error, and the tile works afterwards."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    b = build("tile", AccelConfig(rows=4, cols=4, dtype="int8"))

    @settings(max_examples=6, deadline=None, derandomize=True)
    @given(st.lists(_command(), min_size=1, max_size=25))
    def check(commands) -> None:
        env = {"PYARD_TB_ARGS": json.dumps({"commands": commands})}
        run_cocotb(b, "tb.tile_tb", testcase="tile_random_commands", env=env, name="random")

    check()


def test_tile_random_command_streams_bf16() -> None:
    """The same on a bf16 tile with the FPTT update unit, so UPDATE commands (valid or not) run."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    b = build("tile", AccelConfig(rows=4, cols=4, dtype="bf16"))

    @settings(max_examples=3, deadline=None, derandomize=True)
    @given(st.lists(_command("bf16"), min_size=1, max_size=25))
    def check(commands) -> None:
        env = {"PYARD_TB_ARGS": json.dumps({"commands": commands})}
        run_cocotb(b, "tb.tile_tb", testcase="tile_random_commands", env=env, name="random")

    check()


LARGE = [
    AccelConfig(rows=8, cols=8, dtype="bf16"),
    AccelConfig(rows=16, cols=16, dtype="int8"),
    AccelConfig(rows=8, cols=8, dtype="int8"),
    AccelConfig(rows=4, cols=8, dtype="bf16"),
]
# At PYARD_SCALE=small (the CI) the largest of each dtype; the default tier has the 8x4 bf16 tile.
LARGE_HERE = LARGE[:2] if os.environ.get("PYARD_SCALE") == "small" else LARGE


@pytest.mark.slow
@pytest.mark.parametrize("cfg", LARGE_HERE, ids=lambda c: c.name)
def test_tile_large(cfg: AccelConfig, scale: str) -> None:
    """Larger and non-square tiles: the GEMM loop over odd shapes and options (fewer at small scale)."""
    cases = [
        {"m": 3, "k": 5, "n": 7},
        {"m": 33, "k": 17, "n": 19, "bias": 1, "out": 0, "act": 1},
        {"m": 20, "k": 40, "n": 9, "trans_a": 1, "trans_b": 1},
        {"m": 64, "k": 64, "n": 64},
        {"m": 4, "k": 129, "n": 40, "bias": 2},
        {"m": 17, "k": 33, "n": 9, "acc_c": 1},
    ]
    b = build("tile", cfg)
    args = {"cases": cases[:3] if scale == "small" else cases}
    run_cocotb(b, "tb.tile_tb", testcase="tile_gemm_loop", env={"PYARD_TB_ARGS": json.dumps(args)})

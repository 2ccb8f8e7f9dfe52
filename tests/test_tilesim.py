"""The C++ tile simulator (tilesim/): GEMM and CONV2D loop commands run with no Python per cycle
and are bit-exact against the NumPy model; errors are reported, never hang; ``pyard bench
gemm|conv`` run on it. The loop commands at their documented limits run here (slow tier)."""

import json

import pytest

from rtl.config import AccelConfig
from rtl.vector.engine import SETTLE_CYCLES
from rtl.vector.engine_model import VecCommand
from rtl.vector.ops import VecOp
from runtime.device import Device, DeviceError
from sim.cli import main
from tb.tile_cases import LoopCase, check_exact, conv_case, gemm_case
from tb.vector_cases import vector_case
from tests.test_tile import CONV_CASES, LIMIT_CASES, LIMIT_CONV_CASES, LOOP_CASES, SMALL_CASES, SMALL_CONV_CASES
from tilesim.build import build_tile_sim, pgo_requested
from tilesim.run import MIN_MEM_BYTES, run_case


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_loop_commands_exact(dtype: str) -> None:
    cfg = AccelConfig(rows=4, cols=4, dtype=dtype)
    for i, case in enumerate(LOOP_CASES):
        run_case(cfg, gemm_case(cfg, case, seed=40 + i))
    for i, case in enumerate(CONV_CASES):
        run_case(cfg, conv_case(cfg, case, seed=60 + i))


def test_small_memories_exact_and_gating_invisible() -> None:
    """1 KiB memories: M in blocks, A streamed with each step (bf16 holds half the elements), the
    last pair in two parts, prefetches, im2col walks. Each case is exact, and takes the same cycles
    and counts the same events on a tile whose units are clocked on every cycle as on the one whose
    idle units (GEMM loop, walker, DMA engines, command queue) stop (``TileSim``'s ``gate_idle``)."""
    cfg = AccelConfig(rows=4, cols=4, dtype="bf16", sp_kib=1, acc_kib=1)
    # Not the resident-B cases: the simulator's runner pushes a case's commands and stops at the
    # first done interrupt, which the LOADs before the GEMM can raise (tests/test_tile.py runs them).
    cases = [gemm_case(cfg, c, seed=80 + i) for i, c in enumerate(c for c in SMALL_CASES if not c.get("sp_b"))]
    cases += [conv_case(cfg, c, seed=90 + i) for i, c in enumerate(c for c in SMALL_CONV_CASES if not c.get("sp_b"))]
    for case in cases:
        gated, free = run_case(cfg, case), run_case(cfg, case, gate_idle=False)
        assert free.counters.pop("vector_clocked") >= free.cycles > gated.counters.pop("vector_clocked")
        assert (gated.cycles, gated.counters) == (free.cycles, free.counters), case.label


def test_a_tile_error_is_reported() -> None:
    cfg = AccelConfig(rows=4, cols=4, dtype="int8")
    good = gemm_case(cfg, {"m": 3, "k": 5, "n": 7}, seed=1)
    bad = LoopCase(good.label, [good.words[0] | 1 << 31, *good.words[1:]], good.writes, good.out_addr,
                   good.out_shape, good.out_dtype, good.out_stride, good.want, good.macs, good.mem_bytes)  # fmt: skip
    with pytest.raises(RuntimeError, match="BAD_FIELD"):
        run_case(cfg, bad)


def test_an_error_in_a_conv2d_leaves_the_next_exact() -> None:
    """An error halts a CONV2D mid-walk (its output store answers DECERR while the im2col walker
    still loads the next M blocks); the halt resets the walker, whose clock the simulator stops
    between CONV2Ds (``Tile``'s ``gate_idle``), so the next CONV2D on the device, and the same one
    again after a GEMM, are exact."""
    cfg = AccelConfig(rows=4, cols=4, dtype="bf16", sp_kib=1, acc_kib=1)  # M in blocks
    conv = conv_case(cfg, SMALL_CONV_CASES[2], seed=5)  # A streamed: walks all along
    gemm = gemm_case(cfg, SMALL_CASES[0], seed=6)
    with Device(cfg) as dev:
        out_word = conv.words.index(conv.out_addr)
        stray = [*conv.words[:out_word], dev.mem_bytes, *conv.words[out_word + 1 :]]  # past the memory
        dev.write(0, conv.image())
        with pytest.raises(DeviceError, match="AXI_DECERR"):
            dev.run([stray], 1_000_000)
        for case in (conv, gemm, conv):
            dev.write(0, case.image())
            dev.run(case.commands, 10_000_000)
            got = case.result(dev.read(case.out_addr, case.out_bytes))
            check_exact(case.label, got, case.want, "after a halted CONV2D")


def test_a_tile_without_the_vector_engine() -> None:
    """A bf16 tile built without the vector engine: loop commands exact, VEC refused (the
    decoder's rule for every operation: tests/test_decode.py), and the tile still works after."""
    cfg = AccelConfig(rows=4, cols=4, dtype="bf16", vector=False)
    run_case(cfg, gemm_case(cfg, LOOP_CASES[6], seed=7))  # bias, activation, narrow output
    run_case(cfg, conv_case(cfg, CONV_CASES[0], seed=8))  # packed C_in = 3
    add = VecCommand(op=VecOp.ADD, rows=2, elems=4, a=0, b=8, d=16).words()
    with pytest.raises(RuntimeError, match="BAD_FIELD"):
        run_case(cfg, LoopCase("vec", add))
    run_case(cfg, gemm_case(cfg, LOOP_CASES[2], seed=9))


@pytest.mark.parametrize(("dtype", "op"), [("int8", VecOp.ADD), ("bf16", VecOp.SIGMOID)])
def test_the_vector_engine_is_clocked_only_while_it_works(dtype: str, op: VecOp) -> None:
    """The simulator stops the idle vector engine's clock (Tile's ``gate_idle``): a GEMM clocks it
    in none of its cycles but the settling ones left from the start, a VEC command in every cycle
    the engine is busy and SETTLE_CYCLES after each busy stretch; both exact. (VEC commands after
    the engine has slept through GEMMs on one device: tests/test_runtime.py, tests/test_deploy.py.)"""
    cfg = AccelConfig(rows=4, cols=4, dtype=dtype)
    gemm = run_case(cfg, gemm_case(cfg, {"m": 48, "k": 40, "n": 36}, seed=3))
    assert gemm.cycles > 20 * SETTLE_CYCLES
    assert gemm.counters["vector_clocked"] <= SETTLE_CYCLES
    case = vector_case(cfg, op, 1000, "sp", seed=4)
    vec = run_case(cfg, case)
    busy, clocked = vec.counters["vec_cycles"], vec.counters["vector_clocked"]
    stretches = sum(1 for words in case.commands if words[0] & 0xFF == 0x05) + 1  # and the start's
    assert busy > 100
    assert busy <= clocked <= busy + stretches * SETTLE_CYCLES < vec.cycles


@pytest.mark.parametrize(
    ("argv", "macs"),
    [
        (["gemm", "--m", "40", "--k", "24", "--n", "12"], 40 * 24 * 12),
        (["conv", "--h", "6", "--w", "5", "--cin", "3", "--cout", "8", "--pad", "0"], 4 * 3 * 9 * 3 * 8),
    ],
)
def test_bench_runs_on_the_tile_simulator(argv, macs, capsys) -> None:
    assert main(["bench", *argv, "--config", "4x4-int8", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["macs"] == macs
    assert result["utilization"] == round(macs / (16 * result["cycles"]), 4)
    assert result["cycles"] >= macs / 16 and result["sim_cycles_per_second"] > 0


@pytest.mark.parametrize(
    ("value", "wanted"), [(None, True), ("1", True), ("0", False), ("no", False), ("FALSE", False)]
)
def test_pgo_is_on_unless_switched_off(value, wanted, monkeypatch) -> None:
    if value is None:
        monkeypatch.delenv("PYARD_SIM_PGO", raising=False)
    else:
        monkeypatch.setenv("PYARD_SIM_PGO", value)
    assert pgo_requested() == wanted


@pytest.mark.slow
def test_profile_guided_build_runs_the_same_cycles(monkeypatch, capsys) -> None:
    """The build users get by default (profile-guided; the suite's are not): compiled with the
    profile of its training run, and the bench on it exact, with the cycles and counters of the
    plain build."""
    cfg = AccelConfig(rows=4, cols=4, dtype="int8")
    argv = ["bench", "gemm", "--config", cfg.name, "--m", "64", "--k", "48", "--n", "40", "--json"]
    runs = {}
    for pgo in ("0", "1"):
        monkeypatch.setenv("PYARD_SIM_PGO", pgo)
        assert main(argv) == 0
        runs[pgo] = json.loads(capsys.readouterr().out)
        build = build_tile_sim(cfg, MIN_MEM_BYTES, runs[pgo]["read_latency"])  # the bench's for this case
        assert build.cached and bool(list(build.directory.glob("obj/*.gcda"))) == (pgo == "1")
    timing = ("sim_seconds", "sim_cycles_per_second", "simulator_build_was_cached")
    plain, guided = ({k: v for k, v in run.items() if k not in timing} for run in (runs["0"], runs["1"]))
    assert plain == guided


@pytest.mark.parametrize("out", ["narrow", "full"])
def test_bench_stores_the_output_width_asked(out, capsys) -> None:
    """``--out``: C leaves the tile as int8 (narrow) or int32 (full) elements, exact either way
    (run_case compares it with the model); the store DMA wrote exactly those bytes."""
    argv = ["bench", "gemm", "--m", "40", "--k", "24", "--n", "12", "--out", out, "--config", "4x4-int8", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["out"] == out and result["dma_wr_bytes"] == 40 * 12 * (1 if out == "narrow" else 4)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_loop_limits(dtype: str) -> None:
    """Every loop command at its documented limits runs and is exact (the 1 KiB memories make the
    loop stream A and split M into many blocks)."""
    cfg = AccelConfig(rows=4, cols=4, dtype=dtype, sp_kib=1, acc_kib=1)
    for i, case in enumerate(LIMIT_CASES):
        run_case(cfg, gemm_case(cfg, case, seed=100 + i))
    for i, case in enumerate(LIMIT_CONV_CASES):
        run_case(cfg, conv_case(cfg, case, seed=300 + i))

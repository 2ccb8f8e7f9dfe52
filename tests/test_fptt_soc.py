"""FPTT-K training on the SoC (firmware/fptt, fptt_soc/) against the bf16 reference under the
hardware contract (``Arith("bf16", tile=cfg)``): θ, θ̄, λ and the logits after every part, bit for
bit, on 1 and 2 harts, with the element-wise steps on the vector engine and (the software-only
mode) on the cores; the runs' refusals; the generated programs against the decoder's rules.

The SoC is the 4x4-bf16 build with 4 harts that tests/test_soc_firmware.py also uses; the
firmware runs on 1 or 2 of them (``PYARD_NHARTS_ACTIVE``)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from fptt_soc import check, host
from fptt_soc.layout import FpttProblem, Layout
from rtl.config import AccelConfig, ConfigError
from soc.config import SocConfig
from tb.fptt.arith import BF16
from tb.fptt.data import load_digits_sequences
from tb.fptt.model import cross_entropy, init_params
from tb.fptt.tensors import Dims, Hyper

SOC = SocConfig.from_name("4x4-bf16", cores=4)
SMALL = os.environ.get("PYARD_SCALE") == "small"


def run_and_check(
    problem: FpttProblem, x: np.ndarray, y: np.ndarray, cores: int, seed: int = 0, elementwise: str = "engine"
) -> host.FpttResult:
    theta = init_params(problem.dims, np.random.default_rng(seed)).astype(BF16)
    state = check.initial_state(theta)
    got = host.run(SOC, problem, state, x, y, snapshots=True, cores=cores, elementwise=elementwise)
    ref = check.reference_pass(SOC.accel, problem, state, x, y)
    bad = check.compare(ref, got)
    assert not bad, "; ".join(map(str, bad[:5]))
    assert len(got.snapshots) == len(problem.parts)
    assert got.losses == [cross_entropy(lg, y) for lg in ref.logits]
    return got


@pytest.mark.parametrize("cores", [1, 2])
def test_digits_by_row(cores: int) -> None:
    """T = 8 rows of 8 pixels, H = 8, B = 4, K = 2 and 8 (one step per part)."""
    data = load_digits_sequences("row")
    x, y = data.x_train[:4], data.y_train[:4]
    for k in (2, 8):
        problem = FpttProblem(Dims(inputs=8, hidden=8, classes=10, batch=4), 8, Hyper(eta=0.1, alpha=0.1, K=k))
        run_and_check(problem, x, y, cores)


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("k", [1, 4, 16])
def test_random_problem(cores: int, k: int) -> None:
    """T = 16, H = 8, B = 2, I = 3, C = 5; K = 1 is plain BPTT over the sequence, 16 one step per part."""
    rng = np.random.default_rng(k)
    x = rng.standard_normal((2, 16, 3)).astype(np.float32)
    y = rng.integers(0, 5, 2)
    problem = FpttProblem(Dims(inputs=3, hidden=8, classes=5, batch=2), 16, Hyper(eta=0.05, alpha=0.2, K=k))
    got = run_and_check(problem, x, y, cores, seed=k)
    assert got.phases["other"] >= 0 and got.phases["fwd_act"] == 0  # σ / tanh in the read-out
    assert all(got.phases[p] > 0 for p in ("fwd_gemm", "fwd_cell", "bwd_cell", "bwd_dw", "update"))


@pytest.mark.parametrize(
    ("cores", "hyper"),
    [
        (1, Hyper(eta=0.05, alpha=0.2, K=4)),
        # a window shorter than the part, the carry on past it: every variant of the cell backward
        (2, Hyper(eta=0.05, alpha=0.2, K=2, trunc_h=2, ramp=True)),
    ],
)
def test_software_only_mode(cores: int, hyper: Hyper) -> None:
    """--elementwise cores: the GEMMs on the tile, every element-wise step in integer C on the
    harts, bit-exact with the same contract; the gates' σ / tanh are cycles of the cores' own phase."""
    rng = np.random.default_rng(hyper.K)
    x = rng.standard_normal((2, 16, 3)).astype(np.float32)
    y = rng.integers(0, 5, 2)
    problem = FpttProblem(Dims(inputs=3, hidden=8, classes=5, batch=2), 16, hyper)
    got = run_and_check(problem, x, y, cores, seed=hyper.K, elementwise="cores")
    assert got.run.counters["vec_cycles"] == 0  # the vector engine did nothing
    assert all(got.phases[p] > 0 for p in ("fwd_gemm", "fwd_act", "fwd_cell", "softmax", "bwd_cell", "update"))


def test_truncation_ramp_and_a_batch_wider_than_a_row() -> None:
    """trunc_h (a window shorter than the part) with the cell-state gradient running on past it to
    the part's first step (Algorithm 3 line 15, the default) and cut at the window's edge,
    trunc_s = 0 (no cell-state carry), the t/T ramp, a batch of 6 (two blocks of the head's
    transposed tensors on a 4-wide row), T not divisible by K (a last, shorter part) and α = 0."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 11, 2)).astype(np.float32)
    y = rng.integers(0, 3, 6)
    dims = Dims(inputs=2, hidden=4, classes=3, batch=6)
    for hyper in (
        Hyper(eta=0.1, alpha=0.1, K=2, trunc_h=2, ramp=True),
        Hyper(eta=0.1, alpha=0.1, K=2, trunc_h=1, cut_s_at_window=True),
        Hyper(eta=0.1, alpha=0.0, K=3, trunc_h=1, trunc_s=0),
    ):
        run_and_check(FpttProblem(dims, 11, hyper), x, y, cores=1)


@pytest.mark.slow  # over two minutes
def test_gate_weights_resident_and_streamed() -> None:
    """Asked for (``resident_weights``), gate weights resident in the scratchpad (GEMM flag [21])
    where they fit, streamed from memory where they do not: on this SoC's 256 KiB scratchpad
    H = 152 is the largest H (I = 1) whose 4H × (I+H+1) weights fit above the forward cell's
    regions and the gate GEMM's A, H = 156 does not. Both bit-exact; the resident pass reads the
    weights once a part, not every step."""
    rng = np.random.default_rng(156)
    x = rng.standard_normal((2, 4, 1)).astype(np.float32)
    y = rng.integers(0, 3, 2)
    read = {}
    for hidden, resident in ((152, True), (156, False)):
        dims = Dims(inputs=1, hidden=hidden, classes=3, batch=2)
        problem = FpttProblem(dims, 4, Hyper(eta=0.05, alpha=0.1, K=2), resident_weights=True)
        assert (Layout(SOC.accel, problem).gate_weights_row is not None) == resident
        got = run_and_check(problem, x, y, cores=1, seed=hidden)
        weights = 4 * hidden * problem.xc_width * 2
        read[resident] = got.run.counters["dma_rd_bytes"] / weights
    # Weight reads a pass: 4 forward GEMMs + 4 dh (W_h) streamed, or 2 loads + 4 dh resident.
    assert read[False] - read[True] > 1.5, read


def test_every_generated_command_passes_the_decoder() -> None:
    """The programs of the header, for a few shapes, are legal VEC commands on the tile (the
    decoder's rules as tests/test_vector_programs.py states them)."""
    from tests.test_vector_programs import vec_error

    for dims, cfg in (
        (Dims(3, 8, 5, 2), AccelConfig(rows=4, cols=4, dtype="bf16")),
        (Dims(1, 128, 10, 4), AccelConfig(rows=4, cols=4, dtype="bf16")),
        (Dims(8, 16, 10, 9), AccelConfig(rows=8, cols=8, dtype="bf16")),
    ):
        lay = Layout(cfg, FpttProblem(dims, 28, Hyper(eta=0.1, alpha=0.1, K=7)))
        progs = [lay.forward_cell(), lay.head(), lay.update()]
        progs += [lay.backward_cell(bool(v >> 1), bool(v & 1)) for v in range(4)]
        progs += [lay.backward_cell(True, bool(v), inside=False) for v in range(2)]
        for cmd in (c for p in progs for c in p):
            assert vec_error(cfg, cmd) is None, cmd
        assert lay.sp_end <= cfg.sp_rows


def test_layout_refusals() -> None:
    cfg = AccelConfig(rows=4, cols=4, dtype="bf16")
    hp = Hyper(eta=0.1, alpha=0.1, K=2)
    with pytest.raises(ConfigError, match="hidden = 6 is invalid: allowed a multiple of the array's cols"):
        Layout(cfg, FpttProblem(Dims(1, 6, 10, 4), 8, hp))
    with pytest.raises(ConfigError, match="dtype = 'int8' is invalid"):
        Layout(AccelConfig(rows=4, cols=4, dtype="int8"), FpttProblem(Dims(1, 8, 10, 4), 8, hp))
    with pytest.raises(ConfigError, match="K = 9 is invalid: allowed an integer from 1 to the sequence length 8"):
        FpttProblem(Dims(1, 8, 10, 4), 8, Hyper(eta=0.1, alpha=0.1, K=9))
    with pytest.raises(ConfigError, match="trunc_s = 2 is invalid"):
        FpttProblem(Dims(1, 8, 10, 4), 16, Hyper(eta=0.1, alpha=0.1, K=2, trunc_s=2))
    with pytest.raises(ConfigError, match="hidden = 4096 is invalid: allowed a size whose tensors fit"):
        Layout(AccelConfig(rows=4, cols=4, dtype="bf16", sp_kib=64), FpttProblem(Dims(1, 4096, 10, 4), 8, hp))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "4x4-int8"], "dtype = 'int8' is invalid"),
        (["--config", "4x4-bf16", "--T", "9"], "--T = 9 is invalid for digits"),
        (["--config", "4x4-bf16", "--T", "8", "--hidden", "6"], "hidden = 6 is invalid"),
        (["--config", "4x4-bf16", "--T", "8", "--K", "9"], "K = 9 is invalid"),
        (["--config", "4x4-bf16", "--T", "8", "--lr", "0"], "--lr"),
        (
            ["--config", "4x4-bf16", "--T", "8", "--elementwise", "gpu"],
            "elementwise = 'gpu' is invalid: allowed engine or cores",
        ),
        (["--config", "4x4-bf16", "--T", "8", "--vector", "off"], "vector = False is invalid: allowed true for"),
    ],
)
def test_cli_refusals(args: list[str], message: str) -> None:
    """Bad arguments: one line naming the field, exit 2, no traceback, before anything is built."""
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", "fptt", "run", *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_digits_by_pixel_several_batches() -> None:
    """T = 64 pixels, H = 32, B = 4, K = 8, three batches one after another (θ, θ̄, λ carried)."""
    data = load_digits_sequences("pixel")
    steps, hidden = (16, 8) if SMALL else (64, 32)
    problem = FpttProblem(Dims(1, hidden, 10, 4), steps, Hyper(eta=0.1, alpha=0.1, K=8 if not SMALL else 4))
    state = check.initial_state(init_params(problem.dims, np.random.default_rng(0)).astype(BF16))
    for k in range(1 if SMALL else 3):
        x, y = data.x_train[4 * k : 4 * k + 4, :steps], data.y_train[4 * k : 4 * k + 4]
        got = host.run(SOC, problem, state, x, y, snapshots=False, cores=1)
        ref = check.reference_pass(SOC.accel, problem, state, x, y)
        assert not check.compare(ref, got)
        state = got.state


@pytest.mark.slow
def test_thesis_size_pass() -> None:
    """One pass of the thesis' workload (T = 784, H = 128, B = 4, K = 28; small scale: T = 56, K = 2),
    final θ, θ̄, λ and every part's logits bit-exact."""
    steps, k = (56, 2) if SMALL else (784, 28)
    rng = np.random.default_rng(28)
    x = rng.random((4, steps, 1), dtype=np.float32)
    y = rng.integers(0, 10, 4)
    problem = FpttProblem(Dims(1, 128, 10, 4), steps, Hyper(eta=0.05, alpha=0.1, K=k))
    state = check.initial_state(init_params(problem.dims, np.random.default_rng(0)).astype(BF16))
    got = host.run(SOC, problem, state, x, y, snapshots=False, cores=1)
    assert not check.compare(check.reference_pass(SOC.accel, problem, state, x, y), got)


def test_thesis_figures_beside_ours() -> None:
    """The breakdown table's thesis column: Appendix C read from the shipped copy (4x4, 1 core,
    K = 28: 1,652,452,686 cycles, table C.9), and no column for a design point it does not have."""
    from fptt_soc.cli import THESIS_ROWS, thesis_cycles

    t = thesis_cycles("4x4-bf16", 1, 28)
    assert t is not None and t["total cycles"] == 1_652_452_686
    mapped = {f for _, _, fns in THESIS_ROWS for f in fns}
    functions = set(t) - {"total cycles", "total seconds (500MHz)"}
    assert mapped == functions  # every thesis function has a row, and only those
    assert sum(t[f] for f in functions) == pytest.approx(t["total cycles"], rel=1e-6)
    assert thesis_cycles("4x4-int8", 1, 28) is None and thesis_cycles("4x4-bf16", 3, 28) is None

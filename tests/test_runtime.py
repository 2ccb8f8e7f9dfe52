"""The host runtime (runtime/): every operator bit-exact against the model of the tile's arithmetic
(rtl/gemm_loop_model.py, rtl/vector/engine_model.py) and the documented int8 scale factors, the
tensorizer at block edges, several devices equal to one, and the error paths (bad shapes, device
errors by name, a cycle budget that stops the device). Small shapes; the 4x4 tile simulators are
the ones tests/test_tilesim.py builds."""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rtl.config import AccelConfig
from rtl.vector.ops import VecOp
from runtime import DeviceError, DeviceHung, Runtime, apps, kernels, link, ops, quant
from runtime.device import Device
from sim.cli import main

INT8, BF16 = AccelConfig(rows=4, cols=4, dtype="int8"), AccelConfig(rows=4, cols=4, dtype="bf16")
BLOCK = 4  # the tensorizer's block edge here: every shape below is cut, most not at multiples of 4


@pytest.fixture(scope="module")
def rt():
    with Runtime((INT8, BF16), devices=2, block=BLOCK) as runtime:
        yield runtime


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _spans(size: int) -> list[tuple[int, int]]:
    return [(lo, min(size, lo + BLOCK)) for lo in range(0, size, BLOCK)]


# -- GEMM ---------------------------------------------------------------------------------------


def _int8_operands(a: np.ndarray, b: np.ndarray, scaling: str) -> tuple:
    """The documented int8 factors of a GEMM (runtime/quant.py): per tensor (GPTPU), or per row of
    A and column of B after balancing K."""
    if scaling == "tensor":
        fa, fb = quant.factor(a), quant.factor(b)
    else:
        d = quant.balance(a, b)
        a, b = a * d, b / d[:, None]
        fa, fb = quant.factors(a, 1), quant.factors(b, 0)
        return quant.quantize(a, fa), quant.quantize_sums(b, fb), fa * fb
    return quant.quantize(a, fa), quant.quantize(b, fb), fa * fb


@pytest.fixture(scope="module")
def runtimes(rt):
    with Runtime(INT8, devices=2, block=BLOCK, scaling="tensor") as tensor:
        yield {"balanced": rt, "tensor": tensor}


@pytest.mark.parametrize("scaling", ["balanced", "tensor"])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (5, 7, 3), (9, 4, 10)])
def test_gemm_int8_exact(runtimes, scaling, m, k, n) -> None:
    a, b = _rng(m).normal(0, 3, (m, k)), _rng(n).uniform(-1, 2, (k, n))
    qa, qb, f = _int8_operands(a, b, scaling)
    exact = qa.view(np.int8).astype(np.int64) @ qb.view(np.int8).astype(np.int64)
    assert np.array_equal(kernels.gemm_model(INT8, qa, qb).view(np.int32), exact)  # the tile's model agrees
    got = runtimes[scaling].gemm(a, b, precision="int8")
    assert np.array_equal(got, exact / f)
    assert np.max(np.abs(got - a @ b)) < 0.05 * np.max(np.abs(a @ b)) + 1e-9


def test_quantize_sums_keeps_each_column_sum() -> None:
    w = _rng(15).uniform(-1, 1, (40, 6))
    f = quant.factors(w, 0)
    q = quant.quantize_sums(w, f).view(np.int8).astype(np.int64)
    assert np.array_equal(q.sum(axis=0), np.rint((w * f).sum(axis=0)))
    assert np.max(np.abs(q - w * f)) < 1  # each weight still within one step
    stencil = np.array([[0.375, 0.125, 0.125, 0.125, 0.125, 0.0625, 0.0625]]).T
    assert quant.quantize_sums(stencil, 127 / 0.375).view(np.int8).sum() == 339  # rint(127 / 0.375)


def test_balanced_scaling_keeps_small_slices() -> None:
    """PageRank's case: columns of very different size; balancing K keeps each column's steps."""
    a = np.array([[1.0, 0.01], [0.5, 0.02]])
    b = np.array([[0.001], [1.0]])
    qa, qb, f = _int8_operands(a, b, "balanced")
    got = (qa.view(np.int8).astype(np.int64) @ qb.view(np.int8).astype(np.int64)) / f
    qa, qb, f = _int8_operands(a, b, "tensor")
    per_tensor = (qa.view(np.int8).astype(np.int64) @ qb.view(np.int8).astype(np.int64)) / f
    assert np.max(np.abs(got / (a @ b) - 1)) < 0.01 < np.max(np.abs(per_tensor / (a @ b) - 1))


@pytest.mark.parametrize(("m", "k", "n"), [(5, 9, 6), (4, 8, 4)])
def test_gemm_bf16_exact(rt, m, k, n) -> None:
    """Each block bit-exact with the GEMM model, the K partials summed in fp32 in K order."""
    a, b = _rng(1).normal(0, 2, (m, k)), _rng(2).normal(0, 2, (k, n))
    qa, qb = quant.bf16_bits(a), quant.bf16_bits(b)
    want = np.zeros((m, n), np.float32)
    for k0, k1 in _spans(k):
        for r0, r1 in _spans(m):
            for c0, c1 in _spans(n):
                part = kernels.gemm_model(BF16, qa[r0:r1, k0:k1], qb[k0:k1, c0:c1]).view(np.float32)
                want[r0:r1, c0:c1] += part
    got = rt.gemm(a, b, precision="bf16")
    assert np.array_equal(got, want.astype(np.float64))
    assert np.allclose(got, quant.from_bf16(qa) @ quant.from_bf16(qb), rtol=1e-2, atol=1e-2)


def _ints(q: np.ndarray) -> np.ndarray:
    return q.view(np.int8).astype(np.int64)


@pytest.mark.parametrize("scaling", ["balanced", "tensor"])
def test_gemm_int8_two_digits_exact(runtimes, scaling) -> None:
    """digits=2: the integer products of the two digits, combined exactly, over the factors; and
    15 bits of operand precision instead of 8 (GPTPU's "portions of raw input numbers")."""
    a, b = _rng(21).normal(0, 3, (9, 7)), _rng(22).uniform(-1, 2, (7, 5))
    if scaling == "balanced":
        d = quant.balance(a, b)
        sa, sb = a * d, b / d[:, None]
        fa, fb = quant.factors(sa, 1), quant.factors(sb, 0)
    else:
        sa, sb, fa, fb = a, b, quant.factor(a), quant.factor(b)
    (a1, a2), (b1, b2) = quant.split_int8(sa, fa), quant.split_int8(sb, fb)
    assert np.all(np.abs(sa * fa - (_ints(a1) + _ints(a2) / quant.DIGIT)) <= 0.5 / quant.DIGIT + 1e-12)
    exact = quant.DIGIT * (_ints(a1) @ _ints(b1)) + _ints(a1) @ _ints(b2) + _ints(a2) @ _ints(b1)
    got = runtimes[scaling].gemm(a, b, precision="int8", digits=2)
    assert np.array_equal(got, exact / (quant.DIGIT * (fa * fb)))
    one = runtimes[scaling].gemm(a, b, precision="int8")
    scale = np.max(np.abs(a @ b))
    assert np.max(np.abs(got - a @ b)) < 1e-3 * scale < np.max(np.abs(one - a @ b))


def test_gemm_bf16_two_digits_exact(rt) -> None:
    """hi·hi + (hi·lo + lo·hi) from the GEMM model (one block: K ≤ 4), near float64."""
    a, b = _rng(23).normal(0, 2, (6, 4)), _rng(24).normal(0, 2, (4, 3))
    (ah, al), (bh, bl) = quant.split_bf16(a), quant.split_bf16(b)
    assert np.max(np.abs(quant.from_bf16(ah) + quant.from_bf16(al) - a) / np.abs(a)) <= 2.0**-17
    model = [
        kernels.gemm_model(BF16, x, y).view(np.float32).astype(np.float64) for x, y in ((ah, bh), (ah, bl), (al, bh))
    ]
    got = rt.gemm(a, b, precision="bf16", digits=2)
    assert np.array_equal(got, model[0] + (model[1] + model[2]))
    assert np.max(np.abs(got - a @ b)) < 2.0**-14 * np.max(np.abs(a @ b))


def test_gemm_digits_are_checked(rt) -> None:
    with pytest.raises(ValueError, match="digits: must be one of 1, 2, got 3"):
        rt.gemm(np.ones((2, 2)), np.ones((2, 2)), digits=3)


def test_gemm_blocks_fit_the_device_memory() -> None:
    """The block edge shrinks until A, B and C fit; the largest edge that fits is taken."""
    for cfg, block, mem in [(INT8, 65535, 16 << 20), (BF16, 65535, 16 << 20), (INT8, 64, 4096), (BF16, 8, 1 << 20)]:
        edge, per_element = ops.gemm_edge(cfg, block, mem), 2 * cfg.in_bits // 8 + 4
        need = [e * e * per_element + 3 * kernels.ALIGN for e in (edge, edge + 1)]
        assert edge <= block and need[0] <= mem
        assert edge == block or need[1] > mem


def test_fully_connected_vector(rt) -> None:
    x, w = _rng(3).normal(size=6), _rng(4).normal(size=(6, 5))
    assert np.array_equal(rt.fully_connected(x, w, precision="bf16"), rt.gemm(x[None], w, precision="bf16")[0])


# -- conv2D -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_conv2d_exact(rt, dtype) -> None:
    """Bands of output rows and blocks of output channels give the CONV2D model's result."""
    cfg = INT8 if dtype == "int8" else BF16
    x, w = _rng(5).normal(size=(2, 5, 6, 3)), _rng(6).normal(size=(3, 3, 3, 6))
    if dtype == "int8":  # the runtime's balanced scaling: channels weighted, a factor per output channel
        d = quant.balance(x.reshape(-1, 3), w.transpose(2, 0, 1, 3).reshape(3, -1))
        xb, wb = x * d, w / d[:, None]
        fx, fw = quant.factor(xb), quant.factors(wb, (0, 1, 2))
        qx, qw = quant.quantize(xb, fx), quant.quantize_sums(wb.reshape(-1, 6), fw.reshape(1, -1)).reshape(w.shape)
        want = kernels.conv2d_model(cfg, qx, qw, 2, 1).view(np.int32) / (fx * fw)
    else:
        qx, qw = quant.bf16_bits(x), quant.bf16_bits(w)
        want = kernels.conv2d_model(cfg, qx, qw, 2, 1).view(np.float32).astype(np.float64)
    assert np.array_equal(rt.conv2d(x, w, stride=2, pad=1, precision=dtype), want)


# -- element-wise and matrix-wise ---------------------------------------------------------------


def _int8_elementwise(op: VecOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The documented int8 factors (eqs. 6-8) and the vector engine's model."""
    if op in (VecOp.ADD, VecOp.SUB):
        fa = fb = quant.add_factor(a, b)
    else:
        fa, fb = quant.factor(a), quant.factor(b)
    shift = quant.MUL_SHIFT if op == VecOp.MUL else 0
    rows = lambda q: np.pad(q.ravel(), (0, -q.size % 4)).reshape(-1, 4)  # noqa: E731
    out = kernels.vec_model(INT8, op, rows(quant.quantize(a, fa)), rows(quant.quantize(b, fb)), 0, shift)
    f = fa * fb / 2**shift if op == VecOp.MUL else fa
    return quant.dequant(out.ravel()[: a.size], 8, f).reshape(a.shape)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "relu"])
def test_elementwise_int8_exact(rt, name) -> None:
    a, b = _rng(7).normal(size=(7, 5)), _rng(8).normal(size=(7, 5))  # 35 elements: 9 rows, 3 blocks
    op = {"add": VecOp.ADD, "sub": VecOp.SUB, "mul": VecOp.MUL, "relu": VecOp.RELU}[name]
    got = getattr(rt, name)(a, b, precision="int8") if name != "relu" else rt.relu(a, precision="int8")
    assert np.array_equal(got, _int8_elementwise(op, a, b))
    ref = {"add": a + b, "sub": a - b, "mul": a * b, "relu": np.maximum(a, 0)}[name]
    assert np.max(np.abs(got - ref)) <= 2.5 / quant.factor(ref)  # a few int8 steps of the result


@pytest.mark.parametrize("name", ["add", "sub", "mul", "relu", "tanh"])
def test_elementwise_bf16_exact(rt, name) -> None:
    a, b = _rng(9).normal(size=(3, 11)), _rng(10).normal(size=(3, 11))
    op = VecOp[name.upper()]
    qa, qb = quant.bf16_bits(a), quant.bf16_bits(b)
    rows = lambda q: np.pad(q.ravel(), (0, -q.size % 4)).reshape(-1, 4)  # noqa: E731
    want = quant.from_bf16(kernels.vec_model(BF16, op, rows(qa), rows(qb)).ravel()[: a.size]).reshape(a.shape)
    got = (
        getattr(rt, name)(a, b, precision="bf16")
        if name in ("add", "sub", "mul")
        else getattr(rt, name)(a, precision="bf16")
    )
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_mean_and_max_exact(rt, dtype) -> None:
    a = _rng(11).normal(1, 2, (6, 7))  # 42 elements: 11 rows of 4, the last padded
    cfg = INT8 if dtype == "int8" else BF16
    f = quant.factor(a) if dtype == "int8" else 1.0
    q = (quant.quantize(a, f) if dtype == "int8" else quant.bf16_bits(a)).ravel()
    sums = kernels.fold_model(cfg, np.pad(q, (0, -q.size % 4)).reshape(-1, 4), False)
    maxes = kernels.fold_model(cfg, np.pad(q, (0, -q.size % 4), constant_values=q[0]).reshape(-1, 4), True)
    if dtype == "int8":
        assert rt.mean(a, precision=dtype) == float(sums.view(np.int32).astype(np.int64).sum()) / f / a.size
        assert rt.max(a, precision=dtype) == float(quant.dequant(maxes, 8, f).max())
    else:
        assert rt.mean(a, precision=dtype) == float(sums.view(np.float32).astype(np.float64).sum()) / a.size
        assert rt.max(a, precision=dtype) == float(quant.from_bf16(maxes).max())
    assert abs(rt.max(a, precision=dtype) - a.max()) < 0.02 * a.max()


def test_crop_and_ext(rt) -> None:
    a = np.arange(20.0).reshape(4, 5)
    assert np.array_equal(rt.crop(a, 1, 2, 2, 3), a[1:3, 2:5])
    assert np.array_equal(rt.ext(a, 5, 7)[:4, :5], a) and rt.ext(a, 5, 7)[4:].sum() == 0


# -- devices, tasks -----------------------------------------------------------------------------


def test_several_devices_equal_one(rt) -> None:
    a, b = _rng(12).normal(size=(10, 9)), _rng(13).normal(size=(9, 7))
    with Runtime(INT8, devices=1, block=BLOCK) as one:
        want = one.gemm(a, b), one.add(a, a), one.mean(a)
    before = rt.device_cycles()["int8"]
    got = rt.gemm(a, b), rt.add(a, a), rt.mean(a)
    spent = [x - y for x, y in zip(rt.device_cycles()["int8"], before, strict=True)]
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    assert all(s > 0 for s in spent), f"every device should take blocks: {spent}"


def test_tasks_wait_and_sync(rt) -> None:
    a = _rng(14).normal(size=(6, 6))
    tasks = [rt.enqueue(lambda x: rt.gemm(x, x), a * (i + 1)) for i in range(3)]
    results = [rt.wait(t) for t in tasks]
    assert all(np.array_equal(r, rt.gemm(a * (i + 1), a * (i + 1))) for i, r in enumerate(results))
    rt.enqueue(rt.gemm, a, a[:3])
    with pytest.raises(ValueError, match="b: must have 6 rows"):
        rt.sync()


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda rt: rt.gemm(np.ones((3, 4)), np.ones((5, 2))), "b: must have 4 rows"),
        (lambda rt: rt.add(np.ones((3, 4)), np.ones((4, 3))), "b: must have the shape of a"),
        (lambda rt: rt.tanh(np.ones(4), precision="int8"), "precision: tanh runs on bf16 tiles"),
        (lambda rt: rt.gemm(np.ones((2, 2)), np.ones((2, 2)), precision="fp8"), "precision: must be one of int8, bf16"),
        (lambda rt: rt.conv2d(np.ones((1, 4, 4, 2)), np.ones((3, 3, 3, 1))), "w: must have C_in = 2"),
        (lambda rt: rt.conv2d(np.ones((1, 4, 4, 2)), np.ones((8, 8, 2, 1))), "w: kernel must be 1-7"),
        (lambda rt: rt.invoke("fft", np.ones(2)), "op: must be one of"),
        (lambda rt: rt.mean([1.0, np.nan], precision="int8"), "a: int8 operands must be finite"),
        (lambda rt: rt.gemm([[1.0]], [[np.inf]], precision="int8"), "b: int8 operands must be finite"),
    ],
)
def test_bad_shapes_raise_value_error(rt, call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call(rt)


def test_bad_runtime_arguments() -> None:
    with pytest.raises(ValueError, match="devices: must be 1-8"):
        Runtime(INT8, devices=9)
    with pytest.raises(ValueError, match="block: must be 1-65535"):
        Runtime(INT8, block=0)


def test_elementwise_needs_the_vector_engine() -> None:
    """Refused before any device is asked (a tile without the engine would refuse the VEC command)."""
    from types import SimpleNamespace

    from runtime.ops import elementwise

    bare = SimpleNamespace(cfg=INT8.replace(vector=False))
    with pytest.raises(ValueError, match="device: add runs on the vector engine, which tile 4x4-int8-novector"):
        elementwise(bare, "add", np.ones(4), np.ones(4))


def test_device_error_has_its_name(rt) -> None:
    """A command the tile refuses: the exception names the code and carries the command."""
    bad = [0x05 | 20 << 18, 0, 1 | 4 << 16, 0, 8]  # VEC op 20: undefined
    future = rt.pool("int8").submit(lambda dev: dev.run([[0x04], bad, [0x04]], 10_000))
    with pytest.raises(DeviceError, match="BAD_FIELD") as err:
        future.result()
    assert err.value.name == "BAD_FIELD" and err.value.command == bad
    assert np.array_equal(rt.gemm(np.eye(3), np.eye(3), precision="int8"), np.eye(3))  # the tile goes on


def test_cycle_budget_stops_the_device() -> None:
    with Runtime(INT8, devices=1, budget=200) as small:
        pid = small.pool().devices[0].pid
        with pytest.raises(DeviceHung, match="no interrupt within the budget of 200 cycles"):
            small.gemm(np.ones((16, 16)), np.ones((16, 16)))
        device = small.pool().devices[0]
        assert device.pid != pid  # stopped and started again
        small.pool().budget = 1_000_000
        assert np.array_equal(small.gemm(np.ones((3, 3)), np.ones((3, 3))), np.full((3, 3), 3.0))
        pids = [d.pid for d in small.pool().devices]
    for p in pids:  # closed and reaped: no process left behind
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)


@pytest.mark.parametrize("end", ["exit", "sigkill"])
def test_no_device_outlives_its_runtime(end) -> None:
    """A program that never closes its runtime (atexit closes it), or is killed (the devices read
    the end of their input and quit), leaves no simulator running."""
    script = (
        "import sys; from runtime import Runtime; rt = Runtime('4x4-int8', devices=2); rt.gemm([[1.0]], [[2.0]]);"
        "print(*[d.pid for d in rt.pool().devices], flush=True); sys.stdin.read()"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2
    if end == "exit":
        proc.stdin.close()
    else:
        proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(p) for p in pids)


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie waiting to be reaped by init."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_device_memory_range_is_checked() -> None:
    with Device(INT8) as dev, pytest.raises(ValueError, match="range outside the device memory"):
        dev.write(dev.mem_bytes - 2, b"1234")


# -- the bench ----------------------------------------------------------------------------------


def test_bench_runtime(capsys) -> None:
    assert main(["bench", "runtime", "--app", "gemm", "--size", "12", "--devices", "2", "--block", "4",
                 "--config", "4x4-int8", "--json"]) == 0  # fmt: skip
    result = json.loads(capsys.readouterr().out)
    assert result["app"] == "gemm" and result["devices"] == 2 and result["size"] == "12"
    assert 0 <= result["mape"] < 1.0  # GPTPU's bound
    # Any free device takes the next block (first come, first served), so how the blocks split
    # between the two depends on the simulators' timing; on a loaded machine one may take all.
    assert 0 < result["cycles_max"] <= result["cycles_total"] == sum(result["device_cycles"])
    assert len(result["device_cycles"]) == 2 and max(result["device_cycles"]) == result["cycles_max"]
    moved = sum(result["bytes_written"]) + sum(result["bytes_read"])
    assert result["transfer_seconds"] == pytest.approx(moved / 500e6) and result["link"] == "pcie2x1"
    assert result["cycles_max_with_transfers"] > result["cycles_max"]
    assert main(["bench", "runtime", "--app", "hotspot3d", "--digits", "2"]) == 2
    assert "--digits = 2 is invalid for --app hotspot3d" in capsys.readouterr().err


def test_blackscholes_cnd_polynomial() -> None:
    """The CND polynomial's own error (float64) is far below what the device's operands add."""
    x = np.linspace(-apps.CND_RANGE, apps.CND_RANGE, 4001)
    cnd = np.polynomial.chebyshev.chebvander(x / apps.CND_RANGE, apps.CND_DEGREE)[:, apps.CND_TERMS] @ apps.CND_POLY
    want = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    assert np.max(np.abs(cnd - want)) < 1e-4


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_blackscholes_within_gptpu_bound(rt, precision) -> None:
    """GPTPU's Table 4 bound (MAPE < 1 %) with the app's two digits; one int8 digit misses it."""
    result = apps.run_app(rt, "blackscholes", size=64, precision=precision)
    assert result.digits == 2 and result.mape < 0.1 and result.rmse < 1.0
    if precision == "int8":
        assert apps.run_app(rt, "blackscholes", size=64, precision="int8", digits=1).mape > 1.0
    with pytest.raises(ValueError, match="digits: only blackscholes, gemm, pagerank take it, not hotspot3d"):
        apps.run_app(rt, "hotspot3d", size=4, precision=precision, digits=2)


# -- the host link ------------------------------------------------------------------------------


def test_transfer_report_arithmetic() -> None:
    """(written + read) / bandwidth per device, in cycles at the clock, added to that device's
    cycles; the run's length is the busiest device's sum."""
    report = link.transfer_report([1000, 50_000], [400_000, 0], [100_000, 250], "pcie2x1", 100.0)
    assert report["link_bytes_per_second"] == 500e6  # 5 GT/s, 8b/10b: 4 Gb/s
    assert (report["bytes_to_device"], report["bytes_from_device"]) == (400_000, 100_250)
    assert report["transfer_seconds"] == pytest.approx(1e-3 + 0.5e-6)
    assert report["transfer_cycles"] == [100_000, 50] and report["cycles_max_with_transfers"] == 101_000
    assert link.transfer_report([10], [0], [0], "pcie3x4", 250.0)["link_bytes_per_second"] == 4 * 8e9 * 128 / 130 / 8
    with pytest.raises(ValueError, match="link: must be one of pcie2x1, pcie3x4, usb3, got 'pci'"):
        link.transfer_report([0], [0], [0], "pci")


def test_device_bytes_count_a_block(rt) -> None:
    """One int8 GEMM block: A and B written (one byte an element), C read (4 bytes an element)."""
    rt.pool("int8")  # started, so its counts exist before the call
    before = [sum(x) for x in zip(*rt.device_bytes()["int8"], strict=True)]
    rt.gemm(np.ones((3, 4)), np.ones((4, 2)), precision="int8")
    after = [sum(x) for x in zip(*rt.device_bytes()["int8"], strict=True)]
    assert [a - b for a, b in zip(after, before, strict=True)] == [3 * 4 + 4 * 2, 3 * 2 * 4]

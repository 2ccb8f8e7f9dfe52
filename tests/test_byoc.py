"""The TVM BYOC backend (byoc/): patterns and partition on models imported with TVM's ONNX frontend,
the cost rule, the codegen's regions equal to the same runtime operators called directly, every
model within the bf16 bound of onnxruntime, and the bench's table and argument errors. Skipped
where the optional [tvm] extra (apache-tvm, onnx, onnxruntime) is not installed."""

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tvm")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tvm.relax.frontend.onnx import from_onnx  # noqa: E402

from byoc.bench import BF16_BOUND, run_model  # noqa: E402
from byoc.codegen import build  # noqa: E402
from byoc.models import make_model  # noqa: E402
from byoc.partition import partition_for_pyard  # noqa: E402
from runtime import Runtime  # noqa: E402

MLP_MACS = 16 * 64 * 64 + 16 * 64 * 32 + 16 * 32 * 10  # x(16x64) through 64 -> 64 -> 32 -> 10


@pytest.fixture(scope="module")
def rt():
    with Runtime("4x4-bf16") as runtime:
        yield runtime


def _relax(name: str):
    model, x = make_model(name)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return from_onnx(model, keep_params_in_input=False), x, want


def test_mlp_is_one_region_of_three_fused_layers() -> None:
    mod, _, _ = _relax("mlp")
    parted, regions = partition_for_pyard(mod, "4x4-bf16")
    assert [(r.ops, r.macs, r.calls, r.offloaded) for r in regions] == [
        (["dense_bias_relu", "dense_bias_relu", "dense_bias"], MLP_MACS, 1, True)
    ]
    # Parameters (x, 3 weights, 3 biases) and the output, 2 bytes each in bf16.
    elements = 16 * 64 + 64 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10 + 16 * 10
    assert regions[0].transfer_bytes == 2 * elements
    assert [f.attrs["Codegen"] for f in parted.functions.values() if f.attrs and "Codegen" in f.attrs] == ["pyard"]


def test_cost_rule_keeps_regions_below_the_threshold_on_the_cpu() -> None:
    mod, _, _ = _relax("mlp")
    ratio = MLP_MACS / partition_for_pyard(mod)[1][0].transfer_bytes
    assert partition_for_pyard(mod, min_macs_per_byte=ratio)[1][0].offloaded
    kept, regions = partition_for_pyard(mod, min_macs_per_byte=ratio * 1.01)
    assert not regions[0].offloaded
    assert not [f for f in kept.functions.values() if f.attrs and "Codegen" in f.attrs]
    with pytest.raises(ValueError, match="min_macs_per_byte"):
        partition_for_pyard(mod, min_macs_per_byte=-1)


def test_rejected_regions_run_on_tvm_cpu_in_fp32(rt: Runtime) -> None:
    mod, x, want = _relax("mlp")
    before = sum(rt.device_cycles().get("bf16", [0]))
    got = build(mod, rt, min_macs_per_byte=1e9)(x)
    assert sum(rt.device_cycles().get("bf16", [0])) == before  # nothing ran on the device
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mlp_regions_equal_the_runtime_operators(rt: Runtime) -> None:
    """The codegen's program is the runtime's operators in the graph's order, nothing else: the
    same calls made by hand give the same bits."""
    model, x = make_model("mlp")
    w = {t.name: np.frombuffer(t.raw_data, np.float32).reshape(t.dims) for t in model.graph.initializer}
    names = [n.input[1] for n in model.graph.node if n.op_type in ("MatMul", "Add")]
    h = x
    for layer in range(3):
        weight, bias = w[names[2 * layer]], w[names[2 * layer + 1]]
        h = rt.add(rt.gemm(h, weight), np.broadcast_to(bias, (16, bias.size)))
        h = rt.relu(h) if layer < 2 else h
    got = build(from_onnx(model, keep_params_in_input=False), rt)(x)
    np.testing.assert_array_equal(got, h.astype(np.float32))


def test_builds_keep_their_own_regions(rt: Runtime) -> None:
    """Each build's regions are in its own library: a second build must not replace the first's."""
    first_mod, x, _ = _relax("mlp")
    first = build(first_mod, rt)
    want = first(x)
    second_mod, x2, _ = _relax("split")
    second = build(second_mod, rt)
    second(x2)
    np.testing.assert_array_equal(first(x), want)
    assert set(first.stats.per_region).isdisjoint(second.stats.per_region)


# Run in a fresh process: the exported libraries, first without byoc.codegen (the regions' C stubs
# must say what is missing), then with it, on a runtime of its own.
_LOAD_SCRIPT = """
import sys
from pathlib import Path
import numpy as np
import tvm
from tvm import relax

out = Path(sys.argv[1])
vm = relax.VirtualMachine(tvm.runtime.load_module(str(out / "split.so")), tvm.cpu())
try:
    vm["main"](tvm.runtime.tensor(np.load(out / "split_x.npy")))
except Exception as error:
    (out / "unregistered.txt").write_text(str(error))
from byoc.codegen import load
from runtime import Runtime
with Runtime(("4x4-bf16", "4x4-int8")) as rt:
    for name in ("split", "qmlp"):
        np.save(out / f"{name}_loaded.npy", load(out / f"{name}.so", rt)(np.load(out / f"{name}_x.npy")))
"""


def test_exported_library_runs_in_a_fresh_process(tmp_path) -> None:
    """export_library keeps the regions (a C module with their programs, compiled into the
    library): loaded in another process that imports byoc.codegen, the model gives the same bits
    as in the process that built it, within the bf16 bound of onnxruntime (split: two regions around
    the CPU's Sigmoid) or equal to it (qmlp, int8)."""
    got, want = {}, {}
    with Runtime(("4x4-bf16", "4x4-int8")) as both:
        for name in ("split", "qmlp"):
            mod, x, want[name] = _relax(name)
            exe = build(mod, both)
            got[name] = exe(x)
            exe.export_library(tmp_path / f"{name}.so")
            np.save(tmp_path / f"{name}_x.npy", x)
    subprocess.run([sys.executable, "-c", _LOAD_SCRIPT, str(tmp_path)], check=True, timeout=600)
    assert "pyard.run_region is not registered: import byoc.codegen" in (tmp_path / "unregistered.txt").read_text()
    for name in ("split", "qmlp"):
        np.testing.assert_array_equal(np.load(tmp_path / f"{name}_loaded.npy"), got[name])
    assert np.abs(got["split"] - want["split"]).max() <= BF16_BOUND * np.abs(want["split"]).max()
    np.testing.assert_array_equal(got["qmlp"], want["qmlp"])


def test_split_model_has_two_regions_around_the_cpu_sigmoid() -> None:
    mod, _, _ = _relax("split")
    parted, regions = partition_for_pyard(mod)
    assert [r.ops for r in regions] == [["dense_bias_relu"], ["dense_bias_relu"]]
    assert all(r.offloaded for r in regions)
    assert "R.sigmoid" in parted["main"].script()


@pytest.mark.parametrize("name", ["mlp", "split", "cnn", "lstm"])
def test_models_within_the_bf16_bound_of_onnxruntime(name: str) -> None:
    row = run_model(name)
    assert row["within_bound"], row["max_err_rel"]
    assert 0 < row["max_err_rel"] <= BF16_BOUND  # bf16, so never exactly fp32's result
    assert row["cycles_total"] > 0 and row["transfer_bytes"] >= row["region_bytes"] > 0
    assert 0 < row["macs_offloaded"] <= row["macs"]


def test_qdq_mlp_is_exact_on_the_int8_tile(rt: Runtime) -> None:
    """int8 QDQ: the tile's integer GEMM and the host's requantization (QLinearMatMul's) give
    onnxruntime's output exactly, with its graph optimizations on (fused QLinearMatMul) or off
    (float DequantizeLinear / MatMul / QuantizeLinear)."""
    row = run_model("qmlp")
    assert (row["regions"], row["regions_detail"][0]["ops"], row["tile_types"]) == (1, ["qdense", "qdense"], ["int8"])
    assert row["max_err_rel"] == 0.0 and row["macs_offloaded"] == row["macs"] == 16 * 64 * (64 + 32)
    _equals_unoptimized_onnxruntime("qmlp")


def test_qdq_cnn_is_exact_on_the_int8_tile() -> None:
    """int8 QDQ convolutions, one weight scale (3 -> 8) and one per output channel (8 -> 16, stride
    2): the tile's CONV2D on the model's integers and QLinearConv's requantization give onnxruntime's
    output exactly, with its graph optimizations on (fused QLinearConv) or off."""
    row = run_model("qcnn")
    assert (row["regions"], row["regions_detail"][0]["ops"], row["tile_types"]) == (1, ["qconv2d", "qconv2d"], ["int8"])
    assert row["max_err_rel"] == 0.0 and row["macs_offloaded"] == row["macs"] == 8 * 16 * 16 * 27 + 16 * 8 * 8 * 72
    _equals_unoptimized_onnxruntime("qcnn")


def _equals_unoptimized_onnxruntime(name: str) -> None:
    """The model on both tiles against onnxruntime without graph optimizations (float DequantizeLinear,
    MatMul or Conv, QuantizeLinear), exactly."""
    model, x = make_model(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    with Runtime(("4x4-bf16", "4x4-int8")) as both:
        got = build(from_onnx(model, keep_params_in_input=False), both)(x)
    np.testing.assert_array_equal(got, plain.run(None, {"x": x})[0])


def test_qdq_conv_with_nonzero_zero_points_is_not_quantized() -> None:
    """The tile's int8 is symmetric: per-channel zero points other than 0 fail qconv2d's check, so
    only the first convolution becomes a qconv2d region; the second is a float conv2d (its
    dequantized operands, bf16 on the tile), not an integer one."""
    model, _ = make_model("qcnn")
    inits = {t.name: t for t in model.graph.initializer}
    per_channel = next(n for n in model.graph.node if n.op_type == "DequantizeLinear" and len(n.attribute))
    inits[per_channel.input[2]].CopyFrom(onnx.numpy_helper.from_array(np.ones(16, np.int8), per_channel.input[2]))
    _, regions = partition_for_pyard(from_onnx(model, keep_params_in_input=False))
    assert [(r.ops, r.offloaded) for r in regions] == [(["qconv2d"], True), (["conv2d"], True)]


def test_cnn_table_row() -> None:
    """ResNet-8: every conv in one region; the 64x10 classifier (640 MACs, 1,448 bytes) fails the
    cost rule and stays on the CPU with the pooling."""
    row = run_model("cnn")
    conv_macs = (
        1 * 16 * 16 * 16 * 27 + 16 * 16 * 16 * 144 * 2 + 8 * 8 * 32 * (144 + 288 + 16) + 4 * 4 * 64 * (288 + 576 + 32)
    )
    assert (row["regions"], row["regions_kept_on_cpu"], row["macs_offloaded"]) == (1, 1, conv_macs)
    assert row["macs"] == conv_macs + 64 * 10


def test_bench_cli_json_and_errors() -> None:
    run = [sys.executable, "-m", "sim.cli", "bench", "byoc"]
    out = subprocess.run([*run, "--model", "mlp", "--json"], capture_output=True, text=True, check=True)
    row = json.loads(out.stdout)
    assert (row["model"], row["config"], row["macs_offloaded"], row["regions"]) == ("mlp", "4x4-bf16", MLP_MACS, 1)
    # The transfer model beside the device cycles: the runtime's bytes over GPTPU's PCIe 2.0 lane.
    assert row["bytes_to_device"] + row["bytes_from_device"] == row["transfer_bytes"] > 0
    assert row["transfer_seconds"] == row["transfer_bytes"] / 500e6 and row["link"] == "pcie2x1"
    assert row["cycles_max_with_transfers"] == row["cycles_total"] + round(row["transfer_bytes"] / 500e6 * 100e6)
    bad_args = (
        (["--model", "resnet50"], "--model"),
        (["--min-macs-per-byte", "-1"], "--min-macs-per-byte"),
        (["--link", "ethernet"], "--link"),
        (["--clock-mhz", "0"], "--clock-mhz"),
    )
    for bad, field in bad_args:
        err = subprocess.run([*run, *bad], capture_output=True, text=True)
        assert err.returncode == 2 and field in err.stderr and "Traceback" not in err.stderr

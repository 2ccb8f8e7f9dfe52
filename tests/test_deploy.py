"""pyard deploy (docs/deploy.md): the layer table's NumPy executor against LiteRT's reference kernels,
the test models' generator, the errors, and models run on the SoC checked bit for bit."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from deploy import quant
from deploy.model import DeployError, load_model
from deploy.reference import OPS, run_model
from sim.cli import main as pyard

litert = pytest.importorskip("ai_edge_litert.interpreter")
schema = pytest.importorskip("ai_edge_litert.schema_py_generated")

MODELS = Path(__file__).resolve().parent.parent / "deploy" / "models"
NAMES = ("lenet", "kws", "resnet8", "autoencoder")
SMALL = os.environ.get("PYARD_SCALE") == "small"
# The tile-sharing tests' SoC (tests/test_soc_tiles.py): two 1x1 tiles, two harts, one shared build.
SOC_ARGS = ["--config", "1x1-int8", "--sp-kib", "16", "--acc-kib", "16", "--cores", "2", "--tiles", "2"]


def _litert(path: Path, preserve: bool = False):
    it = litert.Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
        experimental_preserve_all_tensors=preserve,
    )
    it.allocate_tensors()
    return it


def _random_input(it, rng: np.random.Generator) -> np.ndarray:
    d = it.get_input_details()[0]
    if d["dtype"] == np.float32:  # a little beyond the calibrated range: the clamps are exercised too
        return rng.uniform(-1.3, 1.3, d["shape"]).astype(np.float32)
    return rng.integers(-128, 128, d["shape"]).astype(np.int8)


@pytest.mark.parametrize("name", NAMES)
def test_numpy_executor_equals_litert_reference_kernels(name: str) -> None:
    path = MODELS / f"{name}.tflite"
    model, it = load_model(path), _litert(path)
    rng = np.random.default_rng(7)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    for _ in range(40):
        x = _random_input(it, rng)
        it.set_tensor(inp["index"], x)
        it.invoke()
        (got,) = run_model(model, [x])
        want = it.get_tensor(out["index"])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _layer_mismatches(name: str, fc_rounding: str = "", inputs: int = 30) -> dict[str, int]:
    """Outputs per operator that differ from LiteRT when each layer gets LiteRT's own inputs."""
    path = MODELS / f"{name}.tflite"
    model, it = load_model(path), _litert(path, preserve=True)
    rng, bad = np.random.default_rng(3), {}
    for _ in range(inputs):
        it.set_tensor(it.get_input_details()[0]["index"], _random_input(it, rng))
        it.invoke()
        for layer in model.layers:
            if layer.op == "FULLY_CONNECTED":
                layer = dataclasses.replace(layer, rounding=fc_rounding)
            args = [it.get_tensor(i) for i in layer.inputs]
            got = OPS[layer.op](layer, [model.tensors[i] for i in layer.inputs], model.tensors[layer.output], *args)
            n = int(np.count_nonzero(got != it.get_tensor(layer.output)))
            if n:
                bad[layer.op] = bad.get(layer.op, 0) + n
    return bad


def test_every_layer_matches_litert_given_its_inputs() -> None:
    for name in NAMES:
        assert _layer_mismatches(name) == {}, name


def test_fully_connected_rounds_once_where_convolutions_round_twice() -> None:
    # The requantization differs per kernel in LiteRT 2.3: with two roundings FC misses LiteRT.
    assert _layer_mismatches("autoencoder", "double").get("FULLY_CONNECTED", 0) > 0
    x = np.array([5 * 2**20 + 2**19 - 1, -(2**25) - 12345, 2**28 - 1, -(2**28), 7, -7], np.int64)
    for m, shift in ((1 << 30, -3), (1518500250, -7), (2**31 - 1, 0), (1 << 30, 2)):
        double = quant.multiply_by_quantized_multiplier(x, m, shift, True)
        assert [quant.mbqm_double(int(v), m, shift) for v in x] == double.tolist()
        exact = [round(int(v) * m / 2 ** (31 - shift)) for v in x]  # the real product, rounded once
        single = quant.multiply_by_quantized_multiplier(x, m, shift, False)
        assert np.all(np.abs(single - exact) <= 1) and np.all(np.abs(double - exact) <= 1)
    # 7 · 2^30 / 2^34 = 0.4375: one rounding gives 0; rounding to 3.5 → 4 first, then 4 / 8 = 0.5 → 1.
    # For −7 the doubling high multiply rounds −3.5 towards zero (gemmlowp's nudge), then −3/8 → 0.
    assert quant.multiply_by_quantized_multiplier(np.array([7, -7]), 1 << 30, -3, False).tolist() == [0, 0]
    assert quant.multiply_by_quantized_multiplier(np.array([7, -7]), 1 << 30, -3, True).tolist() == [1, 0]


def test_quantize_multiplier_matches_frexp_rounding() -> None:
    assert quant.quantize_multiplier(0.5) == (1 << 30, 0)
    assert quant.quantize_multiplier(0.0) == (0, 0)
    m, shift = quant.quantize_multiplier(0.0123)
    assert 1 << 30 <= m < 1 << 31 and abs(m * 2.0 ** (shift - 31) - 0.0123) < 1e-11
    assert quant.quantize_multiplier(1 - 2**-40) == (1 << 30, 1)  # rounds up to 2^31: halved, shift + 1


def test_the_committed_models_are_what_the_script_writes_and_small() -> None:
    from deploy.models.make_models import MODELS as BUILDERS
    from deploy.models.make_models import build_tflite

    assert set(BUILDERS) == set(NAMES)
    for name in NAMES:
        data = build_tflite(name)
        assert data == (MODELS / f"{name}.tflite").read_bytes(), name
        assert len(data) < 1 << 20


def test_onnx_model_numpy_executor_equals_onnxruntime() -> None:
    pytest.importorskip("onnxruntime")
    from deploy.check import reference_outputs
    from deploy.models.make_onnx import build_onnx

    path = MODELS / "qcnn.onnx"
    assert build_onnx() == {"qcnn": path.read_bytes()}
    model, rng = load_model(path), np.random.default_rng(11)
    xs = [rng.uniform(-1.3, 1.3, (1, 1, 12, 12)).astype(np.float32) for _ in range(60)]
    for x, want in zip(xs, reference_outputs(path, xs), strict=True):
        (got,) = run_model(model, [x])
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert [layer.rounding for layer in model.layers if layer.op in ("CONV_2D", "FULLY_CONNECTED")] == ["float"] * 3


def test_unsupported_onnx_operator_is_refused(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    m = onnx.load(str(MODELS / "qcnn.onnx"))
    next(n for n in m.graph.node if n.op_type == "MaxPool").op_type = "AveragePool"
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(DeployError, match="operator AveragePool: unsupported: allowed QuantizeLinear"):
        load_model(tmp_path / "m.onnx")


def test_models_cover_the_edge_model_operators() -> None:
    ops = {name: {layer.op for layer in load_model(MODELS / f"{name}.tflite").layers} for name in NAMES}
    assert {"CONV_2D", "MAX_POOL_2D", "FULLY_CONNECTED", "SOFTMAX", "QUANTIZE", "DEQUANTIZE"} <= ops["lenet"]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "FULLY_CONNECTED"} <= ops["kws"]
    assert {"CONV_2D", "ADD"} <= ops["resnet8"]
    assert ops["autoencoder"] == {"QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE"}


# ---- errors --------------------------------------------------------------------------------------
def _with_op_replaced(tmp_path: Path, old: str, new: str) -> Path:
    import flatbuffers

    m = schema.ModelT.InitFromPackedBuf(bytearray((MODELS / "lenet.tflite").read_bytes()), 0)
    for code in m.operatorCodes:
        if code.builtinCode == getattr(schema.BuiltinOperator, old):
            code.builtinCode = code.deprecatedBuiltinCode = getattr(schema.BuiltinOperator, new)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path = tmp_path / "model.tflite"
    path.write_bytes(bytes(b.Output()))
    return path


def _one_line_error(capsys, argv: list[str]) -> str:
    assert pyard(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pyard: error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_unsupported_operator_is_one_line_naming_the_allowed_ones(tmp_path: Path, capsys) -> None:
    path = _with_op_replaced(tmp_path, "MAX_POOL_2D", "TANH")
    with pytest.raises(DeployError, match="operator TANH: unsupported: allowed CONV_2D"):
        load_model(path)
    err = _one_line_error(capsys, ["deploy", str(path), "--config", "4x4-int8"])
    assert "TANH" in err and "MAX_POOL_2D" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["deploy", "{bad}", "--config", "4x4-int8"], "not a TFLite flatbuffer"),
        (["deploy", "{missing}", "--config", "4x4-int8"], "allowed an existing .tflite or .onnx file"),
        (["deploy", "{txt}", "--config", "4x4-int8"], "allowed a .tflite or .onnx file"),
        (["deploy", "{lenet}", "--config", "4x4-bf16"], "allowed an int8 tile with int32 accumulators"),
        (["deploy", "{lenet}", "--config", "4x4-int8", "--random", "0"], "--random"),
        (["deploy", "{lenet}", "--config", "4x4-int8", "--cores", "2", "--harts", "3"], "--harts = 3"),
        (["deploy", "{lenet}", "--config", "4x4-int8", "--input", "{bad}"], "--input"),
    ],
)
def test_bad_model_or_arguments_exit_2_in_one_line(tmp_path: Path, capsys, argv: list[str], words: str) -> None:
    (tmp_path / "bad.tflite").write_bytes(b"\x00" * 64)
    (tmp_path / "m.txt").write_text("x")
    paths = {"bad": tmp_path / "bad.tflite", "missing": tmp_path / "none.tflite", "txt": tmp_path / "m.txt"}
    paths["lenet"] = MODELS / "lenet.tflite"
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in argv]
    assert words in _one_line_error(capsys, argv)


def test_truncated_flatbuffer_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.tflite"
    path.write_bytes((MODELS / "resnet8.tflite").read_bytes()[:600])
    with pytest.raises(DeployError, match="invalid"):
        load_model(path)


# ---- on the SoC ----------------------------------------------------------------------------------
def _deploy(capsys, name: str, extra: list[str]) -> dict:
    file = name if "." in name else f"{name}.tflite"
    code = pyard(["deploy", str(MODELS / file), "--check", "--json", *extra])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    return out


@pytest.mark.parametrize("name", ["autoencoder", "lenet"])
def test_model_on_two_tiles_and_two_harts_is_bit_exact_with_litert(capsys, name: str) -> None:
    r = _deploy(capsys, name, [*SOC_ARGS, "--random", "2", "--seed", "5"])
    assert r["check"] == {"bit_exact": True, "mismatched_inferences": 0, "mismatched_values": 0}
    assert r["inferences"] == 2 and r["harts"] == 2 and r["tiles"] == 2
    assert r["cycles_per_inference"] > 0 and all(layer["cycles"] > 0 for layer in r["layers"])
    on_tile = [layer["op"] for layer in r["layers"] if layer["where"] == "tile+hart"]
    assert on_tile and set(on_tile) <= {"CONV_2D", "FULLY_CONNECTED"}
    # every layer run on a tile is counted on the one it ran on, and both tiles were used
    assert len(r["tile_layers"]) == 2 and min(r["tile_layers"]) > 0
    assert sum(r["tile_layers"]) == r["inferences"] * len(on_tile)


def test_input_file_gives_the_numpy_executors_outputs(tmp_path: Path, capsys) -> None:
    # --input: two stacked inputs, one of them at the clamps, through the CLI; compared by --check too.
    x = np.stack([np.full((1, 32), 9.0, np.float32), np.linspace(-1, 1, 32, dtype=np.float32)[None]])
    np.save(tmp_path / "x.npy", x)
    r = _deploy(capsys, "autoencoder", [*SOC_ARGS, "--harts", "1", "--input", str(tmp_path / "x.npy")])
    assert r["check"]["bit_exact"] and r["inferences"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("name", [*NAMES, "qcnn"])
def test_every_model_on_4x4_int8_is_bit_exact(capsys, name: str) -> None:
    n = "2" if SMALL else "8"
    model = f"{name}.onnx" if name == "qcnn" else f"{name}.tflite"
    r = _deploy(capsys, model, ["--config", "4x4-int8", "--cores", "2", "--tiles", "2", "--random", n])
    assert r["check"]["bit_exact"] and r["inferences"] == int(n)

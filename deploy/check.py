"""The outside references pyard deploy compares with: LiteRT's reference kernels for .tflite files
(OpResolverType.BUILTIN_REF: the optimized kernels and XNNPACK give other int8 answers, DESIGN.md §5)
and onnxruntime for .onnx files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from deploy.model import DeployError


def reference_outputs(path: Path, inputs: list[npt.NDArray]) -> list[npt.NDArray]:
    """The model's output for each input, from LiteRT BUILTIN_REF or onnxruntime."""
    if path.suffix == ".onnx":
        return _onnxruntime(path, inputs)
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        raise DeployError("--check on a .tflite needs ai-edge-litert: pip install -e '.[deploy]'") from None
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    outs = []
    for x in inputs:
        it.set_tensor(inp["index"], np.asarray(x, inp["dtype"]).reshape(inp["shape"]))
        it.invoke()
        outs.append(it.get_tensor(out["index"]).copy())
    return outs


def _onnxruntime(path: Path, inputs: list[npt.NDArray]) -> list[npt.NDArray]:
    try:
        import onnxruntime as ort
    except ImportError:
        raise DeployError("--check on an .onnx needs onnxruntime: pip install -e '.[deploy]'") from None
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the plain kernels, no fusion
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return [sess.run(None, {name: x})[0] for x in inputs]

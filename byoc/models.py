"""Small ONNX models made here (onnx.helper, seeded weights, no downloads), for the BYOC backend's
checks against onnxruntime. Each builder returns the model and a seeded input."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["MODELS", "make_model"]

OPSET = 17


class _Graph:
    """Nodes and seeded initializers; weights scaled by 1/sqrt(fan-in) so activations stay O(1)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def name(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def weight(self, shape: tuple[int, ...], fan_in: int) -> str:
        name = self.name("w")
        data = (self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(data, name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def dense(self, x: str, k: int, n: int, relu: bool = True) -> str:
        y = self.node("Add", [self.node("MatMul", [x, self.weight((k, n), k)]), self.weight((n,), k)])
        return self.node("Relu", [y]) if relu else y

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, relu: bool = True) -> str:
        w, b = self.weight((cout, cin, k, k), cin * k * k), self.weight((cout,), cin * k * k)
        y = self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        return self.node("Relu", [y]) if relu else y

    def model(self, name: str, x_shape: list[int], out: str, out_shape: list[int]) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        onnx.checker.check_model(model)
        return model


def mlp(g: _Graph) -> tuple[onnx.ModelProto, list[int]]:
    """16 rows of 64 features -> 64 -> 32 -> 10, ReLU between (three dense layers)."""
    h = g.dense(g.dense("x", 64, 64), 64, 32)
    return g.model("mlp", [16, 64], g.dense(h, 32, 10, relu=False), [16, 10]), [16, 64]


def cnn(g: _Graph) -> tuple[onnx.ModelProto, list[int]]:
    """ResNet-8 style on 1x3x16x16: a stem conv, three residual stages (16, 32, 64 channels, the
    last two at stride 2 with a 1x1 shortcut), global average pool, a dense classifier."""
    x, c = g.conv("x", 3, 16), 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        y = g.conv(g.conv(x, c, cout, stride=stride), cout, cout, relu=False)
        short = x if stride == 1 and cout == c else g.conv(x, c, cout, k=1, stride=stride, relu=False)
        x, c = g.node("Relu", [g.node("Add", [y, short])]), cout
    pooled = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    return g.model("cnn", [1, 3, 16, 16], g.dense(pooled, 64, 10, relu=False), [1, 10]), [1, 3, 16, 16]


def split(g: _Graph) -> tuple[onnx.ModelProto, list[int]]:
    """Two dense layers with an operator pyard does not have between them (Sigmoid), so the graph
    is split into two pyard regions around a CPU one."""
    h = g.node("Sigmoid", [g.dense("x", 64, 64)])
    return g.model("split", [16, 64], g.dense(h, 64, 32), [16, 32]), [16, 64]


def lstm(g: _Graph) -> tuple[onnx.ModelProto, list[int]]:
    """An LSTM layer (6 steps, batch 16, 32 inputs, 32 hidden) unrolled in ONNX ops (TVM's ONNX
    frontend has no LSTM): per step and gate ``x_t W + h R + b``, sigmoid / tanh, the cell update;
    a dense head on the last hidden state."""
    steps, batch, n_in, hidden = 6, 16, 32, 32
    gates = {gate: (g.weight((n_in, hidden), n_in), g.weight((hidden, hidden), hidden), g.weight((hidden,), hidden))
             for gate in "ifgo"}  # fmt: skip
    h = c = _const(g, np.zeros((batch, hidden), np.float32))
    for t in range(steps):
        x_t = g.node("Gather", ["x", _const(g, np.array(t, np.int64))], axis=0)
        act = {}
        for gate, (w, r, b) in gates.items():
            pre = g.node("Add", [g.node("Add", [g.node("MatMul", [x_t, w]), g.node("MatMul", [h, r])]), b])
            act[gate] = g.node("Tanh" if gate == "g" else "Sigmoid", [pre])
        c = g.node("Add", [g.node("Mul", [act["f"], c]), g.node("Mul", [act["i"], act["g"]])])
        h = g.node("Mul", [act["o"], g.node("Tanh", [c])])
    return g.model("lstm", [steps, batch, n_in], g.dense(h, hidden, 10, relu=False), [batch, 10]), [steps, batch, n_in]


def qmlp(g: _Graph) -> tuple[onnx.ModelProto, list[int]]:
    """An int8 QDQ MLP (16 x 64 -> 64 -> 32): per-tensor scales, zero points 0, int8 weights; each
    MatMul between DequantizeLinear of its operands and a QuantizeLinear of its result."""
    zero = _const(g, np.array(0, np.int8))

    def qdq(x: str, scale: float) -> str:
        s = _const(g, np.array(scale, np.float32))
        return g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s, zero]), s, zero])

    def qdense(x: str, k: int, n: int, out_scale: float) -> str:
        wq = g.name("wq")
        g.inits.append(numpy_helper.from_array(g.rng.integers(-127, 128, (k, n)).astype(np.int8), wq))
        w = g.node("DequantizeLinear", [wq, _const(g, np.array(1 / (127 * np.sqrt(k)), np.float32)), zero])
        return qdq(g.node("MatMul", [x, w]), out_scale)

    h = qdense(qdq("x", 1 / 127), 64, 64, 3 / 127)
    return g.model("qmlp", [16, 64], qdense(h, 64, 32, 6 / 127), [16, 32]), [16, 64]


def qcnn(g: _Graph) -> tuple[onnx.ModelProto, list[int]]:
    """Two int8 QDQ convolutions on 1 x 3 x 16 x 16: 3 -> 8 channels, 3 x 3, with one weight scale
    (per tensor), then 8 -> 16, 3 x 3 at stride 2, with a weight scale per output channel
    (DequantizeLinear axis 0); per-tensor activation scales, zero points 0, no bias."""
    zero = _const(g, np.array(0, np.int8))

    def qdq(x: str, scale: float) -> str:
        s = _const(g, np.array(scale, np.float32))
        return g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s, zero]), s, zero])

    def qconv(x: str, cin: int, cout: int, stride: int, per_channel: bool, out_scale: float) -> str:
        wq = g.name("wq")
        g.inits.append(numpy_helper.from_array(g.rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8), wq))
        base = 1 / (127 * np.sqrt(cin * 9))
        if per_channel:  # scales spread over 0.5-2x the base: each channel needs its own
            scale = _const(g, (base * 2 ** g.rng.uniform(-1, 1, cout)).astype(np.float32))
            w = g.node("DequantizeLinear", [wq, scale, _const(g, np.zeros(cout, np.int8))], axis=0)
        else:
            w = g.node("DequantizeLinear", [wq, _const(g, np.array(base, np.float32)), zero])
        y = g.node("Conv", [x, w], kernel_shape=[3, 3], strides=[stride, stride], pads=[1, 1, 1, 1])
        return qdq(y, out_scale)

    h = qconv(qdq("x", 1 / 127), 3, 8, 1, False, 3 / 127)
    out = qconv(h, 8, 16, 2, True, 6 / 127)
    return g.model("qcnn", [1, 3, 16, 16], out, [1, 16, 8, 8]), [1, 3, 16, 16]


def _const(g: _Graph, value: npt.NDArray) -> str:
    name = g.name("c")
    g.inits.append(numpy_helper.from_array(value, name))
    return name


MODELS: dict[str, Callable[[_Graph], tuple[onnx.ModelProto, list[int]]]] = {
    "mlp": mlp, "cnn": cnn, "split": split, "lstm": lstm, "qmlp": qmlp, "qcnn": qcnn}  # fmt: skip


def make_model(name: str, seed: int = 0) -> tuple[onnx.ModelProto, npt.NDArray[np.float32]]:
    """The model ``name`` (MODELS) and a seeded input in [-1, 1)."""
    if name not in MODELS:
        raise ValueError(f"model: must be one of {', '.join(MODELS)}, got {name!r}")
    g = _Graph(seed)
    model, shape = MODELS[name](g)
    x = g.rng.uniform(-1, 1, shape).astype(np.float32)
    return model, x

"""Writes the small int8 test models of pyard deploy (docs/deploy.md) without TensorFlow.

    python deploy/models/make_models.py            # rewrites deploy/models/*.tflite and *.onnx

Each .tflite is a ``ModelT`` built with LiteRT's schema object API (ai_edge_litert.schema_py_generated)
and packed with flatbuffers. Weights come from a seeded generator; every activation scale is
calibrated on a float forward pass over random inputs, the way a post-training quantizer would
(per-channel weight scales for CONV_2D / DEPTHWISE_CONV_2D, per-tensor for FULLY_CONNECTED, int32
biases at input scale × weight scale). Some models take float input and output (QUANTIZE and
DEQUANTIZE at the edges), others int8 ones: both occur in the wild.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

OUT_DIR = Path(__file__).resolve().parent
Array = npt.NDArray[np.float64]
SAME, VALID = "SAME", "VALID"
CALIBRATION_INPUTS = 64


def _pad_amount(size: int, k: int, stride: int, padding: str) -> tuple[int, int]:
    """Output size and the top/left padding of TFLite's SAME / VALID."""
    if padding == VALID:
        return (size - k) // stride + 1, 0
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2


def _windows(x: Array, kh: int, kw: int, stride: int, padding: str, fill: float) -> Array:
    """(N, OH, OW, C, kh, kw) windows of NHWC ``x``; padding reads ``fill``."""
    _, h, w, _ = x.shape
    oh, pt = _pad_amount(h, kh, stride, padding)
    ow, pl = _pad_amount(w, kw, stride, padding)
    ph, pw = max((oh - 1) * stride + kh - h - pt, 0), max((ow - 1) * stride + kw - w - pl, 0)
    xp = np.pad(x, ((0, 0), (pt, ph), (pl, pw), (0, 0)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))
    return win[:, : (oh - 1) * stride + 1 : stride, : (ow - 1) * stride + 1 : stride]


@dataclass
class Tensor:
    index: int
    shape: tuple[int, ...]
    scale: float | None  # None: float32
    zero_point: int
    value: Array  # float values (the dequantized activations) over the calibration batch


@dataclass
class Builder:
    """One subgraph: tensors, constant buffers, operators; float values flow along for calibration."""

    name: str
    rng: np.random.Generator
    s: object  # the schema module
    tensors: list = field(default_factory=list)
    buffers: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    codes: list = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buffers.append(self.s.BufferT())  # buffer 0: the empty one, by convention

    # ---- tensors ---------------------------------------------------------------------------------
    def _tensor(self, shape, ttype, scales=None, zps=None, dim=0, data: bytes | None = None) -> int:
        t = self.s.TensorT()
        t.shape, t.type, t.name = list(shape), ttype, f"t{len(self.tensors)}"
        t.buffer = 0
        if data is not None:
            b = self.s.BufferT()
            b.data = np.frombuffer(data, dtype=np.uint8).copy()
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        if scales is not None:
            q = self.s.QuantizationParametersT()
            q.scale = [float(v) for v in scales]
            q.zeroPoint = [int(v) for v in zps]
            q.quantizedDimension = dim
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def _activation(self, value: Array, relu: bool = False, fixed: tuple[float, int] | None = None) -> Tensor:
        """An int8 activation tensor, its scale calibrated on ``value``'s range (ReLU: from 0)."""
        if fixed is not None:
            scale, zp = fixed
        else:
            lo, hi = (0.0 if relu else min(float(value.min()), 0.0)), max(float(value.max()), 1e-3)
            scale = float(np.float32((hi - lo) / 255.0))
            zp = int(np.clip(round(-128 - lo / scale), -128, 127))
        q = np.clip(np.round(value / scale) + zp, -128, 127)
        idx = self._tensor(value.shape[1:] and (1, *value.shape[1:]), self.s.TensorType.INT8, [scale], [zp])
        return Tensor(idx, (1, *value.shape[1:]), scale, zp, (q - zp) * scale)

    def input(self, shape: tuple[int, ...], as_float: bool) -> Tensor:
        x = self.rng.uniform(-1.0, 1.0, (CALIBRATION_INPUTS, *shape[1:]))
        if as_float:
            f = self._tensor(shape, self.s.TensorType.FLOAT32)
            self.inputs.append(f)
            q = self._activation(x)
            self._op("QUANTIZE", [f], [q.index], None, None)
            return q
        q = self._activation(x, fixed=(float(np.float32(2.0 / 255)), 0))
        self.inputs.append(q.index)
        return q

    def output(self, t: Tensor, as_float: bool) -> None:
        if as_float:
            f = self._tensor(t.shape, self.s.TensorType.FLOAT32)
            self._op("DEQUANTIZE", [t.index], [f], None, None)
            self.outputs.append(f)
        else:
            self.outputs.append(t.index)

    # ---- operators -------------------------------------------------------------------------------
    def _op(self, name: str, inputs: list[int], outputs: list[int], opt_type, options) -> None:
        code = getattr(self.s.BuiltinOperator, name)
        if code not in self.codes:
            self.codes.append(code)
        op = self.s.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = self.codes.index(code), inputs, outputs
        if options is not None:
            op.builtinOptionsType, op.builtinOptions = opt_type, options
        self.ops.append(op)

    def _weights_per_channel(self, w: Array, axis: int) -> tuple[bytes, Array, np.ndarray]:
        other = tuple(i for i in range(w.ndim) if i != axis)
        scales = (np.abs(w).max(axis=other) / 127.0).astype(np.float32)
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(np.int8)
        return q.tobytes(), q * scales.reshape(shape).astype(np.float64), scales

    def _bias(self, n: int, in_scale: float, w_scales: np.ndarray, spread: float) -> tuple[int, Array]:
        b_scales = (np.float32(in_scale) * w_scales).astype(np.float64)
        q = np.round(self.rng.normal(0, spread, n) / b_scales).astype(np.int32)
        idx = self._tensor((n,), self.s.TensorType.INT32, b_scales, [0] * n, 0, q.tobytes())
        return idx, q * b_scales

    def conv(self, x: Tensor, cout: int, k: int, stride: int, padding: str, relu: bool = True) -> Tensor:
        cin = x.shape[3]
        spread = self.rng.uniform(0.5, 1.5, (cout, 1, 1, 1))  # channels of different ranges: per-channel scales
        w = self.rng.normal(0, 1 / np.sqrt(k * k * cin), (cout, k, k, cin)) * spread
        data, wq, scales = self._weights_per_channel(w, 0)
        wi = self._tensor(w.shape, self.s.TensorType.INT8, scales, [0] * cout, 0, data)
        bi, b = self._bias(cout, x.scale, scales, 0.1)
        win = _windows(x.value, k, k, stride, padding, 0.0)  # (N, OH, OW, C, kh, kw)
        y = np.einsum("nhwcij,oijc->nhwo", win, wq) + b
        out = self._activation(np.maximum(y, 0) if relu else y, relu)
        o = self.s.Conv2DOptionsT()
        o.padding = getattr(self.s.Padding, padding)
        o.strideW = o.strideH = stride
        o.fusedActivationFunction = self.s.ActivationFunctionType.RELU if relu else 0
        self._op("CONV_2D", [x.index, wi, bi], [out.index], self.s.BuiltinOptions.Conv2DOptions, o)
        return out

    def depthwise(self, x: Tensor, k: int, stride: int, padding: str, relu: bool = True) -> Tensor:
        c = x.shape[3]
        w = self.rng.normal(0, 1 / k, (1, k, k, c))
        data, wq, scales = self._weights_per_channel(w, 3)
        wi = self._tensor(w.shape, self.s.TensorType.INT8, scales, [0] * c, 3, data)
        bi, b = self._bias(c, x.scale, scales, 0.1)
        win = _windows(x.value, k, k, stride, padding, 0.0)
        y = np.einsum("nhwcij,ijc->nhwc", win, wq[0]) + b
        out = self._activation(np.maximum(y, 0) if relu else y, relu)
        o = self.s.DepthwiseConv2DOptionsT()
        o.padding = getattr(self.s.Padding, padding)
        o.strideW = o.strideH = stride
        o.depthMultiplier = 1
        o.fusedActivationFunction = self.s.ActivationFunctionType.RELU if relu else 0
        self._op("DEPTHWISE_CONV_2D", [x.index, wi, bi], [out.index], self.s.BuiltinOptions.DepthwiseConv2DOptions, o)
        return out

    def pool(self, x: Tensor, kind: str, k: int, stride: int, padding: str = VALID) -> Tensor:
        fill = -np.inf if kind == "MAX_POOL_2D" else np.nan
        win = _windows(x.value, k, k, stride, padding, fill)
        y = win.max(axis=(4, 5)) if kind == "MAX_POOL_2D" else np.nanmean(win, axis=(4, 5))
        out = self._activation(y, fixed=(x.scale, x.zero_point))  # TFLite: pools keep the input's scale
        o = self.s.Pool2DOptionsT()
        o.padding = getattr(self.s.Padding, padding)
        o.strideW = o.strideH = stride
        o.filterWidth = o.filterHeight = k
        self._op(kind, [x.index], [out.index], self.s.BuiltinOptions.Pool2DOptions, o)
        return out

    def reshape(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        si = self._tensor((len(shape),), self.s.TensorType.INT32, data=np.array(shape, np.int32).tobytes())
        out = Tensor(0, shape, x.scale, x.zero_point, x.value.reshape((-1, *shape[1:])))
        out.index = self._tensor(shape, self.s.TensorType.INT8, [x.scale], [x.zero_point])
        o = self.s.ReshapeOptionsT()
        o.newShape = list(shape)
        self._op("RESHAPE", [x.index, si], [out.index], self.s.BuiltinOptions.ReshapeOptions, o)
        return out

    def fc(self, x: Tensor, n: int, relu: bool = False) -> Tensor:
        k = x.shape[-1]
        w = self.rng.normal(0, 1 / np.sqrt(k), (n, k))
        scale = np.float32(np.abs(w).max() / 127.0)
        wq8 = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        wi = self._tensor(w.shape, self.s.TensorType.INT8, [scale], [0], 0, wq8.tobytes())
        bi, b = self._bias(n, x.scale, np.array([scale] * n, np.float32), 0.1)
        y = x.value.reshape(len(x.value), -1) @ (wq8 * float(scale)).T + b
        out = self._activation(np.maximum(y, 0) if relu else y, relu)
        o = self.s.FullyConnectedOptionsT()
        o.fusedActivationFunction = self.s.ActivationFunctionType.RELU if relu else 0
        self._op("FULLY_CONNECTED", [x.index, wi, bi], [out.index], self.s.BuiltinOptions.FullyConnectedOptions, o)
        return out

    def add(self, a: Tensor, b: Tensor, relu: bool = True) -> Tensor:
        y = a.value + b.value
        out = self._activation(np.maximum(y, 0) if relu else y, relu)
        o = self.s.AddOptionsT()
        o.fusedActivationFunction = self.s.ActivationFunctionType.RELU if relu else 0
        self._op("ADD", [a.index, b.index], [out.index], self.s.BuiltinOptions.AddOptions, o)
        return out

    def softmax(self, x: Tensor) -> Tensor:
        e = np.exp(x.value - x.value.max(axis=-1, keepdims=True))
        out = self._activation(e / e.sum(axis=-1, keepdims=True), fixed=(1 / 256, -128))  # TFLite's required scale
        o = self.s.SoftmaxOptionsT()
        o.beta = 1.0
        self._op("SOFTMAX", [x.index], [out.index], self.s.BuiltinOptions.SoftmaxOptions, o)
        return out

    def finish(self) -> bytes:
        import flatbuffers

        sg = self.s.SubGraphT()
        sg.tensors, sg.inputs, sg.outputs, sg.operators = self.tensors, self.inputs, self.outputs, self.ops
        sg.name = "main"
        m = self.s.ModelT()
        m.version, m.description, m.buffers, m.subgraphs = 3, f"pyard deploy test model {self.name}", self.buffers, [sg]
        m.operatorCodes = []
        for code in self.codes:
            oc = self.s.OperatorCodeT()
            oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), OP_VERSIONS.get(code, 1)
            m.operatorCodes.append(oc)
        b = flatbuffers.Builder(4096)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


OP_VERSIONS: dict[int, int] = {}  # filled from the schema at run time: int8 versions of each builtin


def _versions(s) -> None:
    B = s.BuiltinOperator
    OP_VERSIONS.update(
        {
            B.CONV_2D: 3,
            B.DEPTHWISE_CONV_2D: 3,
            B.FULLY_CONNECTED: 4,
            B.MAX_POOL_2D: 2,
            B.AVERAGE_POOL_2D: 2,
            B.ADD: 2,
            B.SOFTMAX: 2,
            B.QUANTIZE: 2,
            B.DEQUANTIZE: 2,
            B.RESHAPE: 1,
        }
    )


# ---- the models ----------------------------------------------------------------------------------
def lenet(b: Builder) -> None:
    """LeNet-like digit classifier: float in/out, per-channel convolutions, max pools, FC, softmax."""
    x = b.input((1, 16, 16, 1), as_float=True)
    x = b.pool(b.conv(x, 6, 3, 1, VALID), "MAX_POOL_2D", 2, 2)
    x = b.pool(b.conv(x, 12, 3, 1, VALID), "MAX_POOL_2D", 2, 2)
    x = b.reshape(x, (1, int(np.prod(x.shape[1:]))))
    x = b.fc(x, 24, relu=True)
    b.output(b.softmax(b.fc(x, 10)), as_float=True)


def kws(b: Builder) -> None:
    """Keyword spotting, DS-CNN-like: int8 in/out, a strided conv, depthwise-separable blocks, average pool."""
    x = b.input((1, 12, 10, 1), as_float=False)
    x = b.conv(x, 16, 3, 2, SAME)
    for _ in range(2):
        x = b.conv(b.depthwise(x, 3, 1, SAME), 16, 1, 1, VALID)
    x = b.pool(x, "AVERAGE_POOL_2D", x.shape[1], 1) if x.shape[1] == x.shape[2] else _avg_all(b, x)
    x = b.reshape(x, (1, x.shape[3]))
    b.output(b.fc(x, 6), as_float=False)


def _avg_all(b: Builder, x: Tensor) -> Tensor:
    """A global average pool over a non-square map (one AVERAGE_POOL_2D whose window is the map)."""
    y = x.value.mean(axis=(1, 2), keepdims=True)
    out = b._activation(y, fixed=(x.scale, x.zero_point))
    o = b.s.Pool2DOptionsT()
    o.padding, o.strideW, o.strideH = b.s.Padding.VALID, 1, 1
    o.filterHeight, o.filterWidth = x.shape[1], x.shape[2]
    b._op("AVERAGE_POOL_2D", [x.index], [out.index], b.s.BuiltinOptions.Pool2DOptions, o)
    return out


def resnet8(b: Builder) -> None:
    """ResNet-8-like (MLPerf Tiny image classification, scaled down): int8 in/out, residual ADDs."""
    x = b.conv(b.input((1, 8, 8, 3), as_float=False), 8, 3, 1, SAME)
    for _ in range(2):
        y = b.conv(b.conv(x, 8, 3, 1, SAME), 8, 3, 1, SAME, relu=False)
        x = b.add(x, y)
    x = b.pool(x, "AVERAGE_POOL_2D", 8, 8)
    x = b.reshape(x, (1, 8))
    b.output(b.softmax(b.fc(x, 10)), as_float=False)


def autoencoder(b: Builder) -> None:
    """Fully-connected autoencoder (MLPerf Tiny anomaly detection, scaled down): float in/out, an FC stack."""
    x = b.input((1, 32), as_float=True)
    for n in (24, 8, 24):
        x = b.fc(x, n, relu=True)
    b.output(b.fc(x, 32), as_float=True)


MODELS = {"lenet": lenet, "kws": kws, "resnet8": resnet8, "autoencoder": autoencoder}


def build_tflite(name: str) -> bytes:
    import ai_edge_litert.schema_py_generated as s

    _versions(s)
    b = Builder(name, np.random.default_rng(sorted(MODELS).index(name) + 2026), s)
    MODELS[name](b)
    return b.finish()


def main() -> int:
    sys.path.insert(0, str(OUT_DIR.parents[1]))  # run as a script from anywhere
    for name in MODELS:
        data = build_tflite(name)
        (OUT_DIR / f"{name}.tflite").write_bytes(data)
        print(f"{name}.tflite: {len(data)} bytes")
    from deploy.models.make_onnx import build_onnx

    for name, data in build_onnx().items():
        (OUT_DIR / f"{name}.onnx").write_bytes(data)
        print(f"{name}.onnx: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

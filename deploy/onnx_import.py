"""ONNX int8 models (QLinear operators) to pyard deploy's layer table.

Supported: QuantizeLinear at the float input, QLinearConv (group 1, per-tensor or per-channel
weights with zero point 0), MaxPool, Flatten / Reshape, QLinearMatMul (per-tensor weights, zero point
0), DequantizeLinear at the float output. Activations are stored NHWC like TFLite's: the host
transposes an NCHW input, weights are reordered, and a matmul after a flatten of C×H×W gets its rows
permuted to H×W×C. onnxruntime requantizes in float (MlasRequantizeOutput: float(acc) × (input scale ×
weight scale / output scale), clamped, rounded half to even), which the layers record as
``rounding = "float"``; QuantizeLinear rounds half to even too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from deploy.model import DeployError, Layer, Model, TensorInfo

ONNX_OPS = ("QuantizeLinear", "QLinearConv", "MaxPool", "Flatten", "Reshape", "QLinearMatMul", "DequantizeLinear")


def load_onnx(path: Path) -> Model:
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise DeployError("reading .onnx files needs onnx: pip install -e '.[deploy]'") from None
    try:
        m = onnx.load(str(path))
    except Exception as err:  # protobuf's DecodeError and friends
        raise DeployError(f"model = {str(path)!r} is invalid: not an ONNX model ({type(err).__name__})") from None
    return _Onnx(m, numpy_helper, path.stem).run()


class _Onnx:
    def __init__(self, m: object, numpy_helper: object, name: str) -> None:
        self.g, self.name = m.graph, name
        self.consts = {t.name: numpy_helper.to_array(t) for t in self.g.initializer}
        self.ids: dict[str, int] = {}
        self.tensors: dict[int, TensorInfo] = {}
        self.chw: dict[str, tuple[int, int, int]] = {}  # flattened tensors still in ONNX's C, H, W order

    def _id(self, name: str, info: TensorInfo) -> int:
        self.ids[name] = len(self.ids)
        self.tensors[self.ids[name]] = info
        return self.ids[name]

    def _q(self, scale: str, zp: str) -> tuple[float, int]:
        s, z = self.consts[scale], self.consts[zp]
        if z.dtype != np.int8:
            raise DeployError(f"zero point {zp}: type {z.dtype}: allowed int8")
        return float(np.float32(s)), int(z)

    def run(self) -> Model:
        if len(self.g.input) != 1 or len(self.g.output) != 1:
            raise DeployError("model: allowed one input and one output")
        dims = tuple(d.dim_value for d in self.g.input[0].type.tensor_type.shape.dim)
        self.in_shape = dims
        self._id(self.g.input[0].name, TensorInfo(_nhwc(dims), "float32"))
        layers = [self._layer(n) for n in self.g.node]
        model = Model(self.name, self.tensors, layers, [0], [self.ids[self.g.output[0].name]])
        model.input_nchw = len(dims) == 4
        return model

    def _layer(self, n: object) -> Layer:
        if n.op_type not in ONNX_OPS:
            raise DeployError(f"operator {n.op_type}: unsupported: allowed {', '.join(ONNX_OPS)}")
        return getattr(self, "_" + n.op_type.lower())(n)

    def _quantizelinear(self, n: object) -> Layer:
        s, zp = self._q(n.input[1], n.input[2])
        x = self.tensors[self.ids[n.input[0]]]
        out = self._id(n.output[0], TensorInfo(x.shape, "int8", s, zp))
        return Layer("QUANTIZE", (self.ids[n.input[0]],), out, extra={"half_even": 1})

    def _dequantizelinear(self, n: object) -> Layer:
        x = self.tensors[self.ids[n.input[0]]]
        out = self._id(n.output[0], TensorInfo(x.shape, "float32"))
        return Layer("DEQUANTIZE", (self.ids[n.input[0]],), out)

    def _requant(self, x_s: float, w_s: npt.NDArray, y_s: float, n: int) -> npt.NDArray[np.int64]:
        """The float32 output scales (as bit patterns): x_s · w_s / y_s, in float32 like onnxruntime."""
        scales = np.float32(x_s) * w_s.astype(np.float32).reshape(-1) / np.float32(y_s)
        scales = np.broadcast_to(scales.astype(np.float32), (n,))
        return scales.view(np.int32).astype(np.int64)

    def _qlinearconv(self, n: object) -> Layer:
        attrs = {a.name: a for a in n.attribute}
        if "group" in attrs and attrs["group"].i != 1:
            raise DeployError(f"operator QLinearConv: group {attrs['group'].i}: allowed 1")
        if "dilations" in attrs and any(d != 1 for d in attrs["dilations"].ints):
            raise DeployError("operator QLinearConv: dilation: allowed 1")
        x_id = self.ids[n.input[0]]
        x = self.tensors[x_id]
        w = self.consts[n.input[3]]  # OIHW
        if np.any(self.consts[n.input[5]] != 0):
            raise DeployError("operator QLinearConv: weight zero point not 0: allowed symmetric weights")
        ys, yzp = self._q(n.input[6], n.input[7])
        pads = list(attrs["pads"].ints) if "pads" in attrs else [0, 0, 0, 0]
        strides = list(attrs["strides"].ints) if "strides" in attrs else [1, 1]
        kh, kw = w.shape[2], w.shape[3]
        oh = (x.shape[1] + pads[0] + pads[2] - kh) // strides[0] + 1
        ow = (x.shape[2] + pads[1] + pads[3] - kw) // strides[1] + 1
        out = self._id(n.output[0], TensorInfo((1, oh, ow, w.shape[0]), "int8", ys, yzp))
        bias = self.consts[n.input[8]] if len(n.input) > 8 and n.input[8] else np.zeros(w.shape[0], np.int32)
        mult = self._requant(x.scale, self.consts[n.input[4]], ys, w.shape[0])
        return Layer("CONV_2D", (x_id,), out, np.ascontiguousarray(w.transpose(0, 2, 3, 1)), bias.astype(np.int32),
                     mult, np.zeros_like(mult), kh, kw, (strides[0], strides[1]), (pads[0], pads[1]),
                     rounding="float")  # fmt: skip

    def _maxpool(self, n: object) -> Layer:
        attrs = {a.name: a for a in n.attribute}
        k = list(attrs["kernel_shape"].ints)
        s = list(attrs["strides"].ints) if "strides" in attrs else [1, 1]
        pads = list(attrs["pads"].ints) if "pads" in attrs else [0, 0, 0, 0]
        x_id = self.ids[n.input[0]]
        x = self.tensors[x_id]
        oh = (x.shape[1] + pads[0] + pads[2] - k[0]) // s[0] + 1
        ow = (x.shape[2] + pads[1] + pads[3] - k[1]) // s[1] + 1
        out = self._id(n.output[0], TensorInfo((1, oh, ow, x.shape[3]), "int8", x.scale, x.zero_point))
        return Layer("MAX_POOL_2D", (x_id,), out, kh=k[0], kw=k[1], stride=(s[0], s[1]), pad=(pads[0], pads[1]))

    def _flatten(self, n: object) -> Layer:
        x_id = self.ids[n.input[0]]
        x = self.tensors[x_id]
        out = self._id(n.output[0], TensorInfo((1, x.size), "int8", x.scale, x.zero_point))
        if len(x.shape) == 4 and x.shape[1] * x.shape[2] > 1 and x.shape[3] > 1:
            self.chw[n.output[0]] = (x.shape[3], x.shape[1], x.shape[2])
        return Layer("RESHAPE", (x_id,), out)

    _reshape = _flatten

    def _qlinearmatmul(self, n: object) -> Layer:
        x_id = self.ids[n.input[0]]
        x = self.tensors[x_id]
        w = self.consts[n.input[3]]  # K × N
        if np.any(self.consts[n.input[5]] != 0) or self.consts[n.input[4]].size != 1:
            raise DeployError("operator QLinearMatMul: weights: allowed per-tensor, zero point 0")
        if n.input[0] in self.chw:  # rows in C, H, W order → H, W, C (our activations are NHWC)
            c, h, wd = self.chw[n.input[0]]
            w = w.reshape(c, h, wd, -1).transpose(1, 2, 0, 3).reshape(c * h * wd, -1)
        ys, yzp = self._q(n.input[6], n.input[7])
        out = self._id(n.output[0], TensorInfo((1, w.shape[1]), "int8", ys, yzp))
        mult = self._requant(x.scale, self.consts[n.input[4]], ys, w.shape[1])
        return Layer("FULLY_CONNECTED", (x_id,), out, np.ascontiguousarray(w.T), np.zeros(w.shape[1], np.int32),
                     mult, np.zeros_like(mult), rounding="float")  # fmt: skip


def _nhwc(dims: tuple[int, ...]) -> tuple[int, ...]:
    return (dims[0], dims[2], dims[3], dims[1]) if len(dims) == 4 else dims

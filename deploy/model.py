"""The layer table of pyard deploy: an int8 model, read from a .tflite file, lowered to dataclasses.

The .tflite is read with LiteRT's schema object API (``ModelT.InitFromPackedBuf``); every operator,
tensor type and option is validated here and turned into a :class:`Layer` with its requantization
constants computed the way LiteRT's kernels compute them (deploy/quant.py). Anything outside the
supported subset raises :class:`DeployError` with one line naming the operator and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from deploy.quant import quantize_multiplier

__all__ = ["SUPPORTED_OPS", "DeployError", "Layer", "Model", "TensorInfo", "load_model"]

SUPPORTED_OPS = (
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D", "ADD", "SOFTMAX",
    "RESHAPE", "QUANTIZE", "DEQUANTIZE",
)  # fmt: skip
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
ADD_LEFT_SHIFT = 20  # TFLite's int8 ADD: inputs are scaled by 2^20 before the rescale
SOFTMAX_DIFF_BITS = 5  # integer bits of the scaled input differences (gemmlowp F5)


class DeployError(ValueError):
    """A model pyard deploy cannot take: the message is one line naming the cause and what is allowed."""


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]
    dtype: str  # "int8" or "float32" (the float edges of a model with QUANTIZE / DEQUANTIZE)
    scale: float = 1.0
    zero_point: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


@dataclass
class Layer:
    """One operator. Weights: CONV_2D OHWI, DEPTHWISE_CONV_2D 1HWC, FULLY_CONNECTED (N, K), all int8;
    bias int32 per output channel; multiplier/shift: the requantization per output channel."""

    op: str
    inputs: tuple[int, ...]
    output: int
    weights: npt.NDArray[np.int8] | None = None
    bias: npt.NDArray[np.int32] | None = None
    multiplier: npt.NDArray[np.int64] | None = None
    shift: npt.NDArray[np.int64] | None = None
    kh: int = 1
    kw: int = 1
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)  # top, left (TFLite SAME puts the odd row/column at the bottom/right)
    act_min: int = -128
    act_max: int = 127
    extra: dict[str, int] = field(default_factory=dict)  # ADD's and SOFTMAX's constants
    # "" (LiteRT: per operator, deploy/quant.py), "single" / "double" (forced), or "float"
    # (onnxruntime: float(acc) · scale, rounded half to even; multiplier holds the float32 scale's bits)
    rounding: str = ""


@dataclass
class Model:
    name: str
    tensors: dict[int, TensorInfo]
    layers: list[Layer]
    inputs: list[int]
    outputs: list[int]
    input_nchw: bool = False  # an ONNX image input: transposed to NHWC before the first layer


def load_model(path: Path | str) -> Model:
    """Reads and validates a .tflite or .onnx model."""
    path = Path(path)
    if not path.is_file():
        raise DeployError(f"model = {str(path)!r} is invalid: allowed an existing .tflite or .onnx file")
    if path.suffix == ".onnx":
        from deploy.onnx_import import load_onnx

        return load_onnx(path)
    if path.suffix != ".tflite":
        raise DeployError(f"model = {str(path)!r} is invalid: allowed a .tflite or .onnx file")
    return load_tflite(path)


def load_tflite(path: Path) -> Model:
    try:
        import ai_edge_litert.schema_py_generated as schema
    except ImportError:
        raise DeployError("reading .tflite files needs ai-edge-litert: pip install -e '.[deploy]'") from None
    data = path.read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise DeployError(f"model = {str(path)!r} is invalid: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        m = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    except Exception as err:  # a corrupt flatbuffer raises whatever the generated reader hits
        why = type(err).__name__
        raise DeployError(f"model = {str(path)!r} is invalid: cannot read the flatbuffer ({why})") from None
    return _Lowering(m, schema, path.stem).run()


class _Lowering:
    def __init__(self, m: object, schema: object, name: str) -> None:
        self.m, self.s, self.name = m, schema, name
        if len(m.subgraphs or []) != 1:
            raise DeployError(f"model: {len(m.subgraphs or [])} subgraphs: allowed exactly one")
        self.g = m.subgraphs[0]
        self.op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        self.type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
        self.act_names = {v: k for k, v in vars(schema.ActivationFunctionType).items() if not k.startswith("_")}
        self.tensors: dict[int, TensorInfo] = {}

    def run(self) -> Model:
        layers = [self._layer(op) for op in self.g.operators or []]
        if not layers:
            raise DeployError("model: no operators: allowed a model with at least one")
        ins = [int(i) for i in self.g.inputs]
        outs = [int(i) for i in self.g.outputs]
        for i in ins + outs:
            if i not in self.tensors:  # an edge tensor no operator reads or writes
                self._info(i)
        return Model(self.name, self.tensors, layers, ins, outs)

    # ---- tensors ---------------------------------------------------------------------------------
    def _info(self, i: int, allowed: tuple[str, ...] = ("INT8",)) -> TensorInfo:
        t = self.g.tensors[i]
        tname = self.type_names.get(t.type, str(t.type))
        if tname not in allowed:
            raise DeployError(f"tensor {_name(t)}: type {tname}: allowed {', '.join(allowed)}")
        shape = tuple(int(d) for d in t.shape)
        if shape and shape[0] != 1 and len(shape) == 4:
            raise DeployError(f"tensor {_name(t)}: batch {shape[0]}: allowed batch 1")
        q = t.quantization
        if tname == "INT8":
            if q is None or q.scale is None or len(q.scale) == 0:
                raise DeployError(f"tensor {_name(t)}: int8 without quantization: allowed quantized int8 tensors")
            info = TensorInfo(shape, "int8", float(np.float32(q.scale[0])), int(q.zeroPoint[0]))
        else:
            info = TensorInfo(shape, "float32")
        self.tensors[i] = info
        return info

    def _const(self, i: int, dtype: type) -> npt.NDArray:
        t = self.g.tensors[i]
        buf = self.m.buffers[t.buffer].data if t.buffer < len(self.m.buffers) else None
        if buf is None or len(buf) == 0:
            raise DeployError(f"tensor {_name(t)}: weights/bias not constant: allowed constant weights and biases")
        return np.frombuffer(np.asarray(buf, np.uint8).tobytes(), dtype).reshape([int(d) for d in t.shape])

    def _scales(self, i: int) -> npt.NDArray[np.float32]:
        q = self.g.tensors[i].quantization
        return np.asarray(q.scale, np.float32)

    # ---- operators -------------------------------------------------------------------------------
    def _layer(self, op: object) -> Layer:
        code = self.m.operatorCodes[op.opcodeIndex]
        name = self.op_names.get(max(int(code.builtinCode), int(code.deprecatedBuiltinCode)), "CUSTOM")
        if name not in SUPPORTED_OPS:
            raise DeployError(f"operator {name}: unsupported: allowed {', '.join(SUPPORTED_OPS)}")
        return getattr(self, "_" + name.lower())(name, op)

    def _act(self, op_name: str, opts: object, out: TensorInfo) -> tuple[int, int]:
        """CalculateActivationRangeQuantized: the clamp of a fused activation, in output units."""
        act = self.act_names.get(opts.fusedActivationFunction, str(opts.fusedActivationFunction))
        if act not in ACTIVATIONS:
            raise DeployError(f"operator {op_name}: fused activation {act}: allowed {', '.join(ACTIVATIONS)}")

        def q(f: float) -> int:
            v = np.float32(f) / np.float32(out.scale)
            return out.zero_point + int(np.trunc(v + np.copysign(np.float32(0.5), v)))

        lo, hi = {"NONE": (-128, 127), "RELU": (q(0), 127), "RELU6": (q(0), q(6)), "RELU_N1_TO_1": (q(-1), q(1))}[act]
        return max(lo, -128), min(hi, 127)

    def _geometry(self, op_name: str, opts: object, x: TensorInfo, kh: int, kw: int) -> dict:
        if getattr(opts, "dilationHFactor", 1) != 1 or getattr(opts, "dilationWFactor", 1) != 1:
            raise DeployError(f"operator {op_name}: dilation: allowed dilation 1")
        pad_names = {v: k for k, v in vars(self.s.Padding).items() if not k.startswith("_")}
        padding, sh, sw = pad_names[opts.padding], int(opts.strideH), int(opts.strideW)
        pads = []
        for size, k, s in ((x.shape[1], kh, sh), (x.shape[2], kw, sw)):
            out = -(-size // s) if padding == "SAME" else (size - k) // s + 1
            pads.append(max((out - 1) * s + k - size, 0) // 2 if padding == "SAME" else 0)
        return {"kh": kh, "kw": kw, "stride": (sh, sw), "pad": (pads[0], pads[1])}

    def _requant(self, in_scale: float, w_scales: npt.NDArray[np.float32], out_scale: float, n: int, fc: bool):
        # Conv (PopulateConvolutionQuantizationParams) multiplies in double; FC
        # (GetQuantizedConvolutionMultipler) forms input·filter scale in float first.
        if fc:
            real = [float(np.float32(in_scale) * np.float32(s)) / out_scale for s in w_scales]
        else:
            real = [in_scale * float(s) / out_scale for s in w_scales]
        if len(real) == 1:
            real = real * n
        ms = [quantize_multiplier(r) for r in real]
        return np.array([m for m, _ in ms], np.int64), np.array([s for _, s in ms], np.int64)

    def _bias(self, op: object, n: int) -> npt.NDArray[np.int32]:
        if len(op.inputs) < 3 or op.inputs[2] < 0:
            return np.zeros(n, np.int32)
        b = self._const(op.inputs[2], np.int32).reshape(-1)
        if len(b) != n:
            raise DeployError(f"bias of {len(b)} values: allowed one per output channel ({n})")
        return b.copy()

    def _conv_2d(self, name: str, op: object) -> Layer:
        x, out = self._info(op.inputs[0]), self._info(op.outputs[0])
        w = self._const(op.inputs[1], np.int8)
        geo = self._geometry(name, op.builtinOptions, x, w.shape[1], w.shape[2])
        if w.shape[3] != x.shape[3]:
            raise DeployError(f"operator {name}: grouped convolution: allowed filters over all input channels")
        mult, shift = self._requant(x.scale, self._scales(op.inputs[1]), out.scale, w.shape[0], fc=False)
        lo, hi = self._act(name, op.builtinOptions, out)
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]), w.copy(), self._bias(op, w.shape[0]),
                     mult, shift, act_min=lo, act_max=hi, **geo)  # fmt: skip

    def _depthwise_conv_2d(self, name: str, op: object) -> Layer:
        x, out = self._info(op.inputs[0]), self._info(op.outputs[0])
        w = self._const(op.inputs[1], np.int8)
        if op.builtinOptions.depthMultiplier != 1 or w.shape[3] != x.shape[3]:
            raise DeployError(f"operator {name}: depth multiplier {op.builtinOptions.depthMultiplier}: allowed 1")
        geo = self._geometry(name, op.builtinOptions, x, w.shape[1], w.shape[2])
        mult, shift = self._requant(x.scale, self._scales(op.inputs[1]), out.scale, w.shape[3], fc=False)
        lo, hi = self._act(name, op.builtinOptions, out)
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]), w.copy(), self._bias(op, w.shape[3]),
                     mult, shift, act_min=lo, act_max=hi, **geo)  # fmt: skip

    def _fully_connected(self, name: str, op: object) -> Layer:
        x, out = self._info(op.inputs[0]), self._info(op.outputs[0])
        w = self._const(op.inputs[1], np.int8)
        opts = op.builtinOptions
        if opts.weightsFormat != 0 or w.ndim != 2 or x.size != w.shape[1]:
            raise DeployError(f"operator {name}: weights {w.shape} for input {x.shape}: allowed (N, K) default format")
        scales = self._scales(op.inputs[1])
        if len(scales) != 1:
            raise DeployError(f"operator {name}: per-channel weights: allowed per-tensor FULLY_CONNECTED weights")
        mult, shift = self._requant(x.scale, scales, out.scale, w.shape[0], fc=True)
        lo, hi = self._act(name, opts, out)
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]), w.copy(), self._bias(op, w.shape[0]),
                     mult, shift, act_min=lo, act_max=hi)  # fmt: skip

    def _pool(self, name: str, op: object) -> Layer:
        x, out = self._info(op.inputs[0]), self._info(op.outputs[0])
        if (x.scale, x.zero_point) != (out.scale, out.zero_point):
            raise DeployError(f"operator {name}: output quantization differs from the input's: allowed equal")
        opts = op.builtinOptions
        geo = self._geometry(name, opts, x, int(opts.filterHeight), int(opts.filterWidth))
        lo, hi = self._act(name, opts, out)
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]), act_min=lo, act_max=hi, **geo)

    _max_pool_2d = _pool
    _average_pool_2d = _pool

    def _add(self, name: str, op: object) -> Layer:
        a, b, out = (self._info(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
        if a.shape != b.shape:
            raise DeployError(f"operator {name}: broadcast {a.shape} + {b.shape}: allowed equal shapes")
        twice_max = 2 * max(a.scale, b.scale)
        m1, s1 = quantize_multiplier(a.scale / twice_max)
        m2, s2 = quantize_multiplier(b.scale / twice_max)
        mo, so = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * out.scale))
        lo, hi = self._act(name, op.builtinOptions, out)
        extra = {"m1": m1, "s1": s1, "m2": m2, "s2": s2, "mo": mo, "so": so}
        return Layer(name, (int(op.inputs[0]), int(op.inputs[1])), int(op.outputs[0]), act_min=lo, act_max=hi,
                     extra=extra)  # fmt: skip

    def _softmax(self, name: str, op: object) -> Layer:
        x, out = self._info(op.inputs[0]), self._info(op.outputs[0])
        if (out.scale, out.zero_point) != (1 / 256, -128):
            got = f"output scale {out.scale}, zero point {out.zero_point}"
            raise DeployError(f"operator {name}: {got}: allowed scale 1/256, zero point -128")
        real = min(float(op.builtinOptions.beta) * x.scale * (1 << (31 - SOFTMAX_DIFF_BITS)), 2.0**31 - 1)
        m, left = quantize_multiplier(real)
        radius = int(np.floor(((1 << SOFTMAX_DIFF_BITS) - 1) * (1 << (31 - SOFTMAX_DIFF_BITS)) / (1 << left)))
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]), extra={"m": m, "left": left, "diff_min": -radius})

    def _reshape(self, name: str, op: object) -> Layer:
        x, out = self._info(op.inputs[0]), self._info(op.outputs[0])
        if x.size != out.size or (x.scale, x.zero_point) != (out.scale, out.zero_point):
            raise DeployError(f"operator {name}: {x.shape} -> {out.shape}: allowed the same elements and quantization")
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]))

    def _quantize(self, name: str, op: object) -> Layer:
        self._info(op.inputs[0], ("FLOAT32",))
        self._info(op.outputs[0])
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]))

    def _dequantize(self, name: str, op: object) -> Layer:
        self._info(op.inputs[0])
        self._info(op.outputs[0], ("FLOAT32",))
        return Layer(name, (int(op.inputs[0]),), int(op.outputs[0]))


def _name(t: object) -> str:
    n = t.name
    return n.decode() if isinstance(n, bytes) else str(n)

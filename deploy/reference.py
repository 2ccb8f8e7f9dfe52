"""A NumPy executor of the layer table that reproduces LiteRT's reference kernels (BUILTIN_REF) bit for bit.

Each function mirrors one kernel of tensorflow/lite/kernels/internal/reference (integer_ops/*.h):
int32 accumulation of (input − zero point) · weight + bias, the requantization of deploy/quant.py,
the output zero point and the fused activation's clamp. The firmware's C executor (deploy/executor.c)
does the same arithmetic; its outputs are checked against this and against LiteRT.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from deploy.model import Layer, Model, TensorInfo
from deploy.quant import (
    exp_on_negative_values,
    mbqm_double,
    multiply_by_quantized_multiplier,
    reciprocal,
    rounding_divide_by_pot,
    srdhm,
)

I8 = npt.NDArray[np.int8]
I64 = npt.NDArray[np.int64]


def run_model(model: Model, inputs: list[npt.NDArray]) -> list[npt.NDArray]:
    """Outputs of ``model`` for ``inputs`` (float32 or int8, as the model's inputs are typed)."""
    values: dict[int, npt.NDArray] = {}
    for i, x in zip(model.inputs, inputs, strict=True):
        info = model.tensors[i]
        values[i] = to_nhwc(model, np.asarray(x, np.float32 if info.dtype == "float32" else np.int8))
    for layer in model.layers:
        args = [values[i] for i in layer.inputs]
        out = model.tensors[layer.output]
        values[layer.output] = OPS[layer.op](layer, [model.tensors[i] for i in layer.inputs], out, *args)
    return [values[i] for i in model.outputs]


def to_nhwc(model: Model, x: npt.NDArray) -> npt.NDArray:
    """A model input in the layer table's layout (ONNX images are NCHW)."""
    info = model.tensors[model.inputs[0]]
    if model.input_nchw:
        return x.reshape(info.shape[0], info.shape[3], info.shape[1], info.shape[2]).transpose(0, 2, 3, 1)
    return x.reshape(info.shape)


def _finish(acc: I64, layer: Layer, out: TensorInfo, channel_axis: int = -1) -> I8:
    """Requantize int32 accumulators per output channel, add the zero point, clamp."""
    shape = [1] * acc.ndim
    shape[channel_axis] = -1
    if layer.rounding == "float":  # onnxruntime: MlasRequantizeOutput
        scale = layer.multiplier.astype(np.int32).view(np.float32).reshape(shape)
        v = acc.astype(np.float32) * scale
        v = np.clip(v, np.float32(-128 - out.zero_point), np.float32(127 - out.zero_point))
        return (np.round(v).astype(np.int64) + out.zero_point).astype(np.int8)
    # LiteRT 2.3: FC rounds once, convolutions twice (deploy/quant.py); a layer may say otherwise.
    mode = layer.rounding or ("single" if layer.op == "FULLY_CONNECTED" else "double")
    m, s = layer.multiplier.reshape(shape), layer.shift.reshape(shape)
    y = multiply_by_quantized_multiplier(acc, m, s, mode == "double")
    return np.clip(y + out.zero_point, layer.act_min, layer.act_max).astype(np.int8)


def windows(x: I64, layer: Layer, out: TensorInfo, fill: float) -> npt.NDArray:
    """(OH, OW, C, kh, kw) input windows of a 1HWC map; padding reads ``fill``."""
    _, h, w, _ = x.shape
    oh, ow = out.shape[1], out.shape[2]
    (sh, sw), (pt, pl) = layer.stride, layer.pad
    pb, pr = max((oh - 1) * sh + layer.kh - h - pt, 0), max((ow - 1) * sw + layer.kw - w - pl, 0)
    xp = np.pad(x[0], ((pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (layer.kh, layer.kw), axis=(0, 1))
    return win[: (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]


def conv_2d(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    xs = x.astype(np.int64) - ins[0].zero_point  # padding is the zero point: 0 after the offset
    acc = np.einsum("hwcij,oijc->hwo", windows(xs, layer, out, 0), layer.weights.astype(np.int64)) + layer.bias
    return _finish(acc, layer, out)[None]


def depthwise_conv_2d(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    xs = x.astype(np.int64) - ins[0].zero_point
    acc = np.einsum("hwcij,ijc->hwc", windows(xs, layer, out, 0), layer.weights[0].astype(np.int64)) + layer.bias
    return _finish(acc, layer, out)[None]


def fully_connected(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    xs = x.reshape(-1).astype(np.int64) - ins[0].zero_point
    acc = layer.weights.astype(np.int64) @ xs + layer.bias
    return _finish(acc, layer, out).reshape(out.shape)


def max_pool_2d(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    win = windows(x.astype(np.int64), layer, out, -(2**40))  # padding never wins
    return np.clip(win.max(axis=(3, 4)), layer.act_min, layer.act_max).astype(np.int8)[None]


def average_pool_2d(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    # Only the taps inside the map count (filter_count); the quotient rounds half away from zero.
    win = windows(x.astype(np.int64), layer, out, 0)
    count = windows(np.ones_like(x, np.int64), layer, out, 0).sum(axis=(3, 4))
    acc = win.sum(axis=(3, 4))
    q = np.where(acc > 0, (acc + count // 2) // count, -((-acc + count // 2) // count))
    return np.clip(q, layer.act_min, layer.act_max).astype(np.int8)[None]


def add(layer: Layer, ins: list[TensorInfo], out: TensorInfo, a: I8, b: I8) -> I8:
    e = layer.extra
    sa = multiply_by_quantized_multiplier((a.astype(np.int64) - ins[0].zero_point) << 20, e["m1"], e["s1"], True)
    sb = multiply_by_quantized_multiplier((b.astype(np.int64) - ins[1].zero_point) << 20, e["m2"], e["s2"], True)
    y = multiply_by_quantized_multiplier(sa + sb, e["mo"], e["so"], True) + out.zero_point
    return np.clip(y, layer.act_min, layer.act_max).astype(np.int8)


def softmax(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
    return np.stack([softmax_row(layer, [int(v) for v in r]) for r in rows]).reshape(x.shape).astype(np.int8)


def softmax_row(layer: Layer, row: list[int]) -> list[int]:
    """reference_ops::Softmax (int8 → int8): gemmlowp fixed point, F5 differences, F12 sum."""
    e, top = layer.extra, max(row)
    exps = []
    for v in row:
        diff = v - top
        exps.append(exp_on_negative_values(mbqm_double(diff, e["m"], e["left"])) if diff >= e["diff_min"] else None)
    total = sum(rounding_divide_by_pot(v, 12) for v in exps if v is not None)  # Rescale<12>: F0 → F12
    scale, bits_over_unit = reciprocal(total, 12)
    out = []
    for v in exps:
        if v is None:
            out.append(-128)
            continue
        y = rounding_divide_by_pot(srdhm(scale, v), bits_over_unit + 31 - 8) - 128
        out.append(max(min(y, 127), -128))
    return out


def reshape(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> I8:
    return x.reshape(out.shape)


def quantize(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: npt.NDArray[np.float32]) -> I8:
    """AffineQuantize: round(x / scale) (float32 division, halves away from zero) + zero point."""
    v = x.astype(np.float32) / np.float32(out.scale)
    r = np.trunc(v)
    r = np.round(v) if layer.extra.get("half_even") else np.where(np.abs(v - r) >= np.float32(0.5), r + np.sign(v), r)
    return np.clip(r.astype(np.int64) + out.zero_point, -128, 127).astype(np.int8)


def dequantize(layer: Layer, ins: list[TensorInfo], out: TensorInfo, x: I8) -> npt.NDArray[np.float32]:
    """Dequantize: float(double(scale) · (q − zero point))."""
    return (float(ins[0].scale) * (x.astype(np.float64) - ins[0].zero_point)).astype(np.float32)


OPS = {
    "CONV_2D": conv_2d, "DEPTHWISE_CONV_2D": depthwise_conv_2d, "FULLY_CONNECTED": fully_connected,
    "MAX_POOL_2D": max_pool_2d, "AVERAGE_POOL_2D": average_pool_2d, "ADD": add, "SOFTMAX": softmax,
    "RESHAPE": reshape, "QUANTIZE": quantize, "DEQUANTIZE": dequantize,
}  # fmt: skip

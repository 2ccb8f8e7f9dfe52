"""The ONNX test model of pyard deploy: an int8 CNN in QLinear operators, made with onnx.helper.

QuantizeLinear → QLinearConv (per-channel weights, padding 1) → MaxPool → QLinearConv → Flatten →
QLinearMatMul → DequantizeLinear, NCHW as ONNX has it; seeded weights, scales calibrated on a float
forward pass over random inputs. Its reference is onnxruntime (deploy/check.py).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from deploy.models.make_models import VALID, _windows

Array = npt.NDArray[np.float64]


def _scale(v: Array) -> tuple[float, int]:
    lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 1e-3)
    s = float(np.float32((hi - lo) / 255.0))
    return s, int(np.clip(round(-128 - lo / s), -128, 127))


def _fake_quant(v: Array, s: float, zp: int) -> Array:
    return (np.clip(np.round(v / s) + zp, -128, 127) - zp) * s


def _conv(x: Array, w: Array, pad: int) -> Array:
    """NHWC float convolution, OHWI weights, stride 1, symmetric padding."""
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    return np.einsum("nhwcij,oijc->nhwo", _windows(xp, w.shape[1], w.shape[2], 1, VALID, 0.0), w)


def build_onnx() -> dict[str, bytes]:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2027)
    x = rng.uniform(-1, 1, (64, 12, 12, 1))
    inits, nodes = [], []

    def const(name: str, value: npt.NDArray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def qparams(prefix: str, s: float, zp: int) -> list[str]:
        return [const(prefix + "_s", np.array(s, np.float32)), const(prefix + "_zp", np.array(zp, np.int8))]

    xs = _scale(x)
    nodes.append(helper.make_node("QuantizeLinear", ["x", *qparams("x", *xs)], ["xq"]))
    h, hs, name = _fake_quant(x, *xs), xs, "xq"
    for i, (cout, pad) in enumerate(((6, 1), (8, 0))):
        cin = h.shape[3]
        w = rng.normal(0, 1 / np.sqrt(9 * cin), (cout, 3, 3, cin)) * rng.uniform(0.5, 1.5, (cout, 1, 1, 1))
        ws = (np.abs(w).max(axis=(1, 2, 3)) / 127).astype(np.float32)
        wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
        bq = np.round(rng.normal(0, 0.1, cout) / (np.float32(hs[0]) * ws)).astype(np.int32)
        y = _conv(h, wq * ws[:, None, None, None].astype(np.float64), pad) + bq * (hs[0] * ws)
        ys = _scale(y)
        w_in = [const(f"w{i}", np.ascontiguousarray(wq.transpose(0, 3, 1, 2))), const(f"w{i}_s", ws)]
        w_in.append(const(f"w{i}_zp", np.zeros(cout, np.int8)))
        ins = [name, *qparams(f"in{i}", *hs), *w_in, *qparams(f"y{i}", *ys), const(f"b{i}", bq)]
        nodes.append(helper.make_node("QLinearConv", ins, [f"c{i}"], pads=[pad] * 4, kernel_shape=[3, 3]))
        h, hs, name = _fake_quant(y, *ys), ys, f"c{i}"
        if i == 0:
            nodes.append(helper.make_node("MaxPool", [name], ["p0"], kernel_shape=[2, 2], strides=[2, 2]))
            h, name = h.reshape(64, 6, 2, 6, 2, cout).max(axis=(2, 4)), "p0"
    nodes.append(helper.make_node("Flatten", [name], ["f"], axis=1))
    flat = h.transpose(0, 3, 1, 2).reshape(64, -1)  # ONNX flattens C, H, W
    w = rng.normal(0, 1 / np.sqrt(flat.shape[1]), (flat.shape[1], 10))
    wsc = np.float32(np.abs(w).max() / 127)
    wq = np.clip(np.round(w / wsc), -127, 127).astype(np.int8)
    ys = _scale(flat @ (wq * float(wsc)))
    ins = ["f", *qparams("f", *hs), const("fc_w", wq), *qparams("fc_w", float(wsc), 0), *qparams("fc_y", *ys)]
    nodes.append(helper.make_node("QLinearMatMul", ins, ["fc"]))
    nodes.append(helper.make_node("DequantizeLinear", ["fc", "fc_y_s", "fc_y_zp"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "pyard_qcnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pyard")
    model.ir_version = 8
    return {"qcnn": model.SerializeToString()}

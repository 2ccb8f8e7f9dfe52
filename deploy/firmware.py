"""pyard deploy's firmware: the model's blob for deploy/fw/deploy.c, the run on the SoC, the outputs read back.

The executor is one C program for every model (built once per SoC config and hart count); the model
travels as data: a blob loaded at ``__mem_free_start`` (main memory) holding a header, the layer
records, the constants and an activation arena per hart (layout below, mirrored by the structs of
deploy.c). QUANTIZE at a float input and DEQUANTIZE at a float output run on the host (the harts
have no floating point), with LiteRT's arithmetic (deploy/reference.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from deploy.model import DeployError, Layer, Model
from deploy.reference import OPS, to_nhwc
from soc.config import MAX_TILES

FW_SOURCE = Path(__file__).resolve().parent / "fw" / "deploy.c"
MAGIC = 0x50445950
HEADER = ("magic", "total_bytes", "n_layers", "layers", "n_infer", "in_bytes", "out_bytes", "in_off", "out_off",
          "arena_bytes", "arenas", "inputs", "outputs", "infer_cycles", "layer_cycles", "tile_cycles",
          "tile_takes", "status")  # fmt: skip
RECORD = ("op", "in", "in2", "out", "h", "w", "c", "oh", "ow", "oc", "kh", "kw", "sh", "sw", "pt", "pl", "in_zp",
          "in2_zp", "out_zp", "act_min", "act_max", "weights", "bias", "mult", "shift", "pad_buf", "acc_buf", "ph",
          "pw", "e0", "e1", "e2", "e3", "e4", "e5", "float_rq")  # fmt: skip
OP_CODES = {"CONV_2D": 1, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 3, "MAX_POOL_2D": 4, "AVERAGE_POOL_2D": 5,
            "ADD": 6, "SOFTMAX": 7}  # fmt: skip
ON_TILE = ("CONV_2D", "FULLY_CONNECTED")
ALIGN = 64  # every buffer starts on a DMA-friendly boundary


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass
class Plan:
    """Where everything of one model lives: arena offsets of tensors, the layers' records, the constants."""

    records: list[dict[str, int]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    consts: bytearray = field(default_factory=bytearray)
    arena: int = 0
    where: dict[int, int] = field(default_factory=dict)  # tensor → arena offset
    q_in: Layer | None = None  # host-side QUANTIZE of a float input
    dq_out: Layer | None = None  # host-side DEQUANTIZE of a float output

    def buffer(self, nbytes: int) -> int:
        off = self.arena
        self.arena += _align(nbytes)
        return off

    def const(self, data: bytes) -> int:
        off = len(self.consts)
        self.consts += data + bytes(_align(len(data)) - len(data))
        return off  # relative to the constants' start: fixed up when the blob is laid out


def plan(model: Model) -> Plan:
    """Lowers the layer table to records; the edges' QUANTIZE/DEQUANTIZE go to the host."""
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise DeployError(f"model: {len(model.inputs)} inputs, {len(model.outputs)} outputs: allowed one of each")
    p = Plan()
    layers = list(model.layers)
    if layers[0].op == "QUANTIZE":
        p.q_in = layers.pop(0)
    if layers and layers[-1].op == "DEQUANTIZE":
        p.dq_out = layers.pop()
    for layer in layers:
        if layer.op in ("QUANTIZE", "DEQUANTIZE"):
            raise DeployError(f"operator {layer.op}: inside the model: allowed only at a float input or output")
    first = p.q_in.output if p.q_in else model.inputs[0]
    p.where[first] = p.buffer(model.tensors[first].size)
    for layer in layers:
        if layer.op == "RESHAPE":  # the same bytes under another shape
            p.where[layer.output] = p.where[layer.inputs[0]]
            continue
        p.where[layer.output] = p.buffer(model.tensors[layer.output].size)
        p.records.append(_record(model, layer, p))
        p.names.append(layer.op)
    return p


def _record(model: Model, layer: Layer, p: Plan) -> dict[str, int]:
    x, out = model.tensors[layer.inputs[0]], model.tensors[layer.output]
    shape_in = (1, 1, 1, *x.shape)[-4:] if len(x.shape) < 4 else x.shape
    shape_out = (1, 1, 1, *out.shape)[-4:] if len(out.shape) < 4 else out.shape
    r = dict.fromkeys(RECORD, 0)
    r |= {"op": OP_CODES[layer.op], "in": p.where[layer.inputs[0]], "out": p.where[layer.output]}
    r |= {"h": shape_in[1], "w": shape_in[2], "c": shape_in[3], "oh": shape_out[1], "ow": shape_out[2]}
    r |= {"oc": shape_out[3], "kh": layer.kh, "kw": layer.kw, "sh": layer.stride[0], "sw": layer.stride[1]}
    r |= {"pt": layer.pad[0], "pl": layer.pad[1], "in_zp": x.zero_point, "out_zp": out.zero_point}
    r |= {"act_min": layer.act_min, "act_max": layer.act_max, "pad_buf": -1, "acc_buf": -1}
    r["float_rq"] = int(layer.rounding == "float")
    if layer.op == "FULLY_CONNECTED":
        r |= {"c": x.size, "oh": 1, "ow": 1, "oc": layer.weights.shape[0]}
    if layer.multiplier is not None:
        r["mult"] = p.const(layer.multiplier.astype("<i4").tobytes())
        r["shift"] = p.const(layer.shift.astype("<i4").tobytes())
    if layer.op == "CONV_2D":
        _conv_consts(layer, r, p, x.zero_point)
    elif layer.op == "FULLY_CONNECTED":
        w = layer.weights.astype(np.int64)  # (N, K): stored K × N for the GEMM's B
        bias = layer.bias - x.zero_point * w.sum(axis=1)  # Σ (x − zp)·w = Σ x·w − zp·Σ w
        r["weights"] = p.const(np.ascontiguousarray(layer.weights.T).tobytes())
        r["bias"] = p.const(bias.astype("<i4").tobytes())
        r["acc_buf"] = p.buffer(4 * r["oc"])
    elif layer.op == "DEPTHWISE_CONV_2D":
        r["weights"] = p.const(layer.weights.tobytes())
        r["bias"] = p.const(layer.bias.astype("<i4").tobytes())
    elif layer.op == "ADD":
        r["in2"], r["in2_zp"] = p.where[layer.inputs[1]], model.tensors[layer.inputs[1]].zero_point
        e = layer.extra
        r |= {"e0": e["m1"], "e1": e["s1"], "e2": e["m2"], "e3": e["s2"], "e4": e["mo"], "e5": e["so"]}
    elif layer.op == "SOFTMAX":
        r |= {"e0": layer.extra["m"], "e1": layer.extra["left"], "e2": layer.extra["diff_min"]}
        r["acc_buf"] = p.buffer(4 * r["oc"])
    return r


def _conv_consts(layer: Layer, r: dict[str, int], p: Plan, in_zp: int) -> None:
    """CONV_2D on the tile: pad=0 over an input the hart pads with the zero point, HWIO weights, and
    the bias less zp·Σw so the tile's Σ x·w + bias is TFLite's Σ (x − zp)·w + bias."""
    if layer.stride[0] != layer.stride[1] or layer.kh > 7 or layer.kw > 7:
        raise DeployError(f"operator CONV_2D: stride {layer.stride}, kernel {layer.kh}x{layer.kw}: "
                          "allowed equal strides and kernels up to 7x7 (the tile's CONV2D)")  # fmt: skip
    w = layer.weights  # OHWI
    r["weights"] = p.const(np.ascontiguousarray(w.transpose(1, 2, 3, 0)).tobytes())
    r["bias"] = p.const((layer.bias - in_zp * w.astype(np.int64).sum(axis=(1, 2, 3))).astype("<i4").tobytes())
    ph = max((r["oh"] - 1) * r["sh"] + r["kh"], r["h"] + r["pt"])
    pw = max((r["ow"] - 1) * r["sw"] + r["kw"], r["w"] + r["pl"])
    r["ph"], r["pw"] = ph, pw
    if (ph, pw, r["pt"], r["pl"]) != (r["h"], r["w"], 0, 0):
        r["pad_buf"] = p.buffer(ph * pw * r["c"])
    r["acc_buf"] = p.buffer(4 * r["oh"] * r["ow"] * r["oc"])


@dataclass
class Blob:
    data: bytes
    header: dict[str, int]


def make_blob(model: Model, p: Plan, inputs: list[npt.NDArray[np.int8]], harts: int) -> Blob:
    """The bytes deploy.c reads: header, records, constants, arenas, inputs, outputs, cycle counters,
    the layers run on each tile."""
    n_layers, n = len(p.records), len(inputs)
    out_t = p.dq_out.inputs[0] if p.dq_out else model.outputs[0]
    in_t = p.q_in.output if p.q_in else model.inputs[0]
    hd = dict.fromkeys(HEADER, 0)
    hd |= {"magic": MAGIC, "n_layers": n_layers, "n_infer": n, "in_off": p.where[in_t], "out_off": p.where[out_t]}
    hd |= {"in_bytes": model.tensors[in_t].size, "out_bytes": model.tensors[out_t].size, "arena_bytes": p.arena}
    off = _align(4 * len(HEADER))
    hd["layers"] = off
    off = consts = _align(off + 4 * len(RECORD) * n_layers)
    off = hd["arenas"] = _align(off + len(p.consts))
    off = hd["inputs"] = _align(off + p.arena * harts)
    off = hd["outputs"] = _align(off + hd["in_bytes"] * n)
    off = hd["infer_cycles"] = _align(off + hd["out_bytes"] * n)
    off = hd["layer_cycles"] = _align(off + 4 * n)
    off = hd["tile_cycles"] = _align(off + 4 * n_layers)
    off = hd["tile_takes"] = _align(off + 4 * n_layers)
    hd["total_bytes"] = _align(off + 4 * MAX_TILES)
    blob = bytearray(hd["total_bytes"])
    struct.pack_into(f"<{len(HEADER)}I", blob, 0, *hd.values())
    for i, rec in enumerate(p.records):
        rec = dict(rec)
        for k in ("weights", "bias", "mult", "shift"):
            rec[k] += consts  # constants are blob-relative
        struct.pack_into(f"<{len(RECORD)}i", blob, hd["layers"] + 4 * len(RECORD) * i, *rec.values())
    blob[consts : consts + len(p.consts)] = p.consts
    for i, x in enumerate(inputs):
        start = hd["inputs"] + i * hd["in_bytes"]
        blob[start : start + hd["in_bytes"]] = np.asarray(x, np.int8).tobytes()
    return Blob(bytes(blob), hd)


def host_inputs(model: Model, p: Plan, raw: list[npt.NDArray]) -> list[npt.NDArray[np.int8]]:
    """The int8 inputs of the firmware: a float input is quantized here (LiteRT's QUANTIZE)."""
    raw = [to_nhwc(model, np.asarray(x)) for x in raw]
    if p.q_in is None:
        return [np.asarray(x, np.int8) for x in raw]
    q = p.q_in
    return [OPS["QUANTIZE"](q, [model.tensors[q.inputs[0]]], model.tensors[q.output], x) for x in raw]


def host_output(model: Model, p: Plan, y: npt.NDArray[np.int8]) -> npt.NDArray:
    out_t = p.dq_out.inputs[0] if p.dq_out else model.outputs[0]
    y = y.reshape(model.tensors[out_t].shape)
    if p.dq_out is None:
        return y
    d = p.dq_out
    return OPS["DEQUANTIZE"](d, [model.tensors[d.inputs[0]]], model.tensors[d.output], y)

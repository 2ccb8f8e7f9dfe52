"""The multi-TPU paper's synthetic models (§III-A), scaled to a pyard tile, and their NumPy reference.

* ``fc``: five fully-connected layers ``I → n → n → n → n → O`` (three hidden n × n layers dominate
  the weights, as in the paper's Table I), ``rows`` input vectors per inference.
* ``conv``: five 3×3 convolutions, stride 1, padding 1, on an ``hw × hw`` image: ``C → f → f → f →
  f → f`` filters (four f × f layers dominate).

Weights are int8, products accumulate in int32 and every layer ends with the tile's read-out: a
rounding right shift (half to even), ReLU, saturation to int8 (rtl/readout_model.py). The shift of
each layer is chosen once from the reference activations so that the largest accumulator of the
model's own inputs lands near the int8 range: the firmware gets the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig, ConfigError, check_choice, check_int
from rtl.conv_model import im2col
from rtl.readout_model import readout

__all__ = ["KINDS", "Layer", "Model", "ModelSpec", "build_model", "reference"]

KINDS = ("fc", "conv")
SIZE_RANGE = {"fc": (4, 1024), "conv": (4, 256)}
ACT_RELU, OUT_NARROW = 1, 0


@dataclass(frozen=True)
class Layer:
    """One layer: a GEMM ``rows × k`` by ``k × n`` (fc) or a 3×3 convolution ``cin → n`` on ``hw × hw``."""

    conv: bool
    k: int  # fc: inputs; conv: input channels
    n: int  # fc: outputs; conv: filters
    rows: int = 1  # fc: input vectors per inference
    hw: int = 0  # conv: image height = width
    kernel: int = 3

    @property
    def weight_bytes(self) -> int:
        return self.kernel * self.kernel * self.k * self.n if self.conv else self.k * self.n

    @property
    def b_rows(self) -> int:
        """K of the layer's GEMM (a convolution's im2col GEMM: kernel² · C_in), the rows of B."""
        return self.kernel * self.kernel * self.k if self.conv else self.k

    @property
    def in_bytes(self) -> int:
        return self.hw * self.hw * self.k if self.conv else self.rows * self.k

    @property
    def out_bytes(self) -> int:
        return self.hw * self.hw * self.n if self.conv else self.rows * self.n

    @property
    def macs(self) -> int:
        return self.hw * self.hw * self.weight_bytes if self.conv else self.rows * self.weight_bytes


@dataclass(frozen=True)
class ModelSpec:
    """A synthetic model: ``kind`` fc or conv, ``size`` the growing width (n nodes or f filters)."""

    kind: str = "fc"
    size: int = 32
    inputs: int = 32  # fc: I; conv: input channels C
    outputs: int = 16  # fc: O (conv keeps f filters to the end)
    rows: int = 1  # fc: vectors per inference
    hw: int = 8  # conv: image size
    seed: int = 1

    def __post_init__(self) -> None:
        check_choice("model", self.kind, KINDS)
        check_int("size", self.size, *SIZE_RANGE[self.kind])
        check_int("inputs", self.inputs, 1, 1024)
        check_int("outputs", self.outputs, 1, 1024)
        check_int("rows", self.rows, 1, 64)
        check_int("hw", self.hw, 1, 64)

    def layers(self) -> list[Layer]:
        s = self.size
        if self.kind == "fc":
            dims = [self.inputs, s, s, s, s, self.outputs]
            return [Layer(False, dims[i], dims[i + 1], rows=self.rows) for i in range(5)]
        dims = [self.inputs, s, s, s, s, s]
        return [Layer(True, dims[i], dims[i + 1], hw=self.hw) for i in range(5)]


@dataclass
class Model:
    """A model with its weights (per layer: fc ``k × n``, conv HWIO), input batch and shifts."""

    spec: ModelSpec
    layers: list[Layer]
    weights: list[npt.NDArray[np.int8]]
    shifts: list[int] = field(default_factory=list)

    @property
    def weight_offsets(self) -> list[int]:
        """Byte offset of each layer's weights in the packed weight image (8-byte aligned)."""
        offsets, at = [], 0
        for w in self.weights:
            offsets.append(at)
            at += -(-w.size // 8) * 8
        return offsets

    def weight_image(self) -> bytes:
        out = bytearray()
        for w in self.weights:
            data = w.tobytes()
            out += data + bytes(-len(data) % 8)
        return bytes(out)


def inputs(spec: ModelSpec, batch: int) -> npt.NDArray[np.int8]:
    """``batch`` inference inputs (non-negative, as a ReLU's outputs would be), one row of bytes each."""
    rng = np.random.default_rng(spec.seed + 1)
    first = spec.layers()[0]
    return rng.integers(0, 128, (batch, first.in_bytes), dtype=np.int8)


def build_model(spec: ModelSpec, acc: AccelConfig, calibrate: npt.NDArray[np.int8]) -> Model:
    """Weights from ``spec.seed``; each layer's shift from the activations of ``calibrate``."""
    rng = np.random.default_rng(spec.seed)
    layers = spec.layers()
    weights = []
    for layer in layers:
        shape = (layer.kernel, layer.kernel, layer.k, layer.n) if layer.conv else (layer.k, layer.n)
        weights.append(rng.integers(-32, 32, shape, dtype=np.int8))
    model = Model(spec, layers, weights)
    x = calibrate
    for i in range(len(layers)):
        acc_values = _accumulate(layers[i], weights[i], x)
        # The smallest shift that keeps the largest magnitude within 2 × 127: a few values saturate.
        peak = int(np.abs(acc_values).max(initial=1))
        model.shifts.append(max(0, (peak // 254).bit_length()))
        x = _readout(acc, acc_values, model.shifts[i]).reshape(x.shape[0], -1)
    return model


def _accumulate(layer: Layer, w: npt.NDArray[np.int8], x: npt.NDArray[np.int8]) -> npt.NDArray[np.int64]:
    """int32 accumulators of one layer for a batch ``x`` (one inference a row of bytes)."""
    batch = x.shape[0]
    if layer.conv:
        img = x.reshape(batch, layer.hw, layer.hw, layer.k).astype(np.int64)
        cols = im2col(img, layer.kernel, layer.kernel, 1, layer.kernel // 2)
        return cols @ w.reshape(-1, layer.n).astype(np.int64)
    return x.reshape(batch * layer.rows, layer.k).astype(np.int64) @ w.astype(np.int64)


def _readout(acc: AccelConfig, values: npt.NDArray[np.int64], shift: int) -> npt.NDArray[np.int8]:
    if np.any(np.abs(values) >= 2**31):
        raise ConfigError("size", values.shape, "a model whose int32 accumulators do not overflow")
    bits = (values & 0xFFFFFFFF).astype(np.uint64)
    return readout(acc, bits, shift, ACT_RELU, OUT_NARROW).astype(np.uint8).view(np.int8)


def reference(model: Model, acc: AccelConfig, x: npt.NDArray[np.int8]) -> list[npt.NDArray[np.int8]]:
    """Every layer's output for the batch ``x``, as the tile computes it (the last is the model's)."""
    outs = []
    for layer, w, shift in zip(model.layers, model.weights, model.shifts, strict=True):
        x = _readout(acc, _accumulate(layer, w, x), shift).reshape(x.shape[0], -1)
        outs.append(x)
    return outs

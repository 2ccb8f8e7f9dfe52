"""Bit-exact NumPy model of the accumulator read-out (``rtl/readout.py``), per element, on bit patterns.

``C = act(scale · acc)`` then a narrowing (docs/tile.md, docs/arithmetic.md "Read-out"):

* int32 accumulators: ``scale & 31`` is a shift ``s``; ``y = round_half_even(x / 2^s)``; ReLU;
  ``out = 0`` saturates to [-128, 127] in the low 8 bits, any other ``out`` keeps the int32.
* fp32 / bf16 accumulators: ``y = fp32_mul(x, scale)`` (RNE, FTZ, canonical NaN); ReLU
  (−0 and negatives → +0, NaN stays NaN); ``out = 0`` rounds to bf16 (RNE) in the low 16 bits, any
  other ``out`` keeps fp32 (a bf16 accumulator always reads out bf16).
* ``act = 1`` is ReLU. Float accumulators: ``act = 2`` is sigmoid and ``act = 3`` tanh, of the
  value rounded to bf16, correctly rounded (``rtl/vector/functions.py``); the result is that bf16,
  widened exactly for a full fp32 output. int32 accumulators define no act 2–3 (the decoder refuses
  them); here they apply nothing.

Narrow results sit in the low bits of the accumulator-width slot; the bits above are zero.
The model is written against integer and float64 arithmetic, not against the hardware's structure.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.fp_model import _finish, _round_to_precision, f32_bits_to_f64, fp32_mul
from rtl.vector.functions import reference

__all__ = ["readout", "round_shift"]

ACT_RELU = 1
OUT_NARROW = 0


def round_shift(x: npt.ArrayLike, s: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """``round_half_even(x / 2^s)`` for integers ``x`` and shifts ``s`` ≥ 0, in exact integer maths."""
    x, s = np.broadcast_arrays(np.asarray(x, dtype=np.int64), np.asarray(s, dtype=np.int64))
    q = x >> s  # floor(x / 2^s)
    twice_rem, one = 2 * (x - (q << s)), np.int64(1) << s
    up = (twice_rem > one) | ((twice_rem == one) & (q & 1 == 1))
    return q + up


def _int_readout(x: npt.NDArray, s: npt.NDArray, relu: npt.NDArray, full: npt.NDArray) -> npt.NDArray[np.uint32]:
    value = np.asarray(x, dtype=np.uint32).view(np.int32).astype(np.int64)
    y = round_shift(value, s & 31)
    y = np.where(relu & (y < 0), 0, y)
    narrow = np.clip(y, -128, 127) & 0xFF
    return np.where(full, y & 0xFFFFFFFF, narrow).astype(np.uint32)


def _fp_readout(
    x: npt.NDArray, scale: npt.NDArray, act: npt.NDArray, full: npt.NDArray, acc_bits: int
) -> npt.NDArray[np.unsignedinteger]:
    relu = act == ACT_RELU
    x32 = np.asarray(x, dtype=np.uint32) << 16 if acc_bits == 16 else np.asarray(x, dtype=np.uint32)
    y = fp32_mul(x32, scale)
    value = f32_bits_to_f64(y)
    y = np.where(relu & ((value < 0) | (y == 0x80000000)), np.uint32(0), y).astype(np.uint32)
    value = f32_bits_to_f64(y)
    nan = np.isnan(value)
    bf16 = _finish(_round_to_precision(value, np.zeros_like(value), 8), nan, 7).astype(np.uint16)
    function = act >= 2
    for code, name in ((2, "sigmoid"), (3, "tanh")):
        bf16 = np.where(act == code, reference(name, bf16), bf16).astype(np.uint16)
    if acc_bits == 16:
        return bf16
    wide = np.where(function, bf16.astype(np.uint32) << 16, y)
    return np.where(full, wide, bf16.astype(np.uint32)).astype(np.uint32)


def readout(
    cfg: AccelConfig, x: npt.ArrayLike, scale: npt.ArrayLike, act: npt.ArrayLike, out: npt.ArrayLike
) -> npt.NDArray[np.unsignedinteger]:
    """Read-out of accumulator bit patterns ``x`` (any shape; the other arguments broadcast)."""
    x, scale, act, out = np.broadcast_arrays(
        np.asarray(x, dtype=np.uint64),
        np.asarray(scale, dtype=np.uint64),
        np.asarray(act, dtype=np.int64),
        np.asarray(out, dtype=np.int64),
    )
    relu, full = act == ACT_RELU, out != OUT_NARROW
    if cfg.acc_dtype == "int32":
        return _int_readout(x.astype(np.uint32), scale.astype(np.int64), relu, full)
    return _fp_readout(x.astype(np.uint32), scale.astype(np.uint32), act, full, cfg.acc_bits)

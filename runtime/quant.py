"""Number formats of the runtime: int8 with per-operation scale factors (GPTPU §6.2, eqs. 4-8) and
bf16 (round to nearest even, as ml_dtypes does it).

An int8 operand ``x`` is sent as ``q = clip(rint(x · f), -127, 127)`` with the operation's factor
``f``; results come back in the integers the tile computed and are divided by the product of the
factors. GPTPU's factors ``S`` bound the output range; here ``f = 127 · S`` with ``|max − min|``
taken as the largest magnitude (the tile's int8 is symmetric):

* eq. 4/8 (ReLU, max, mean, conv2D and FullyConnected inputs): ``f = 127 / max|x|``, per input.
* eq. 5 (conv2D, FullyConnected): the output bound ``K · max|a| · max|b|`` is checked against the
  int32 accumulator (``127² · K < 2³¹``) rather than used to shrink the inputs, since the runtime
  reads the accumulators at full width and sums K blocks on the host in int64.
* eq. 6 (add, sub): one factor for both inputs, ``f = 127 / (2 · max(max|a|, max|b|))``, so
  ``a + b`` cannot saturate the int8 result.
* eq. 7 (mul): ``f = 127 / max|x|`` per input and the product shifted right by 7 on the tile
  (``127² / 2⁷ < 127``), so it cannot saturate either.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import numpy.typing as npt

__all__ = [
    "MUL_SHIFT",
    "add_factor",
    "bf16_bits",
    "dequant",
    "factor",
    "from_bf16",
    "from_fp32",
    "quantize",
]

QMAX = 127
MUL_SHIFT = 7  # eq. 7: the int8 product's right shift on the tile


def factor(*arrays: npt.ArrayLike) -> float:
    """``127 / max|x|`` over ``arrays`` (eqs. 4 and 8); 1 for all-zero inputs."""
    peak = max(float(np.max(np.abs(a), initial=0.0)) for a in arrays)
    return QMAX / peak if peak > 0 else 1.0


def add_factor(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """The shared factor of add and sub (eq. 6): the sum of two inputs stays within int8."""
    return factor(a, b) / 2


def quantize(x: npt.ArrayLike, f: float) -> npt.NDArray[np.uint8]:
    """int8 bit patterns of ``x · f`` (rounded to nearest even, clipped to ±127)."""
    return np.clip(np.rint(np.asarray(x, np.float64) * f), -QMAX, QMAX).astype(np.int8).view(np.uint8)


def dequant(q: npt.ArrayLike, bits: int, f: float) -> npt.NDArray[np.float64]:
    """Signed integers of ``bits`` bits (as unsigned patterns) divided by the factor ``f``."""
    signed = {8: np.int8, 32: np.int32, 64: np.int64}[bits]
    unsigned = {8: np.uint8, 32: np.uint32, 64: np.uint64}[bits]
    return np.asarray(q).astype(unsigned).view(signed).astype(np.float64) / f


def bf16_bits(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    return np.asarray(x, np.float64).astype(ml_dtypes.bfloat16).view(np.uint16)


def from_bf16(bits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(bits, np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)


def from_fp32(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    return np.asarray(bits, np.uint32).view(np.float32)

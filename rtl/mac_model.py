"""Bit-exact NumPy model of ``rtl/mac.py``: the multiply and accumulate of one PE, on bit patterns."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.fp_model import bf16_mul, fp_add

__all__ = ["accumulate", "multiply"]


def _signed(bits: npt.ArrayLike, width: int) -> npt.NDArray[np.int64]:
    b = np.asarray(bits).astype(np.int64) & ((1 << width) - 1)
    return np.where(b >> (width - 1) != 0, b - (1 << width), b)


def multiply(cfg: AccelConfig, a: npt.ArrayLike, w: npt.ArrayLike) -> npt.NDArray[np.unsignedinteger]:
    """Products of input bit patterns: int16 bits for int8 inputs, fp32 bits for bf16 inputs."""
    if cfg.dtype == "int8":
        return (_signed(a, 8) * _signed(w, 8) & 0xFFFF).astype(np.uint16)
    return bf16_mul(a, w)


def accumulate(cfg: AccelConfig, acc: npt.ArrayLike, p: npt.ArrayLike) -> npt.NDArray[np.unsignedinteger]:
    """``acc + p`` in the accumulator format (bit patterns)."""
    if cfg.dtype == "int8":
        return ((_signed(acc, 32) + _signed(p, 16)) & 0xFFFFFFFF).astype(np.uint32)
    return fp_add(acc, p, 23 if cfg.acc_dtype == "fp32" else 7)

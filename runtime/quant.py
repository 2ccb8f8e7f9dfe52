"""Number formats of the runtime: int8 with per-operation scale factors (GPTPU §6.2, eqs. 4-8) and
bf16 (round to nearest even, as ml_dtypes does it).

An int8 operand ``x`` is sent as ``q = clip(rint(x · f), -127, 127)`` with the operation's factor
``f``; results come back in the integers the tile computed and are divided by the product of the
factors. GPTPU's factors ``S`` bound the output range; here ``f = 127 · S`` with ``|max − min|``
taken as the largest magnitude (the tile's int8 is symmetric):

* eq. 4/8 (ReLU, max, mean, conv2D and FullyConnected inputs): ``f = 127 / max|x|``, per input.
* eq. 5 (conv2D, FullyConnected): not needed to shrink the inputs. Its output bound
  ``K · 127²`` fits the int32 accumulator for every block (K ≤ 65535), the runtime reads the
  accumulators at full width and sums K blocks on the host in int64.
* ``scaling="balanced"`` (the runtime's default) refines eq. 4 for GEMM and conv2D: a factor per
  row of A and per column of B (per output channel of conv2D weights), after weighting GEMM's K
  slices so both operands' slices have the same range (:func:`balance`; conv2D: its input
  channels), and B's columns (conv2D: the weights of each output channel) rounded so that each
  keeps its sum (:func:`quantize_sums`); ``scaling="tensor"`` is GPTPU's one factor per tensor.
* eq. 6 (add, sub): one factor for both inputs, ``f = 127 / (2 · max(max|a|, max|b|))``, so
  ``a + b`` cannot saturate the int8 result.
* eq. 7 (mul): ``f = 127 / max|x|`` per input and the product shifted right by 7 on the tile
  (``127² / 2⁷ < 127``), so it cannot saturate either.

GEMM can also take its operands as **two digits** (``digits=2``; GPTPU §10: it "can achieve the
desired level of precision by iteratively computing on different portions of raw input numbers"):
int8 ``x · f ≈ q₁ + q₂ / 254`` (:func:`split_int8`; q₂ is the first digit's rounding residual, which
is within ±½, in 254ths), bf16 ``x ≈ hi + lo`` (:func:`split_bf16`; lo the bf16 of ``x − hi``).
``A·B ≈ A₁B₁ + (A₁B₂ + A₂B₁)`` (the int8 cross terms weighted 1/254) takes three products on the tile
instead of one and leaves the operands 15 bits (int8) or 16 bits (bf16) of precision.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import numpy.typing as npt

__all__ = [
    "MUL_SHIFT",
    "add_factor",
    "balance",
    "bf16_bits",
    "dequant",
    "factor",
    "factors",
    "from_bf16",
    "from_fp32",
    "quantize",
    "quantize_sums",
    "split_bf16",
    "split_int8",
]

QMAX = 127
MUL_SHIFT = 7  # eq. 7: the int8 product's right shift on the tile
DIGIT = 254  # the second int8 digit's weight: a rounding residual within ±½ in 254ths fits ±127


def factor(*arrays: npt.ArrayLike) -> float:
    """``127 / max|x|`` over ``arrays`` (eqs. 4 and 8); 1 for all-zero inputs."""
    peak = max(float(np.max(np.abs(a), initial=0.0)) for a in arrays)
    return QMAX / peak if peak > 0 else 1.0


def factors(x: npt.ArrayLike, axis: int | tuple[int, ...]) -> npt.NDArray[np.float64]:
    """``127 / max|x|`` along ``axis`` (kept as size-1 dimensions): a factor per row, column or
    output channel; 1 where the slice is all zero."""
    peak = np.max(np.abs(np.asarray(x, np.float64)), axis=axis, keepdims=True)
    return np.where(peak > 0, QMAX / np.where(peak > 0, peak, 1.0), 1.0)


def balance(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Per-K weights ``d`` with ``A·B = (A·diag(d))·(diag(d)⁻¹·B)`` and column k of ``A·diag(d)``
    as large as row k of ``diag(d)⁻¹·B`` (the geometric mean of the two), so neither operand's
    small K slices lose their int8 steps to another slice's range; 1 where either is zero."""
    pa = np.max(np.abs(np.asarray(a, np.float64)), axis=0)
    pb = np.max(np.abs(np.asarray(b, np.float64)), axis=1)
    ok = (pa > 0) & (pb > 0)
    return np.where(ok, np.sqrt(np.where(ok, pb, 1.0) / np.where(ok, pa, 1.0)), 1.0)


def quantize_sums(x: npt.ArrayLike, f: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """int8 bit patterns of the columns of ``x · f`` (2-D), each column's rounding corrected so its
    integers sum to its rounded sum (largest remainders move): rounding every weight of an output
    the same way would scale that output (stencil weights 6/16, 2/16, 1/16 at 127/0.375 sum to
    0.995 of their value, a drift of 0.5 % per step), a kept sum leaves it unbiased."""
    v = np.asarray(x, np.float64) * f
    q = np.rint(v)
    diff = (np.rint(v.sum(axis=0)) - q.sum(axis=0)).astype(np.int64)  # |diff| ≤ rows / 2
    residual = v - q
    rank_up = np.argsort(np.argsort(-residual, axis=0, kind="stable"), axis=0, kind="stable")
    rank_down = np.argsort(np.argsort(residual, axis=0, kind="stable"), axis=0, kind="stable")
    q += (rank_up < diff) * 1.0 - (rank_down < -diff) * 1.0
    return np.clip(q, -QMAX, QMAX).astype(np.int8).view(np.uint8)


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


def split_int8(x: npt.ArrayLike, f: npt.ArrayLike) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Two int8 digits of ``x · f`` (``|x · f| ≤ 127``): ``q₁ = rint(x · f)`` and ``q₂`` its
    residual in 254ths, so ``x · f = q₁ + q₂ / 254`` to within 1/508."""
    v = np.asarray(x, np.float64) * f
    q1 = np.clip(np.rint(v), -QMAX, QMAX)
    q2 = np.clip(np.rint((v - q1) * DIGIT), -QMAX, QMAX)
    return q1.astype(np.int8).view(np.uint8), q2.astype(np.int8).view(np.uint8)


def split_bf16(x: npt.ArrayLike) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
    """Two bf16 digits: ``hi`` the bf16 of ``x``, ``lo`` the bf16 of what ``hi`` leaves out, so
    ``hi + lo`` is ``x`` to 2⁻¹⁷ of its size."""
    hi = bf16_bits(x)
    return hi, bf16_bits(np.asarray(x, np.float64) - from_bf16(hi))


def bf16_bits(x: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    return np.asarray(x, np.float64).astype(ml_dtypes.bfloat16).view(np.uint16)


def from_bf16(bits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(bits, np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)


def from_fp32(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    return np.asarray(bits, np.uint32).view(np.float32)

"""Precision modes and the counted, rounded operations the FPTT reference is written in.

Every arithmetic step of the model goes through one :class:`Arith` object. That object decides
how results are rounded (the precision contract in docs/fptt.md) and, when asked, counts the work
by kind, so the analytic counts in :mod:`tb.fptt.accounting` can be checked against a real run.

* ``fp64``: storage and arithmetic in float64 (finite-difference tests only).
* ``fp32``: storage and arithmetic in float32, no extra rounding.
* ``bf16``: storage in ``ml_dtypes.bfloat16``; arithmetic in float32 on bf16-exact values and
  each result rounded once to bf16, nearest even, with results below 2^-126 flushed to a zero of
  the same sign, as the accelerator does. A GEMM accumulates in float32 and is rounded once per
  output element.
* ``bf16`` with ``tile=cfg`` (an ``rtl.config.AccelConfig``): the **hardware contract**. Storage as
  plain bf16, but every operation is the one the tile computes, bit for bit (docs/fptt.md,
  "Hardware contract"; ``tb.fptt.hardware``): GEMMs in the tile's order (a bias as the last row of
  B), element-wise steps as VEC lane ops, functions from the engine's tables, bias gradients as
  the ones row of the gradient GEMM, the softmax as a fixed sequence of VEC operations.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Literal

import ml_dtypes
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from rtl.config import AccelConfig

Precision = Literal["fp64", "fp32", "bf16"]
PRECISIONS: tuple[Precision, ...] = ("fp64", "fp32", "bf16")
BF16 = np.dtype(ml_dtypes.bfloat16)
MIN_NORMAL = np.float32(2.0**-126)

Array = npt.NDArray[np.floating]


def round_bf16(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Round to the nearest bf16 (ties to even) and flush subnormal results; keep float32 storage."""
    y = np.asarray(x, dtype=np.float32).astype(BF16).astype(np.float32)
    tiny = np.abs(y) < MIN_NORMAL
    if tiny.any():
        y = np.where(tiny, np.copysign(np.float32(0.0), y), y)
    return y


@dataclass
class OpCounts:
    """Work done, by phase and kind (element-wise) and by GEMM tag and shape (M, K, N)."""

    elementwise: Counter[tuple[str, str]] = field(default_factory=Counter)
    gemm_calls: Counter[tuple[str, int, int, int]] = field(default_factory=Counter)

    def gemm_macs(self) -> dict[str, int]:
        macs: Counter[str] = Counter()
        for (tag, m, k, n), calls in self.gemm_calls.items():
            macs[tag] += calls * m * k * n
        return dict(macs)

    def by_kind(self, phases: tuple[str, ...] | None = None) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (phase, kind), n in self.elementwise.items():
            if phases is None or phase in phases:
                out[kind] += n
        return dict(out)


class Arith:
    """Rounded, optionally counted arithmetic in one precision mode."""

    def __init__(self, precision: Precision, count: bool = False, tile: AccelConfig | None = None) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        if tile is not None:
            if precision != "bf16":
                raise ValueError(f"a tile (the hardware contract) needs precision bf16, not {precision!r}")
            _hw().check_tile(tile)
        self.tile = tile
        self.precision: Precision = precision
        self.compute = np.dtype(np.float64 if precision == "fp64" else np.float32)
        self.storage = BF16 if precision == "bf16" else self.compute
        self.counts: OpCounts | None = OpCounts() if count else None
        self.phase = "forward"

    # -- conversions -------------------------------------------------------------------------
    def rnd(self, x: npt.ArrayLike) -> Array:
        """One rounding to the storage precision; the value stays in the compute dtype."""
        if self.precision == "bf16":
            return round_bf16(x)
        return np.asarray(x, dtype=self.compute)

    def load(self, x: npt.ArrayLike) -> Array:
        """A stored tensor as compute-dtype values (exact: storage is never wider than compute)."""
        return np.asarray(x).astype(self.compute)

    def store(self, x: npt.ArrayLike) -> Array:
        """Compute-dtype values (already rounded) as a storage-dtype tensor, the form hardware holds."""
        return np.asarray(x).astype(self.storage)

    def const(self, c: float) -> Array:
        """A scalar constant as the hardware holds it (bf16 constants in bf16 mode)."""
        return self.rnd(np.asarray(c, dtype=np.float64))

    # -- counting ----------------------------------------------------------------------------
    def _tally(self, kind: str, n: int) -> None:
        if self.counts is not None:
            self.counts.elementwise[(self.phase, kind)] += int(n)

    # -- element-wise operations, each rounded once ------------------------------------------
    def _vec(self, op: str, a: Array, b: Array | float = 0.0, s: float = 0.0) -> Array:
        """One VEC lane op of the hardware contract (``op`` a ``VecOp`` name)."""
        from rtl.vector.ops import VecOp

        assert self.tile is not None
        return _hw().elementwise(self.tile, VecOp[op], a, b, s)

    def mul(self, a: Array, b: Array) -> Array:
        out = self._vec("MUL", a, b) if self.tile is not None else self.rnd(a * b)
        self._tally("mul", out.size)
        return out

    def scale(self, a: Array, c: Array) -> Array:
        """Multiply by a scalar constant (counted as a multiply)."""
        if self.tile is None:
            return self.mul(a, c)
        out = self._vec("MULS", a, s=float(c))
        self._tally("mul", out.size)
        return out

    def add(self, a: Array, b: Array) -> Array:
        out = self._vec("ADD", a, b) if self.tile is not None else self.rnd(a + b)
        self._tally("add", out.size)
        return out

    def sub(self, a: Array, b: Array) -> Array:
        out = self._vec("SUB", a, b) if self.tile is not None else self.rnd(a - b)
        self._tally("add", out.size)
        return out

    def one_minus(self, a: Array) -> Array:
        out = self._vec("RSUBS", a, s=1.0) if self.tile is not None else self.rnd(1.0 - a)
        self._tally("add", out.size)
        return out

    def sigmoid(self, z: Array) -> Array:
        if self.tile is not None:
            out = _hw().function("sigmoid", z)
        else:
            # exp of a large positive argument overflows to inf and gives the correct limit 0
            with np.errstate(over="ignore"):
                out = self.rnd(1.0 / (1.0 + np.exp(-z)))
        self._tally("sigmoid", out.size)
        return out

    def tanh(self, z: Array) -> Array:
        out = _hw().function("tanh", z) if self.tile is not None else self.rnd(np.tanh(z))
        self._tally("tanh", out.size)
        return out

    def softmax(self, z: Array) -> Array:
        """Row softmax evaluated in the compute dtype and rounded once per output (hardware
        contract: ``hardware.softmax``'s sequence of VEC steps)."""
        if self.tile is not None:
            out = _hw().softmax(self.tile, z)
        else:
            e = np.exp(z - z.max(axis=-1, keepdims=True))
            out = self.rnd(e / e.sum(axis=-1, keepdims=True))
        self._tally("softmax", out.size)
        return out

    def sum_rows(self, a: Array) -> Array:
        """Sum over the leading axes (a bias gradient): accumulated, then rounded once per output.

        Hardware contract: the ones row of the gradient GEMM (``hardware.ones_sum``), where the
        firmware gets every bias gradient (docs/fptt.md)."""
        flat = a.reshape(-1, a.shape[-1])
        out = _hw().ones_sum(self.tile, flat) if self.tile is not None else self.rnd(flat.sum(axis=0))
        self._tally("sum", flat.size)
        return out

    def sum_axis0(self, a: Array) -> Array:
        """Sum of stacked tensors (the truncated cell-state ages), rounded once per output
        (hardware contract: in order in the accumulator, as ``sum_rows``)."""
        out = _hw().acc_sum(self.tile, a) if self.tile is not None else self.rnd(a.sum(axis=0))
        self._tally("sum", a.size)
        return out

    # -- matrix multiply ---------------------------------------------------------------------
    def gemm(self, a: Array, b: Array, tag: str, bias: Array | None = None) -> Array:
        """(M x K) . (K x N) [+ bias], accumulated in the compute dtype, rounded once per output."""
        m, k = a.shape
        k2, n = b.shape
        if k != k2:
            raise ValueError(f"GEMM {tag}: inner dimensions differ ({k} vs {k2})")
        if self.counts is not None:
            self.counts.gemm_calls[(tag, m, k, n)] += 1
        if self.tile is not None:  # the tile's loop: bias, K tiles of `rows`, read-out (hardware.gemm)
            return _hw().gemm(self.tile, a, b, bias)
        acc = a @ b
        if bias is not None:
            acc = acc + bias
        return self.rnd(acc)


def _hw() -> ModuleType:
    """``tb.fptt.hardware``, imported on first use: the plain modes need none of rtl."""
    from . import hardware

    return hardware

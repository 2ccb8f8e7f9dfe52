"""GPTPU's operators (its Table 1) with its tensorizer (§6.2): each operator is cut into blocks that
fit one device instruction (runtime/kernels.py), the blocks are spread over the devices first come
first served, and the host combines the partial results.

| operator | on the device | on the host |
| --- | --- | --- |
| gemm / fully_connected | GEMM command per (M, K, N) block, full accumulators | sum of K partials (and digits) |
| conv2d | CONV2D command per (image, band of output rows, C_out) block, full accumulators | zero padding |
| add, sub, mul, relu, tanh | VEC ADD / SUB / MUL / RELU / TANH per block of rows | — |
| mean, max | VEC fold of each row (sum into the accumulator / max) | fold of the row results |
| crop, ext | — | slicing / zero padding |

int8 operands are quantized with the operation's scale factors (runtime/quant.py) and the results
divided by them; bf16 operands are rounded to bf16 and results read as fp32 (accumulators) or bf16.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from math import isqrt
from typing import Protocol

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.vector.ops import VecOp
from runtime import kernels, quant
from runtime.device import Device
from runtime.kernels import Block

__all__ = [
    "DIGITS",
    "ELEMENTWISE",
    "Pool",
    "conv2d",
    "conv2d_partials",
    "crop",
    "elementwise",
    "ext",
    "gemm",
    "gemm_edge",
    "reduce",
]

Instruction = Callable[[Device], Block]
DIGITS = (1, 2)  # GEMM operands as one digit, or two (runtime/quant.py: split_int8, split_bf16)
# Element-wise operators: the VEC op and the tile types that define it.
ELEMENTWISE = {
    "add": (VecOp.ADD, ("int8", "bf16")),
    "sub": (VecOp.SUB, ("int8", "bf16")),
    "mul": (VecOp.MUL, ("int8", "bf16")),
    "relu": (VecOp.RELU, ("int8", "bf16")),
    "tanh": (VecOp.TANH, ("bf16",)),
}


class Pool(Protocol):
    """The devices of one tile type (runtime/api.py)."""

    cfg: AccelConfig
    budget: int
    block: int
    mem_bytes: int
    scaling: str  # int8 GEMM / conv2D factors: "balanced" or "tensor" (runtime/quant.py)

    def submit(self, instruction: Instruction) -> Future[Block]: ...


def _run(pool: Pool, instructions: list[Instruction]) -> list[Block]:
    """All ``instructions`` queued at once (any free device takes the next), results in order."""
    futures = [pool.submit(i) for i in instructions]
    return [f.result() for f in futures]


def _spans(size: int, block: int) -> list[tuple[int, int]]:
    return [(lo, min(size, lo + block)) for lo in range(0, size, block)]


def _encode(pool: Pool, x: npt.NDArray, f: float) -> npt.NDArray:
    return quant.quantize(x, f) if pool.cfg.dtype == "int8" else quant.bf16_bits(x)


def _accumulators(pool: Pool, blocks: npt.NDArray, f: float | npt.NDArray) -> npt.NDArray[np.float64]:
    """Full accumulators (int32 or fp32 patterns, or their int64 / float32 sums) as float64."""
    if pool.cfg.acc_dtype == "int32":
        return np.asarray(blocks, np.int64).astype(np.float64) / f
    return np.asarray(blocks, np.float32).astype(np.float64)


def _check_int8(pool: Pool, **operands: npt.NDArray | None) -> None:
    """int8 scale factors need finite operands (bf16 carries Inf and NaN through the tile)."""
    if pool.cfg.dtype != "int8":
        return
    for name, x in operands.items():
        if x is not None and not np.isfinite(x).all():
            raise ValueError(f"{name}: int8 operands must be finite (NaN / Inf have no int8 value); use bf16")


def _check_2d(name: str, x: npt.NDArray) -> None:
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"{name}: must be a non-empty 2-D array (got shape {x.shape})")


# -- GEMM ---------------------------------------------------------------------------------------


def gemm(pool: Pool, a: npt.NDArray, b: npt.NDArray, digits: int = 1) -> npt.NDArray[np.float64]:
    """``a @ b``: (M, K, N) blocks of at most ``pool.block`` on each edge (less where the device
    memory would not hold them: :func:`gemm_edge`), K partials summed on the host (int64 for int8,
    float32 in K order for bf16). ``digits=2`` sends each operand as two digits
    (runtime/quant.py) and combines three products: :func:`_gemm_two_digits`."""
    _check_2d("a", a)
    _check_2d("b", b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"b: must have {a.shape[1]} rows (the columns of a), got {b.shape[0]}")
    if digits not in DIGITS:
        raise ValueError(f"digits: must be one of {', '.join(map(str, DIGITS))}, got {digits!r}")
    _check_int8(pool, a=a, b=b)
    if pool.cfg.dtype != "int8":
        if digits == 2:
            return _gemm_two_digits(pool, quant.split_bf16(a), quant.split_bf16(b), 1, 1.0)
        return _accumulators(pool, gemm_partials(pool, quant.bf16_bits(a), quant.bf16_bits(b)), 1.0)
    if pool.scaling == "balanced":
        d = quant.balance(a, b)
        a, b = a * d, b / d[:, None]
        fa, fb = quant.factors(a, 1), quant.factors(b, 0)
    else:
        fa, fb = quant.factor(a), quant.factor(b)
    if digits == 2:  # the second digit carries the rounding: no column-sum correction needed
        return _gemm_two_digits(pool, quant.split_int8(a, fa), quant.split_int8(b, fb), quant.DIGIT, fa * fb)
    qb = quant.quantize_sums(b, fb) if pool.scaling == "balanced" else quant.quantize(b, fb)
    partials = gemm_partials(pool, quant.quantize(a, fa), qb)
    return _accumulators(pool, partials, fa * fb)


def _gemm_two_digits(
    pool: Pool, a: tuple[npt.NDArray, npt.NDArray], b: tuple[npt.NDArray, npt.NDArray], weight: int, f: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """``A·B ≈ A₁B₁ + (A₁B₂ + A₂B₁) / weight`` from digits ``a = (A₁, A₂)``, ``b = (B₁, B₂)``: two
    products queued together, ``A₁·[B₁ | B₂]`` and ``A₂·B₁`` (A₂B₂ is below the digits'
    precision). int8: the integers combined exactly in int64 (``weight`` 254) and divided by the
    factors ``f``; bf16: the fp32 sums added in float64 (``weight`` 1)."""
    n = b[0].shape[1]
    first, cross = gemm_partials_many(pool, [(a[0], np.concatenate(b, axis=1)), (a[1], b[0])])
    if pool.cfg.acc_dtype == "int32":
        exact = weight * first[:, :n] + first[:, n:] + cross
        return exact.astype(np.float64) / (weight * np.asarray(f))
    wide = [np.asarray(p, np.float32).astype(np.float64) for p in (first[:, :n], first[:, n:], cross)]
    return wide[0] + (wide[1] + wide[2])


def gemm_edge(cfg: AccelConfig, block: int, mem_bytes: int) -> int:
    """The largest block edge up to ``block`` whose A, B (input type) and C (accumulators) fit in
    the device memory together, with their alignment gaps."""
    per_element = 2 * cfg.in_bits // 8 + 4
    return max(1, min(block, isqrt((mem_bytes - 3 * kernels.ALIGN) // per_element)))


def gemm_partials(pool: Pool, qa: npt.NDArray, qb: npt.NDArray) -> npt.NDArray:
    """The tile's A·B on encoded operands, blocked: int64 (int8 tiles) or float32 (bf16) sums of
    the K blocks' full accumulators, in K order."""
    return gemm_partials_many(pool, [(qa, qb)])[0]


def gemm_partials_many(pool: Pool, pairs: list[tuple[npt.NDArray, npt.NDArray]]) -> list[npt.NDArray]:
    """:func:`gemm_partials` of several (A, B) pairs, their blocks all queued at once (so they
    spread over the devices together)."""
    edge = gemm_edge(pool.cfg, pool.block, pool.mem_bytes)
    jobs = []
    for index, (qa, qb) in enumerate(pairs):
        rows, inner, cols = (_spans(size, edge) for size in (qa.shape[0], qa.shape[1], qb.shape[1]))
        jobs += [(index, r, i, c) for r in rows for c in cols for i in inner]
    blocks = _run(
        pool,
        [partial(kernels.gemm, a=pairs[p][0][r[0] : r[1], i[0] : i[1]], b=pairs[p][1][i[0] : i[1], c[0] : c[1]],
                 budget=pool.budget) for p, r, i, c in jobs],
    )  # fmt: skip
    wide = pool.cfg.acc_dtype == "int32"
    outs = [np.zeros((qa.shape[0], qb.shape[1]), np.int64 if wide else np.float32) for qa, qb in pairs]
    for (p, r, _, c), block in zip(jobs, blocks, strict=True):
        part = block.out.view(np.int32).astype(np.int64) if wide else block.out.view(np.float32)
        outs[p][r[0] : r[1], c[0] : c[1]] += part
    return outs


# -- conv2D -------------------------------------------------------------------------------------


def conv2d(pool: Pool, x: npt.NDArray, w: npt.NDArray, stride: int = 1, pad: int = 0) -> npt.NDArray[np.float64]:
    """NHWC ``x`` with HWIO ``w`` on the CONV2D command: the operands encoded (int8 with their
    factors, or bf16), :func:`conv2d_partials`, the accumulators divided by the factors."""
    _check_conv(x, w, stride, pad)
    _check_int8(pool, x=x, w=w)
    qx, qw, f = _conv_operands(pool, x, w)
    return _accumulators(pool, conv2d_partials(pool, qx, qw, stride, pad), f)


def conv2d_partials(pool: Pool, qx: npt.NDArray, qw: npt.NDArray, stride: int = 1, pad: int = 0) -> npt.NDArray:
    """The tile's CONV2D on encoded operands (NHWC, HWIO bit patterns): its full accumulators as
    int32 (int8 tiles) or float32 (bf16). The input is zero-padded on the host, then cut into
    instructions of one image, a band of output rows (at most ``block`` output pixels, at least
    one row) and at most ``block`` output channels; each band reads its input rows with the
    kernel's halo."""
    qx = np.pad(qx, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    kh, kw, _, cout = qw.shape
    oh, ow = (qx.shape[1] - kh) // stride + 1, (qx.shape[2] - kw) // stride + 1
    bands = _spans(oh, max(1, pool.block // ow))
    jobs = [(n, r, c) for n in range(qx.shape[0]) for r in bands for c in _spans(cout, pool.block)]
    blocks = _run(
        pool,
        [partial(kernels.conv2d, x=qx[n : n + 1, r[0] * stride : (r[1] - 1) * stride + kh], w=qw[..., c[0] : c[1]],
                 stride=stride, pad=0, budget=pool.budget) for n, r, c in jobs],
    )  # fmt: skip
    out = np.zeros((qx.shape[0], oh, ow, cout), np.uint32)
    for (n, r, c), block in zip(jobs, blocks, strict=True):
        out[n, r[0] : r[1], :, c[0] : c[1]] = block.out[0]
    return out.view(np.int32) if pool.cfg.acc_dtype == "int32" else out.view(np.float32)


def _conv_operands(pool: Pool, x: npt.NDArray, w: npt.NDArray) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray | float]:
    """Encoded input and weights and the output's factor (runtime/quant.py)."""
    if pool.cfg.dtype != "int8":
        return quant.bf16_bits(x), quant.bf16_bits(w), 1.0
    if pool.scaling == "tensor":
        fx, fw = quant.factor(x), quant.factor(w)
        return quant.quantize(x, fx), quant.quantize(w, fw), fx * fw
    # As GEMM's K: the input channels weighted so x's and w's slices share their range.
    d = quant.balance(x.reshape(-1, x.shape[3]), w.transpose(2, 0, 1, 3).reshape(w.shape[2], -1))
    x, w = x * d, w / d[:, None]
    fx, fw = quant.factor(x), quant.factors(w, (0, 1, 2))
    qw = quant.quantize_sums(w.reshape(-1, w.shape[3]), fw.reshape(1, -1)).reshape(w.shape)
    return quant.quantize(x, fx), qw, fx * fw


def _check_conv(x: npt.NDArray, w: npt.NDArray, stride: int, pad: int) -> None:
    if x.ndim != 4 or w.ndim != 4 or 0 in x.shape or 0 in w.shape:
        raise ValueError(f"conv2d: x must be N×H×W×C_in and w kh×kw×C_in×C_out (got {x.shape}, {w.shape})")
    if w.shape[2] != x.shape[3]:
        raise ValueError(f"w: must have C_in = {x.shape[3]} (the channels of x), got {w.shape[2]}")
    if not (1 <= w.shape[0] <= 7 and 1 <= w.shape[1] <= 7):
        raise ValueError(f"w: kernel must be 1-7 × 1-7, got {w.shape[0]} × {w.shape[1]}")
    if not (1 <= stride <= 255 and 0 <= pad <= 255):
        raise ValueError(f"stride, pad: must be 1-255 and 0-255, got {stride} and {pad}")
    if min(x.shape[1] + 2 * pad - w.shape[0], x.shape[2] + 2 * pad - w.shape[1]) < 0:
        raise ValueError(f"w: kernel {w.shape[:2]} larger than the padded input {x.shape[1:3]}")


# -- element-wise -------------------------------------------------------------------------------


def _rows(pool: Pool, flat: npt.NDArray, fill: int) -> npt.NDArray:
    """A flat operand as scratchpad rows of ``dim`` elements, the last padded with ``fill``."""
    dim = pool.cfg.dim
    rows = -(-flat.size // dim)
    out = np.full(rows * dim, fill, flat.dtype)
    out[: flat.size] = flat
    return out.reshape(rows, dim)


def _row_blocks(pool: Pool, rows: int, regions: int) -> list[tuple[int, int]]:
    return _spans(rows, min(pool.block, kernels.max_vec_rows(pool.cfg, regions)))


def elementwise(pool: Pool, name: str, a: npt.NDArray, b: npt.NDArray | None = None) -> npt.NDArray[np.float64]:
    """``name`` (ELEMENTWISE) element by element on the vector engine, blocks of rows."""
    op, types = ELEMENTWISE[name]
    if pool.cfg.dtype not in types:
        raise ValueError(f"precision: {name} runs on {' or '.join(types)} tiles, not {pool.cfg.dtype}")
    if not pool.cfg.vector:
        raise ValueError(f"device: {name} runs on the vector engine, which tile {pool.cfg.name} is built without")
    if a.size == 0:
        raise ValueError(f"a: must not be empty (shape {a.shape})")
    if b is not None and b.shape != a.shape:
        raise ValueError(f"b: must have the shape of a, {a.shape}, got {b.shape}")
    _check_int8(pool, a=a, b=b)
    qa, qb, shift, scale = _elementwise_operands(pool, op, a, b)
    ra = _rows(pool, qa.ravel(), 0)
    rb = _rows(pool, qb.ravel(), 0) if qb is not None else None
    spans = _row_blocks(pool, ra.shape[0], 3)
    blocks = _run(
        pool,
        [partial(kernels.vec, op=op, a=ra[lo:hi], b=None if rb is None else rb[lo:hi], budget=pool.budget,
                 shift=shift) for lo, hi in spans],
    )  # fmt: skip
    out = np.concatenate([blk.out for blk in blocks]).ravel()[: a.size].reshape(a.shape)
    if pool.cfg.dtype == "int8":
        return quant.dequant(out, 8, scale)
    return quant.from_bf16(out)


def _elementwise_operands(
    pool: Pool, op: VecOp, a: npt.NDArray, b: npt.NDArray | None
) -> tuple[npt.NDArray, npt.NDArray | None, int, float]:
    """Encoded operands, the VEC shift and the result's factor (eqs. 6-8 for int8)."""
    if pool.cfg.dtype == "bf16":
        return quant.bf16_bits(a), None if b is None else quant.bf16_bits(b), 0, 1.0
    if op in (VecOp.ADD, VecOp.SUB):
        f = quant.add_factor(a, b)
        return quant.quantize(a, f), quant.quantize(b, f), 0, f
    if op == VecOp.MUL:
        fa, fb = quant.factor(a), quant.factor(b)
        return quant.quantize(a, fa), quant.quantize(b, fb), quant.MUL_SHIFT, fa * fb / 2**quant.MUL_SHIFT
    f = quant.factor(a)
    return quant.quantize(a, f), None, 0, f


# -- matrix-wise: mean, max ---------------------------------------------------------------------


def reduce(pool: Pool, name: str, a: npt.NDArray) -> float:
    """``mean`` or ``max`` of all elements: each row of ``dim`` elements folded on the vector
    engine (sum into the accumulator, or max), the row results folded on the host (GPTPU §6.2.1)."""
    if a.size == 0:
        raise ValueError(f"a: must not be empty (shape {a.shape})")
    _check_int8(pool, a=a)
    is_max = name == "max"
    f = quant.factor(a) if pool.cfg.dtype == "int8" else 1.0
    q = _encode(pool, a, f).ravel()
    rows = _rows(pool, q, q[0] if is_max else 0)  # padding that changes neither the max nor the sum
    # A max keeps input and result rows in the scratchpad; a sum has one accumulator row per row.
    limit = kernels.max_vec_rows(pool.cfg, 2) if is_max else min(kernels.max_vec_rows(pool.cfg, 1), pool.cfg.acc_rows)
    spans = _spans(rows.shape[0], min(pool.block, limit))
    blocks = _run(
        pool, [partial(kernels.fold, a=rows[lo:hi], reduce_max=is_max, budget=pool.budget) for lo, hi in spans]
    )
    parts = np.concatenate([blk.out for blk in blocks])
    if is_max:
        values = quant.dequant(parts, 8, f) if pool.cfg.dtype == "int8" else quant.from_bf16(parts)
        return float(values.max())
    if pool.cfg.acc_dtype == "int32":
        return float(parts.view(np.int32).astype(np.int64).sum()) / f / a.size
    return float(parts.view(np.float32).astype(np.float64).sum()) / a.size


# -- host-side shape operators ------------------------------------------------------------------


def crop(a: npt.NDArray, top: int, left: int, height: int, width: int) -> npt.NDArray:
    """The ``height × width`` sub-matrix at (``top``, ``left``) (host-side)."""
    _check_2d("a", a)
    if not (top >= 0 and left >= 0 and height >= 1 and width >= 1):
        raise ValueError("crop: top, left must be ≥ 0 and height, width ≥ 1")
    if top + height > a.shape[0] or left + width > a.shape[1]:
        raise ValueError(f"crop: the window {height}×{width} at ({top}, {left}) leaves a {a.shape[0]}×{a.shape[1]} a")
    return a[top : top + height, left : left + width].copy()


def ext(a: npt.NDArray, rows: int, cols: int) -> npt.NDArray:
    """``a`` zero-padded to ``rows × cols`` (host-side)."""
    _check_2d("a", a)
    if rows < a.shape[0] or cols < a.shape[1]:
        raise ValueError(f"ext: rows, cols must be at least {a.shape[0]}, {a.shape[1]} (got {rows}, {cols})")
    out = np.zeros((rows, cols), a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out

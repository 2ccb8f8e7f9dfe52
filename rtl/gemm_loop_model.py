"""NumPy model of the GEMM and CONV2D loop commands (rtl/gemm_loop.py): the result, rounded in the
hardware's order.

Per element: the optional bias (or C), then each K tile's mesh sum (from +0) added in the
accumulator, then the read-out. GEMM K tiles are ``rows``-wide slices of K; CONV2D's are
``rows``-wide slices of C_in at each kernel position in (kh, kw) order, over the im2col matrix,
or, when C_in < rows, ``rows``-wide slices of the im2col K itself (kernel positions packed).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.accumulator_model import add_rows
from rtl.config import AccelConfig
from rtl.mesh_model import mesh_tile
from rtl.readout_model import readout

__all__ = [
    "block_min_rows",
    "conv_a_rows",
    "conv_k_tiles",
    "gemm_k_tiles",
    "loop_result",
    "resident_b_fits",
    "resident_b_rows",
]


def gemm_k_tiles(cfg: AccelConfig, k: int) -> list[tuple[int, int]]:
    """A GEMM's K tiles as (first row of B, width)."""
    return [(k0, min(cfg.rows, k - k0)) for k0 in range(0, k, cfg.rows)]


def conv_k_tiles(cfg: AccelConfig, kh: int, kw: int, cin: int) -> list[tuple[int, int]]:
    """The CONV2D loop's K tiles: at each kernel position (kh, kw), ``rows``-wide slices of C_in;
    with C_in < rows the kernel positions are packed: ``rows``-wide slices of the whole im2col K
    (kh, kw, C_in), as for a GEMM."""
    if cin < cfg.rows:
        return gemm_k_tiles(cfg, kh * kw * cin)
    return [
        ((i * kw + j) * cin + c0, min(cfg.rows, cin - c0))
        for i in range(kh)
        for j in range(kw)
        for c0 in range(0, cin, cfg.rows)
    ]


def block_min_rows(cfg: AccelConfig) -> int:
    """The loop's least M block when it cuts M (rtl/gemm_loop.py): blocks of at least this many
    rows keep a weight load (about R beats per R × C tile row group) under half the bus time of the
    block's EXEC."""
    bus_bytes = cfg.dma_bits // 8
    return max(cfg.rows, 2 * cfg.rows * -(-cfg.cols * (cfg.in_bits // 8) // bus_bytes))


def conv_a_rows(cfg: AccelConfig, pixels: int, k_tiles: int) -> int:
    """Scratchpad rows a CONV2D of ``pixels`` output pixels (its M) and ``k_tiles`` K tiles keeps
    its A in when its A region has room for them: all of M if it is at most one block, else two
    blocks (about M/8 rows, at least ``block_min_rows``) of every K slice. With resident weights
    these are the region's first rows wherever B lies above them (the loop's odd blocks follow
    the even blocks' rows)."""
    block = max(-(-pixels // 8), block_min_rows(cfg))
    return k_tiles * (pixels if pixels <= block else 2 * block)


def resident_b_rows(cfg: AccelConfig, b: npt.NDArray, stride: int) -> npt.NDArray:
    """The scratchpad image of a resident B (K × N) for a GEMM with flag [21] (docs/isa.md): N tile
    ``j`` (columns ``j·cols`` on) is K rows from row ``j·stride`` on, a row per row of B, its
    ``cols`` columns in the row's first elements and zeros after them (the rows a LOAD of those
    columns writes). Rows between the tiles (``stride`` > K) are left zero."""
    k, n = b.shape
    tiles = -(-n // cfg.cols)
    out = np.zeros(((tiles - 1) * stride + k, cfg.dim), b.dtype)
    for j in range(tiles):
        cols = b[:, j * cfg.cols : (j + 1) * cfg.cols]
        out[j * stride : j * stride + k, : cols.shape[1]] = cols
    return out


def resident_b_fits(cfg: AccelConfig, base: int, k: int, n: int, stride: int) -> bool:
    """The loop's rule for a resident B from row ``base``: it lies in the A region, at least one
    row per weight slot of the region below it (the loop's A rows); else SP_RANGE, nothing issued."""
    layout = cfg.sp_layout
    span = (-(-n // cfg.cols) - 1) * stride + k
    return base >= layout.a_base + layout.slots and base + span <= layout.a_base + layout.a_rows


def loop_result(
    cfg: AccelConfig,
    a: npt.NDArray,
    b: npt.NDArray,
    init: npt.NDArray | None,
    scale: int,
    act: int,
    out: int,
    k_tiles: list[tuple[int, int]] | None = None,
) -> npt.NDArray:
    """``act(scale · (A·B + init))`` as the loop computes it, bit patterns in and out (accumulator
    slots of 32 bits; a narrow result in the low bits). ``init`` is the bias or C (accumulator
    type), broadcast over the rows, or None."""
    m, k = a.shape
    n = b.shape[1]
    acc = None if init is None else np.broadcast_to(init, (m, n)).astype(np.uint32)
    for k0, width in k_tiles if k_tiles is not None else gemm_k_tiles(cfg, k):
        # Every output column is summed on its own, so the N tiles of ``cols`` columns of one K tile
        # are modelled as one mesh tile as wide as N (the same sums, one NumPy call instead of N/cols).
        a_t = np.zeros((m, cfg.rows), a.dtype)
        a_t[:, :width] = a[:, k0 : k0 + width]
        w_t = np.zeros((cfg.rows, n), b.dtype)
        w_t[:width] = b[k0 : k0 + width]
        part = mesh_tile(cfg, a_t, w_t, np.zeros((m, n), np.uint32))
        acc = part if acc is None else add_rows(cfg, acc, part)
    return readout(cfg, acc, scale, act, out)

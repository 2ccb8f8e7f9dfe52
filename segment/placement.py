"""Which weights of a segment stay in its tile's scratchpad (the Edge TPU's on-chip memory).

A resident B (GEMM and CONV2D flag [21], docs/isa.md) lies in the scratchpad's A region,
N-tile-major: N tile ``j`` is K rows from row ``base + j·K``, each row ``dim`` elements wide of
which ``cols`` are used; a convolution's K is kh·kw·C_in (its weights as the im2col GEMM's B). The
loop's own A rows are the region's rows below the resident B, from its start; the bottom
``reserve`` rows are kept for them (above the weight slots' minimum: twice the largest A a fully
connected layer needs, or for a convolution two of the loop's M blocks of about M/8 output pixels
with all their K slices, so its A is walked once per block, not once per N tile: with resident
weights the loop keeps its A in those first rows wherever B lies). Like the Edge TPU compiler, a
layer is resident whole or not at all: in layer order, each layer that still fits is placed, the
others stream from main memory on every inference. A streamed convolution's A uses the whole
region (its odd M blocks start half-way up), so a segment that streams one keeps nothing resident.
"""

from __future__ import annotations

from dataclasses import dataclass

from rtl.config import AccelConfig
from rtl.gemm_loop_model import conv_a_rows, conv_k_tiles
from segment.model import Layer

__all__ = ["STREAMED", "Placement", "place"]

STREAMED = -1  # the row of a layer that is not resident


@dataclass(frozen=True)
class Placement:
    """Per layer of a segment: its first scratchpad row, or STREAMED."""

    rows: tuple[int, ...]
    layers: tuple[Layer, ...]

    def resident_bytes(self) -> list[int]:
        return [0 if r == STREAMED else lay.weight_bytes for r, lay in zip(self.rows, self.layers, strict=True)]

    def streamed_bytes(self) -> list[int]:
        return [lay.weight_bytes if r == STREAMED else 0 for r, lay in zip(self.rows, self.layers, strict=True)]


def sp_rows_of(acc: AccelConfig, layer: Layer) -> int:
    """Scratchpad rows a resident copy of the layer's weights takes."""
    return -(-layer.n // acc.cols) * layer.b_rows


def a_reserve_of(acc: AccelConfig, layer: Layer) -> int:
    """Scratchpad rows kept below resident weights for the layer's A, every K slice of: all its
    rows twice (GEMM: the loop's two halves), or what the CONV2D loop keeps of its A (two of its
    M blocks of about an eighth of the output pixels)."""
    if layer.conv:
        return conv_a_rows(acc, layer.hw * layer.hw, len(conv_k_tiles(acc, layer.kernel, layer.kernel, layer.k)))
    return 2 * layer.rows * -(-layer.k // acc.dim)


def capacity(acc: AccelConfig, layers: list[Layer]) -> tuple[int, int]:
    """The first row resident weights may use and the end of the A region."""
    layout = acc.sp_layout
    reserve = max(layout.slots, max((a_reserve_of(acc, lay) for lay in layers), default=0))
    return layout.a_base + reserve, layout.a_base + layout.a_rows


def place(acc: AccelConfig, layers: list[Layer], stream_all: bool = False) -> Placement:
    """The segment's placement: layers resident in order while they fit (none with ``stream_all``)."""
    rows = [STREAMED] * len(layers)
    if not stream_all:
        at, end = capacity(acc, layers)
        for i, lay in enumerate(layers):
            need = sp_rows_of(acc, lay)
            if at + need <= end:
                rows[i], at = at, at + need
    if any(lay.conv and r == STREAMED for lay, r in zip(layers, rows, strict=True)):
        rows = [STREAMED] * len(layers)  # a streamed CONV2D's odd blocks use the region's upper half
    return Placement(tuple(rows), tuple(layers))

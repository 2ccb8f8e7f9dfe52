"""Which weights of a segment stay in its tile's scratchpad (the Edge TPU's on-chip memory).

A resident B (GEMM flag [21], docs/isa.md) lies in the scratchpad's A region, N-tile-major: N tile
``j`` is ``k`` rows from row ``base + j·k``, each row ``dim`` elements wide of which ``cols`` are
used. The loop's own A rows are the region's rows below the resident B, from its start; the bottom
``reserve`` rows are kept for them (the largest A a layer needs, twice for the loop's two halves,
above the weight slots' minimum). Like the Edge TPU compiler, a layer is resident whole or not at
all: in layer order, each layer that still fits is placed, the others stream from main memory on
every inference. CONV2D has no resident-weight form and uses the whole A region, so a segment with
a convolution keeps nothing resident.
"""

from __future__ import annotations

from dataclasses import dataclass

from rtl.config import AccelConfig
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
    return -(-layer.n // acc.cols) * layer.k


def a_rows_of(acc: AccelConfig, layer: Layer) -> int:
    """Scratchpad rows the GEMM loop keeps the layer's A in: every K slice of every row."""
    return layer.rows * -(-layer.k // acc.dim)


def capacity(acc: AccelConfig, layers: list[Layer]) -> tuple[int, int]:
    """The first row resident weights may use and the end of the A region."""
    layout = acc.sp_layout
    reserve = max(layout.slots, 2 * max((a_rows_of(acc, lay) for lay in layers), default=0))
    return layout.a_base + reserve, layout.a_base + layout.a_rows


def place(acc: AccelConfig, layers: list[Layer], stream_all: bool = False) -> Placement:
    """The segment's placement: layers resident in order while they fit (none with ``stream_all``)."""
    rows = [STREAMED] * len(layers)
    if not stream_all and not any(lay.conv for lay in layers):
        at, end = capacity(acc, layers)
        for i, lay in enumerate(layers):
            need = sp_rows_of(acc, lay)
            if at + need <= end:
                rows[i], at = at, at + need
    return Placement(tuple(rows), tuple(layers))

"""Formats of the operations that flow between the tile's units (docs/isa.md, docs/tile.md).

Kept apart from the units so the decoder, the loop generators and the gates share one definition.
"""

from typing import NamedTuple

from amaranth.lib import data

__all__ = [
    "KIND",
    "MAX_CONV_PIXELS",
    "MAX_DIM",
    "GemmCmd",
    "TransferBlock",
    "deps_layout",
    "dma_desc_layout",
    "transfer_blocks",
]

# The command set's size limits (docs/isa.md); the loops' counters are as wide as these need.
MAX_DIM = 65535  # GEMM M, K, N; CONV2D batch, C_in, H, W, C_out; LOAD/STORE rows and elements; EXEC M
MAX_CONV_PIXELS = 2**32 - 1  # CONV2D batch · OH · OW, the M of its GEMM

# DMA descriptor kinds (docs/tile.md, "DMA").
KIND = {"mem_to_sp": 0, "mem_to_acc": 1, "acc_to_mem": 2, "sp_to_mem": 3}

# Dependency flags of a LOAD / EXEC / STORE / VEC operation (docs/isa.md, "Dependency tokens"):
# the chain LOAD - EXEC - STORE ("prev", "next"), and each one's link to the vector unit ("side"),
# whose own "prev", "next" and "side" are EXEC, STORE and LOAD.
deps_layout = data.StructLayout(
    {"wait_prev": 1, "wait_next": 1, "signal_prev": 1, "signal_next": 1, "wait_side": 1, "signal_side": 1}
)


class TransferBlock(NamedTuple):
    """One DMA descriptor of a LOAD / STORE: ``rows`` memory rows ``stride`` bytes apart from
    ``addr``, ``elems`` elements each, to local rows from ``local``."""

    addr: int
    stride: int
    rows: int
    elems: int
    local: int


def transfer_blocks(
    addr: int, stride: int, rows: int, elems: int, local: int, width: int, esize: int
) -> list[TransferBlock]:
    """The descriptors of a LOAD or STORE (not transposed) whose rows hold ``elems`` elements of
    ``esize`` bytes, for local rows ``width`` elements wide (docs/isa.md, "Split transfers"): each
    memory row fills ``n = ⌈elems / width⌉`` consecutive local rows, memory row ``r`` from local row
    ``local + r·n``. One descriptor when that is one contiguous stretch of memory (or the rows fit
    a local row); else, per memory row, one for its full local rows and one for the partial last.
    The decoder issues exactly these (rtl/decode.py); this is its model."""
    if elems <= width:
        return [TransferBlock(addr, stride, rows, elems, local)]
    full, rest = divmod(elems, width)
    n, block = full + (rest > 0), width * esize
    if rest == 0 and (stride == elems * esize or rows == 1) and rows * n < 1 << 16:
        return [TransferBlock(addr, block, rows * n, width, local)]
    out = []
    for r in range(rows):
        out.append(TransferBlock(addr + r * stride, block, full, width, local + r * n))
        if rest:
            out.append(TransferBlock(addr + r * stride + full * block, block, 1, rest, local + r * n + full))
    return out


def dma_desc_layout() -> data.StructLayout:
    return data.StructLayout(
        {
            "kind": 2,
            "dram_addr": 32,
            "dram_stride": 32,
            "rows": 16,
            "elems": 16,
            "local_addr": 16,
            "transpose": 1,
            "accumulate": 1,
            "zero": 1,  # loads: write zero rows, read no memory
            "scale": 32,
            "act": 2,
            "out": 2,
            # mem→sp, not transposed: the row's first element goes to this column; > 0 writes only
            # the row's own elements (elems + col ≤ dim), 0 zero-fills the rest of the row.
            "col": 8,
        }
    )


# A decoded loop command (docs/isa.md, "GEMM" and "CONV2D").
GemmCmd = data.StructLayout(
    {
        "m": 32,  # CONV2D: batch · OH · OW, computed by the loop
        "k": 16,
        "n": 16,
        "a": 32,
        "lda": 32,
        "b": 32,
        "ldb": 32,
        "c": 32,
        "ldc": 32,
        "d": 32,
        "ldd": 32,
        "scale": 32,
        "trans_a": 1,
        "trans_b": 1,
        "b_sp": 1,  # B resident in the scratchpad: b is its first row, ldb the rows from one N tile to the next
        "bias": 2,  # 0 none, 1 full D, 2 one row of D repeated
        "acc_c": 1,
        "act": 2,
        "out": 2,
        "seq": 16,
        # CONV2D (docs/isa.md): the loop runs it as the GEMM of its implicit im2col matrix.
        "conv": 1,
        "batch": 16,
        "cin": 16,
        "h": 16,
        "w": 16,
        "kh": 8,
        "kw": 8,
        "stride": 8,
        "pad": 8,
    }
)

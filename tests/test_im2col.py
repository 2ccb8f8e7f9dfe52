"""The CONV2D loop's im2col walker (rtl/im2col.py) against the NumPy im2col (rtl/conv_model.py).

The walker's loads are applied the way the DMA applies them (strided rows, or zero rows) to a
scratchpad model, and each K slice of each M block must equal the matching columns of im2col.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from rtl.config import AccelConfig
from rtl.conv_model import im2col, out_size
from rtl.im2col import Im2col

CFG = AccelConfig.from_name("4x4-int8")


async def _set_up(ctx, dut: Im2col, shape: dict) -> None:
    """Give the walker ``shape`` and wait until its per-command setup is done."""
    for name, value in shape.items():
        ctx.set(getattr(dut.shape, name), value)
    ctx.set(dut.setup, 1)
    await ctx.tick()
    ctx.set(dut.setup, 0)
    await ctx.tick()
    while not ctx.get(dut.ready):
        await ctx.tick()


def walk(shape: dict, block: int, tiles: list[tuple[int, ...]]) -> list[list[dict]]:
    """Run the walker over all M blocks of ``block`` rows; per block and tile ``(ky, kx, c0, width)``
    or ``(ky, kx, c0, width, col)``, the loads it emits."""
    dut = Im2col(CFG)
    fields = ("kind", "dram_addr", "dram_stride", "rows", "elems", "local_addr", "zero", "col")
    out: list[list[dict]] = []

    async def bench(ctx) -> None:
        await _set_up(ctx, dut, shape)
        total = shape["batch"] * ctx.get(dut.oh) * ctx.get(dut.ow)
        for m0 in range(0, total, block):
            for ky, kx, c0, width, *col in tiles:
                for port, value in (("rows", min(block, total - m0)), ("local", 0), ("ky", ky), ("kx", kx)):
                    ctx.set(getattr(dut, port), value)
                ctx.set(dut.c0, c0)
                ctx.set(dut.width, width)
                ctx.set(dut.col, col[0] if col else 0)
                ctx.set(dut.active, 1)
                ctx.set(dut.desc.ready, 1)
                loads = []
                while True:
                    await ctx.tick()
                    if ctx.get(dut.step):  # a piece sent (valid) or skipped
                        if ctx.get(dut.desc.valid):
                            d = {f: ctx.get(getattr(dut.desc.p, f)) for f in fields}
                            d["first"], d["last"] = ctx.get(dut.first), ctx.get(dut.last)
                            loads.append(d)
                        if ctx.get(dut.last):
                            break
                await ctx.tick()  # the last load is taken at this edge
                ctx.set(dut.active, 0)
                ctx.set(dut.desc.ready, 0)
                await ctx.tick()
                out.append(loads)
            ctx.set(dut.next_block, 1)
            await ctx.tick()
            ctx.set(dut.next_block, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def apply(loads: list[dict], memory: np.ndarray, rows: int, width: int, sp: np.ndarray | None = None) -> np.ndarray:
    """The scratchpad rows the loads write (int8 elements: addresses are element indices), as the
    DMA writes them: a row at column 0 zero-fills the rest of the row, one at ``col`` > 0 only its
    own elements. A load of no rows or no elements is one the DMA refuses (ZERO_DIM)."""
    sp = np.full((rows, CFG.dim), -99, dtype=np.int64) if sp is None else sp
    for d in loads:
        col, elems = d["col"], d["elems"]
        assert d["rows"] > 0 and elems > 0, f"a load the DMA refuses (ZERO_DIM): {d}"
        assert col + elems <= CFG.dim
        for r in range(d["rows"]):
            start = d["dram_addr"] + r * d["dram_stride"]
            if col == 0:
                sp[d["local_addr"] + r] = 0
            sp[d["local_addr"] + r, col : col + elems] = 0 if d["zero"] else memory[start : start + elems]
    return sp[:, :width] if width < CFG.dim else sp


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(1, 6),
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(0, 3),
    st.integers(1, 40),
)
# Kernel columns 0 and 1 start inside past OW (lo 3 and 2, OW 1), where the walker's pieces end
# at hi instead; the gap from an image's last output row to the next image's first is negative
# (kh + 0 − 2·pad: 4 − 6).
@example(batch=2, cin=3, h=3, w=1, kh=4, kw=7, stride=1, pad=3, block=5)
def test_walker_builds_im2col(batch, cin, h, w, kh, kw, stride, pad, block) -> None:
    assume(h + 2 * pad >= kh and w + 2 * pad >= kw)  # the decoder refuses an empty output
    rng = np.random.default_rng(batch * 1000 + cin * 100 + h * 10 + w)
    x = rng.integers(-100, 100, size=(batch, h, w, cin))
    base = 64
    memory = np.concatenate([np.full(base, 77), x.reshape(-1)])
    r = CFG.rows
    tiles = [(i, j, c0, min(r, cin - c0)) for i in range(kh) for j in range(kw) for c0 in range(0, cin, r)]
    shape = {"batch": batch, "cin": cin, "h": h, "w": w, "kh": kh, "kw": kw, "stride": stride, "pad": pad, "a": base}
    walks = walk(shape, block, tiles)

    expected = im2col(x, kh, kw, stride, pad)
    total = batch * out_size(h, kh, stride, pad) * out_size(w, kw, stride, pad)
    assert len(walks) == len(range(0, total, block)) * len(tiles)
    for index, loads in enumerate(walks):
        m0 = (index // len(tiles)) * block
        ky, kx, c0, width = tiles[index % len(tiles)]
        rows = min(block, total - m0)
        assert [d["first"] for d in loads] == [1] + [0] * (len(loads) - 1)
        assert sum(d["rows"] for d in loads) == rows
        got = apply(loads, memory, rows, width)
        k = (ky * kw + kx) * cin + c0
        np.testing.assert_array_equal(got, expected[m0 : m0 + rows, k : k + width])


def packed_segments(kh: int, kw: int, cin: int, k0: int, width: int) -> list[tuple[int, int, int, int, int]]:
    """A packed K tile (C_in < rows) as the loop walks it: ``(ky, kx, c0, width, col)`` segments,
    each the channels of one kernel position, side by side from column 0."""
    out, col = [], 0
    while col < width:
        pos, c0 = divmod(k0 + col, cin)
        seg = min(cin - c0, width - col)
        out.append((pos // kw, pos % kw, c0, seg, col))
        col += seg
    assert pos < kh * kw
    return out


@settings(max_examples=20, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(1, CFG.rows - 1),
    st.integers(1, 7),
    st.integers(1, 7),
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(0, 3),
    st.integers(1, 30),
)
def test_walker_packs_kernel_positions(batch, cin, h, w, kh, kw, stride, pad, block) -> None:
    """Segments of several kernel positions in one K tile (C_in < rows) build its im2col columns,
    every column of the row written (zeros past the tile's width)."""
    assume(h + 2 * pad >= kh and w + 2 * pad >= kw)
    rng = np.random.default_rng(batch * 1000 + cin * 100 + h * 10 + w)
    x = rng.integers(-100, 100, size=(batch, h, w, cin))
    base = 64
    memory = np.concatenate([np.full(base, 77), x.reshape(-1)])
    k = kh * kw * cin
    k_tiles = [(k0, min(CFG.rows, k - k0)) for k0 in range(0, k, CFG.rows)]
    segments = [packed_segments(kh, kw, cin, k0, width) for k0, width in k_tiles]
    shape = {"batch": batch, "cin": cin, "h": h, "w": w, "kh": kh, "kw": kw, "stride": stride, "pad": pad, "a": base}
    walks = walk(shape, block, [seg for tile in segments for seg in tile])

    expected = im2col(x, kh, kw, stride, pad)
    total = batch * out_size(h, kh, stride, pad) * out_size(w, kw, stride, pad)
    index = 0
    for m0 in range(0, total, block):
        rows = min(block, total - m0)
        for (k0, width), tile in zip(k_tiles, segments, strict=True):
            sp = np.full((rows, CFG.dim), -99, dtype=np.int64)
            for _ in tile:
                loads = walks[index]
                index += 1
                apply(loads, memory, rows, CFG.dim, sp)
            want = np.zeros((rows, CFG.dim), dtype=np.int64)
            want[:, :width] = expected[m0 : m0 + rows, k0 : k0 + width]
            np.testing.assert_array_equal(sp, want)
    assert index == len(walks)


def apply_all(loads: list[dict], memory: np.ndarray, rows: int) -> np.ndarray:
    """``apply`` for long walks (column 0, one element per row), each load as one NumPy gather."""
    sp = np.full(rows, -99, dtype=np.int64)
    for d in loads:
        assert d["col"] == 0 and d["elems"] == 1
        assert d["rows"] > 0, f"a load the DMA refuses (ZERO_DIM): {d}"
        where = slice(d["local_addr"], d["local_addr"] + d["rows"])
        sp[where] = 0 if d["zero"] else memory[d["dram_addr"] + d["dram_stride"] * np.arange(d["rows"])]
    return sp


@pytest.mark.parametrize(
    "shape",
    [
        # OW = 65,535 + 2 − 1 + 1 = 65,537: output columns and a row's end past 16 bits (two images).
        {"batch": 2, "h": 1, "w": 65535, "kh": 1, "kw": 1, "pad": 1},
        # OW = 65,537 with a 3-wide kernel: each kernel column's inside columns end past 2^16.
        {"batch": 1, "h": 1, "w": 65535, "kh": 1, "kw": 3, "pad": 2},
    ],
)
def test_walker_outputs_wider_than_16_bits(shape: dict) -> None:
    """OW above 65,535 (stride 1 with padding, docs/isa.md): the output size, the walk's columns and
    the block starts' column offsets need a 17th bit, and the walks still build im2col."""
    shape = {"cin": 1, "stride": 1, "a": 64} | shape
    rng = np.random.default_rng(7)
    x = rng.integers(-100, 100, size=(shape["batch"], shape["h"], shape["w"], 1))
    memory = np.concatenate([np.full(shape["a"], 77), x.reshape(-1)])
    tiles = [(0, j, 0, 1) for j in range(shape["kw"])]
    block = 65535
    walks = walk(shape, block, tiles)
    expected = im2col(x, shape["kh"], shape["kw"], 1, shape["pad"])
    total = len(expected)
    assert len(walks) == len(range(0, total, block)) * len(tiles)
    for index, loads in enumerate(walks):
        m0 = (index // len(tiles)) * block
        rows = min(block, total - m0)
        _, kx, _, _ = tiles[index % len(tiles)]
        got = apply_all(loads, memory, rows)
        np.testing.assert_array_equal(got, expected[m0 : m0 + rows, kx], err_msg=f"block at {m0}, kernel column {kx}")


@pytest.mark.parametrize(
    ("h", "kh", "stride", "pad"),
    [(65535, 1, 1, 255), (65535, 7, 1, 255), (65535, 1, 2, 255), (65535, 1, 1, 0), (1, 1, 1, 1), (3, 7, 255, 255)],
)
def test_output_size_takes_17_bits(h: int, kh: int, stride: int, pad: int) -> None:
    """The setup's OH and OW (docs/isa.md's formula) over the fields' whole ranges: up to 66,045."""
    dut = Im2col(CFG)
    shape = {"batch": 1, "cin": 1, "h": h, "w": h, "kh": kh, "kw": kh, "stride": stride, "pad": pad, "a": 0}
    got = []

    async def bench(ctx) -> None:
        await _set_up(ctx, dut, shape)
        got.extend([ctx.get(dut.oh), ctx.get(dut.ow)])

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [out_size(h, kh, stride, pad)] * 2

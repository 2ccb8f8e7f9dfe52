"""The DMA's burst planner (rtl/dma.py, ``_Engine._planner``) in the Amaranth simulator: the read
engine's AR bursts, address and length, are exactly the documented cut of its segments into INCR
bursts of at most 256 beats that never cross a 4 KiB page, for long contiguous transfers, unaligned
starts, and strided rows that cross page ends (cut in two) among rows that do not (the planner
counts lanes of the smallest element, not bytes, picks the nearer of the page end and the 256-beat
limit by one compare, and foresees whether the next row is one burst as the previous row's goes)."""

import pytest
from amaranth.sim import Simulator

from rtl.config import AccelConfig
from rtl.dma import DmaKind, DmaRead


def _expected(addr: int, stride: int, rows: int, row_bytes: int, beat: int) -> list[tuple[int, int]]:
    """(address aligned down to the bus, AXI len) of every burst, by the rule in rtl/dma.py."""
    contiguous = rows == 1 or stride == row_bytes
    segments = [(addr, rows * row_bytes)] if contiguous else [(addr + r * stride, row_bytes) for r in range(rows)]
    bursts = []
    for pos, left in segments:
        while left:
            lane = pos % beat
            take = min(left, 4096 - pos % 4096, 256 * beat - lane)
            bursts.append((pos - lane, (lane + take - 1) // beat))
            pos, left = pos + take, left - take
    return bursts


def _bursts(cfg: AccelConfig, desc: dict) -> list[tuple[int, int]]:
    dut = DmaRead(cfg, max_reads=4)
    seen: list[tuple[int, int]] = []

    async def bench(ctx) -> None:
        axi, pending, beats = dut.m_axi, [], []
        for field, value in desc.items():
            ctx.set(getattr(dut.cmd.payload, field), value)
        for signal in (axi.arready, dut.done.ready, dut.sp_write.ready, dut.acc_write.ready):
            ctx.set(signal, 1)
        ctx.set(dut.cmd.valid, 1)
        for _ in range(20_000):
            if ctx.get(dut.done.valid):
                assert ctx.get(dut.done.payload.code) == 0
                return
            if not beats and pending:
                length = pending.pop(0)
                beats = [k == length for k in range(length + 1)]
            ctx.set(axi.rvalid, bool(beats))
            ctx.set(axi.rlast, bool(beats) and beats[0])
            if ctx.get(axi.arvalid):
                seen.append((ctx.get(axi.araddr), ctx.get(axi.arlen)))
                pending.append(ctx.get(axi.arlen))
            if beats and ctx.get(axi.rready):
                beats.pop(0)
            taken = ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready)
            await ctx.tick()
            if taken:
                ctx.set(dut.cmd.valid, 0)
        raise AssertionError("the transfer did not finish")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


CONFIGS = [
    AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16", sp_kib=128, acc_kib=32),  # 8-byte beats
    AccelConfig(rows=8, cols=8, dtype="bf16", dma_bits=128, sp_kib=64, acc_kib=8),  # 16-byte beats
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda cfg: f"{cfg.name}-{cfg.dma_bits}b")
@pytest.mark.parametrize(
    ("addr", "stride", "rows"),
    [
        (0x2000 + 6, None, 700),  # contiguous, an unaligned start: 256-beat bursts, then the page end
        (0x3000 - 40, None, 600),  # contiguous from just below a page end
        (0x5000 - 4, 4096, 5),  # strided rows, each across a page end
        (0x7000 - 30, 4100, 12),  # strided rows drifting across page ends: whole, cut, whole again
        (0x9000 + 2, 38, 40),  # strided rows within a page, each one burst
    ],
)
def test_read_bursts_follow_the_rule(cfg: AccelConfig, addr: int, stride: int | None, rows: int) -> None:
    row_bytes = cfg.dim * cfg.in_bits // 8
    stride = row_bytes if stride is None else stride
    desc = {
        "kind": DmaKind.MEM_SP,
        "dram_addr": addr,
        "dram_stride": stride,
        "rows": rows,
        "elems": cfg.dim,
        "local_addr": 0,
    }
    assert _bursts(cfg, desc) == _expected(addr, stride, rows, row_bytes, cfg.dma_bits // 8)

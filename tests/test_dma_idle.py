"""The read engine's ``idle`` (rtl/dma.py, ``DmaRead``) in the Amaranth simulator: the tile's
simulators stop an idle engine's clock (rtl/tile.py), so ``idle`` must mean that nothing is left to
do. In every cycle it is high and no descriptor is offered, the engine issues no burst, takes no
beat, writes no row and reports nothing; and every descriptor is reported before it rises.
Transposed loads are the case that matters: their block stage writes its rows after the rest of
the engine has emptied."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.config import AccelConfig
from rtl.dma import DmaKind, DmaRead


def _descriptors(cfg: AccelConfig, rng: random.Random, count: int) -> list[dict]:
    out = []
    for _ in range(count):
        transpose = rng.random() < 0.6
        rows, elems = rng.randint(1, cfg.dim), rng.randint(1, cfg.dim)
        out.append(
            {
                "kind": DmaKind.MEM_SP,
                "dram_addr": rng.randrange(0, 4096, cfg.in_bits // 8),
                "dram_stride": rng.choice([elems * cfg.in_bits // 8, 64]),
                "rows": rows,
                "elems": elems,
                "local_addr": rng.randrange(0, cfg.sp_rows - cfg.dim),
                "transpose": int(transpose),
            }
        )
    return out


@pytest.mark.parametrize("name", ["4x4-int8", "8x8-bf16"])
def test_idle_means_nothing_left_to_do(name: str) -> None:
    cfg = AccelConfig.from_name(name)
    rng = random.Random(name)
    dut = DmaRead(cfg, max_reads=4)
    descriptors = _descriptors(cfg, rng, 24)
    seen = {"done": 0, "idle_cycles": 0}
    beat_bytes = cfg.dma_bits // 8

    async def bench(ctx) -> None:
        axi, bursts, beats = dut.m_axi, [], []
        ctx.set(axi.arready, 1)
        ctx.set(dut.done.ready, 1)
        ctx.set(dut.sp_write.ready, 1)
        sent = pause = 0
        for _ in range(4000):
            if seen["done"] == len(descriptors) and ctx.get(dut.idle):
                break
            # Descriptors back to back or after a pause, so the engine goes idle between some.
            pause = max(0, pause - 1)
            offer = sent < len(descriptors) and pause == 0
            if offer:
                for field, value in descriptors[sent].items():
                    ctx.set(getattr(dut.cmd.payload, field), value)
            ctx.set(dut.cmd.valid, offer)
            # The memory: bursts answered in order, a beat per cycle after a random delay.
            if not beats and bursts and rng.random() < 0.5:
                addr, length = bursts.pop(0)
                beats = [(addr + k * beat_bytes, k == length) for k in range(length + 1)]
            ctx.set(axi.rvalid, bool(beats))
            if beats:
                addr, last = beats[0]
                ctx.set(axi.rdata, int.from_bytes(bytes((addr + i) % 251 for i in range(beat_bytes)), "little"))
                ctx.set(axi.rlast, last)
            ctx.set(axi.rresp, 0)

            idle = ctx.get(dut.idle)
            if idle and not offer:
                seen["idle_cycles"] += 1
                quiet = (axi.arvalid, axi.rready, dut.sp_write.valid, dut.acc_write.valid, dut.done.valid)
                assert not any(ctx.get(sig) for sig in quiet), "an idle engine is still working"
                assert not bursts and not beats
                assert seen["done"] == sent, "a descriptor accepted but not reported while idle"
            if ctx.get(axi.arvalid):
                bursts.append((ctx.get(axi.araddr), ctx.get(axi.arlen)))
            if beats and ctx.get(axi.rready):
                beats.pop(0)
            seen["done"] += ctx.get(dut.done.valid)
            if offer and ctx.get(dut.cmd.ready):
                sent += 1
                pause = rng.choice([0, 0, 10, 80])
            await ctx.tick()
        assert seen["done"] == sent == len(descriptors)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["idle_cycles"] > 20  # the run went through idle stretches

"""rtl/queue.py against Amaranth's own FIFOs: with the same random writes and reads, every port of
the queue equals the library FIFO's in every cycle (so swapping one for the other changes no cycle
count), and what comes out is what went in, in order (a deque)."""

import random
from collections import deque

import pytest
from amaranth.hdl import Module
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.sim import Simulator

from rtl.queue import Queue

WIDTH = 12
CYCLES = 600


def _simulate(m: Module, bench, counts: list[int]) -> tuple[int, int]:
    """Run ``bench`` on ``m``; (entries written, entries read) as it counted them."""
    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return counts[0], counts[1]


def _run(depth: int, buffered: bool, seed: int) -> tuple[int, int]:
    m = Module()
    m.submodules.ours = ours = Queue(width=WIDTH, depth=depth, buffered=buffered)
    m.submodules.ref = ref = (SyncFIFOBuffered if buffered else SyncFIFO)(width=WIDTH, depth=depth)
    rng = random.Random(seed)
    counts = [0, 0]

    async def bench(ctx) -> None:
        model: deque[int] = deque()
        for cycle in range(CYCLES):
            # Phases of mostly writes and mostly reads, so the queue is full and empty often.
            write_p = 0.8 if (cycle // 50) % 2 == 0 else 0.3
            w_en, r_en, data = rng.random() < write_p, rng.random() < 1 - write_p, rng.randrange(1 << WIDTH)
            for fifo in (ours, ref):
                ctx.set(fifo.w_en, w_en)
                ctx.set(fifo.r_en, r_en)
                ctx.set(fifo.w_data, data)
            for name in ("w_rdy", "r_rdy", "level", "w_level", "r_level"):
                assert ctx.get(getattr(ours, name)) == ctx.get(getattr(ref, name)), f"{name}, cycle {cycle}"
            if ctx.get(ref.r_rdy):
                assert ctx.get(ours.r_data) == ctx.get(ref.r_data), f"r_data, cycle {cycle}"
                if r_en:
                    assert ctx.get(ours.r_data) == model.popleft()
                    counts[1] += 1
            if w_en and ctx.get(ours.w_rdy):
                model.append(data)
                counts[0] += 1
            await ctx.tick()

    return _simulate(m, bench, counts)


@pytest.mark.parametrize("buffered", [False, True])
@pytest.mark.parametrize("depth", [2, 3, 4, 7, 16])
def test_queue_matches_amaranth_fifo(depth: int, buffered: bool) -> None:
    writes, reads = _run(depth, buffered, seed=depth * 2 + buffered)
    # The stimulus must have exercised the queue: many entries through it.
    assert writes > CYCLES // 5 and reads > CYCLES // 5


def test_unbuffered_depth_one() -> None:
    writes, reads = _run(1, False, seed=5)
    assert writes > CYCLES // 8 and reads > CYCLES // 8


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_buffered_depth_one_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        Queue(width=4, depth=1, buffered=True)


def _run_refill_late(depth: int, seed: int) -> tuple[int, int]:
    """The late-refilled queue against its own rule, modelled here: a head register, refilled in
    the cycle after it is empty (or read) when an entry is inside; every port, every cycle."""
    m = Module()
    m.submodules.ours = ours = Queue(width=WIDTH, depth=depth, buffered=True, refill_late=True)
    rng = random.Random(seed)
    counts = [0, 0]

    async def bench(ctx) -> None:
        inside: deque[int] = deque()
        head: int | None = None
        refill = False
        for cycle in range(CYCLES):
            write_p = 0.8 if (cycle // 50) % 2 == 0 else 0.3
            w_en, r_en, data = rng.random() < write_p, rng.random() < 1 - write_p, rng.randrange(1 << WIDTH)
            ctx.set(ours.w_en, w_en)
            ctx.set(ours.r_en, r_en)
            ctx.set(ours.w_data, data)
            w_rdy, r_rdy = len(inside) != depth - 1, head is not None
            assert ctx.get(ours.w_rdy) == w_rdy, f"w_rdy, cycle {cycle}"
            assert ctx.get(ours.r_rdy) == r_rdy, f"r_rdy, cycle {cycle}"
            assert ctx.get(ours.level) == len(inside) + r_rdy, f"level, cycle {cycle}"
            if r_rdy:
                assert ctx.get(ours.r_data) == head, f"r_data, cycle {cycle}"
            written, taken = w_en and w_rdy, r_en and r_rdy
            emptied = not refill and (not r_rdy or taken)
            next_refill = emptied and (written or len(inside) > refill)
            if refill:
                head = inside.popleft()
            elif taken:
                head = None
            if written:
                inside.append(data)
            counts[0] += written
            counts[1] += taken
            refill = next_refill
            await ctx.tick()

    return _simulate(m, bench, counts)


@pytest.mark.parametrize("depth", [2, 3, 8])
def test_refill_late(depth: int) -> None:
    writes, reads = _run_refill_late(depth, seed=depth)
    assert writes > CYCLES // 5 and reads > CYCLES // 5


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_refill_late_needs_buffered() -> None:
    with pytest.raises(ValueError, match="buffered"):
        Queue(width=4, depth=2, refill_late=True)

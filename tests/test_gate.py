"""Dependency gate (rtl/gate.py): tokens are waited for, taken at start, given at completion;
engine errors become error events and give no tokens; a flush drops the waiting operation."""

from amaranth.lib import data
from amaranth.sim import Simulator

from rtl.gate import Gate

OP = data.StructLayout({"x": 8})


def run(bench) -> None:
    dut = Gate(OP, unit=3)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def testbench(ctx) -> None:
        await bench(ctx, dut)

    sim.add_testbench(testbench)
    sim.run()


def offer(ctx, dut, x: int, wait_prev=0, wait_next=0, signal_prev=0, signal_next=0, seq=0) -> None:
    ctx.set(dut.inp.valid, 1)
    ctx.set(dut.inp.p.op.x, x)
    ctx.set(dut.inp.p.seq, seq)
    d = dut.inp.p.deps
    for name, v in (("wait_prev", wait_prev), ("wait_next", wait_next), ("signal_prev", signal_prev)):
        ctx.set(getattr(d, name), v)
    ctx.set(d.signal_next, signal_next)


async def hand_over(ctx, dut, x: int, **deps) -> None:
    """Offer an operation that waits for nothing: the gate takes it, then gives it to the engine."""
    offer(ctx, dut, x, **deps)
    assert ctx.get(dut.inp.ready)
    await ctx.tick()
    ctx.set(dut.inp.valid, 0)
    assert ctx.get(dut.engine.valid) and ctx.get(dut.engine.payload.x) == x
    await ctx.tick()


def test_waits_for_token_then_takes_it() -> None:
    async def bench(ctx, dut):
        ctx.set(dut.engine.ready, 1)
        offer(ctx, dut, 42, wait_prev=1)
        assert ctx.get(dut.inp.ready) and not ctx.get(dut.engine.valid), "taken into the gate's register first"
        await ctx.tick()
        offer(ctx, dut, 43)
        for _ in range(3):
            assert not ctx.get(dut.engine.valid) and ctx.get(dut.waiting_prev)
            assert not ctx.get(dut.inp.ready), "one operation is held at a time"
            await ctx.tick()
        ctx.set(dut.prev_avail, 1)
        assert ctx.get(dut.engine.valid) and ctx.get(dut.engine.payload.x) == 42
        assert ctx.get(dut.take_prev) and not ctx.get(dut.take_next) and not ctx.get(dut.inp.ready)
        await ctx.tick()
        ctx.set(dut.prev_avail, 0)
        assert ctx.get(dut.inp.ready) and not ctx.get(dut.engine.valid)
        await ctx.tick()
        ctx.set(dut.inp.valid, 0)
        assert ctx.get(dut.engine.valid) and ctx.get(dut.engine.payload.x) == 43 and not ctx.get(dut.take_prev)

    run(bench)


def test_gives_tokens_on_success_only() -> None:
    async def bench(ctx, dut):
        ctx.set(dut.engine.ready, 1)
        await hand_over(ctx, dut, 1, signal_next=1, seq=5)
        await hand_over(ctx, dut, 2, signal_prev=1, seq=6)
        assert ctx.get(dut.busy)
        ctx.set(dut.engine_done.valid, 1)
        assert ctx.get(dut.give_next) and not ctx.get(dut.give_prev) and not ctx.get(dut.error.valid)
        await ctx.tick()
        ctx.set(dut.engine_done.p.error, 1)
        ctx.set(dut.engine_done.p.code, 7)
        assert not ctx.get(dut.give_prev), "a failed operation must not release its dependants"
        assert ctx.get(dut.error.valid)
        assert (ctx.get(dut.error.payload.unit), ctx.get(dut.error.payload.code), ctx.get(dut.error.payload.seq)) == (
            3,
            7,
            6,
        )
        await ctx.tick()
        ctx.set(dut.engine_done.valid, 0)
        assert not ctx.get(dut.busy)

    run(bench)


def test_flush_drops_waiting_operation() -> None:
    async def bench(ctx, dut):
        offer(ctx, dut, 9, wait_next=1)
        await ctx.tick()
        ctx.set(dut.inp.valid, 0)
        assert ctx.get(dut.waiting_next) and not ctx.get(dut.inp.ready) and ctx.get(dut.busy)
        ctx.set(dut.flush, 1)
        ctx.set(dut.next_avail, 1)
        assert not ctx.get(dut.engine.valid)
        await ctx.tick()
        ctx.set(dut.flush, 0)
        assert ctx.get(dut.inp.ready) and not ctx.get(dut.busy), "the held operation is dropped"
        assert not ctx.get(dut.engine.valid)

    run(bench)


def test_full_counter_fails_the_giver() -> None:
    """A token given to a full counter would be lost: the operation reports BAD_DEPS instead."""
    from rtl.cmd import ERR

    async def bench(ctx, dut):
        ctx.set(dut.engine.ready, 1)
        await hand_over(ctx, dut, 1, signal_next=1, seq=9)
        await ctx.tick()  # the in-flight record reaches the buffered FIFO's output
        ctx.set(dut.next_full, 1)
        ctx.set(dut.prev_full, 1)  # not this operation's direction: ignored
        ctx.set(dut.engine_done.valid, 1)
        assert not ctx.get(dut.give_next) and ctx.get(dut.error.valid)
        assert (ctx.get(dut.error.payload.code), ctx.get(dut.error.payload.seq)) == (ERR["BAD_DEPS"], 9)

    run(bench)

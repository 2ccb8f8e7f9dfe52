"""Sequential multiplier and constant multiplication (rtl/multiplier.py) against Python integers."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.multiplier import Multiplier, times

EDGES = [0, 1, 2, 3, 2**16 - 1, 2**31, 2**32 - 1]


@pytest.mark.parametrize("b_width", [16, 17])  # 17: the loop's (OH and OW reach 66,045)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_products(b_width: int, data) -> None:
    dut = Multiplier(32, b_width)
    top = 2**b_width - 1
    cases = data.draw(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, top)), min_size=10, max_size=10))
    cases = cases + [(a, b) for a in EDGES for b in (0, 1, 2**15, 2**16 - 1, 2**16, top) if b <= top]
    got = []

    async def bench(ctx) -> None:
        for a, b in cases:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycles = 1
            while not ctx.get(dut.done):
                await ctx.tick()
                cycles += 1
            assert cycles == b_width + 1
            got.append(ctx.get(dut.product))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [a * b for a, b in cases]


@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 3, 4, 7, 16, 33, 63, 64, 96, 255]))
@settings(max_examples=60, deadline=None)
def test_constant_products(value: int, k: int) -> None:
    m = Module()
    x = Signal(32)
    y = Signal(32)
    m.d.comb += y.eq(times(x, k, 32))

    async def bench(ctx) -> None:
        ctx.set(x, value)
        assert ctx.get(y) == value * k % 2**32

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()

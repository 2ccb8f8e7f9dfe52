"""Sequential divider (rtl/divider.py) against Python integer division."""

from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from rtl.divider import Divider


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1)), min_size=20, max_size=20))
def test_quotients(cases) -> None:
    dut = Divider(16)
    got = []

    async def bench(ctx) -> None:
        for n, d in cases:
            ctx.set(dut.numerator, n)
            ctx.set(dut.denominator, d)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycles = 1
            while not ctx.get(dut.done):
                await ctx.tick()
                cycles += 1
            assert cycles == 17
            got.append(ctx.get(dut.quotient))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [n // d if d else 2**16 - 1 for n, d in cases]

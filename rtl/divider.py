"""A small sequential unsigned divider (restoring, one quotient bit per cycle).

The loop generators divide only once per command (tile counts, block sizes), so a few cycles
beat the area of a combinational divider.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Divider"]


class Divider(wiring.Component):
    """``quotient = numerator // denominator`` after ``width`` + 1 cycles; ``start`` latches the
    operands, ``done`` pulses with the result. A zero denominator gives all ones."""

    def __init__(self, width: int = 24) -> None:
        self.width = width
        super().__init__(
            {
                "start": In(1),
                "numerator": In(width),
                "denominator": In(width),
                "busy": Out(1),
                "done": Out(1),
                "quotient": Out(width),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        w = self.width
        rem = Signal(w + 1)
        num = Signal(w)
        den = Signal(w)
        step = Signal(range(w + 1))
        m.d.sync += self.done.eq(0)
        with m.If(self.start & ~self.busy):
            m.d.sync += [num.eq(self.numerator), den.eq(self.denominator), rem.eq(0), step.eq(w), self.busy.eq(1)]
        with m.Elif(self.busy):
            trial = Cat(num[w - 1], rem[:w])  # remainder shifted left, next numerator bit in
            fits = trial >= den
            m.d.sync += [
                rem.eq(Mux(fits, trial - den, trial)),
                num.eq(Cat(fits, num[: w - 1])),
                step.eq(step - 1),
            ]
            with m.If(step == 1):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        m.d.comb += self.quotient.eq(num)
        return m

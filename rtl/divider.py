"""A small sequential unsigned divider (restoring, one quotient bit per cycle).

The loop generators divide only once per command (tile counts, block sizes), so a few cycles
beat the area of a combinational divider.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Divider", "DividerPort"]


class Divider(wiring.Component):
    """``quotient = numerator // denominator`` after ``width`` + 1 cycles; ``start`` latches the
    operands, ``done`` pulses with the result (and ``remainder``, numerator mod denominator, with
    it). A zero denominator gives all ones.

    With ``short_width``, a division started with ``short`` set is one of a ``short_width``-bit
    numerator and takes ``short_width`` + 1 cycles, as a divider of that width would (its
    numerator starts at the top, so its quotient ends in the low bits): two users that need
    different widths share one divider with the timing each would have with its own."""

    def __init__(self, width: int = 24, *, short_width: int | None = None) -> None:
        assert short_width is None or 0 < short_width < width
        self.width, self.short_width = width, short_width
        short = {"short": In(1)} if short_width is not None else {}
        super().__init__(
            short
            | {
                "start": In(1),
                "numerator": In(width),
                "denominator": In(width),
                "busy": Out(1),
                "done": Out(1),
                "quotient": Out(width),
                "remainder": Out(width),
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
            if self.short_width is not None:
                with m.If(self.short):
                    m.d.sync += [num.eq(self.numerator << (w - self.short_width)), step.eq(self.short_width)]
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
        m.d.comb += [self.quotient.eq(num), self.remainder.eq(rem[:w])]
        return m


class DividerPort:
    """One user's side of a :class:`Divider` shared by units that never divide at once: its requests
    (``start``, ``numerator``, ``denominator``: zero while it does not ask, so the owner ORs its users'
    requests into the divider's inputs) and the divider's outputs, as a Divider has them, ``width``
    bits wide."""

    def __init__(
        self,
        width: int,
        start: Value,
        numerator: Value,
        denominator: Value,
        busy: Value,
        done: Value,
        quotient: Value,
        remainder: Value,
    ) -> None:
        self.width = width
        self.start, self.numerator, self.denominator = start, numerator, denominator
        self.busy, self.done, self.quotient, self.remainder = busy, done, quotient, remainder

    @classmethod
    def requests_of(cls, div: Divider, width: int, name: str) -> "DividerPort":
        """A new user of ``div`` with ``width``-bit operands: request signals of its own, ``div``'s outputs."""
        return cls(
            width,
            Signal(name=f"{name}_start"),
            Signal(width, name=f"{name}_numerator"),
            Signal(width, name=f"{name}_denominator"),
            div.busy,
            div.done,
            div.quotient[:width],
            div.remainder[:width],
        )

"""Multiplication without DSP blocks, for the loop commands' per-command products.

The loops need a few products once per command (block strides such as ``mb · lda``, the output
pixel count ``batch · OH · OW``) and otherwise step their addresses by additions (strength
reduction, docs/tile.md). A small sequential shift-and-add unit computes the former in one cycle
per multiplier bit, and :func:`times` multiplies by an elaboration-time constant with adders only.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Multiplier", "MultiplierPort", "times"]


def times(value: Value, k: int, width: int) -> Value:
    """``value · k`` modulo ``2**width`` for a constant ``k ≥ 0``, as a sum of shifted copies (no
    multiplier cell, so synthesis never spends a DSP block on it)."""
    value = Value.cast(value)
    terms = [Cat(Const(0, n), value)[:width] for n in range(k.bit_length()) if k >> n & 1]
    total = Const(0, width)
    for term in terms:
        total = (total + term)[:width]
    return total


class Multiplier(wiring.Component):
    """``product = a · b`` (exact, ``a_width + b_width`` bits) ``b_width`` cycles after ``start``;
    ``start`` takes the operands, ``done`` pulses with the result, which ``product`` holds only in
    that cycle. ``start`` while ``busy`` is ignored.

    The operands are taken into the shift-and-add registers in every cycle the unit is idle, not
    only by ``start``: the wide registers' enables are then ``busy``, a register, and a user's start
    condition (a compare after an adder, say) only sets ``busy`` and the step count (it reached the
    accumulator's enable, the loop's longest ECP5 path)."""

    def __init__(self, a_width: int, b_width: int) -> None:
        self.a_width, self.b_width = a_width, b_width
        super().__init__(
            {
                "start": In(1),
                "a": In(a_width),
                "b": In(b_width),
                "busy": Out(1),
                "done": Out(1),
                "product": Out(a_width + b_width),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        wa, wb = self.a_width, self.b_width
        a = Signal(wa)
        # The partial product above the multiplier's bits still to use: the adder is only as wide
        # as a (plus its carry), and the multiplier needs no register of its own.
        acc = Signal(wa + wb)
        step = Signal(range(wb + 1))
        m.d.sync += self.done.eq(0)
        with m.If(~self.busy):
            m.d.sync += [a.eq(self.a), acc.eq(self.b)]
            with m.If(self.start):
                m.d.sync += [step.eq(wb), self.busy.eq(1)]
        with m.Else():
            # Least significant multiplier bit first: the upper part gains a or not, then all of
            # acc moves down a bit.
            upper = acc[wb:] + Mux(acc[0], a, 0)
            m.d.sync += [acc.eq(Cat(acc[1:wb], upper)), step.eq(step - 1)]
            with m.If(step == 1):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        m.d.comb += self.product.eq(acc)
        return m


class MultiplierPort:
    """One user's side of a :class:`Multiplier` shared by units that never multiply at once: its
    requests (``start``, ``a``, ``b``: zero while it does not ask, so the owner ORs its users'
    requests into the multiplier's inputs) and the multiplier's outputs, as a Multiplier has them."""

    def __init__(self, start: Value, a: Value, b: Value, busy: Value, done: Value, product: Value) -> None:
        self.start, self.a, self.b = start, a, b
        self.busy, self.done, self.product = busy, done, product

    @classmethod
    def requests_of(cls, mul: Multiplier, name: str) -> "MultiplierPort":
        """A new user of ``mul``: request signals of its own, ``mul``'s outputs."""
        return cls(
            Signal(name=f"{name}_start"),
            Signal(mul.a_width, name=f"{name}_a"),
            Signal(mul.b_width, name=f"{name}_b"),
            mul.busy,
            mul.done,
            mul.product,
        )

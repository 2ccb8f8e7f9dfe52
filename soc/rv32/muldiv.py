"""Multiply and divide units.

The multiplier is a two-stage pipeline spread over execute and writeback: execute registers the
33-bit signed operands, writeback forms the 66-bit product, so a multiply issues every cycle and
only an instruction that uses its result right away waits one cycle.

The divider is iterative (one quotient bit per cycle) and runs beside the pipeline: execute starts
it and moves on; the result is written into the register file later through a free write slot, and
only instructions that touch its destination register (or another divide) wait for it.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Divider", "mul_operands", "mul_result"]


def mul_operands(a: Value, b: Value, funct3: Value) -> tuple[Value, Value]:
    """Extend the operands to 33-bit signed values for mul/mulh/mulhsu/mulhu (funct3 0..3)."""
    a_signed = (funct3 == 0b001) | (funct3 == 0b010)
    b_signed = funct3 == 0b001
    return Cat(a, a_signed & a[31]).as_signed(), Cat(b, b_signed & b[31]).as_signed()


def mul_result(m: Module, a: Value, b: Value, funct3: Value) -> Value:
    """The 32-bit result from registered 33-bit signed operands (funct3 0 takes the low word)."""
    product = Signal(signed(66))
    m.d.comb += product.eq(a * b)
    return Mux(funct3 == 0, product[0:32], product[32:64])


class Divider(wiring.Component):
    """div/divu/rem/remu (funct3 4..7) in 33 cycles; RISC-V results for x/0 and overflow, no trap.

    ``start`` is accepted only while ``busy`` and ``done`` are low. ``done`` holds the result until
    ``ack``.
    """

    start: In(1)
    a: In(32)
    b: In(32)
    funct3: In(3)
    busy: Out(1)
    done: Out(1)
    ack: In(1)
    result: Out(32)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        signed_op, want_rem = ~self.funct3[0], self.funct3[1]
        quo, rem, divisor = Signal(32), Signal(33), Signal(32)
        neg_quo, neg_rem, rem_sel, count = Signal(), Signal(), Signal(), Signal(range(33))
        a_neg = signed_op & self.a[31]
        b_neg = signed_op & self.b[31]
        with m.If(self.start):
            # Divide magnitudes; x/0 falls out of the loop as quotient all ones, remainder x.
            m.d.sync += [
                quo.eq(Mux(a_neg, -self.a, self.a)),
                rem.eq(0),
                divisor.eq(Mux(b_neg, -self.b, self.b)),
                neg_quo.eq((a_neg ^ b_neg) & (self.b != 0)),
                neg_rem.eq(a_neg),
                rem_sel.eq(want_rem),
                count.eq(32),
                self.busy.eq(1),
            ]
        with m.Elif(self.busy):
            shifted = Cat(quo[31], rem[0:32])
            diff = Signal(34)
            m.d.comb += diff.eq(shifted - divisor)
            fits = ~diff[33]
            m.d.sync += [rem.eq(Mux(fits, diff[0:33], shifted)), quo.eq(Cat(fits, quo[0:31])), count.eq(count - 1)]
            with m.If(count == 1):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        with m.If(self.ack):
            m.d.sync += self.done.eq(0)
        q = Mux(neg_quo, -quo, quo)
        r = Mux(neg_rem, -rem[0:32], rem[0:32])
        m.d.comb += self.result.eq(Mux(rem_sel, r, q))
        return m

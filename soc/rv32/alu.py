"""The integer ALU and branch comparator (combinational)."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Alu", "BranchUnit"]


class Alu(wiring.Component):
    """RV32I arithmetic: ``op`` is funct3 of OP/OP-IMM, ``alt`` selects SUB and SRA."""

    a: In(32)
    b: In(32)
    op: In(3)
    alt: In(1)
    out: Out(32)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        a, b, shamt = self.a, self.b, self.b[0:5]
        with m.Switch(self.op):
            with m.Case(0b000):
                m.d.comb += self.out.eq(Mux(self.alt, a - b, a + b))
            with m.Case(0b001):
                m.d.comb += self.out.eq(a << shamt)
            with m.Case(0b010):
                m.d.comb += self.out.eq(a.as_signed() < b.as_signed())
            with m.Case(0b011):
                m.d.comb += self.out.eq(a < b)
            with m.Case(0b100):
                m.d.comb += self.out.eq(a ^ b)
            with m.Case(0b101):
                m.d.comb += self.out.eq(Mux(self.alt, a.as_signed() >> shamt, a >> shamt))
            with m.Case(0b110):
                m.d.comb += self.out.eq(a | b)
            with m.Case(0b111):
                m.d.comb += self.out.eq(a & b)
        return m


class BranchUnit(wiring.Component):
    """Evaluates a branch condition given by the branch funct3."""

    a: In(32)
    b: In(32)
    funct3: In(3)
    taken: Out(1)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        eq, lt, ltu = self.a == self.b, self.a.as_signed() < self.b.as_signed(), self.a < self.b
        cond = Mux(self.funct3[2], Mux(self.funct3[1], ltu, lt), eq)
        m.d.comb += self.taken.eq(cond ^ self.funct3[0])
        return m

"""The multiply and accumulate halves of a processing element, chosen by the config's dtypes.

The PE keeps them apart so that a pipeline register can sit between them (``pe_stages`` = 2).
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.fp import Bf16Mul, FpAdd

__all__ = ["IntAdd", "IntMul", "make_adder", "make_multiplier", "product_bits"]


class IntMul(wiring.Component):
    """int8 × int8 → int16 (exact, two's complement bit patterns)."""

    a: In(8)
    b: In(8)
    p: Out(16)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.p.eq(self.a.as_signed() * self.b.as_signed())
        return m


class IntAdd(wiring.Component):
    """int32 + int16 → int32, wrapping (the accumulator is sized so a K ≤ 2^17 sum cannot overflow)."""

    acc: In(32)
    x: In(16)
    o: Out(32)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.o.eq(self.acc + self.x.as_signed())
        return m


def product_bits(cfg: AccelConfig) -> int:
    return 16 if cfg.dtype == "int8" else 32


def make_multiplier(cfg: AccelConfig) -> wiring.Component:
    return IntMul() if cfg.dtype == "int8" else Bf16Mul()


def make_adder(cfg: AccelConfig) -> wiring.Component:
    if cfg.dtype == "int8":
        return IntAdd()
    return FpAdd(23 if cfg.acc_dtype == "fp32" else 7)

"""The multiply and accumulate halves of a processing element, chosen by the config's dtypes.

The PE keeps them apart so that a pipeline register can sit between them (``pe_stages`` ≥ 2), and
the adder can be pipelined itself (``pe_stages`` ≥ 3, ``adder_registers``).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.fp import PRODUCT_FRAC_BITS, Bf16Mul, FpAdd

__all__ = ["IntAdd", "IntMul", "acc_mant_bits", "adder_registers", "make_adder", "make_multiplier", "product_bits"]


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
    """int32 + int16 → int32, wrapping (the accumulator is sized so a K ≤ 2^17 sum cannot overflow).

    With ``registers`` the sum leaves that many cycles later: a 32-bit add is short enough that
    the deeper PE pipelines only delay it, to keep int8 and bf16 meshes on one timing."""

    def __init__(self, registers: int = 0) -> None:
        self.registers = registers
        super().__init__({"acc": In(32), "x": In(16), "o": Out(32)})

    def elaborate(self, platform) -> Module:
        m = Module()
        total = self.acc + self.x.as_signed()
        for k in range(self.registers):
            reg = Signal(32, name=f"sum_d{k}")
            m.d.sync += reg.eq(total)
            total = reg
        m.d.comb += self.o.eq(total)
        return m


def product_bits(cfg: AccelConfig) -> int:
    return 16 if cfg.dtype == "int8" else 32


def make_multiplier(cfg: AccelConfig) -> wiring.Component:
    return IntMul() if cfg.dtype == "int8" else Bf16Mul(flagged=product_flagged(cfg))


def adder_registers(cfg: AccelConfig) -> int:
    """Pipeline registers inside a PE's adder: ``pe_stages`` less the product and sum registers."""
    return max(0, cfg.pe_stages - 2)


def acc_mant_bits(cfg: AccelConfig) -> int:
    """Fraction bits of a floating-point accumulator's elements: 23 (fp32) or 7 (bf16)."""
    return 23 if cfg.acc_dtype == "fp32" else 7


def make_adder(cfg: AccelConfig, registers: int = 0) -> wiring.Component:
    """``acc + product`` in the accumulator format, with ``registers`` pipeline registers."""
    if cfg.dtype == "int8":
        return IntAdd(registers)
    # The leading-zero tree, not FpAdd's serial normalization: alone, a 4x4-bf16 PE is 8 LUTs
    # smaller with the serial one, but the 4x4-bf16 EXEC unit (its mesh) 4 larger (xc7, measured).
    return FpAdd(acc_mant_bits(cfg), registers, x_frac_bits=PRODUCT_FRAC_BITS, flagged_x=product_flagged(cfg))


def product_flagged(cfg: AccelConfig) -> bool:
    """Whether a bf16 PE's product goes to its adder as fields and flags (``Bf16Mul.p_bits`` and
    ``p_flags``) rather than as an IEEE value the adder unpacks again: where the two are in one
    cycle (``pe_stages`` 1), which saves the packing's multiplexers and the field compares (about
    30 LUT a PE, xc7). Behind a product register the IEEE value is what crosses it: with the flags
    there, the BF16 mesh at ``pe_stages`` 5 placed below 60 MHz on ECP5 on one seed of two in every
    form tried (docs/tile.md), and the register is 3 bits narrower."""
    return cfg.dtype == "bf16" and cfg.pe_stages == 1

"""The shared bf16 function unit (sigmoid, tanh, exp, reciprocal), checked bit for bit against ``functions.py``.

One cycle of latency (``FunctionUnit.latency``): ``y`` is the function of the ``x`` (and ``fn``)
of the previous cycle. Each side of each function's rule (``functions.FunctionRule``) is a constant
``Memory`` with a synchronous (``domain="sync"``) read port, addressed by the input's magnitude
code minus the start of its ROM range, so synthesis can map it to block RAM; ``x`` and ``fn`` are
registered beside the ROMs, and after that register two compares select the ROM word, the constant
below the range or the saturated constant above it. The reciprocal's ROM (``ReciprocalRule``) is
addressed by the input's 7 fraction bits; after the register its word's exponent bit and the input's
exponent give the result's exponent.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.vector.functions import (
    FUNCTIONS,
    INF_CODE,
    MIN_NORMAL_CODE,
    NAN,
    RECIP_EXP_SUM,
    FunctionRule,
    ReciprocalRule,
    Side,
    rule,
)

__all__ = ["FunctionUnit"]


class FunctionUnit(wiring.Component):
    """``y = f(x)`` on bf16 bit patterns, with ``f = FUNCTIONS[fn]``.

    Only the functions in ``functions`` are built; any other ``fn`` gives the canonical NaN.
    """

    latency = 1  # y is f(x) of the previous cycle: the ROMs are read synchronously

    x: In(16)
    fn: In(2)
    y: Out(16)

    def __init__(self, functions: tuple[str, ...] = FUNCTIONS) -> None:
        unknown = [f for f in functions if f not in FUNCTIONS]
        if unknown:
            self._MustUse__silence = True  # a rejected unit is not an unused design (Amaranth's own idiom)
            raise ValueError(f"unknown functions {unknown}; expected a subset of {FUNCTIONS}")
        self.functions = tuple(dict.fromkeys(functions))
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        # The ROMs are addressed by this cycle's x; everything else works on the registered x and fn,
        # which arrive with the ROMs' words.
        x1, fn1 = Signal(16, name="x1"), Signal(2, name="fn1")
        m.d.sync += [x1.eq(self.x), fn1.eq(self.fn)]
        code = x1[:15]
        results = {FUNCTIONS.index(name): _function(m, rule(name), self.x, x1) for name in self.functions}
        value = Signal(16)
        with m.Switch(fn1):
            for index, result in results.items():
                with m.Case(index):
                    m.d.comb += value.eq(result)
            with m.Default():
                m.d.comb += value.eq(NAN)
        m.d.comb += self.y.eq(Mux(code > INF_CODE, NAN, value))
        return m


def _function(m: Module, r: FunctionRule | ReciprocalRule, x: Value, x1: Value) -> Value:
    """f(x1) for non-NaN ``x1`` (``x1`` is ``x`` registered; the ROMs are addressed by ``x``): the
    side of x1's sign, or for an odd f the positive side with its sign flipped."""
    if isinstance(r, ReciprocalRule):
        return _reciprocal(m, r, x, x1)
    sign, code = x1[15], x1[:15]
    if r.odd:
        return _side(m, f"{r.name}_pos", r.sides[0], x[:15], code, Const(0, 1)) ^ Cat(Const(0, 15), sign)
    pos = _side(m, f"{r.name}_pos", r.sides[0], x[:15], code, Const(0, 1))
    neg = _side(m, f"{r.name}_neg", r.sides[1], x[:15], code, Const(1, 1))
    return Mux(sign, neg, pos)


def _side(m: Module, name: str, side: Side, addr_code: Value, code: Value, sign: Value) -> Signal:
    """One side of a rule for the registered magnitude ``code``. Its ROM is read at ``addr_code``,
    the magnitude before the register, so the word arrives in the next cycle, together with ``code``."""
    rom = Memory(shape=unsigned(side.width), depth=len(side.rom), init=side.rom)
    m.submodules[f"{name}_rom"] = rom
    port = rom.read_port(domain="sync")  # always enabled
    m.d.comb += port.addr.eq(addr_code - side.lo)  # truncated to the ROM's address width
    flushed = Cat(Mux(code < MIN_NORMAL_CODE, 0, code), sign)  # subnormal inputs read as ±0
    out = Signal(16, name=name)
    with m.If(code < side.lo):
        m.d.comb += out.eq(flushed if side.small is None else side.small)
    with m.Elif(code > side.hi):
        m.d.comb += out.eq(side.large)
    with m.Else():
        m.d.comb += out.eq(port.data + side.offset)
    return out


def _reciprocal(m: Module, r: ReciprocalRule, x: Value, x1: Value) -> Signal:
    """1/x1 for non-NaN ``x1``: the ROM word of x's fraction (read a cycle ahead, at ``x``) gives
    the fraction and whether the exponent field is one higher; zero and subnormal inputs give ±Inf
    and a result exponent ≤ 0 gives ±0 (``ReciprocalRule``)."""
    rom = Memory(shape=unsigned(r.width), depth=len(r.rom), init=r.rom)
    m.submodules.recip_rom = rom
    port = rom.read_port(domain="sync")  # always enabled
    m.d.comb += port.addr.eq(x[:7])
    sign, exp = x1[15], x1[7:15]
    # RECIP_EXP_SUM + 1 − exp lies in −1 … 253: a signed 10-bit value holds it
    out_exp = Signal(signed(10), name="recip_exp")
    m.d.comb += out_exp.eq(RECIP_EXP_SUM + port.data[7] - exp)
    out = Signal(16, name="recip")
    with m.If(exp == 0):
        m.d.comb += out.eq(Cat(Const(INF_CODE, 15), sign))
    with m.Elif(out_exp <= 0):
        m.d.comb += out.eq(Cat(Const(0, 15), sign))
    with m.Else():
        m.d.comb += out.eq(Cat(port.data[:7], out_exp[:8], sign))
    return out

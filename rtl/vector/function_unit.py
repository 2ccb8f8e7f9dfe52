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

from dataclasses import dataclass

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

__all__ = ["ROM_WORDS", "FunctionUnit"]

# Words of one packed ROM: 2,048 is the depth of a Xilinx RAMB18 at 9 bits (a RAMB36 at 18) and of
# an ECP5 DP16KD at 9 bits, so a ROM of up to 9-bit (18-bit) words stays one block.
ROM_WORDS = 2048


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
        words = _packed_roms(m, [s for name in self.functions for s in _sides(rule(name))], self.x, self.fn)
        results = {FUNCTIONS.index(name): _function(m, rule(name), words, self.x, x1) for name in self.functions}
        value = Signal(16)
        with m.Switch(fn1):
            for index, result in results.items():
                with m.Case(index):
                    m.d.comb += value.eq(result)
            with m.Default():
                m.d.comb += value.eq(NAN)
        m.d.comb += self.y.eq(Mux(code > INF_CODE, NAN, value))
        return m


@dataclass(frozen=True)
class _RuleSide:
    """One side of a ``FunctionRule`` (``rtl/vector/functions.py``): its ``fn`` code and the input
    sign it serves (None: both, the only side of an odd function)."""

    name: str
    fn: int
    sign: int | None
    side: Side

    def serves(self, fn: Value, sign: Value) -> Value:
        return (fn == self.fn) & (sign == self.sign) if self.sign is not None else fn == self.fn


def _sides(r: FunctionRule | ReciprocalRule) -> list[_RuleSide]:
    if isinstance(r, ReciprocalRule):
        return []
    signs = (None,) if r.odd else (0, 1)
    fn = FUNCTIONS.index(r.name)
    return [_RuleSide(f"{r.name}_{('pos', 'neg')[i]}", fn, sign, r.sides[i]) for i, sign in enumerate(signs)]


def _packed_roms(m: Module, sides: list[_RuleSide], x: Value, fn: Value) -> dict[str, Value]:
    """The ROM word of each side at ``x``'s magnitude, a cycle later (synchronous read ports).

    Sides are packed into ROMs of at most ``ROM_WORDS`` words, largest first, each into the first
    ROM with room: only one side is read per cycle (the one of ``fn`` and x's sign), so sides can
    share a port, and a ROM of a few hundred words that synthesis would build from LUTs (tanh's
    677) fills the rest of another side's block RAM instead."""
    bins: list[list[_RuleSide]] = []
    for s in sorted(sides, key=lambda s: -len(s.side.rom)):
        fit = next((b for b in bins if sum(len(o.side.rom) for o in b) + len(s.side.rom) <= ROM_WORDS), None)
        if fit is None:
            bins.append([s])
        else:
            fit.append(s)
    sign, mag = x[15], x[:15]
    words = {}
    for members in bins:
        init = [w for s in members for w in s.side.rom]
        rom = Memory(shape=unsigned(max(s.side.width for s in members)), depth=len(init), init=init)
        m.submodules["_".join(s.name for s in members) + "_rom"] = rom
        port = rom.read_port(domain="sync")  # always enabled
        base, addr = 0, None
        for s in members:  # the first member's address unless a later member serves (fn, sign)
            here = mag - s.side.lo + base  # truncated to the ROM's address width
            addr = here if addr is None else Mux(s.serves(fn, sign), here, addr)
            words[s.name] = port.data[: s.side.width]
            base += len(s.side.rom)
        m.d.comb += port.addr.eq(addr)
    return words


def _function(m: Module, r: FunctionRule | ReciprocalRule, words: dict[str, Value], x: Value, x1: Value) -> Value:
    """f(x1) for non-NaN ``x1`` (``x1`` is ``x`` registered; the ROMs are addressed by ``x``): the
    side of x1's sign, or for an odd f the positive side with its sign flipped."""
    if isinstance(r, ReciprocalRule):
        return _reciprocal(m, r, x, x1)
    sign, code = x1[15], x1[:15]
    if r.odd:
        return _side(m, f"{r.name}_pos", r.sides[0], words, code, Const(0, 1)) ^ Cat(Const(0, 15), sign)
    pos = _side(m, f"{r.name}_pos", r.sides[0], words, code, Const(0, 1))
    neg = _side(m, f"{r.name}_neg", r.sides[1], words, code, Const(1, 1))
    return Mux(sign, neg, pos)


def _side(m: Module, name: str, side: Side, words: dict[str, Value], code: Value, sign: Value) -> Signal:
    """One side of a rule for the registered magnitude ``code``; ``words[name]`` is its ROM word,
    read at the magnitude before the register, so it arrives in this cycle, together with ``code``."""
    flushed = Cat(Mux(code < MIN_NORMAL_CODE, 0, code), sign)  # subnormal inputs read as ±0
    out = Signal(16, name=name)
    with m.If(code < side.lo):
        m.d.comb += out.eq(flushed if side.small is None else side.small)
    with m.Elif(code > side.hi):
        m.d.comb += out.eq(side.large)
    with m.Else():
        m.d.comb += out.eq(words[name] + side.offset)
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

"""The shared bf16 function unit (sigmoid, tanh, exp), checked bit for bit against ``functions.py``.

Purely combinational: each side of each function's rule (``functions.FunctionRule``) is a
constant ``Memory`` with an asynchronous (``domain="comb"``) read port, addressed by the input's
magnitude code minus the start of its ROM range, beside two compares that select the constant
below the range or the saturated constant above it.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.vector.functions import FUNCTIONS, INF_CODE, MIN_NORMAL_CODE, NAN, FunctionRule, Side, rule

__all__ = ["FunctionUnit"]


class FunctionUnit(wiring.Component):
    """``y = f(x)`` on bf16 bit patterns, with ``f = FUNCTIONS[fn]``.

    Only the functions in ``functions`` are built; any other ``fn`` gives the canonical NaN.
    """

    latency = 0  # combinational: the ROMs are read asynchronously

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
        code = self.x[:15]
        results = {FUNCTIONS.index(name): _function(m, rule(name), self.x) for name in self.functions}
        value = Signal(16)
        with m.Switch(self.fn):
            for index, result in results.items():
                with m.Case(index):
                    m.d.comb += value.eq(result)
            with m.Default():
                m.d.comb += value.eq(NAN)
        m.d.comb += self.y.eq(Mux(code > INF_CODE, NAN, value))
        return m


def _function(m: Module, r: FunctionRule, x: Value) -> Value:
    """f(x) for non-NaN ``x``: the side of x's sign, or for an odd f the positive side with its sign flipped."""
    sign, code = x[15], x[:15]
    if r.odd:
        return _side(m, f"{r.name}_pos", r.sides[0], code, Const(0, 1)) ^ Cat(Const(0, 15), sign)
    pos = _side(m, f"{r.name}_pos", r.sides[0], code, Const(0, 1))
    neg = _side(m, f"{r.name}_neg", r.sides[1], code, Const(1, 1))
    return Mux(sign, neg, pos)


def _side(m: Module, name: str, side: Side, code: Value, sign: Value) -> Signal:
    rom = Memory(shape=unsigned(side.width), depth=len(side.rom), init=side.rom)
    m.submodules[f"{name}_rom"] = rom
    port = rom.read_port(domain="comb")
    m.d.comb += port.addr.eq(code - side.lo)  # truncated to the ROM's address width
    flushed = Cat(Mux(code < MIN_NORMAL_CODE, 0, code), sign)  # subnormal inputs read as ±0
    out = Signal(16, name=name)
    with m.If(code < side.lo):
        m.d.comb += out.eq(flushed if side.small is None else side.small)
    with m.Elif(code > side.hi):
        m.d.comb += out.eq(side.large)
    with m.Else():
        m.d.comb += out.eq(port.data + side.offset)
    return out

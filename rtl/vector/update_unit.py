"""The FPTT update unit: eqs. 4.17, 4.19-4.21 for one bf16 parameter per cycle, in one pass.

It applies the 13 operations of ``rtl/vector/programs.fptt_update`` in the same order with the same
roundings, so it is bit-exact to that program and to tb/fptt's bf16 ``fptt_update`` (its NumPy
model: ``rtl/vector/update_model.py``). Each operation rounds to bf16 once, as the program's
scratchpad write after each command does:

* a sum or difference of two bf16 values by ``Bf16Add`` (rounded once to bf16; the same bits as
  the lanes' fp32 add followed by the bf16 narrowing, see ``rtl/fp.py``), or, for the first
  ``lane_adds`` of the eight, by a lane's fp32 adder (``lane_acc + lane_x`` → ``lane_sum``, a
  combinational path through the lane) followed by ``round_bf16``: the program's own arithmetic;
* a product with a scalar by ``Bf16Mul`` (exact in fp32, range rules) and ``round_bf16``: the
  lanes' MULS followed by the narrowing; or, for the first ``lane_muls`` products with a scalar
  operand (the constant ½ is an exponent decrement, never lent), by a lane's ``Fp32Mul``
  (``lane_a · lane_b`` → ``lane_p``), which is that MULS itself.

Pipeline (one register after each operation, ``LATENCY`` = 11 cycles, one parameter per cycle)::

    1  d1 = θ − θ̄              7  d2 = θ' − θ̄,  s2 = θ̄ + θ'
    2  p1 = d1 · α             8  p3 = d2 · α,   h = s2 · ½
    3  R' = p1 − λ             9  λ' = λ − p3
    4  s  = g + R'            10  k  = λ' · κ
    5  p2 = s · η             11  θ̄' = h − k
    6  θ' = θ − p2

The scalars (η, α, κ = 1/(2α), bf16) are held by the engine for a whole command.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.fp import Bf16Add, Bf16Mul, round_bf16

__all__ = ["ADDS", "HALF_BF16", "MULS", "UpdateUnit"]

ADDS = 8  # additions per parameter (the pipeline below); the first ``lane_adds`` use lanes' adders
MULS = 4  # products with a scalar operand (η, α, κ) per parameter; the first ``lane_muls`` use lanes'


HALF_BF16 = 0x3F00  # ½, fixed by eq. 4.21
SIGN = 0x8000


class UpdateUnit(wiring.Component):
    """One parameter per cycle: ``theta``, ``theta_bar``, ``lam``, ``grad`` in; the updated ``theta_o``,
    ``theta_bar_o``, ``lam_o`` ``LATENCY`` cycles later (all bf16 bit patterns). With ``lane_adds``
    = n, addition i < n is done by an external fp32 adder: ``lane_acc[i] + lane_x[i]`` (fp32 bit
    patterns of bf16 values) must come back on ``lane_sum[i]`` in the same cycle."""

    LATENCY = 11

    def __init__(self, lane_adds: int = 0, lane_muls: int = 0) -> None:
        assert 0 <= lane_adds <= ADDS and 0 <= lane_muls <= MULS
        self.lane_adds, self.lane_muls = lane_adds, lane_muls
        ports = {name: In(16) for name in ("theta", "theta_bar", "lam", "grad", "eta", "alpha", "kappa")}
        ports |= {name: Out(16) for name in ("theta_o", "theta_bar_o", "lam_o")}
        if lane_adds:
            lanes = data.ArrayLayout(32, lane_adds)
            ports |= {"lane_acc": Out(lanes), "lane_x": Out(lanes), "lane_sum": In(lanes)}
        if lane_muls:
            lanes = data.ArrayLayout(32, lane_muls)
            ports |= {"lane_a": Out(lanes), "lane_b": Out(lanes), "lane_p": In(lanes)}
        super().__init__(ports)

    def elaborate(self, platform) -> Module:
        m = Module()
        self._m, self._n, self._adds, self._muls = m, 0, 0, 0
        th, tb, lm, g = self.theta, self.theta_bar, self.lam, self.grad
        d1 = self._add(th, tb, subtract=True)
        th, tb, lm, g = self._delay(th, tb, lm, g)
        p1 = self._mul(d1, self.alpha)
        th, tb, lm, g = self._delay(th, tb, lm, g)
        reg = self._add(p1, lm, subtract=True)  # 4.17
        th, tb, lm, g = self._delay(th, tb, lm, g)
        s = self._add(g, reg)
        th, tb, lm = self._delay(th, tb, lm)
        p2 = self._mul(s, self.eta)
        th, tb, lm = self._delay(th, tb, lm)
        th_new = self._add(th, p2, subtract=True)  # 4.19
        tb, lm = self._delay(tb, lm)
        d2 = self._add(th_new, tb, subtract=True)
        s2 = self._add(tb, th_new)
        th_new, lm = self._delay(th_new, lm)
        p3 = self._mul(d2, self.alpha)
        half = self._mul(s2, HALF_BF16)
        th_new, lm = self._delay(th_new, lm)
        lm_new = self._add(lm, p3, subtract=True)  # 4.20
        th_new, half = self._delay(th_new, half)
        k = self._mul(lm_new, self.kappa)
        th_new, half, lm_new = self._delay(th_new, half, lm_new)
        tb_new = self._add(half, k, subtract=True)  # 4.21
        th_new, lm_new = self._delay(th_new, lm_new)
        m.d.comb += [self.theta_o.eq(th_new), self.theta_bar_o.eq(tb_new), self.lam_o.eq(lm_new)]
        return m

    def _name(self, kind: str) -> str:
        self._n += 1
        return f"{kind}{self._n}"

    def _add(self, a, b, subtract: bool = False) -> Signal:
        """``a ± b`` rounded to bf16, registered (one pipeline stage); subtraction flips b's sign."""
        name = self._name("add")
        out = Signal(16, name=f"{name}_q")
        b = b ^ SIGN if subtract else b
        i, self._adds = self._adds, self._adds + 1
        if i < self.lane_adds:  # a lane's fp32 adder, then the narrowing (the program's two steps)
            self._m.d.comb += [self.lane_acc[i].eq(Cat(Const(0, 16), a)), self.lane_x[i].eq(Cat(Const(0, 16), b))]
            self._m.d.sync += out.eq(round_bf16(self._m, self.lane_sum[i], name))
            return out
        unit = self._m.submodules[name] = Bf16Add()
        self._m.d.comb += [unit.a.eq(a), unit.b.eq(b)]
        self._m.d.sync += out.eq(unit.o)
        return out

    def _mul(self, a, s) -> Signal:
        """``a · s`` (exact in fp32) rounded to bf16, registered."""
        name = self._name("mul")
        out = Signal(16, name=f"{name}_q")
        if not isinstance(s, int) and self._muls < self.lane_muls:  # a lane's Fp32Mul: the MULS itself
            i, self._muls = self._muls, self._muls + 1
            self._m.d.comb += [self.lane_a[i].eq(Cat(Const(0, 16), a)), self.lane_b[i].eq(Cat(Const(0, 16), s))]
            self._m.d.sync += out.eq(round_bf16(self._m, self.lane_p[i], name))
            return out
        unit = self._m.submodules[name] = Bf16Mul()
        self._m.d.comb += [unit.a.eq(a), unit.b.eq(s)]
        self._m.d.sync += out.eq(round_bf16(self._m, unit.p, name))
        return out

    def _delay(self, *values) -> tuple[Signal, ...]:
        """The values carried one stage further beside the arithmetic."""
        out = tuple(Signal(16, name=self._name("carry")) for _ in values)
        self._m.d.sync += [o.eq(v) for o, v in zip(out, values, strict=True)]
        return out

"""One lane of the vector engine: a pipelined ALU over 32-bit work values, bit-exact against
``rtl/vector/lane_model.py`` (the rules are listed there and in docs/arithmetic.md, "Vector engine
lanes").

The lane does not contain the bf16 function unit (sigmoid, tanh, exp, reciprocal): it offers the bf16-rounded
``a`` on ``fn_x`` and takes the function's value back on ``fn_y``, so the engine decides where the
unit's tables sit (one per lane, or shared). Timing contract: ``fn_x`` is combinational from ``a``
in the cycle ``a`` is presented, and ``fn_y`` must be the function of the ``fn_x`` of the previous
cycle (``FunctionUnit.latency`` = 1: the engine wires ``fn_x → FunctionUnit.x``,
``FunctionUnit.y → fn_y`` directly, with ``FunctionUnit.fn = op - VecOp.SIGMOID`` from the same
cycle's ``op`` as ``fn_x``); stage 2 takes it as the result, in place of stage 1's.

Pipeline, one result per cycle, every op ``LATENCY[dtype]`` cycles from its operands to ``y``
(bf16 2, int8 4). bf16:

1. the multiply (``Fp32Mul``), the operand choice of the adder, and the single-step ops (copy,
   negation, max, min, ReLU), while the function unit reads its tables;
2. the add (``FpAdd``) and the choice of result (the function's value comes straight from
   ``fn_y``), registered into ``y``.

int8 (the multiplier's operands, the 64-bit rounding and the 32-bit add in stages of their own, so
none of them sets the clock):

0. the multiplier's operands (REQUANT shifts ``a`` left in front of its multiplier ``b``), the
   operands registered beside them;
1. the exact 32 × 32 → 64-bit signed product, the adder's operands and the single-step ops;
2. the product's rounding shift, saturated to int32 (REQUANT: its first rounding);
3. the saturating add and the choice of result (REQUANT: its second rounding, the zero point and
   the clamp), registered into ``y``.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.fp import Fp32Mul, FpAdd
from rtl.vector.ops import FUNCTION_OPS, VecOp

__all__ = ["F32_NAN", "LATENCY", "VectorLane", "flush", "is_nan", "order_key", "saturate"]

F32_NAN = 0x7FC00000
BF16_NAN = 0x7FC0
SIGN = 0x80000000
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Cycles from a lane's operands to its ``y``, per tile dtype (the pipelines below).
LATENCY = {"bf16": 2, "int8": 4}
ADD_OPS = (VecOp.ADD, VecOp.SUB, VecOp.ADDS, VecOp.RSUBS, VecOp.MADDS)


class VectorLane(wiring.Component):
    """The lane of a tile whose dtype is ``dtype``: fp32 work values for "bf16", int32 for "int8".

    Ports: ``op`` (a ``VecOp`` code), ``a``, ``b``, ``s`` (the scalar), ``shift`` (int MUL, MULS,
    MADDS: the product's rounding right shift, its low 5 bits; REQUANT: the column's signed shift,
    clamped to [−31, 30]), ``fn_x`` / ``fn_y`` (to and from the external
    function unit; unused on int8 lanes), ``y`` = the result of the operands of ``latency`` cycles
    before. bf16 lanes also lend their fp32 adder and multiplier: while ``ext`` is high the adder
    adds ``ext_acc`` and ``ext_x`` instead of stage 1's operands and the multiplier multiplies
    ``ext_a`` by ``ext_b``, and ``sum`` and ``product`` are their results, combinationally (the FPTT
    update unit's arithmetic runs on the lanes' units, which UPDATE leaves idle).
    ``bf16_a``: the multiplier's first operand (``a``, ``ext_a``) always holds a bf16 value, as on a
    tile whose scratchpad and accumulator both hold bf16; its multiply is then 8 × 24 bits.
    """

    def __init__(self, dtype: str, bf16_a: bool = False) -> None:
        assert dtype in ("int8", "bf16")
        assert not bf16_a or dtype == "bf16"
        self.dtype, self.bf16_a = dtype, bf16_a
        self.latency = LATENCY[dtype]
        lend = {"ext": In(1), **{n: In(32) for n in ("ext_acc", "ext_x", "ext_a", "ext_b")}}
        lend |= {"sum": Out(32), "product": Out(32)}
        super().__init__(
            {
                "op": In(5),
                "a": In(32),
                "b": In(32),
                "s": In(32),
                "shift": In(6),
                "fn_y": In(16),
                "fn_x": Out(16),
                "y": Out(32),
                **(lend if dtype == "bf16" else {}),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        if self.dtype == "bf16":
            self._float(m)
        else:
            self._int(m)
        return m

    # bf16 tiles: fp32 work values

    def _float(self, m: Module) -> None:
        op, a, b, s = self.op, self.a, self.b, self.s
        m.d.comb += self.fn_x.eq(_to_bf16(m, a))

        mul = m.submodules.mul = Fp32Mul(self.bf16_a)
        m.d.comb += [
            mul.a.eq(Mux(self.ext, self.ext_a, a)),
            mul.b.eq(Mux(self.ext, self.ext_b, Mux(op == VecOp.MUL, b, s))),
            self.product.eq(mul.p),
        ]

        # Stage 1: the product, the adder's operands (MADDS takes the product as its first one in
        # stage 2) and the single-step result.
        op1, p1, acc1, x1 = Signal(5), Signal(32), Signal(32), Signal(32)
        flip_b, flip_a = b ^ SIGN, a ^ SIGN  # subtraction adds the negated subtrahend
        m.d.sync += [
            op1.eq(op),
            p1.eq(mul.p),
            acc1.eq(Mux(op == VecOp.RSUBS, s, a)),
            x1.eq(_pick(op, {VecOp.SUB: flip_b, VecOp.ADDS: s, VecOp.RSUBS: flip_a}, b)),
        ]
        r1 = Signal(32)
        m.d.sync += r1.eq(self._float_single(m))

        # Stage 2: the add, and the result; the function unit's value of stage 1's fn_x arrives now.
        add = m.submodules.add = FpAdd(23, registers=0)
        m.d.comb += [
            add.acc.eq(Mux(self.ext, self.ext_acc, Mux(op1 == VecOp.MADDS, p1, acc1))),
            add.x.eq(Mux(self.ext, self.ext_x, x1)),
            self.sum.eq(add.o),
        ]
        function1 = Cat(op1 == code for code in sorted(FUNCTION_OPS)).any()
        self._result(m, op1, add.o, p1, Mux(function1, Cat(Const(0, 16), self.fn_y), r1))

    def _float_single(self, m: Module) -> Signal:
        """The ops done in one step: copy, negation, max, min and ReLU (the functions' results come
        from the unit a cycle later, in stage 2)."""
        a, b = self.a, self.b
        fa, fb = flush(a), flush(b)
        nan_a, nan_b = is_nan(a), is_nan(b)
        a_wins = order_key(fa) > order_key(fb)
        r = Signal(32)
        with m.Switch(self.op):
            with m.Case(VecOp.COPY):
                m.d.comb += r.eq(a)
            with m.Case(VecOp.NEG):
                m.d.comb += r.eq(Mux(nan_a, F32_NAN, fa ^ SIGN))
            with m.Case(VecOp.MAX):
                m.d.comb += r.eq(Mux(nan_a | nan_b, F32_NAN, Mux(a_wins, fa, fb)))
            with m.Case(VecOp.MIN):
                m.d.comb += r.eq(Mux(nan_a | nan_b, F32_NAN, Mux(a_wins, fb, fa)))
            with m.Case(VecOp.RELU):
                # The sign bit alone picks negatives, −0 and −Inf; NaN was checked first.
                m.d.comb += r.eq(Mux(nan_a, F32_NAN, Mux(fa[31], 0, fa)))
        return r

    # int8 tiles: int32 work values

    def _int(self, m: Module) -> None:
        # Stage 0: the multiplier's operands, so that their choice (and REQUANT's shift of ``a``,
        # a barrel shifter) and the 32 × 32 multiply are not one cycle: together they were the
        # int8 tile's ECP5 critical path. The operands travel beside them.
        op, a, b, s = Signal(5), Signal(32), Signal(32), Signal(32)
        shift0, mul_a, mul_b = Signal(5), Signal(signed(32)), Signal(signed(32))
        rq = self.op == VecOp.REQUANT
        m.d.sync += [
            op.eq(self.op),
            a.eq(self.a),
            b.eq(self.b),
            s.eq(self.s),
            shift0.eq(self.shift[:5]),
            mul_a.eq(Mux(rq, self._requant_operand(m), self.a)),
            mul_b.eq(Mux(rq | (self.op == VecOp.MUL), self.b, self.s)),
        ]

        # Stage 1: the exact product, the adder's operands (left ± right; MADDS takes the scaled
        # product as its left one in stage 3) and the single-step result.
        p1 = Signal(signed(64))
        op1, shift1, left1, right1, neg1 = Signal(5), Signal(5), Signal(32), Signal(32), Signal()
        m.d.sync += [
            op1.eq(op),
            shift1.eq(shift0),
            p1.eq(mul_a * mul_b),
            left1.eq(_pick(op, {VecOp.RSUBS: s, VecOp.NEG: 0}, a)),
            right1.eq(_pick(op, {VecOp.ADDS: s, VecOp.RSUBS: a, VecOp.NEG: a}, b)),
            neg1.eq((op == VecOp.SUB) | (op == VecOp.RSUBS) | (op == VecOp.NEG)),
        ]
        r1 = Signal(32)
        m.d.sync += r1.eq(self._int_single(m, op, a, b))

        # Stage 2: the product's rounding shift, saturated (REQUANT: its first rounding); the
        # rest travels on.
        op2, left2, right2, neg2, r2 = Signal(5), Signal(32), Signal(32), Signal(), Signal(32)
        scaled2 = Signal(32)
        m.d.sync += [
            op2.eq(op1),
            left2.eq(left1),
            right2.eq(right1),
            neg2.eq(neg1),
            r2.eq(r1),
            scaled2.eq(Mux(op1 == VecOp.REQUANT, self._requant_high(m, p1), _saturating_round_shift(m, p1, shift1))),
        ]

        # Stage 3: the saturating add (REQUANT: its second rounding, the zero point and the clamp).
        left = Mux(op2 == VecOp.MADDS, scaled2, left2).as_signed()
        right = right2.as_signed()
        total = Signal(32)
        m.d.comb += total.eq(saturate(Mux(neg2, left - right, left + right)))
        self._result(m, op2, total, scaled2, r2, self._requant_low(m, scaled2))

    # REQUANT (lane_model.requant): stage 0 shifts ``a`` left for the two-rounding form, stage 1
    # multiplies it by the multiplier ``b`` (the shared 32 × 32 product); stage 2 rounds the product
    # once (shift 31 − shift, half up), or first by 31; stage 3 rounds again (half away from zero
    # by −shift), adds the zero point and clamps. The scalar and the shifts travel in the ``rq``
    # registers, one set per stage; stage 3's constants (``RQ_BOUNDS``) are formed from them a
    # stage early.

    RQ_FIELDS = data.StructLayout({"total": 6, "right": 5, "zp": 8, "lo": 8, "hi": 8})
    # Stage 3's constants, formed from the fields a stage early: the second rounding's remainder
    # bits, split into its top bit (``top``, one-hot; none when nothing is shifted out) and the
    # bits below it (``half``), and the clamp's bounds less the zero point.
    RQ_BOUNDS = data.StructLayout({"top": 31, "half": 30, "lo": signed(10), "hi": signed(10), "hi_wins": 1})

    def _requant_operand(self, m: Module) -> Signal:
        """``a`` shifted left by ``max(shift, 0)`` with wrap-around (two roundings), else ``a``;
        registers the shifts and scalar fields the later stages need."""
        sh = Signal(signed(6), name="rq_shift")
        raw = self.shift.as_signed()
        m.d.comb += sh.eq(Mux(raw < -31, -31, Mux(raw > 30, 30, raw)))
        double = self.s[24]
        left = Mux(double & (sh > 0), sh[:5], 0)
        shifted = Signal(32, name="rq_shifted")
        m.d.comb += shifted.eq(self.a << left)
        rq0 = Signal(self.RQ_FIELDS, name="rq0")
        self._rq1 = Signal(self.RQ_FIELDS, name="rq1")
        self._rq2 = Signal(self.RQ_FIELDS, name="rq2")
        self._bounds2 = Signal(self.RQ_BOUNDS, name="rq_bounds2")
        m.d.sync += [
            rq0.total.eq(Mux(double, 31, 31 - sh)),
            rq0.right.eq(Mux(double & (sh < 0), -sh, 0)),
            rq0.zp.eq(self.s[:8]),
            rq0.lo.eq(self.s[8:16]),
            rq0.hi.eq(self.s[16:24]),
            self._rq1.eq(rq0),
            self._rq2.eq(self._rq1),
            self._bounds2.eq(self._requant_bounds(m, self._rq1)),
        ]
        return Mux(double, shifted, self.a)

    def _requant_bounds(self, m: Module, rq) -> Signal:
        """Stage 3's constants (``RQ_BOUNDS``) of the fields ``rq``."""
        b = Signal(self.RQ_BOUNDS, name="rq_bounds")
        zp, lo, hi = rq.zp.as_signed(), rq.lo.as_signed(), rq.hi.as_signed()
        mask = ((Const(1, 32) << rq.right) - 1)[:31]
        m.d.comb += [
            b.top.eq(mask & ~(mask >> 1)),
            b.half.eq(mask >> 1),
            b.lo.eq(lo - zp),
            b.hi.eq(hi - zp),
            b.hi_wins.eq(lo > hi),
        ]
        return b

    def _requant_high(self, m: Module, p1) -> Signal:
        """Stage 2 of REQUANT: the registered product ``p1`` rounded half up by ``total`` bits and
        saturated to int32. ``(p + 2^(t−1)) >> t`` is ``(⌊p / 2^(t−1)⌋ + 1) >> 1``, so the product
        is shifted first (``total`` ≥ 1) and clamped to 33 bits, which changes no saturated result,
        and the rounding add is 34 bits wide instead of 65: this stage set the int8 tile's clock."""
        q = Signal(signed(64), name="rq_q")
        m.d.comb += q.eq(p1 >> (self._rq1.total - 1)[:6])
        rounded = Signal(signed(34), name="rq_rounded")
        m.d.comb += rounded.eq((_clamp(q, 33) + 1) >> 1)
        return _clamp(rounded, 32)[:32]

    def _requant_low(self, m: Module, high2) -> Signal:
        """Stage 3 of REQUANT on stage 2's ``high2``: its result before ``y``, ``clamp((high >>
        right) + up + zp, lo, hi)`` with ``hi`` winning when ``lo > hi``. The clamp's compares take
        ``high >> right`` alone, against the bounds less the zero point: the rounding's carry
        ``up`` only moves a value onto a bound from beside it (``< lo`` or ``≥ hi`` then give the
        bound either way), so neither add stands in front of them (compares after two adds were
        the int8 tile's ECP5 critical path). They are 10 bits wide: the bounds less the zero point
        lie in [−255, 255], so a value outside [−512, 511] is clamped by its sign alone."""
        rq, b = self._rq2, self._bounds2
        high = high2.as_signed()
        shifted = Signal(signed(32), name="rq_div")
        m.d.comb += shifted.eq(high >> rq.right)
        # Half away from zero: the remainder is above half when its top bit is set and, for a
        # negative value, some bit below it too.
        up = Signal(name="rq_up")
        m.d.comb += up.eq((high2[:31] & b.top).any() & (~high[31] | (high2[:30] & b.half).any()))
        narrow = shifted[:10].as_signed()
        big = ~shifted[31] & shifted[9:31].any()
        small = shifted[31] & ~shifted[9:31].all()
        below = small | (~big & (narrow < b.lo))
        above = big | (~small & (narrow >= b.hi))
        # Unclamped, the value lies in [lo, hi], an int8: its low byte is all there is to add.
        value = Signal(signed(8), name="rq_value")
        m.d.comb += value.eq(shifted[:8] + up + rq.zp)
        out = Signal(32, name="rq_y")
        with m.If(above | b.hi_wins):
            m.d.comb += out.eq(rq.hi.as_signed())
        with m.Elif(below):
            m.d.comb += out.eq(rq.lo.as_signed())
        with m.Else():
            m.d.comb += out.eq(value)
        return out

    def _int_single(self, m: Module, op, a, b) -> Signal:
        """The ops done in one step: copy, max, min and ReLU."""
        a, b = a.as_signed(), b.as_signed()
        r = Signal(32)
        with m.Switch(op):
            with m.Case(VecOp.COPY):
                m.d.comb += r.eq(a)
            with m.Case(VecOp.MAX):
                m.d.comb += r.eq(Mux(a > b, a, b))
            with m.Case(VecOp.MIN):
                m.d.comb += r.eq(Mux(a > b, b, a))
            with m.Case(VecOp.RELU):
                m.d.comb += r.eq(Mux(a[31], 0, a))
        return r

    def _result(self, m: Module, op1, added, product, single, requant=None) -> None:
        """Register ``y``: the adder's result, the (scaled) product, REQUANT's or the single-step one."""
        with m.Switch(op1):
            if requant is not None:
                with m.Case(VecOp.REQUANT):
                    m.d.sync += self.y.eq(requant)
            with m.Case(*ADD_OPS, *((VecOp.NEG,) if self.dtype == "int8" else ())):
                m.d.sync += self.y.eq(added)
            with m.Case(VecOp.MUL, VecOp.MULS):
                m.d.sync += self.y.eq(product)
            with m.Default():
                m.d.sync += self.y.eq(single)


def _pick(op, choices: dict, default):
    """The value of ``choices`` that ``op`` selects, else ``default`` (a chain of 2:1 multiplexers)."""
    value = default
    for code, choice in choices.items():
        value = Mux(op == code, choice, value)
    return value


def flush(x):
    """An fp32 value with a subnormal read as the zero of its sign."""
    return Mux(x[23:31] == 0, Cat(Const(0, 31), x[31]), x)


def is_nan(x):
    return (x[23:31] == 0xFF) & (x[:23] != 0)


def order_key(x):
    """An unsigned key ordered like the (non-NaN, flushed) fp32 values, with −0 just below +0."""
    return Mux(x[31], ~x, x | SIGN)


def _to_bf16(m: Module, x) -> Signal:
    """``x`` rounded to bf16 as the function unit takes it: flushed, RNE at bit 16 (a carry into the
    exponent gives the next binade or ±Inf), NaN → 0x7FC0."""
    flushed = flush(x)
    rne = Signal(33)
    m.d.comb += rne.eq(flushed + 0x7FFF + flushed[16])
    out = Signal(16)
    m.d.comb += out.eq(Mux(is_nan(x), BF16_NAN, rne[16:32]))
    return out


def _saturating_round_shift(m: Module, x, s) -> Signal:
    """``round_half_even(x / 2^s)`` of a signed ``x`` (the read-out's rounding), saturated to int32:
    an arithmetic shift with one extra low bit, which then holds the guard bit; the bits below make
    the sticky bit. The quotient is clamped to 33 bits before the rounding add, which changes no
    saturated result (a clamped value stays outside int32 after adding 0 or 1), so the add is 34
    bits wide, not the product's 64."""
    width = len(x)
    ext = Cat(Const(0, 1), x).as_signed()
    shifted = Signal(signed(width + 1))
    m.d.comb += shifted.eq(ext >> s)
    sticky = (ext.as_unsigned() & ((Const(1, width + 2) << s) - 1)[: width + 1]) != 0
    q = shifted[1:]
    y = Signal(signed(34))
    m.d.comb += y.eq(_clamp(q, 33) + (shifted[0] & (sticky | q[0])))
    return _clamp(y, 32)[:32]


def _clamp(v, bits: int) -> Value:
    """A signed value clamped to ``bits`` bits (signed), with bit tests instead of comparisons (no
    carry chain): it fits when its bits from ``bits - 1`` up are all equal."""
    high = v[bits - 1 :]
    fits = (high == 0) | high.all()
    return Mux(fits, v[:bits].as_signed(), Mux(v[-1], -(2 ** (bits - 1)), 2 ** (bits - 1) - 1))


def saturate(v):
    """A signed value clamped to int32, as its 32-bit pattern."""
    return Mux(v > INT32_MAX, INT32_MAX, Mux(v < INT32_MIN, INT32_MIN, v))[:32]

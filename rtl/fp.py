"""Floating-point units of the BF16 processing element and the accumulator read-out, checked bit for
bit against ``rtl/fp_model.py``.

The units are combinational, except that the adder can be pipelined (``FpAdd(registers=…)``) for
the deeper PE pipelines of ``pe_stages`` ≥ 3; the other registers are placed by the units' users.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.signals import delayed, named

__all__ = [
    "ADD_CUTS",
    "PRODUCT_FLAGS",
    "PRODUCT_FRAC_BITS",
    "Bf16Add",
    "Bf16Mul",
    "Bf16ScaleMul",
    "Fp32Mul",
    "FpAdd",
    "RoundProduct",
    "round_bf16",
]

EXP_MAX = 255
BIAS = 127


def _fields(m: Module, value, mant_bits: int, prefix: str):
    """Split an IEEE value into (sign, exponent, fraction, is_zero, is_inf, is_nan); subnormals read as 0."""
    sign, exp, frac = value[-1], value[mant_bits:-1], value[:mant_bits]
    is_zero = Signal(name=f"{prefix}_zero")
    is_inf = Signal(name=f"{prefix}_inf")
    is_nan = Signal(name=f"{prefix}_nan")
    m.d.comb += [
        is_zero.eq(exp == 0),
        is_inf.eq((exp == EXP_MAX) & (frac == 0)),
        is_nan.eq((exp == EXP_MAX) & (frac != 0)),
    ]
    return sign, exp, frac, is_zero, is_inf, is_nan


def _product_operands(m: Module, a, b, mant_bits: int):
    """Fields of both operands of a multiply, and the product's sign and IEEE special cases:
    NaN for any NaN operand or 0 × ∞, infinite for any infinite operand, zero for any zero one."""
    sa, ea, fa, za, ia, na = _fields(m, a, mant_bits, "a")
    sb, eb, fb, zb, ib, nb = _fields(m, b, mant_bits, "b")
    special = {"sign": sa ^ sb, "nan": na | nb | (ia & zb) | (ib & za), "inf": ia | ib, "zero": za | zb}
    return (ea, fa), (eb, fb), special


def _product_result(m: Module, out: Signal, special: dict, inf: Value, zero: Value, value: Value) -> None:
    """A product's result by the range rules: the canonical NaN, else ±Inf (an infinite operand or
    ``inf``, an overflow), else ±0 (a zero operand or ``zero``, an underflow), else ``value``."""
    mant = len(out) - 9
    sign = special["sign"]
    with m.If(special["nan"]):
        m.d.comb += out.eq(Cat(Const(0, mant - 1), Const(1, 1), Const(EXP_MAX, 8), Const(0, 1)))
    with m.Elif(special["inf"] | inf):
        m.d.comb += out.eq(Cat(Const(0, mant), Const(EXP_MAX, 8), sign))
    with m.Elif(special["zero"] | zero):
        m.d.comb += out.eq(Cat(Const(0, mant + 8), sign))
    with m.Else():
        m.d.comb += out.eq(value)


# Fraction bits of a bf16 × bf16 product that can be non-zero (Bf16Mul): its significand is the
# 16-bit product of two 8-bit ones.
PRODUCT_FRAC_BITS = 15
# A product's special case beside its fields (Bf16Mul's ``p_bits``), for an adder that takes it
# so (``FpAdd(flagged_x=True)``): zero (a zero operand, or below 2^-126), infinite (an infinite
# operand, or 2^128 and above) or NaN; at most one is set.
PRODUCT_FLAGS = data.StructLayout({"zero": 1, "inf": 1, "nan": 1})


class Bf16Mul(wiring.Component):
    """bf16 × bf16 → fp32. The 8 × 8-bit significand product is exact in fp32, so nothing is rounded:
    the unit only normalizes, overflows to ±Inf and flushes results below 2^-126 to ±0.

    ``p`` is the product as an IEEE value. With ``flagged``, ``p_bits`` and ``p_flags`` are the same
    product for an adder in the same cycle (the bf16 PE's at ``pe_stages`` 1, ``rtl/mac.py``): the
    sign, exponent and fraction as if the product were normal and in range (they are, unless a flag
    is set; a zero's exponent field is 0), and its special case as flags. An adder that decodes
    the flags instead of ``p``'s fields leaves out what ``p`` packs only to unpack again: the
    special cases' multiplexers here and the field compares there (377 → 350 LUT a bf16 PE, xc7)."""

    def __init__(self, flagged: bool = False) -> None:
        self.flagged = flagged
        flags = {"p_bits": Out(32), "p_flags": Out(PRODUCT_FLAGS)} if flagged else {}
        super().__init__({"a": In(16), "b": In(16), "p": Out(32), **flags})

    def elaborate(self, platform) -> Module:
        m = Module()
        (ea, fa), (eb, fb), special = _product_operands(m, self.a, self.b, 7)
        sign = special["sign"]

        prod = Signal(16)
        exp = Signal(signed(11))  # the exponent before normalization, formed beside the multiply
        frac = Signal(23)
        m.d.comb += [
            prod.eq(Cat(fa, 1) * Cat(fb, 1)),
            exp.eq(ea + eb - BIAS),
            # The product lies in [1, 4): its leading one is bit 15 or bit 14.
            frac.eq(Mux(prod[15], Cat(Const(0, 8), prod[:15]), Cat(Const(0, 9), prod[:14]))),
        ]
        # Normalizing adds prod[15] to the exponent: both outcomes are checked against the range
        # while the multiplier works, and the product's top bit only picks one.
        carry = prod[15]
        over = Mux(carry, exp >= EXP_MAX - 1, exp >= EXP_MAX)
        under = Mux(carry, exp <= -1, exp <= 0)
        exp_field = Mux(carry, exp + 1, exp)[:8]
        _product_result(m, self.p, special, over, under, Cat(frac, exp_field, sign))
        if self.flagged:
            self._flags(m, special, frac, exp_field, over, under)
        return m

    def _flags(self, m: Module, special: dict, frac, exp, over, under) -> None:
        nan, inf, zero = (named(m, special[k], f"p_{k}") for k in ("nan", "inf", "zero"))
        over, under = named(m, over, "p_over"), named(m, under, "p_under")
        # A zero product's exponent field is 0 (its fraction bits mean nothing), so it orders below
        # every normal value in the adder's magnitude compare, as an IEEE zero does, and the adder
        # needs no test of the flag there.
        m.d.comb += [
            self.p_bits.eq(Cat(frac, Mux(zero | under, 0, exp), special["sign"])),
            self.p_flags.nan.eq(nan),
            self.p_flags.inf.eq(~nan & (inf | over)),
            self.p_flags.zero.eq(~nan & ~inf & ~over & (zero | under)),
        ]


def round_bf16(m: Module, value, name: str) -> Value:
    """An fp32 value (32 bits) rounded to bf16 at bit 16, nearest even; a carry into the exponent
    gives the next binade or ±Inf, and any NaN becomes the canonical 0x7FC0. The one narrowing of
    the vector engine's writer, the read-out and the FPTT update unit."""
    nan = (value[23:31] == 0xFF) & (value[:23] != 0)
    rne = Signal(16, name=f"{name}_rne")
    m.d.comb += rne.eq(round_nearest_even(value, 16))
    return Mux(nan, 0x7FC0, rne)


def round_nearest_even(value: Value, drop: int) -> Value:
    """``value`` without its low ``drop`` bits, rounded to nearest even: the dropped bits carry
    into the kept ones when they are past the half-way point, or at it with the kept ones odd.
    Only the kept bits are added (value + 0b0111… + the kept LSB, at bit ``drop``)."""
    return value[drop:] + (value[drop - 1] & (value[: drop - 1].any() | value[drop]))


def canonical_nan(mant_bits: int) -> Value:
    """The canonical quiet NaN of a format with ``mant_bits`` fraction bits (0x7FC0 for bf16)."""
    return Cat(Const(0, mant_bits - 1), Const(1, 1), Const(EXP_MAX, 8), Const(0, 1))


class Bf16Add(wiring.Component):
    """bf16 + bf16 → bf16, rounded once to nearest even: ``FpAdd(7)`` with a bf16 ``x``, whose
    datapath is then 8 significand bits plus guard, round and sticky (11 bits) instead of 27.

    Rounding once to bf16 gives the same bits as rounding to fp32 first (the lanes' ADD then the
    bf16 narrowing): with an exponent gap of at most 15 the exact sum has at most 24 bits, and with a
    larger gap the smaller addend lies below half a bf16 ulp of the larger either way."""

    a: In(16)
    b: In(16)
    o: Out(16)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.add = add = FpAdd(7, x_frac_bits=7)
        m.d.comb += [add.acc.eq(self.a), add.x.eq(Cat(Const(0, 16), self.b)), self.o.eq(add.o)]
        return m


# Where a pipelined adder puts its registers, by their number: after the alignment, the add and
# the normalization, the three steps of about equal depth (rounding is the fourth).
ADD_CUTS = {0: (), 1: ("add",), 2: ("align", "normalize"), 3: ("align", "add", "normalize")}


class FpAdd(wiring.Component):
    """``acc + x`` rounded once to nearest even at the accumulator's precision.

    ``acc`` and ``o`` are fp32 (``acc_mant_bits`` = 23) or bf16 (7); ``x`` is always fp32. The
    datapath aligns the smaller operand with guard, round and sticky bits, which is enough for a
    correctly rounded sum: a shift of more than one place loses bits only when the result needs at
    most one place of renormalization.

    ``registers`` (0 to 3, see ``ADD_CUTS``) pipelines the datapath: ``o`` is then the sum of the
    operands of ``registers`` cycles before, one sum per cycle. The arithmetic is the same.

    ``x_frac_bits``: the fraction bits of ``x`` that can be non-zero (its top ones; a bf16 × bf16
    product has ``PRODUCT_FRAC_BITS``). The datapath is as wide as the wider significand plus guard,
    round and sticky: 27 bits with an fp32 ``acc``, 19 for a bf16 ``acc`` plus a product instead
    of 27, with the same sums for every such ``x``.

    ``flagged_x``: ``x`` comes as a multiplier's ``p_bits`` and ``p_flags`` (``Bf16Mul``): its
    special cases from ``x_flags``, its fields read only where no flag is set, except that a zero's
    exponent field must be 0 (it orders the operands). The sums are those of the product's IEEE
    value ``p``.

    ``serial_normalize``: the normalization as a binary search of shifts (``_normalize_serial``)
    instead of a leading-zero tree beside the shifter: often fewer LUTs (xc7: 177 -> 171 a bf16
    accumulator's row adder, the 4x4-bf16 accumulator 2,056 -> 2,022; not in the PE's mesh,
    measured), but its steps are in series, so only for adders where area counts more than the
    clock (see ``_normalize``). The sums are the same.
    """

    def __init__(
        self,
        acc_mant_bits: int = 23,
        registers: int = 0,
        x_frac_bits: int = 23,
        *,
        flagged_x: bool = False,
        serial_normalize: bool = False,
    ) -> None:
        assert acc_mant_bits in (7, 23) and registers in ADD_CUTS and 0 < x_frac_bits <= 23
        self.acc_mant_bits, self.registers, self.x_frac_bits = acc_mant_bits, registers, x_frac_bits
        self.flagged_x = flagged_x
        self.serial_normalize = serial_normalize
        self.sig = max(acc_mant_bits, x_frac_bits) + 1  # significand bits, the leading one included
        self.ext = self.sig + 3  # with guard, round and sticky
        width = acc_mant_bits + 9
        flags = {"x_flags": In(PRODUCT_FLAGS)} if flagged_x else {}
        super().__init__({"acc": In(width), "x": In(32), **flags, "o": Out(width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        cut = _Cuts(m, ADD_CUTS[self.registers])
        v = cut("align", self._align_operands(m))
        subtract = named(m, v["sign_a"] ^ v["sign_x"], "subtract")
        # One adder for both: big - aligned = big + ~aligned + 1, the inversion one bit wider than
        # the operands so that a difference has no carry into the top bit. (Written as
        # Mux(subtract, big - aligned, big + aligned), Yosys keeps two adders and a mux: 25 LUTs
        # more in FpAdd(7, 0, 15), 52 in (23, 0, 23), measured.)
        inverted = Cat(v["aligned"], 0) ^ Cat(*[subtract] * (self.ext + 1))
        v["sum"] = named(m, (v["big"] + inverted + subtract)[: self.ext + 1], "sum")
        v = cut("add", v)
        normalize = self._normalize_serial if self.serial_normalize else self._normalize
        v["norm"], v["sticky"], v["exp"], v["zero"] = normalize(m, v["sum"], v["e_big"])
        v = cut("normalize", v)
        frac, exp_r = self._round(m, v["norm"], v["sticky"], v["exp"])

        mant = self.acc_mant_bits
        s_big = v["s_big"]
        with m.If(v["nan"]):
            m.d.comb += self.o.eq(canonical_nan(mant))
        with m.Elif(v["inf"]):
            m.d.comb += self.o.eq(Cat(Const(0, mant), Const(EXP_MAX, 8), v["inf_sign"]))
        with m.Elif(v["zero"]):
            # An exact zero is +0 under round-to-nearest unless both addends are negative.
            m.d.comb += self.o.eq(Cat(Const(0, mant + 8), v["sign_a"] & v["sign_x"]))
        with m.Elif(exp_r >= EXP_MAX):
            m.d.comb += self.o.eq(Cat(Const(0, mant), Const(EXP_MAX, 8), s_big))
        with m.Elif(exp_r <= 0):
            m.d.comb += self.o.eq(Cat(Const(0, mant + 8), s_big))
        with m.Else():
            m.d.comb += self.o.eq(Cat(frac, exp_r[:8], s_big))
        return m

    def _align_operands(self, m: Module) -> dict:
        """Special cases, the operands ordered by magnitude, and the smaller one aligned to the larger."""
        a32 = Cat(Const(0, 23 - self.acc_mant_bits), self.acc)
        sa, ea, fa, za, ia, na = _fields(m, a32, 23, "a")
        if self.flagged_x:
            sx, ex, fx = self.x[31], self.x[23:31], self.x[:23]
            zx, ix, nx = self.x_flags.zero, self.x_flags.inf, self.x_flags.nan
        else:
            sx, ex, fx, zx, ix, nx = _fields(m, self.x, 23, "x")

        # Order the operands by magnitude. Both exponent differences are formed beside the compare
        # (not after the swap it decides), so the alignment starts one subtraction earlier. The
        # compare needs no flush: a subnormal orders below every normal value as its flushed zero
        # does, and where both operands are flushed both significands are 0, so the sum is an
        # exact zero whose sign does not depend on the order. A flagged zero x has a zero exponent
        # field (``Bf16Mul.p_bits``), so it orders as a flushed value does.
        swap = named(m, _greater_magnitude(self.x, 23 - self.x_frac_bits, a32, 23 - self.acc_mant_bits), "swap")
        # Both significands at the datapath's width, the leading one on top; flush to zero: a
        # subnormal's fraction is dropped.
        sig_a = named(m, Mux(za, 0, Cat(fa[23 - self.sig + 1 :], 1)), "sig_a")
        sig_x = named(m, Mux(zx, 0, Cat(fx[23 - self.sig + 1 :], 1)), "sig_x")
        sig_big, sig_small = Mux(swap, sig_x, sig_a), Mux(swap, sig_a, sig_x)
        dist = Signal(range(self.ext + 1))
        m.d.comb += dist.eq(Mux(swap, _align_distance(m, ex, ea, self.ext), _align_distance(m, ea, ex, self.ext)))
        aligned = Signal(self.ext)
        m.d.comb += aligned.eq(_align(m, Cat(Const(0, 3), sig_small), dist))
        return {
            "sign_a": sa,
            "sign_x": sx,
            "s_big": Mux(swap, sx, sa),
            "e_big": Mux(swap, ex, ea),
            "big": Cat(Const(0, 3), sig_big),
            "aligned": aligned,
            "nan": na | nx | (ia & ix & (sa ^ sx)),
            "inf": ia | ix,
            "inf_sign": Mux(ia, sa, sx),
        }

    def _normalize_serial(self, m: Module, sum_, e_big):
        """``_normalize`` as a binary search of shifts: each step tests whether the top bits left
        are zero and shifts them out, so the count forms as the value shifts (no leading-zero tree
        beside the shifter). After each step the bits that the steps left can no longer bring up
        to the kept ones are OR-ed into the sticky and dropped, as ``_align`` does. Its steps are
        in series: for adders with no pipeline register (see ``FpAdd``'s ``serial_normalize``)."""
        w = len(sum_)
        n = self.acc_mant_bits + 2  # kept bits plus guard
        value, sticky, counts = sum_, Const(0, 1), []
        for k in reversed(range((w - 1).bit_length())):
            step = 1 << k
            top_zero = named(m, ~value[-step:].any(), f"nz_{k}")
            value = named(m, Mux(top_zero, Cat(Const(0, step), value)[: len(value)], value), f"nshift_{k}")
            counts.insert(0, top_zero)
            # What is left of the shift is at most step - 1 places: bits below that reach stay below.
            drop = len(value) - n - (step - 1)
            if drop > 0:
                sticky = sticky | value[:drop].any()
                value = value[drop:]
        lz = Cat(*counts)
        norm, exp = Signal(n), Signal(signed(10))
        m.d.comb += [norm.eq(value[len(value) - n :]), exp.eq(e_big + 1 - lz)]
        # A non-zero sum ends with its leading one on top: the steps shift up to 2^k - 1 >= w - 1.
        return norm, named(m, sticky, "nsticky"), exp, ~value[-1]

    def _normalize(self, m: Module, sum_, e_big):
        """Bring the leading one of ``sum_`` to the top; return (the output precision's bits and the
        guard bit, the sticky OR of all bits below them, exponent, ``sum_ == 0``)."""
        # The carry bit is counted too: a sum that carried has no leading zero, so it needs no mux
        # of its own beside the shift.
        w = len(sum_)
        n = self.acc_mant_bits + 2  # kept bits plus guard
        norm = Signal(n)
        sticky = Signal()
        exp = Signal(signed(10))  # from 1 - 31 to 255 + 1
        # Leading zeros of sum_ counted from its top bit (padded to a power of two at the bottom),
        # as a balanced tree: log-depth where a priority chain would be w muxes deep. (A binary
        # search of shifts, each step testing the last one's output, counts as it shifts and is a
        # few operations fewer in Verilator, but its steps are in series: the mesh at pe_stages 4
        # fell from 60.4 to 52.2 MHz on ECP5, measured.)
        zero, lz = _leading_zeros(m, Cat(Const(0, (1 << (w - 1).bit_length()) - w), sum_))
        # Only the kept and guard bits are shifted; the bits that would land below them are
        # OR-ed without shifting: with lz leading zeros they are sum_[: w - n - lz], so the sticky
        # is one of the prefix ORs of sum_'s low bits, picked by lz.
        prefix = [sum_[:i].any() for i in range(w - n, -1, -1)]  # prefix[lz] = OR(sum_[: w - n - lz])
        prefix += [Const(0, 1)] * ((1 << len(lz)) - len(prefix))
        m.d.comb += [
            norm.eq(_normalize_shift(m, sum_, lz)[w - n :]),
            sticky.eq(Cat(*prefix).bit_select(lz, 1)),
            exp.eq(e_big + 1 - lz),
        ]
        return norm, sticky, exp, zero

    def _round(self, m: Module, norm, sticky, exp):
        """Round the normalized significand to the output precision; return (fraction, exponent)."""
        precision = self.acc_mant_bits + 1
        keep, guard = norm[1:], norm[0]
        rounded = Signal(precision + 1)
        m.d.comb += rounded.eq(keep + (guard & (sticky | keep[0])))
        exp_r = Signal(signed(10))
        m.d.comb += exp_r.eq(exp + rounded[precision])
        # A carry out of rounding leaves 1.000…: the fraction bits are then all zero either way.
        return rounded[: precision - 1], exp_r


class RoundProduct(wiring.Component):
    """What a bf16 PE's ``FpAdd`` gives for ``+0 + x`` (x a product), with its interface less
    ``acc`` and its latency (``registers``): x rounded to the accumulator's precision, nearest
    even (a carry into the exponent gives the next binade or ±Inf); a zero x (a zero operand or an
    underflow) gives +0, as ``+0 + ±0`` does; ±Inf stays; a NaN is the canonical one. A product
    is normal or one of those, so no flush follows the rounding. (xc7: the 4x4-bf16 EXEC unit
    4,487 -> 4,423 LUTs: constant propagation alone leaves part of the adders of its top row.)"""

    def __init__(self, acc_mant_bits: int, registers: int, *, flagged_x: bool = False) -> None:
        self.mant, self.registers, self.flagged = acc_mant_bits, registers, flagged_x
        width = self.mant + 9
        flags = {"x_flags": In(PRODUCT_FLAGS)} if self.flagged else {}
        super().__init__({"x": In(32), **flags, "o": Out(width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        mant, x = self.mant, self.x
        if self.flagged:
            zero, inf, nan = self.x_flags.zero, self.x_flags.inf, self.x_flags.nan
        else:
            _, _, _, zero, inf, nan = _fields(m, x, 23, "x")
        drop = 23 - mant  # fraction bits below the kept ones (x has only PRODUCT_FRAC_BITS of them)
        rounded = Signal(mant + 9, name="rounded")
        # fp32: a bf16 product is exact
        m.d.comb += rounded.eq(round_nearest_even(x, drop) if drop else x)
        out = Signal(mant + 9, name="rounded_out")
        with m.If(nan):
            m.d.comb += out.eq(canonical_nan(mant))
        with m.Elif(inf):
            m.d.comb += out.eq(Cat(Const(0, mant), Const(EXP_MAX, 8), x[31]))
        with m.Elif(zero):
            m.d.comb += out.eq(0)
        with m.Else():
            m.d.comb += out.eq(rounded)
        m.d.comb += self.o.eq(delayed(m, out, self.registers, "rounded"))
        return m


def _align(m: Module, ext, dist):
    """``ext`` shifted right by ``dist``, with every lost bit OR-ed into bit 0 (sticky).

    A log shifter, one stage per bit of ``dist``; each stage ORs the bits it drops into the
    sticky. Its low bits are the stage's own inputs, so the sticky costs a few ORs, where a mask
    decoded from ``dist`` beside the shift, AND-ed with the whole word, cost 14 more LUTs in
    ``FpAdd(7, 0, 15)`` (synth_xilinx, measured). The largest step first, then the others from
    the 1-place one up (all largest first cost 14 LUTs more; all smallest first 11 more in the
    bf16 PE, xc7, measured)."""
    value, sticky = ext, Const(0, 1)
    for k in [len(dist) - 1, *range(len(dist) - 1)]:
        step = 1 << k
        sticky = sticky | (dist[k] & value[:step].any())
        value = named(m, Mux(dist[k], value.shift_right(step), value), f"align_{k}")
    return value | sticky


def _normalize_shift(m: Module, value, dist):
    """``value << dist``, in ``len(value)`` bits: a log shifter, largest step first. Only the top
    bits of the result are kept, and each step narrows what the later ones need: after the step of
    16 places, only the bits that 15 more can still bring to the top. (``value << dist`` maps to
    the smallest step first, so its early steps shift the whole word: 18 LUTs more in the bf16 PE,
    xc7, measured.) The count's top bit also comes first out of the leading-zero tree."""
    w = len(value)
    for k in reversed(range(len(dist))):
        step = 1 << k
        value = named(m, Mux(dist[k], Cat(Const(0, step), value)[:w], value), f"norm_{k}")
    return value


def _align_distance(m: Module, e_big, e_small, width: int):
    """How far the smaller operand shifts right: the exponent difference (of 8-bit fields, at
    least 0 where it is used), or all ones of the shifter's distance (at least ``width``: every bit
    lost) where the difference does not fit in it. (Clamping to ``width`` compares and multiplexes:
    4 LUTs more in FpAdd(7, 0, 7), xc7, measured.)"""
    diff = named(m, (e_big - e_small)[:8], "diff")
    n = width.bit_length()
    far = named(m, diff[n:].any(), "far")
    return diff[:n] | Cat(*[far] * n)


def _greater_magnitude(a, a_zeros: int, b, b_zeros: int):
    """``|a| > |b|`` for IEEE values whose lowest ``a_zeros`` and ``b_zeros`` bits are zero. Where
    only one operand has bits, the other's are zero, so those bits only count as a whole: they are
    OR-ed into one. (Each bit is one LUT of the compare's carry chain, and Yosys maps the chain
    before it could see the constant bits: 11 LUTs in FpAdd(7, 0, 15), measured.)"""
    low, high = min(a_zeros, b_zeros), max(a_zeros, b_zeros)
    if low == high:
        return a[high:-1] > b[high:-1]
    a_low = a[low:high].any() if a_zeros < b_zeros else Const(0, 1)
    b_low = b[low:high].any() if b_zeros < a_zeros else Const(0, 1)
    return Cat(a_low, a[high:-1]) > Cat(b_low, b[high:-1])


def _leading_zeros(m: Module, value):
    """(value == 0, leading zeros of ``value``) for a power-of-two width of at least 2; the count
    is meaningless when the value is zero."""
    if len(value) == 2:  # the smallest pair, so no count is ever zero bits wide
        return ~value.any(), ~value[1]
    half = len(value) // 2
    zero_hi, count_hi = _leading_zeros(m, value[half:])
    zero_lo, count_lo = _leading_zeros(m, value[:half])
    return named(m, zero_hi & zero_lo, "lz_zero"), named(m, Cat(Mux(zero_hi, count_lo, count_hi), zero_hi), "lz_count")


class _Cuts:
    """Pipeline registers of a unit at the named points of its datapath: ``cut(point, values)``
    returns the values registered when a register sits at that point, else the values as signals
    (``rtl.signals.named``: the next step reads each of them more than once)."""

    def __init__(self, m: Module, points: tuple[str, ...]) -> None:
        self.m, self.points = m, points

    def __call__(self, point: str, values: dict) -> dict:
        domain = "sync" if point in self.points else "comb"
        return {name: named(self.m, value, f"{point}_{name}", domain) for name, value in values.items()}


class Fp32Mul(wiring.Component):
    """fp32 × fp32 → fp32, rounded once to nearest even (the read-out's scale multiply).

    The 24 × 24-bit significand product is exact in 48 bits; it is rounded to 24 bits with guard and
    sticky bits and an unbounded exponent, then ≥ 2^128 gives ±Inf and < 2^-126 gives ±0, the same
    range rules as ``FpAdd``. Subnormal inputs read as zero; NaN results are canonical.
    """

    a: In(32)
    b: In(32)
    p: Out(32)

    def __init__(self, bf16_a: bool = False) -> None:
        # ``bf16_a``: ``a`` always holds a bf16 value (its low 16 bits zero), so the significand
        # product is 8 × 24 bits, one DSP block instead of two; the result is the same.
        self.bf16_a = bf16_a
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        (ea, fa), (eb, fb), special = _product_operands(m, self.a, self.b, 23)
        sign = special["sign"]

        prod = Signal(48)
        if self.bf16_a:
            m.d.comb += prod.eq(Cat(fa[16:], 1) * Cat(fb, 1) << 16)
        else:
            m.d.comb += prod.eq(Cat(fa, 1) * Cat(fb, 1))
        # The product lies in [1, 4): keep 24 bits below its leading one (bit 47 or 46).
        sig, guard, sticky = Signal(24), Signal(), Signal()
        with m.If(prod[47]):
            m.d.comb += [sig.eq(prod[24:]), guard.eq(prod[23]), sticky.eq(prod[:23] != 0)]
        with m.Else():
            m.d.comb += [sig.eq(prod[23:47]), guard.eq(prod[22]), sticky.eq(prod[:22] != 0)]
        rounded = Signal(25)
        exp = Signal(signed(11))
        m.d.comb += [
            rounded.eq(sig + (guard & (sticky | sig[0]))),
            # A carry out of rounding leaves 1.000…: the fraction bits are then all zero either way.
            exp.eq(ea + eb - BIAS + prod[47] + rounded[24]),
        ]
        _product_result(m, self.p, special, exp >= EXP_MAX, exp <= 0, Cat(rounded[:23], exp[:8], sign))
        return m


class Bf16ScaleMul(wiring.Component):
    """bf16 × fp32 → bf16 with the bits of ``round_bf16(Fp32Mul(a · 2^16, b))``: the product rounded
    to fp32 (nearest even, then ±Inf at ≥ 2^128 and ±0 below 2^-126), and that value rounded to
    bf16 (nearest even, a carry into ±Inf, NaN canonical). The read-out of a bf16 accumulator.

    Neither the fp32 value nor its 24-bit rounding adder is built. Of the 24-bit significand, the
    high 8 bits (``hi``) are the bf16 one and the low 16 are the bits bf16 drops (``lo``). The fp32
    rounding adds one at ``lo``'s bottom: it carries out of ``lo`` only when ``lo`` is all ones, and
    it changes what the bf16 rounding sees of ``lo`` (its top bit, and whether any bit below is
    set) only when ``lo``'s low 15 bits are all ones or all zeros. So those two tests and one 16-bit
    increment of the bf16 pattern give both roundings (124 LUTs fewer in the 4x4-bf16 read-out than
    ``Fp32Mul`` and ``round_bf16``, xc7, measured).
    """

    a: In(16)
    b: In(32)
    p: Out(16)

    def elaborate(self, platform) -> Module:
        m = Module()
        (ea, fa), (eb, fb), special = _product_operands(m, Cat(Const(0, 16), self.a), self.b, 23)
        sign = special["sign"]
        prod = Signal(32)  # the 8 × 24-bit significand product, in [2^30, 2^32)
        exp = Signal(signed(11))  # its exponent before normalization
        m.d.comb += [prod.eq(Cat(fa[16:], 1) * Cat(fb, 1)), exp.eq(ea + eb - BIAS)]
        # Normalized: the significand is prod[8:32] (top set) or prod[7:31]. Its bits are read
        # from both places where they differ; the 14 bits of lo both places share are tested once.
        top = prod[31]
        hi = named(m, Mux(top, prod[24:32], prod[23:31]), "hi")
        lo_top, lo_bottom = Mux(top, prod[23], prod[22]), Mux(top, prod[8], prod[7])
        edge = Mux(top, prod[22], prod[7])  # lo's bit 14 (top set) or bit 0 (not): the unshared one
        ones = prod[8:22].all() & edge  # lo's low 15 bits all ones
        zeros = ~prod[8:22].any() & ~edge  # ... all zeros
        guard = Mux(top, prod[7], prod[6])
        sticky = prod[:6].any() | (top & prod[6])
        up32 = guard & (sticky | lo_bottom)  # the fp32 rounding adds one to lo
        carry = up32 & ones & lo_top  # ... which carries out of lo: lo becomes 0
        # The bf16 rounding of the fp32 value: its guard bit and sticky are lo + up32's, modulo 2^16.
        up16 = (lo_top ^ (up32 & ones)) & (~Mux(up32, ones, zeros) | hi[0])
        over = carry & hi.all()  # the fp32 rounding's carry reaches the exponent: fraction 0
        exp32 = Signal(signed(11))  # the fp32 value's exponent
        rounded = Signal(16)
        m.d.comb += [
            exp32.eq(exp + top + over),
            # One increment for both roundings' carries; they never both add one (after a carry out
            # of lo, the bf16 rounding sees zeros).
            rounded.eq(Cat(Mux(over, 0, hi[:7]), exp32[:8], sign) + ((carry & ~over) | up16)),
        ]
        _product_result(m, self.p, special, exp32 >= EXP_MAX, exp32 <= 0, rounded)
        return m

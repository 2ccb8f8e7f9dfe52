"""The accumulator read-out: scale, activation and narrowing of one row, per element.

``C = act(scale · acc)``, bit-exact against ``rtl/readout_model.py`` (the rules are listed there and
in docs/arithmetic.md, "Read-out"). The row pipeline has no backpressure: a row entering on ``inp``
leaves on ``result`` exactly ``READOUT_LATENCY`` cycles later. Stages:

1. register the row and its controls (the accumulator's memory and bank multiplexer feed it);
2. the arithmetic: right shift by the scale's multiple of four (int32: the shifted value with the
   sticky bit of what it dropped; the rest of the shift waits for stage 2b, the rounding increment
   for stage 3, so no clock period holds a whole barrel shifter, nor a shifter and an adder)
   or fp32 multiply by the scale (floats); a bf16 accumulator's product is also rounded to bf16
   here, in the same unit (``Bf16ScaleMul``: the same bits as the fp32 product's bf16 rounding in
   stage 3, with no fp32 value formed); a float's ReLU is applied to the product here;
2b. an int32's shift by the scale's two low bits, with the guard and sticky bits; a float's value
   waits a cycle;
3. narrowing (an int32's rounding increment, ReLU, then saturation to int8; rounding to bf16);
   for float accumulators the sigmoid and tanh activations (codes 2 and 3) take the bf16-rounded
   value through the correctly rounded function unit (``rtl/vector/function_unit.py``) and give
   its bf16 result. The unit takes the rounded value in stage 3 and answers a cycle later
   (``FunctionUnit.latency`` = 1, its tables in synchronous ROMs), so its result is chosen after
   the stage-3 register, by the activation and output width registered beside it: ``result``
   leaves in the same cycle as the other activations'.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.fp import Bf16ScaleMul, Fp32Mul, round_bf16
from rtl.shared import add_shared
from rtl.signals import delayed
from rtl.vector.function_unit import FunctionUnit

__all__ = ["READOUT_LATENCY", "Readout", "readout_controls"]

READOUT_LATENCY = 4
ACT_RELU = 1
# Float accumulators only: act 2 and 3 are these functions, in this order.
ACT_FUNCTIONS = ("sigmoid", "tanh")
OUT_NARROW = 0  # every other value (1, and the reserved 2–3) keeps the full width, as the DMA sizes it


def readout_controls() -> dict[str, int]:
    """The per-read controls: ``scale`` (shift or fp32 multiplier), ``act`` and ``out`` (docs/tile.md)."""
    return {"scale": 32, "act": 2, "out": 2}


def _valid_only(layout: data.Layout) -> wiring.Signature:
    return wiring.Signature({"valid": Out(1), "payload": Out(layout)})


def _coarse_shift(m: Module, x, s, name: str) -> Value:
    """Stage 2 of ``round_half_even(x / 2^s)`` for a signed 32-bit ``x``: ``x`` with one extra low
    bit (the guard bit's place) shifted arithmetically by ``s``'s multiple of four, and the sticky
    bit of what that shifts out, as ``Cat(sticky, u)``: 34 bits for ``_fine_shift``."""
    ext = Cat(Const(0, 1), x).as_signed()
    u = Signal(signed(33), name=f"{name}_u")
    m.d.comb += u.eq(ext >> Cat(Const(0, 2), s[2:]))
    # ext's bits below 4g are shifted out when s[2:] > g: each group of four ORed once, then the
    # groups compared with constants, where a mask ``(1 << s) - 1`` would put a carry chain in the way.
    # (The shift is at most 28: the top group is never dropped.)
    sticky = Cat(ext[4 * g : 4 * g + 4].any() & (s[2:] > g) for g in range(7)).any()
    return Cat(sticky, u)


def _fine_shift(m: Module, bits, s, name: str) -> Value:
    """Stage 2b: ``_coarse_shift``'s value shifted on by ``s``'s low two bits, with its sticky bit:
    ``Cat(sticky, guard, q)`` (34 bits) for ``_narrow_int``. Below the guard bit (the shift's bit 0) lie
    the bits the coarse shift dropped and the fine shift's own."""
    coarse_sticky, u = bits[0], bits[1:34].as_signed()
    shifted = Signal(signed(33), name=f"{name}_sh")
    m.d.comb += shifted.eq(u >> s[:2])
    dropped = Cat(u[i] & (s[:2] > i) for i in range(3)).any()
    return Cat(coarse_sticky | dropped, shifted)


def _narrow_int(m: Module, bits, relu, full, name: str) -> Value:
    """Stage 3 of an int32: ``_fine_shift``'s quotient rounded half to even, ReLU, then the full
    value or the int8 saturation of it. The rounded value ``y = q + inc`` (``inc`` 0 or 1) is
    classified from ``q`` and ``inc``, beside the adder and not after it, so only a multiplexer
    follows the carry chain: y > 127 iff q ≥ 128 or q = 127 and inc; y ≤ −128 if q < −128; y ≤ 0
    if q < 0."""
    sticky, guard, q = bits[0], bits[1], bits[2:34]
    inc = Signal(name=f"{name}_inc")
    y = Signal(32, name=f"{name}_y")
    # No overflow: q + 1 needs 32 bits only when s = 0, and then the guard bit is 0.
    m.d.comb += [inc.eq(guard & (sticky | q[0])), y.eq(q + inc)]
    neg, upper = q[31], q[7:31]  # q in [−128, 127] iff its bits 7 to 31 are all equal
    above = ~neg & (upper.any() | ((q[:7] == 127) & inc))
    below = neg & ~upper.all()  # y = −128 when q = −129 and inc: the same low byte as saturated
    zero = relu & neg  # y = 0 when q = −1 and inc: zeroed all the same
    narrow = Mux(above, 127, Mux(below, 0x80, y[:8]))
    return Mux(full, Mux(zero, 0, y), Cat(Mux(zero, 0, narrow), Const(0, 24)))


def _narrow_fp(m: Module, value, fn, full, acc_bits: int, name: str) -> tuple[Value, Value]:
    """Stage 3: the output width (a bf16 output is the rounded value, ReLU already applied in stage
    2); the bf16-rounded value also goes into the function unit (``fn`` picks sigmoid or tanh).
    Returns the narrowed value, to be registered, and the unit's ``y``: a cycle later, the
    function of that value."""
    # Nearest even at bit 16, NaN canonical; a bf16 accumulator's value is already rounded (stage 2).
    rounded = value[16:] if acc_bits == 16 else round_bf16(m, value, name)
    unit = add_shared(m, f"{name}_fn", "pyard_readout_functions", lambda: FunctionUnit(ACT_FUNCTIONS))
    m.d.comb += [unit.x.eq(rounded), unit.fn.eq(fn)]
    narrowed = rounded if acc_bits == 16 else Mux(full, value, Cat(rounded, Const(0, 16)))
    return narrowed, unit.y


def _function_out(fy, full, acc_bits: int) -> Value:
    """After the stage-3 register: a function's bf16 result ``fy`` as the output element, widened
    exactly for a full fp32 output."""
    if acc_bits == 16:
        return fy
    return Mux(full, Cat(Const(0, 16), fy), Cat(fy, Const(0, 16)))


class Readout(wiring.Component):
    """One row of ``width`` accumulator elements (default ``cfg.cols``) per cycle, fixed latency."""

    def __init__(self, cfg: AccelConfig, width: int | None = None) -> None:
        self.cfg = cfg
        self.width = width or cfg.cols
        row = data.ArrayLayout(cfg.acc_bits, self.width)
        super().__init__(
            {
                "inp": In(_valid_only(data.StructLayout({"data": row, **readout_controls()}))),
                "result": Out(_valid_only(data.StructLayout({"data": row}))),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        s1 = Signal(data.StructLayout({"valid": 1, "payload": self.inp.payload.shape()}))
        m.d.sync += [s1.valid.eq(self.inp.valid), s1.payload.eq(self.inp.payload)]

        ys = data.ArrayLayout(34 if cfg.acc_dtype == "int32" else 32, self.width)
        y2, y = Signal(ys), Signal(ys)
        relu_now = s1.payload.act == ACT_RELU  # stage 2's (a float's); ``relu`` is stage 3's (an int32's)
        for k in range(self.width):
            m.d.sync += y2[k].eq(self._arith(m, s1.payload.data[k], s1.payload.scale, relu_now, k))
        # Stage 2b: an int32's shift by the scale's two low bits (stage 2 shifted by its multiple
        # of four: a 33-bit barrel shifter and its sticky bit are too deep for one ECP5 period at
        # 100 MHz); a float's value waits beside it, so every accumulator has one latency.
        fine = delayed(m, s1.payload.scale[:2], 1, "fine")
        for k in range(self.width):
            m.d.sync += y[k].eq(_fine_shift(m, y2[k], fine, f"e{k}") if cfg.acc_dtype == "int32" else y2[k])
        relu, function, fn, full, valid2 = (
            delayed(m, value, 2, name)
            for value, name in (
                (relu_now, "relu"),
                (s1.payload.act >= 2, "function"),
                (s1.payload.act[0], "fn"),
                (s1.payload.out != OUT_NARROW, "full"),
                (s1.valid, "valid"),
            )
        )

        m.d.sync += self.result.valid.eq(valid2)
        if cfg.acc_dtype == "int32":
            for k in range(self.width):
                m.d.sync += self.result.payload.data[k].eq(_narrow_int(m, y[k], relu, full, f"e{k}"))
            return m
        # Float accumulators: the function unit's result arrives a cycle after stage 3, beside the
        # registered narrowed value; the activation and output width chosen in stage 3 pick it.
        function3, full3 = Signal(), Signal()
        m.d.sync += [function3.eq(function), full3.eq(full)]
        for k in range(self.width):
            narrowed, fy = _narrow_fp(m, y[k], fn, full, cfg.acc_bits, f"e{k}")
            narrowed3 = Signal(cfg.acc_bits, name=f"e{k}_narrowed")
            m.d.sync += narrowed3.eq(narrowed)
            out = Mux(function3, _function_out(fy, full3, cfg.acc_bits), narrowed3)
            m.d.comb += self.result.payload.data[k].eq(out)
        return m

    def _arith(self, m: Module, x, scale, relu, k: int):
        """Stage 2 of element ``k``: the shifted (int32, with its rounding bits: 34) or scaled (fp,
        32 bits) value; a float's ReLU too, so that it joins the product's own choice of special
        values (77 LUTs fewer in the 4x4-bf16 read-out than a ReLU of its own in stage 3, xc7,
        measured). An int32's ReLU stays in stage 3, in front of its saturation."""
        if self.cfg.acc_dtype == "int32":
            return _coarse_shift(m, x.as_signed(), scale[:5], f"e{k}")
        if self.cfg.acc_bits == 16:
            # The fp32 product and its bf16 rounding in one unit (the same bits), in y's top half.
            scaled = m.submodules[f"mul{k}"] = Bf16ScaleMul()
            m.d.comb += [scaled.a.eq(x), scaled.b.eq(scale)]
            product = Cat(Const(0, 16), scaled.p)
        else:
            mul = m.submodules[f"mul{k}"] = Fp32Mul()
            m.d.comb += [mul.a.eq(x), mul.b.eq(scale)]
            product = mul.p
        # A NaN from the multiplier is canonical (sign 0), so the sign bit alone picks −0 and negatives.
        return Mux(relu & product[31], 0, product)

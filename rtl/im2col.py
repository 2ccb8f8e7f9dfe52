"""Implicit im2col for the CONV2D loop: one K slice of an M block of A, as scratchpad loads.

The CONV2D loop (rtl/gemm_loop.py) runs a convolution as a GEMM: M = batch·OH·OW output pixels
in NHWC order, N = C_out, and K tiles ``(kh, kw, c0)``, each up to ``rows`` input channels at one
kernel position. Row ``p`` of A for tile ``(kh, kw, c0)`` is
``input[n, oh·s − pad + kh, ow·s − pad + kw, c0 : c0 + width]``, or zeros where that is padding.

Along one output row, neighbouring pixels read input pixels ``s·C_in`` elements apart, so a run of
output pixels is one strided LOAD; output pixels whose input lies in the padding get zero-fill
loads. The block's rows therefore become a few pieces per output row they touch: zeros left of the
input, one strided load, zeros right (or all zeros for a padding row). Which output columns read
inside the input depends only on ``kw``, so those limits are computed once per command, with the
output size, on a small sequential divider.

No multiplier sits in the per-cycle path (strength reduction): the walk keeps the byte address of
the input row its output row starts from and steps it by additions (one stride of rows per output
row; from an image's last output row, on to the next image's first). A piece that reads the input
starts either at the walk's first pixel (the M block's start) or at the first column inside the
input for this kw, so its address is that row address plus an offset summed over the walk's start
cycles from registered terms. For the ECP5 clock every step of a walk is a register of its own:
a piece's limit is registered in a calc cycle, the piece is offered from the output register, and
once taken its end is applied in an advance cycle (a row's end in a cycle of its own), so no
compare or sum runs on into the next one; a walk costs a few cycles more, hidden behind the
EXECs of a CONV2D (docs/tile.md). The products come
from a sequential shift-and-add multiplier: the per-command ones (row size, strides, each kw's
first inside column) after the divisions, and the block start's column offset once per M block.
"""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.divider import Divider, DividerPort
from rtl.multiplier import Multiplier, MultiplierPort, times
from rtl.ops import KIND, dma_desc_layout
from rtl.signals import named

__all__ = ["DIVIDER_WIDTH", "KERNEL_MAX", "MUL_B_BITS", "OUT_BITS", "ConvShape", "Im2col"]

KERNEL_MAX = 7
# The walker's divisions' width: its numerators (see `Im2col._limits`) are 18-bit.
DIVIDER_WIDTH = 18

# The convolution's geometry, as the CONV2D command gives it (docs/isa.md).
ConvShape = data.StructLayout(
    {"batch": 16, "cin": 16, "h": 16, "w": 16, "kh": 8, "kw": 8, "stride": 8, "pad": 8, "a": 32}
)

# Where a walk is: output pixel (oh, x) of image n, ``oh_s`` = oh · stride, and the byte address
# a − pad_off + (n·H + oh_s) · row_bytes (``row``), modulo 2^32.
# OH and OW reach 66,045 (H = 65,535, pad = 255, kh = 1, stride 1; docs/isa.md), so output rows and
# columns take 17 bits; oh_s ≤ H + 2·pad − kh does too.
_Pos = data.StructLayout({"oh": 17, "x": 17, "oh_s": 17, "row": 32})

# Output rows and columns (OH, OW, and the positions and column limits below them): 17 bits.
OUT_BITS = 17
# A kernel column's first inside output column, lo = ⌈(pad − kw)⁺ / s⌉ ≤ pad: the pad field's bits.
LO_BITS = ConvShape["pad"].width
# The shared multiplier's operand b: output columns (a block start's, for its column offset) and
# the loop's OH and OW, so OUT_BITS.
MUL_B_BITS = OUT_BITS

# Products computed once per command after the divisions, in this order; then each kw's
# first inside column offset (lo · x_step).
_PRODUCTS = ("row_bytes", "x_step", "row_step", "wrap", "pad_off")


def times_small(value: Value, small: Value) -> Value:
    """``value · small`` modulo 2^32 for a small unsigned ``small`` (a kernel index), with adders."""
    terms = [Mux(small[bit], value << bit, 0) for bit in range(len(small))]
    return sum(terms[1:], terms[0])[:32]


class _Table:
    """A value per kernel column, written while the walker sets up and read while it walks: a
    small memory with combinational reads (LUT RAM on an FPGA) instead of registers behind a
    multiplexer per read. No read depends on a value before its setup wrote it."""

    def __init__(self, m: Module, name: str, width: int) -> None:
        self.m = m
        self.mem = m.submodules[name] = Memory(shape=width, depth=KERNEL_MAX, init=[])
        self.port = self.mem.write_port()

    def offer(self, index, value) -> None:
        """What a write stores, and where: driven always, not only with the write (a multiplexer
        to zero per bit in front of the memory's pins otherwise), as only ``write`` enables it."""
        self.m.d.comb += [self.port.addr.eq(index), self.port.data.eq(value)]

    def write(self) -> list:
        """The statement that writes what is offered in this cycle (where it is active)."""
        return [self.port.en.eq(1)]

    def __getitem__(self, index) -> Value:
        port = self.mem.read_port(domain="comb")
        self.m.d.comb += port.addr.eq(index)
        return port.data


class Im2col(wiring.Component):
    """``setup`` (a pulse, with ``shape`` held) computes OH, OW, the column limits and the address
    steps; ``ready`` follows. While ``active``, the walker emits the loads of the K slice
    ``(ky, kx, c0, width)`` of the current M block (``rows`` output pixels from the block start, to
    scratchpad rows from ``local``, columns from ``col``), flagging the walk's ``first`` and ``last``
    piece and when the current one is done with (``step``). A slice at ``col`` > 0 lands beside one
    at column 0 that zero-filled its rows, so its padding pieces are skipped, not loaded. ``next_block``
    moves the block start past the block just walked; ``setup`` also resets it to pixel 0.

    With ``shared`` the walker has no multiplier and divider of its own: it asks for products and
    quotients on its ``mul_*`` and ``div_*`` ports, from a multiplier and a divider its owner shares
    with units that use them only while the walker does not (the GEMM loop's setup, which waits for
    ``ready``, and its block strides, which a block change waits for). The walker asks only while
    it sets up (both) and after a ``next_block`` (a product)."""

    def __init__(self, cfg: AccelConfig, *, shared: bool = False) -> None:
        self.cfg, self.shared = cfg, shared
        ports = {}
        if shared:
            ports = {
                "mul_start": Out(1),
                "mul_a": Out(32),
                "mul_b": Out(MUL_B_BITS),
                "mul_busy": In(1),
                "mul_done": In(1),
                "mul_product": In(32 + MUL_B_BITS),
                "div_start": Out(1),
                "div_numerator": Out(DIVIDER_WIDTH),
                "div_denominator": Out(DIVIDER_WIDTH),
                "div_busy": In(1),
                "div_done": In(1),
                "div_quotient": In(DIVIDER_WIDTH),
                "div_remainder": In(DIVIDER_WIDTH),
            }
        super().__init__(
            ports
            | {
                "shape": In(ConvShape),
                "setup": In(1),
                "ready": Out(1),
                "oh": Out(OUT_BITS),
                "ow": Out(OUT_BITS),
                "active": In(1),
                "rows": In(16),
                "local": In(16),
                "ky": In(3),
                "kx": In(3),
                "c0": In(16),
                "width": In(16),
                "col": In(8),  # the scratchpad column the slice's elements start at
                "next_block": In(1),
                # The walk's last piece is sent even if it is padding at col > 0, so that a descriptor
                # ends every walk (a resident-B CONV2D's last load carries EXEC's token).
                "keep_last": In(1),
                "desc": Out(stream.Signature(dma_desc_layout())),
                "first": Out(1),
                "last": Out(1),
                "step": Out(1),  # the current piece is done with: sent, or skipped (padding at col > 0)
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        if self.shared:
            mul = MultiplierPort(self.mul_start, self.mul_a, self.mul_b, self.mul_busy, self.mul_done, self.mul_product)
            div = DividerPort(
                DIVIDER_WIDTH,
                self.div_start,
                self.div_numerator,
                self.div_denominator,
                self.div_busy,
                self.div_done,
                self.div_quotient,
                self.div_remainder,
            )
        else:
            m.submodules.mul = mul = Multiplier(32, MUL_B_BITS)
            m.submodules.div = div = Divider(DIVIDER_WIDTH)
        # First output column inside (LO_BITS); above it, whether that is OW or past it.
        lo = _Table(m, "lo", LO_BITS + 1)
        hi = _Table(m, "hi", OUT_BITS + 1)  # end of the columns inside; above it, whether that is OW
        lo_xs = _Table(m, "lo_xs", 32)  # lo · x_step
        prod = {name: Signal(32, name=name) for name in _PRODUCTS}
        # The walk's position registers are set by every setup before a walk reads them, so they
        # need no reset (to a halt, say): without one, a flip-flop's synchronous reset pin is free
        # for the zeros the walk itself writes (the block start's pixel 0, a row's column 0, an
        # image's row 0) instead of a gate to zero in front of every bit.
        block = Signal(_Pos, reset_less=True)  # where the M block starts
        # Where the walk is. A block's walks all end where the next block starts, and the loop
        # moves to the next block (``next_block``) only once they have all ended.
        cur = Signal(_Pos, reset_less=True)
        block_xs = Signal(32, reset_less=True)  # its column's offset, block.x · x_step
        xs_ready = Signal()
        dividing, multiplying = Signal(), Signal()
        gap = Signal(signed(10))  # H − (OH − 1)·s, from −510 to 261
        m.d.comb += self.ready.eq(~dividing & ~multiplying)
        self._oh_last = Signal(OUT_BITS, name="oh_last")  # OH − 1: an image's last output row
        # ``next_block`` and ``active`` come late in the loop's cycle: the walker acts on them a
        # cycle later, from registers (``active`` cleared as a walk's last piece leaves, when the
        # loop may let it fall or change the walk's inputs).
        self._next_block_r, self._active_r = Signal(name="next_block_r"), Signal(name="active_r")
        m.d.sync += [
            self._next_block_r.eq(self.next_block),
            self._active_r.eq(self.active & ~(self.step & self.last)),
        ]
        self._limits(m, div, lo, hi, gap, dividing, multiplying)
        self._products(m, mul, lo, lo_xs, prod, block, cur, block_xs, xs_ready, gap, dividing, multiplying)
        self._walker(m, lo, hi, lo_xs, prod, block, cur, block_xs, xs_ready, multiplying)
        return m

    def _limits(self, m: Module, div, lo, hi, gap, running, then) -> None:
        """OH, OW, then for each kw: lo = ceil((pad − kw)⁺ / s), hi = min(OW, ⌊(W − 1 + pad − kw) / s⌋ + 1);
        ``then`` rises when they are known. OH's remainder gives ``gap``."""
        s = self.shape
        step = Signal(range(2 * KERNEL_MAX + 3))  # 0: OH, 1: OW, then lo and hi of each kw
        k = (step - 2)[1:4]
        # The numerators, as one sum A + P − C − D on a single adder (−C − 1 is ~C, so D rides as
        # a missing carry): OH: H + 2·pad − kh, OW: W + 2·pad − kw, lo: s − 1 + (pad − kw)⁺, and hi:
        # W − 1 + pad − kw, how far right of output column 0 the last input column lies (negative:
        # the kernel column never reaches the input, and hi is 0 whatever the quotient).
        size = step < 2
        at_lo = ~size & ~step[0]
        clipped = at_lo & (s.pad <= k)  # lo's (pad − kw)⁺ is 0
        a = Mux(step == 0, s.h, Mux(at_lo, s.stride, s.w))
        p = Mux(size, s.pad << 1, Mux(clipped, 0, s.pad))
        c = Signal(DIVIDER_WIDTH)
        m.d.comb += c.eq(Mux(step == 0, s.kh, Mux(step == 1, s.kw, Mux(clipped, 0, k))))
        # The numerator is registered (its step decode and three-term sum ran on into the shared
        # divider's operand register): a division starts a cycle after its step (or, at ``setup``,
        # the shape the loop registers then) is known, `stepped` holding it back meanwhile.
        numerator, stepped = Signal(DIVIDER_WIDTH, name="div_numerator"), Signal(name="div_stepped")
        m.d.sync += [numerator.eq(a + p + ~c + size), stepped.eq(div.done | self.setup)]
        unreachable = numerator[-1]  # at hi: W − 1 + pad − kw < 0 (it is at least −8, at most 2^17)
        # Whether the step is the last (2 + 2·kw steps), registered: a step lasts a division.
        final = Signal(name="div_final")
        m.d.sync += final.eq(step == Cat(C(1, 1), s.kw))
        # The operands only while dividing: a shared divider's users' requests are ORed.
        with m.If(running):
            m.d.comb += [
                div.numerator.eq(numerator),
                div.denominator.eq(s.stride),
                div.start.eq(~div.busy & ~div.done & ~stepped),
            ]
        with m.If(self.setup):
            m.d.sync += [step.eq(0), running.eq(1)]
        q = div.quotient[:OUT_BITS]
        # hi is clipped to OW, and lo is flagged where it is OW or past it (it stays as it is for its
        # column offset, lo · x_step), on one comparison, so the walker's pieces end at the next
        # limit without a test against OW. An unreachable kernel column's hi is 0.
        limit = q + step[0]  # lo at even steps, hi at odd ones
        # The limit, its tests and its kernel column, registered in every cycle: a division's are
        # written to lo or hi in the cycle after it is done (``write_lo``, ``write_hi``), so the
        # quotient's add and compare do not run on into the tables' write data (a long ECP5 path).
        # Nothing reads the tables before the products that follow the divisions.
        limit_r, within_r = Signal(OUT_BITS, name="limit_r"), Signal(name="within_r")
        unreachable_r, k_r = Signal(name="unreachable_r"), Signal(3, name="limit_k")
        write_lo, write_hi = Signal(name="write_lo"), Signal(name="write_hi")
        m.d.sync += [
            limit_r.eq(limit),
            within_r.eq(limit < self.ow),
            unreachable_r.eq(unreachable),
            k_r.eq(k),
            write_lo.eq(0),
            write_hi.eq(0),
        ]
        lo.offer(k_r, Cat(limit_r[:LO_BITS], ~within_r))
        hi.offer(k_r, Cat(Mux(unreachable_r, 0, Mux(within_r, limit_r, self.ow)), ~unreachable_r & ~within_r))
        with m.If(write_lo):
            m.d.comb += lo.write()
        with m.If(write_hi):
            m.d.comb += hi.write()
        with m.If(running & div.done):
            with m.If(step == 0):
                m.d.sync += [self.oh.eq(q + 1), self._oh_last.eq(q)]
            with m.Elif(step == 1):
                m.d.sync += self.ow.eq(q + 1)
            with m.Elif(~step[0]):
                m.d.sync += write_lo.eq(1)
            with m.Else():
                m.d.sync += write_hi.eq(1)
            m.d.sync += step.eq(step + 1)
            with m.If(final):
                m.d.sync += [running.eq(0), then.eq(1)]
        # gap = H − (OH − 1)·s, the input rows from the last output row's first to the next image's
        # row 0: with OH − 1 = (H + 2·pad − kh − r) / s, r the division's remainder, that is
        # kh + r − 2·pad, no product.
        with m.If(running & div.done & (step == 0)):
            m.d.sync += gap.eq(s.kh + div.remainder[:8] - (s.pad << 1))

    def _products(
        self, m: Module, mul, lo, lo_xs, prod, block, cur, block_xs, xs_ready, gap, dividing, running
    ) -> None:
        """The address steps, one product at a time after the divisions (``running``); then the walk
        starts at pixel 0. Later, each ``next_block`` multiplies the new block start's column."""
        s = self.shape
        pix = times(s.cin, self.cfg.in_bits // 8, 18)  # bytes of one input pixel
        step = Signal(range(len(_PRODUCTS) + KERNEL_MAX + 1))
        k = (step - len(_PRODUCTS))[:3]
        # pad_off's multiplicand, registered (read three products after row_bytes is written):
        # its carry chain was in front of the operands' multiplexers into the multiplier.
        row_pix = Signal(32, name="row_pix_bytes")
        m.d.sync += row_pix.eq(prod["row_bytes"] + pix)
        operands = [
            (pix, s.w),  # row_bytes: one input row
            (pix, s.stride),  # x_step: from one output column's input pixel to the next
            (prod["row_bytes"], s.stride),  # row_step: one output row down
            # wrap: from an image's last output row to the next image (gap sign-extended to b's bits)
            (prod["row_bytes"], Cat(gap, gap[-1].replicate(MUL_B_BITS - len(gap)))),
            (row_pix, s.pad),  # pad_off: the padding before row and column 0
        ]
        first_col = step >= len(_PRODUCTS)
        # Whether the step is the last (len(_PRODUCTS) + kw steps), registered: a step lasts a product.
        final = Signal(name="mul_final")
        m.d.sync += final.eq(step == len(_PRODUCTS) - 1 + s.kw)
        with m.If(running):
            m.d.comb += [
                mul.start.eq(~mul.busy & ~mul.done),
                mul.a.eq(Mux(first_col, prod["x_step"], Array(a for a, _ in operands)[step])),
                mul.b.eq(Mux(first_col, lo[k][:LO_BITS], Array(b for _, b in operands)[step])),
            ]
        with m.Elif(self._next_block_r):  # (from the register: the loop's strobe comes late in its cycle)
            m.d.comb += [mul.start.eq(1), mul.a.eq(prod["x_step"]), mul.b.eq(cur.x)]
        product = mul.product[:32]
        # A negative gap is multiplied as gap + 2^17: the product is row_bytes · 2^17 too large.
        wrap = Cat(product[:MUL_B_BITS], product[MUL_B_BITS:32] - Mux(gap[-1], prod["row_bytes"][: 32 - MUL_B_BITS], 0))
        with m.If(self.setup):
            m.d.sync += [step.eq(0), xs_ready.eq(0)]
        lo_xs.offer(k, product)
        with m.If(running & mul.done):
            with m.Switch(step):
                for index, name in enumerate(_PRODUCTS):
                    with m.Case(index):
                        m.d.sync += prod[name].eq(wrap if name == "wrap" else product)
                with m.Default():
                    m.d.comb += lo_xs.write()
            m.d.sync += step.eq(step + 1)
            with m.If(final):
                start = (s.a - prod["pad_off"])[:32]
                m.d.sync += [running.eq(0), block.eq(0), block.row.eq(start)]
                m.d.sync += [block_xs.eq(0), xs_ready.eq(1)]
        # The block start's column offset, asked for at `next_block` (which clears xs_ready): not
        # during the setup (gap's product comes during the divisions), nor a shared multiplier's
        # other users' products (they come while xs_ready is set, or before the setup).
        with m.If(~xs_ready & ~running & ~dividing & mul.done):
            m.d.sync += [block_xs.eq(product), xs_ready.eq(1)]
        with m.If(self._next_block_r):
            m.d.sync += xs_ready.eq(0)

    def _walker(self, m: Module, lo, hi, lo_xs, prod, block, cur, block_xs, xs_ready, setting_up) -> None:
        cfg, s = self.cfg, self.shape
        in_e = cfg.in_bits // 8
        pix = times(s.cin, in_e, 18)
        local = Signal(16)
        # The walk's steps, one register each (no decoding in front of their wide enables): waiting
        # (``idle``); two start cycles (``start``: its K slice's offsets summed; ``bounds``: its
        # first row's bounds); then per piece ``calc`` (its limit), ``offer`` (it is taken as the
        # output register empties) and ``advance`` (the walk's position moves past it).
        idle = Signal(init=1, name="idle")
        start, bounds = Signal(name="start"), Signal(name="bounds")
        calc, offer, advance = Signal(name="calc"), Signal(name="offer"), Signal(name="advance")
        emitted = Signal()
        ty, tx = Signal(32), Signal(32)  # ky · row_bytes; kx · pix + c0 · in_e
        k_off = Signal(32, name="k_off")  # their sum
        lo_off = Signal(32, name="lo_off")  # lo · x_step of the walk's kernel column
        q = Signal(32)  # the offset of the next inside piece from cur.row
        # The walk's end column, counted from the current output row's column 0 (past OW while the
        # walk runs on into later rows): a piece ends at it or at the row's next limit.
        end = Signal(OUT_BITS + 1, name="walk_end")

        # Whether the input row that kernel row ky reads for output row oh lies inside the input:
        # 0 ≤ oh_s + ky − pad < H. ``rel`` is registered from cur: in ``start`` for the walk's first
        # row (read in ``bounds``), while walking for the next row (read in ``advance``, cur having
        # stayed since ``calc``); the next image's row 0 reads row ky − pad.
        ky_pad, row_inside = Signal(signed(9), name="ky_pad"), Signal(name="row_inside")
        # Whether cur's output row is its image's last, registered from cur (read by
        # rel's register and in ``advance``, two cycles or more after cur last changed).
        # (In two halves, each registered.)
        image_end_lo, image_end_hi = Signal(name="image_end_lo"), Signal(name="image_end_hi")
        m.d.sync += [
            image_end_lo.eq(cur.oh[:9] == self._oh_last[:9]),
            image_end_hi.eq(cur.oh[9:] == self._oh_last[9:]),
        ]
        image_end = image_end_lo & image_end_hi
        rel = Signal(signed(OUT_BITS + 2), name="rel")
        # (The next row is the next image's row 0 where cur's row is its image's last.)
        row_s = (cur.oh_s + Mux(start, 0, s.stride))[:OUT_BITS]  # start: this row; then the next
        m.d.sync += rel.eq(Mux(image_end & ~start, 0, row_s) + ky_pad)
        rel_inside = (rel >= 0) & (rel < s.h)

        # The walk's kernel column's inside columns, registered while the walker waits (constant
        # through a walk), so no kernel-column multiplexer sits in front of the piece logic.
        col_lo, col_hi = Signal(LO_BITS, name="col_lo"), Signal(OUT_BITS, name="col_hi")
        lo_past = Signal(name="lo_past")  # lo ≥ OW: hi is OW where it is not 0 (hi ≥ lo unclipped)
        hi_ow = Signal(name="hi_ow")  # hi is OW: the inside columns end the row
        # The current piece's limit (lo, hi or OW: lo only below OW, hi at most OW), worked out in
        # its ``calc`` cycle from its first column; whether it ends the row; whether it is inside.
        limit, limit_ow, inside = Signal(OUT_BITS, name="limit"), Signal(name="limit_ow"), Signal(name="inside")
        with m.If(calc):
            before_hi = row_inside & (cur.x < col_hi)
            before_lo = cur.x < col_lo
            to_lo = before_lo & ~lo_past
            m.d.sync += [
                limit.eq(Mux(before_hi, Mux(to_lo, col_lo, col_hi), self.ow)),
                limit_ow.eq(~before_hi | (~to_lo & hi_ow)),
                inside.eq(before_hi & ~before_lo),
                calc.eq(0),
                offer.eq(1),
            ]
        # A piece ends at the walk's end or at its limit, whichever comes first: the walk's last
        # piece is the one that reaches its end. Reaching a limit that is OW ends the row.
        last = ~named(m, limit - end, "short")[-1]  # end ≤ limit, on a carry chain of its own
        past = named(m, end - limit, "past")  # ≥ 0: the limit is reached; at OW, the next row's end
        row_end = ~past[-1] & limit_ow
        piece_end = Mux(last, end, limit)[:OUT_BITS]
        length = piece_end - cur.x
        skip = ~inside & (self.col != 0) & ~(self.keep_last & last)
        # The pieces leave through a register (with their skip, first and last flags); a piece is
        # taken as the register empties.
        full, out_skip = Signal(name="out_full"), Signal(name="out_skip")
        out = Signal(dma_desc_layout(), name="out")
        out_first, out_last = Signal(name="out_first"), Signal(name="out_last")
        take = offer & ~full  # not as the register empties: desc.ready comes late in the loop's cycle
        m.d.comb += [
            self.desc.valid.eq(full & ~out_skip),
            self.step.eq((self.desc.valid & self.desc.ready) | (full & out_skip)),
            self.desc.p.eq(out),
            # What is the same for every piece of a walk (or of the command) needs no register: the
            # loop's inputs describe the walk until its last piece has left.
            self.desc.p.col.eq(self.col),
            self.desc.p.kind.eq(KIND["mem_to_sp"]),
            self.desc.p.dram_stride.eq(prod["x_step"]),
            self.desc.p.elems.eq(self.width),
            self.first.eq(out_first),
            self.last.eq(out_last),
        ]
        m.d.sync += full.eq(take | (full & ~self.step))
        with m.If(take):
            m.d.sync += [out_skip.eq(skip), out_first.eq(~emitted), out_last.eq(last)]
            m.d.sync += [
                out.dram_addr.eq(cur.row + q),
                out.rows.eq(length),
                out.local_addr.eq(local),
                out.zero.eq(~inside),
            ]
        # The next piece's scratchpad row, from the one just taken, while its limit is worked out.
        with m.If(calc & emitted):
            m.d.sync += local.eq(out.local_addr + out.rows)

        # What the walk reads from the loop's inputs follows them while the walker waits (only the
        # walk's position and its start wait for the start's condition).
        # (The loop's inputs stay as they are from a walk's start until its last piece has left.)
        with m.If(idle):
            m.d.sync += [local.eq(self.local), emitted.eq(0)]
        lo_kx = lo[self.kx]
        m.d.sync += [ky_pad.eq(self.ky - s.pad), col_lo.eq(lo_kx[:LO_BITS]), lo_past.eq(lo_kx[LO_BITS])]
        hi_kx = hi[self.kx]
        m.d.sync += [col_hi.eq(hi_kx[:OUT_BITS]), hi_ow.eq(hi_kx[OUT_BITS]), lo_off.eq(lo_xs[self.kx])]
        # The K slice's offset ky · row_bytes + kx · pix + c0 · in_e, summed as a tree over the
        # start's cycles (each register follows the inputs; the sum is ready by the first calc).
        ty_terms = [Mux(self.ky[bit], prod["row_bytes"] << bit, 0)[:32] for bit in range(len(self.ky))]
        tx_terms = [named(m, Mux(self.kx[bit], pix << bit, 0), f"x_term{bit}") for bit in range(len(self.kx))]
        sums = [Signal(32, name=f"k_sum{i}") for i in range(4)]
        m.d.sync += [
            sums[0].eq(ty_terms[0] + ty_terms[1]),
            sums[1].eq(ty_terms[2]),
            sums[2].eq((self.c0 << (in_e - 1)) + tx_terms[0]),
            sums[3].eq(tx_terms[1] + tx_terms[2]),
            ty.eq(sums[0] + sums[1]),
            tx.eq(sums[2] + sums[3]),
            k_off.eq(ty + tx),
        ]
        # A new walk starts at the block start once the block's column offset is known and the
        # last walk's last piece has left (the loop's inputs then describe the new walk).
        with m.If(idle & self._active_r & xs_ready & ~self._next_block_r & ~setting_up & ~full):
            m.d.sync += [cur.eq(block), idle.eq(0), start.eq(1)]
        # An inside piece starts at the walk's first pixel (its first piece) or at column lo: the
        # first offset is summed while the walk starts, the other in the cycles that work out the
        # later pieces' limits (the first piece has been taken by then).
        with m.If(calc):
            m.d.sync += q.eq(k_off + Mux(emitted, lo_off, block_xs))
        with m.If(start):
            m.d.sync += [start.eq(0), bounds.eq(1), end.eq(cur.x + self.rows)]
        with m.If(bounds):
            m.d.sync += [bounds.eq(0), calc.eq(1), row_inside.eq(rel_inside)]
        # What a taken piece changes is applied in the cycle after (``advance``), from registers.
        row_end_r = Signal(name="row_end_r")
        piece_end_r, past_r = Signal(OUT_BITS, name="piece_end_r"), Signal(len(end), name="past_r")
        with m.If(take):
            m.d.sync += [emitted.eq(1), offer.eq(0), advance.eq(1)]
            m.d.sync += [row_end_r.eq(row_end), piece_end_r.eq(piece_end), past_r.eq(past)]
            with m.If(last):
                m.d.sync += idle.eq(1)
        # The output row's end: the next row, maybe image (after the walk's last piece too, where
        # the block's next walks, or the next block, start).
        next_row = cur.row + named(m, Mux(image_end, prod["wrap"], prod["row_step"]), "row_advance")
        with m.If(advance):
            m.d.sync += [advance.eq(0), calc.eq(~idle), cur.x.eq(piece_end_r)]
            with m.If(row_end_r):
                m.d.sync += [cur.x.eq(0), end.eq(past_r), cur.row.eq(next_row), row_inside.eq(rel_inside)]
                with m.If(image_end):
                    m.d.sync += [cur.oh.eq(0), cur.oh_s.eq(0)]
                with m.Else():
                    m.d.sync += [cur.oh.eq(cur.oh + 1), cur.oh_s.eq(row_s)]
        with m.If(self._next_block_r):
            m.d.sync += block.eq(cur)

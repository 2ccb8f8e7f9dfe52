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
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.divider import Divider
from rtl.ops import KIND, dma_desc_layout

__all__ = ["KERNEL_MAX", "ConvShape", "Im2col"]

KERNEL_MAX = 7

# The convolution's geometry, as the CONV2D command gives it (docs/isa.md).
ConvShape = data.StructLayout(
    {"batch": 16, "cin": 16, "h": 16, "w": 16, "kh": 8, "kw": 8, "stride": 8, "pad": 8, "a": 32}
)


class Im2col(wiring.Component):
    """``setup`` (a pulse, with ``shape`` held) computes OH, OW and the column limits; ``ready``
    follows. While ``active``, the walker emits the loads of the K slice ``(ky, kx, c0, width)`` of
    the current M block (``rows`` output pixels from the block start, to scratchpad rows from
    ``local``), flagging the walk's ``first`` and ``last`` load. ``next_block`` moves the block
    start past the block just walked; ``setup`` also resets it to pixel 0."""

    def __init__(self, cfg: AccelConfig) -> None:
        self.cfg = cfg
        super().__init__(
            {
                "shape": In(ConvShape),
                "setup": In(1),
                "ready": Out(1),
                "oh": Out(16),
                "ow": Out(16),
                "active": In(1),
                "rows": In(16),
                "local": In(16),
                "ky": In(3),
                "kx": In(3),
                "c0": In(16),
                "width": In(16),
                "next_block": In(1),
                "desc": Out(stream.Signature(dma_desc_layout())),
                "first": Out(1),
                "last": Out(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        lo = Array(Signal(16, name=f"lo_{k}") for k in range(KERNEL_MAX))  # first output column inside
        hi = Array(Signal(16, name=f"hi_{k}") for k in range(KERNEL_MAX))  # end of the columns inside
        self._limits(m, lo, hi)
        self._walker(m, lo, hi)
        return m

    def _limits(self, m: Module, lo, hi) -> None:
        """OH, OW, then for each kw: lo = ceil((pad − kw)⁺ / s), hi = min(OW, ⌊(W − 1 + pad − kw) / s⌋ + 1)."""
        s = self.shape
        m.submodules.div = div = Divider(18)
        step = Signal(range(2 * KERNEL_MAX + 3))  # 0: OH, 1: OW, then lo and hi of each kw
        k = (step - 2)[1:4]
        # W − 1 + pad − kw: how far right of output column 0 the last input column lies (negative:
        # the kernel column never reaches the input).
        unreachable = s.w + s.pad < k + 1
        reach = (s.w + s.pad - k - 1)[:18]
        numerators = [
            s.h + 2 * s.pad - s.kh,
            s.w + 2 * s.pad - s.kw,
            Mux(s.pad > k, s.pad - k, 0) + s.stride - 1,
            Mux(unreachable, 0, reach),
        ]
        kind = Mux(step < 2, step, 2 + step[0])
        running = Signal()
        end = 2 + 2 * s.kw
        m.d.comb += [
            div.numerator.eq(Array(numerators)[kind]),
            div.denominator.eq(s.stride),
            div.start.eq(running & ~div.busy & ~div.done),
            self.ready.eq(~running),
        ]
        with m.If(self.setup):
            m.d.sync += [step.eq(0), running.eq(1)]
        with m.If(running & div.done):
            q = div.quotient[:16]
            with m.If(step == 0):
                m.d.sync += self.oh.eq(q + 1)
            with m.Elif(step == 1):
                m.d.sync += self.ow.eq(q + 1)
            with m.Elif(~step[0]):
                m.d.sync += lo[k].eq(q)
            with m.Else():
                m.d.sync += hi[k].eq(Mux(unreachable, 0, Mux(q + 1 < self.ow, q + 1, self.ow)))
            m.d.sync += step.eq(step + 1)
            with m.If(step + 1 == end):
                m.d.sync += running.eq(0)

    def _walker(self, m: Module, lo, hi) -> None:
        cfg, s = self.cfg, self.shape
        in_e = cfg.in_bits // 8
        block = [Signal(16, name=f"block_{f}") for f in ("n", "oh", "ow")]  # where the M block starts
        after = [Signal(16, name=f"after_{f}") for f in ("n", "oh", "ow")]  # where the last walk ended
        n, oh, x = (Signal(16, name=f"cur_{f}") for f in ("n", "oh", "ow"))
        left, local = Signal(16), Signal(16)
        started, emitted = Signal(), Signal()

        # The input row read at kernel row ky; above the input (in the top padding) when negative.
        below = oh * s.stride + self.ky
        ih = (below - s.pad)[:16]
        row_inside = (below >= s.pad) & (ih < s.h)
        col_lo, col_hi = lo[self.kx], hi[self.kx]
        seg_end = Mux(x + left < self.ow, x + left, self.ow)
        inside = row_inside & (x >= col_lo) & (x < col_hi)
        piece_end = Signal(16)
        with m.If(~row_inside | (x >= col_hi)):
            m.d.comb += piece_end.eq(seg_end)
        with m.Elif(x < col_lo):
            m.d.comb += piece_end.eq(Mux(seg_end < col_lo, seg_end, col_lo))
        with m.Else():
            m.d.comb += piece_end.eq(Mux(seg_end < col_hi, seg_end, col_hi))
        length = piece_end - x
        pixel = Signal(32)  # index of the input pixel the piece's first row reads
        m.d.comb += pixel.eq((n * s.h + ih) * s.w + (x * s.stride + self.kx - s.pad)[:16])
        m.d.comb += [
            self.desc.valid.eq(started & (left != 0)),
            self.desc.p.kind.eq(KIND["mem_to_sp"]),
            self.desc.p.dram_addr.eq(s.a + (pixel * s.cin + self.c0) * in_e),
            self.desc.p.dram_stride.eq(s.stride * s.cin * in_e),
            self.desc.p.rows.eq(length),
            self.desc.p.elems.eq(self.width),
            self.desc.p.local_addr.eq(local),
            self.desc.p.zero.eq(~inside),
            self.first.eq(~emitted),
            self.last.eq(length == left),
        ]

        with m.If(self.active & ~started):  # a new walk starts at the block start
            m.d.sync += [n.eq(block[0]), oh.eq(block[1]), x.eq(block[2])]
            m.d.sync += [left.eq(self.rows), local.eq(self.local), started.eq(1), emitted.eq(0)]
        with m.If(self.desc.valid & self.desc.ready):
            wrap = piece_end == self.ow
            next_oh = Mux(oh + 1 == self.oh, 0, oh + 1)
            next_n = Mux(oh + 1 == self.oh, n + 1, n)
            nxt = [Mux(wrap, next_n, n), Mux(wrap, next_oh, oh), Mux(wrap, 0, piece_end)]
            m.d.sync += [n.eq(nxt[0]), oh.eq(nxt[1]), x.eq(nxt[2])]
            m.d.sync += [left.eq(left - length), local.eq(local + length), emitted.eq(1)]
            with m.If(length == left):
                m.d.sync += started.eq(0)
                m.d.sync += [a.eq(b) for a, b in zip(after, nxt, strict=True)]
        with m.If(self.next_block):
            m.d.sync += [a.eq(b) for a, b in zip(block, after, strict=True)]
        with m.If(self.setup):
            m.d.sync += [b.eq(0) for b in block]

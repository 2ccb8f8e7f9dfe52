"""The GEMM hardware loop: one command becomes the whole tiled LOAD / EXEC / STORE sequence.

``C = act(scale · (A·B + D))`` with B stationary in the mesh (docs/tile.md, "GEMM loop").
Loop order: M blocks (as many A rows as half the scratchpad holds for all K tiles), then N tiles,
then K tiles. A block's K slices are loaded once, during its first N tile, and reused by the
others. Buffers: S weight slots (up to 32, and no more than the steps of one M block), two A
halves (by M block parity), two C slots in the accumulator (by (M block, N tile) pair), so loads,
compute and stores of neighbouring steps overlap, and with short steps (small M) many weight
loads are in flight at once. Dependencies use the ISA's tokens:

* each step's last LOAD signals EXEC; each EXEC waits for it;
* each EXEC frees its weight slot (signal LOAD) and the LOAD S steps later waits for that;
* the last EXEC of a pair signals STORE; the STORE waits for it and frees its C slot for the
  first EXEC two pairs later.

Token counts are balanced, so no token is left over when the loop ends. CONV2D runs through the
same loop as the GEMM of its implicit im2col matrix: its K tiles walk C_in slices at each kernel
position and its A slices come from the im2col walker (rtl/im2col.py). A bias (or C) load into a
C slot must not overtake the STORE that last used that slot; LOAD has no link to STORE, so the
generator itself waits for that STORE's completion before emitting the bias load.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.divider import Divider
from rtl.exec_unit import exec_op_layout
from rtl.im2col import Im2col
from rtl.ops import KIND, GemmCmd, deps_layout, dma_desc_layout

__all__ = ["GemmLoop", "pack", "sp_layout"]


# Weight slots at most: enough weight loads in flight to cover the memory latency when each step
# is only a few rows (the LSTM gate GEMM: M = 4), at one `rows`-row slot each.
MAX_WEIGHT_SLOTS = 32


def sp_layout(cfg: AccelConfig) -> tuple[int, int, int, int]:
    """Scratchpad rows of the loop's buffers: (first weight slot, weight slots, A region, rows per A half).

    The EXEC unit reads activations and the next weight tile in the same cycles, on two read
    ports; in one bank they would take turns and starve the weights. So with two or more banks
    the weight slots fill the last bank (up to ``MAX_WEIGHT_SLOTS``, a power of two) and the A
    halves the others; a single bank keeps two slots in front of the A region.
    """
    bank_rows = cfg.sp_bank_rows
    if cfg.sp_banks == 1:
        return 0, 2, 2 * cfg.rows, (cfg.sp_rows - 2 * cfg.rows) // 2
    fit = min(MAX_WEIGHT_SLOTS, bank_rows // cfg.rows)
    slots = 1 << (fit.bit_length() - 1)
    return (cfg.sp_banks - 1) * bank_rows, slots, 0, (cfg.sp_banks - 1) * bank_rows // 2


def pack(layout: data.StructLayout, **fields) -> Value:
    """The bits of a ``layout`` value with the given fields; fields not given are zero."""
    unknown = set(fields) - {name for name, _ in layout}
    assert not unknown, f"no fields {unknown} in {layout}"
    parts = []
    for name, field in layout:
        value = Value.cast(fields.get(name, 0)).as_unsigned()
        width = Shape.cast(field.shape).width
        parts.append(value[:width] if len(value) >= width else Cat(value, Const(0, width - len(value))))
    return Cat(*parts)


def _gated(op: data.Layout) -> stream.Signature:
    return stream.Signature(data.StructLayout({"op": op, "deps": deps_layout, "seq": 16}))


class GemmLoop(wiring.Component):
    def __init__(self, cfg: AccelConfig, sp_bits: int, acc_bits: int) -> None:
        self.cfg, self.sp_bits, self.acc_bits = cfg, sp_bits, acc_bits
        super().__init__(
            {
                "cmd": In(stream.Signature(GemmCmd)),
                "load": Out(_gated(dma_desc_layout())),
                "exec": Out(_gated(exec_op_layout(sp_bits, acc_bits))),
                "store": Out(_gated(dma_desc_layout())),
                "store_finished": In(1),  # a STORE completed (any STORE: the loop runs alone)
                "too_large": Out(1),  # K needs more scratchpad rows than half of it: nothing issued
                "seq": Out(16),  # sequence number of the loop command being run
                "busy": Out(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        R, C = cfg.rows, cfg.cols
        in_e, acc_e = cfg.in_bits // 8, cfg.acc_bits // 8
        narrow_e = 1 if cfg.dtype == "int8" else 2
        b_base, max_slots, a_base, a_half = sp_layout(cfg)
        m.submodules.div = div = Divider(24)
        m.submodules.im2col = im2col = Im2col(cfg)

        c = Signal(GemmCmd)
        sizes = {name: Signal(32, name=name) for name in ("k_tiles", "mb", "n_tiles", "groups", "pairs")}
        m0, n0, k0, kt, chunk = (Signal(16, name=n) for n in ("m0", "n0", "k0", "kt", "chunk"))
        # The K tile: GEMM walks k0 over K; CONV2D walks k0 over C_in at kernel position (ky, kx),
        # and kbase = (ky·kw + kx)·C_in places that slice in the flat (kh, kw, c_in) order of B.
        kx, ky = Signal(3), Signal(3)
        kbase = Signal(16)
        g, p, stores_done = Signal(32), Signal(32), Signal(32)
        odd_block = Signal()  # parity of the M block: which A half it uses
        a_waits = Signal()
        slots = Signal(range(max_slots + 1))  # weight slots in use: all, or 2 when A takes the token
        with m.If(self.store_finished):
            m.d.sync += stores_done.eq(stores_done + 1)

        mb = sizes["mb"][:16]
        mb_rows = Mux(c.m - m0 < mb, c.m - m0, mb)
        nw = Mux(c.n - n0 < C, c.n - n0, C)
        kdim = Mux(c.conv, c.cin, c.k)
        kw = Mux(kdim - k0 < R, kdim - k0, R)
        kflat = kbase + k0
        last_slice = k0 + R >= kdim
        last_pos = ~c.conv | ((kx + 1 == c.kw) & (ky + 1 == c.kh))
        first_n, last_k = n0 == 0, last_slice & last_pos
        b_slot = b_base + (g[: max(1, (max_slots - 1).bit_length())] & (slots - 1)) * R
        a_slot = a_base + Mux(odd_block, a_half, 0) + kt * mb
        # The STORE reads one C slot while the mesh accumulates into the other, every cycle using
        # that bank's read port: with two or more banks the slots sit in different banks.
        c_slot = Mux(p[0], cfg.acc_bank_rows if cfg.acc_banks > 1 else mb, 0)
        out_e = Mux(c.out == 0, narrow_e, acc_e)
        has_bias = (c.bias != 0) | c.acc_c

        # Where a step starts: A slices are loaded in an M block's first N tile only. Callers say
        # whether that is so, because n0 may be changing in the same cycle.
        def go_data_loads(first) -> None:
            with m.If(first):
                m.next = "LOAD_A"
            with m.Else():
                m.next = "LOAD_B"

        def go_first_load(first) -> None:
            with m.If(has_bias):
                m.next = "BIAS"
            with m.Else():
                go_data_loads(first)

        # The generator writes into small queues in front of the gates, so it runs ahead of them
        # (the next step's loads are issued while this step computes).
        # The EXEC queue holds as many steps as there are weight slots, so that weight loads can
        # really run that far ahead of the EXECs waiting for them.
        load, ex, store = (
            self._queue(m, port, name, depth)
            for port, name, depth in (
                (self.load, "load", 4),
                (self.exec, "exec", max(4, max_slots)),
                (self.store, "store", 4),
            )
        )

        # What each state emits, as plain expressions of the loop registers: the FSM below only
        # decides when to move on, so every payload bit is driven by one continuous assignment.
        def op(payload, **deps):
            return pack(load.p.shape(), op=payload, deps=pack(deps_layout, **deps), seq=c.seq)

        def desc(**fields):
            return pack(dma_desc_layout(), **fields)

        rows_left = mb_rows - chunk
        a_block = Mux(rows_left < cfg.dim, rows_left, cfg.dim)
        last_a = ~c.trans_a | (chunk + cfg.dim >= mb_rows)
        bias_load = op(
            desc(
                kind=KIND["mem_to_acc"],
                dram_addr=self._bias_addr(c, m0, n0, acc_e),
                dram_stride=self._bias_stride(c),
                rows=mb_rows,
                elems=nw,
                local_addr=c_slot,
            ),
        )
        b_load = op(
            desc(
                kind=KIND["mem_to_sp"],
                dram_addr=Mux(c.trans_b, c.b + n0 * c.ldb + kflat * in_e, c.b + kflat * c.ldb + n0 * in_e),
                dram_stride=c.ldb,
                rows=Mux(c.trans_b, nw, kw),
                elems=Mux(c.trans_b, kw, nw),
                local_addr=b_slot,
                transpose=c.trans_b,
            ),
            # The weight load waits for its slot (freed by the EXEC S steps back) and, being the
            # step's last load, tells EXEC the step's data is in place. A and bias loads ahead of
            # it need no token, so they stream while earlier steps still compute.
            wait_next=(g >= slots) & ~a_waits,
            signal_next=1,
        )
        a_load = op(
            desc(
                kind=KIND["mem_to_sp"],
                dram_addr=Mux(c.trans_a, c.a + k0 * c.lda + (m0 + chunk) * in_e, c.a + m0 * c.lda + k0 * in_e),
                dram_stride=c.lda,
                rows=Mux(c.trans_a, kw, mb_rows),
                elems=Mux(c.trans_a, a_block, kw),
                local_addr=a_slot + chunk,
                transpose=c.trans_a,
            ),
            wait_next=(g >= 2) & a_waits & (chunk == 0),
        )
        conv_a_load = op(im2col.desc.p.as_value(), wait_next=(g >= 2) & a_waits & im2col.first)
        self._im2col_inputs(m, im2col, c, mb_rows, a_slot, kx, ky, k0, kw)
        exec_op = pack(
            ex.p.shape(),
            op=pack(
                ex.p.op.shape(),
                b_addr=b_slot,
                k_rows=kw,
                a_addr=a_slot,
                m=mb_rows,
                c_addr=c_slot,
                accumulate=(kt != 0) | has_bias,
                seq=c.seq,
            ),
            deps=pack(
                deps_layout,
                wait_prev=1,
                wait_next=(kt == 0) & (p >= 2),
                signal_prev=g + slots < sizes["groups"],
                signal_next=last_k,
            ),
            seq=c.seq,
        )
        store_op = op(
            desc(
                kind=KIND["acc_to_mem"],
                dram_addr=c.c + m0 * c.ldc + n0 * out_e,
                dram_stride=c.ldc,
                rows=mb_rows,
                elems=nw,
                local_addr=c_slot,
                scale=c.scale,
                act=c.act,
                out=c.out,
            ),
            wait_prev=1,
            signal_prev=p + 2 < sizes["pairs"],
        )

        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [c.eq(self.cmd.p), m0.eq(0), n0.eq(0), k0.eq(0), kt.eq(0), g.eq(0), p.eq(0)]
                    m.d.sync += [stores_done.eq(0), odd_block.eq(0), kx.eq(0), ky.eq(0), kbase.eq(0)]
                    with m.If(self.cmd.p.conv):
                        m.d.comb += im2col.setup.eq(1)
                        m.next = "CONV_SIZE"
                    with m.Else():
                        self._divide(m, div, self.cmd.p.k + R - 1, R)
                        m.next = "K_TILES"
            with m.State("CONV_SIZE"), m.If(im2col.ready):
                # M = batch · OH · OW output pixels; K tiles: kh · kw kernel positions of C_in slices.
                pixels = c.batch * im2col.oh * im2col.ow
                m.d.sync += c.m.eq(pixels)
                self._divide(m, div, c.cin + R - 1, R)
                m.next = "K_TILES"
                with m.If(pixels >> 16 != 0):
                    m.d.comb += self.too_large.eq(1)
                    m.next = "IDLE"
            with m.State("K_TILES"), m.If(div.done):
                k_tiles = Mux(c.conv, div.quotient * c.kh * c.kw, div.quotient)
                m.d.sync += sizes["k_tiles"].eq(k_tiles)
                self._divide(m, div, 2 * a_half, k_tiles)  # A rows that fit with all K slices
                m.next = "BLOCK"
            with m.State("BLOCK"), m.If(div.done):
                # Two C slots in the accumulator, a bank each where there are two or more banks.
                limit = min(cfg.acc_bank_rows if cfg.acc_banks > 1 else cfg.acc_rows // 2, 0xFFFF)
                # All of M in one block uses the whole A region; more blocks double-buffer it in halves.
                whole = (c.m <= div.quotient) & (c.m <= limit)
                half = div.quotient >> 1
                block = Mux(whole, c.m, Mux(half < limit, half, limit))
                m.d.sync += sizes["mb"].eq(block)
                self._divide(m, div, c.n + C - 1, C)
                m.next = "N_TILES"
                with m.If(block == 0):
                    m.d.comb += self.too_large.eq(1)
                    m.next = "IDLE"
            with m.State("N_TILES"), m.If(div.done):
                m.d.sync += sizes["n_tiles"].eq(div.quotient)
                self._divide(m, div, c.m + mb - 1, mb)
                m.next = "M_BLOCKS"
            with m.State("M_BLOCKS"), m.If(div.done):
                pairs = div.quotient * sizes["n_tiles"]
                m.d.sync += [sizes["pairs"].eq(pairs), sizes["groups"].eq(pairs * sizes["k_tiles"])]
                # Loads run up to `slots` steps ahead of EXEC; an A load must not overwrite the half
                # that the block before the previous one still reads, so no more slots than steps per
                # block. With one step per block even two is too many: then the A load, not the weight
                # load, takes the token (from the EXEC two steps back).
                steps = sizes["n_tiles"] * sizes["k_tiles"]
                fit = Const(2, slots.shape())
                for count in (4, 8, 16, 32, 64):
                    if count <= max_slots:
                        fit = Mux(steps >= count, count, fit)
                m.d.sync += [a_waits.eq(steps < 2), slots.eq(fit)]
                go_first_load(1)
            with m.State("BIAS"):
                # The C slot's previous STORE (two pairs back) must be finished (see module doc).
                m.d.comb += load.valid.eq((p < 2) | (stores_done + 1 >= p))
                with m.If(load.valid & load.ready):
                    go_data_loads(first_n)
            with m.State("LOAD_A"):
                self._load_a(m, c, load, im2col, chunk, last_a)
            with m.State("LOAD_B"):
                m.d.comb += load.valid.eq(1)
                with m.If(load.ready):
                    m.next = "EXEC"
            with m.State("EXEC"):
                m.d.comb += ex.valid.eq(1)
                with m.If(ex.ready):
                    m.d.sync += g.eq(g + 1)
                    with m.If(last_k):
                        m.next = "STORE"
                    with m.Else():
                        self._next_k_tile(m, c, k0, kt, kx, ky, kbase, last_slice)
                        go_data_loads(first_n)
            with m.State("STORE"):
                m.d.comb += store.valid.eq(1)
                with m.If(store.ready):
                    m.d.sync += [p.eq(p + 1), k0.eq(0), kt.eq(0), kx.eq(0), ky.eq(0), kbase.eq(0)]
                    with m.If(n0 + C < c.n):
                        m.d.sync += n0.eq(n0 + C)
                        go_first_load(0)
                    with m.Elif(m0 + mb < c.m):
                        m.d.sync += [n0.eq(0), m0.eq(m0 + mb), odd_block.eq(~odd_block)]
                        m.d.comb += im2col.next_block.eq(1)
                        go_first_load(1)
                    with m.Else():
                        m.next = "IDLE"
        m.d.comb += [
            load.payload.eq(
                Mux(
                    fsm.ongoing("BIAS"),
                    bias_load,
                    Mux(fsm.ongoing("LOAD_B"), b_load, Mux(c.conv, conv_a_load, a_load)),
                )
            ),
            ex.payload.eq(exec_op),
            store.payload.eq(store_op),
        ]
        m.d.comb += self.seq.eq(c.seq)
        # FIFO levels, not r_rdy: a FIFO's output lags a write, and busy must not dip meanwhile.
        queued = (m.submodules.load_q.level != 0) | (m.submodules.exec_q.level != 0) | (m.submodules.store_q.level != 0)
        m.d.comb += self.busy.eq(~self.cmd.ready | queued)
        return m

    @staticmethod
    def _queue(m: Module, port, name: str, depth: int):
        """A stream-shaped front of a ``depth``-deep FIFO that drives ``port``."""
        layout = port.payload.shape()
        q = fifo.SyncFIFOBuffered(width=layout.size, depth=depth)
        m.submodules[f"{name}_q"] = q
        front = stream.Signature(layout).create(path=(f"{name}_gen",))
        m.d.comb += [
            q.w_en.eq(front.valid),
            q.w_data.eq(front.payload),
            front.ready.eq(q.w_rdy),
            port.valid.eq(q.r_rdy),
            port.payload.eq(q.r_data),
            q.r_en.eq(port.ready),
        ]
        return front

    @staticmethod
    def _im2col_inputs(m: Module, im2col: Im2col, c, rows, local, kx, ky, k0, width) -> None:
        shape = im2col.shape
        for name in ("batch", "cin", "h", "w", "kh", "kw", "stride", "pad", "a"):
            m.d.comb += getattr(shape, name).eq(getattr(c, name))
        m.d.comb += [
            im2col.rows.eq(rows),
            im2col.local.eq(local),
            im2col.kx.eq(kx),
            im2col.ky.eq(ky),
            im2col.c0.eq(k0),
            im2col.width.eq(width),
        ]

    def _load_a(self, m: Module, c, load, im2col: Im2col, chunk, last_a) -> None:
        """A's K slice for this block: the walker's loads (CONV2D), or up to ``dim`` rows per load."""
        with m.If(c.conv):
            m.d.comb += [im2col.active.eq(1), load.valid.eq(im2col.desc.valid), im2col.desc.ready.eq(load.ready)]
            with m.If(load.valid & load.ready & im2col.last):
                m.next = "LOAD_B"
        with m.Else():
            m.d.comb += load.valid.eq(1)
            with m.If(load.ready):
                m.d.sync += chunk.eq(chunk + self.cfg.dim)
                with m.If(last_a):
                    m.d.sync += chunk.eq(0)
                    m.next = "LOAD_B"

    def _next_k_tile(self, m: Module, c, k0, kt, kx, ky, kbase, last_slice) -> None:
        """The next K tile: the next slice of K (GEMM) or of C_in, then the next kernel position."""
        m.d.sync += kt.eq(kt + 1)
        with m.If(last_slice):  # only CONV2D gets here without being at its last K tile
            m.d.sync += [k0.eq(0), kbase.eq(kbase + c.cin)]
            with m.If(kx + 1 == c.kw):
                m.d.sync += [kx.eq(0), ky.eq(ky + 1)]
            with m.Else():
                m.d.sync += kx.eq(kx + 1)
        with m.Else():
            m.d.sync += k0.eq(k0 + self.cfg.rows)

    @staticmethod
    def _divide(m: Module, div: Divider, numerator, denominator) -> None:
        m.d.comb += [div.start.eq(1), div.numerator.eq(numerator), div.denominator.eq(denominator)]

    @staticmethod
    def _bias_addr(c, m0, n0, acc_e: int):
        """C itself (accumulate into C), one repeated row of D, or the full D."""
        full = c.d + m0 * c.ldd + n0 * acc_e
        return Mux(c.acc_c, c.c + m0 * c.ldc + n0 * acc_e, Mux(c.bias == 2, c.d + n0 * acc_e, full))

    @staticmethod
    def _bias_stride(c):
        return Mux(c.acc_c, c.ldc, Mux(c.bias == 2, 0, c.ldd))

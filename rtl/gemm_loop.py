"""The GEMM hardware loop: one command becomes the whole tiled LOAD / EXEC / STORE sequence.

``C = act(scale · (A·B + D))`` with B stationary in the mesh (docs/tile.md, "The GEMM loop").
Loop order: M blocks, then N tiles, then K tiles; a step is one (block, N tile, K tile) and loads
one weight tile into one of S weight slots. Where the accumulator has room (GEMM), the first
block's first GROUP N tiles run K-outer instead, each in a C slot of its own, so the A slices that
block loads each serve GROUP weight tiles as they arrive (docs/tile.md, "The GEMM loop").

CONV2D runs through the same loop as the GEMM of its implicit im2col matrix: its K tiles walk C_in
slices at each kernel position and its A slices come from the im2col walker (rtl/im2col.py).

A is kept in the scratchpad one of two ways, chosen per command:

* **resident**: a block's A rows for every K slice fit the A region (all of M in one block) or half
  of it (blocks alternate between the halves). A block's K slices are loaded during its first N
  tile and reused by the others.
* **streaming**: not even two rows per K slice fit half the region (a very long K). Each step then
  loads its own A slice into a ring of S slots beside the weight slots, every N tile again.

Every size the command allows runs; nothing is refused for not fitting the scratchpad.

Counters are positions (``n0``, ``k0``, kernel position, and M's rows left), each as wide as its documented
limit; addresses are byte registers stepped by additions (strength reduction), so no multiplier
sits in the per-step path. Buffer reuse is decided here, from exact counts of the operations
issued and not yet finished (``exec_finished``, ``store_finished``): a load waits until the EXEC
that last read its slot has finished. Only the units' own hand-offs use the ISA's tokens:

* each step's weight load (its last load) signals EXEC; each EXEC waits for it;
* the last EXEC of a pair (M block, N tile) signals STORE; the STORE waits for it;
* the STORE of a pair frees its C slot (signal EXEC) for the first EXEC two pairs later, unless
  fewer than two pairs follow (or the pair is one of the K-outer group, whose slots are used
  once), so no token is left over when the loop ends.

A bias (or C) load into a used C slot must not overtake the STORE that last used that slot, so it
waits until at most one STORE is unfinished.
"""

from amaranth.hdl import Cat, Const, DomainRenamer, Module, Mux, ResetInserter, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.clock_gate import gate_domain, settled_activity
from rtl.config import AccelConfig
from rtl.divider import Divider, DividerPort
from rtl.dma import DmaKind, element_bytes
from rtl.exec_unit import exec_op_layout
from rtl.gemm_loop_model import block_min_rows
from rtl.im2col import DIVIDER_WIDTH, KERNEL_MAX, MUL_B_BITS, Im2col, times_small
from rtl.multiplier import Multiplier, MultiplierPort, times
from rtl.ops import KIND, MAX_DIM, GemmCmd, deps_layout, dma_desc_layout
from rtl.queue import Queue

__all__ = ["GemmLoop", "pack"]

# Operations the generator has issued and that have not finished are counted in this many bits.
# They are bounded by the queues and gates between the generator and the engines (below 64).
OUTSTANDING_BITS = 8
# The first block's first N tiles run K-outer, this many at a time: each A slice is used by this many
# weight tiles as it arrives, so the block's A loads and their EXECs balance. Their C slots, as
# (bank, place in units of M blocks): where the STOREs they leave behind can drain while the next
# two pairs accumulate in the other bank (docs/tile.md, "The GEMM loop").
GROUP = 3
GROUP_SLOTS = ((0, 1), (0, 2), (1, 1))
# The command's last pair may be cut in two (rows); its second part is a number of eighths of it,
# up to TAIL_EIGHTHS_MAX (see `_tail_eighths`).
TAIL_EIGHTHS_MAX = 4
# Cycles the gated im2col walker stays clocked after a CONV2D: none of its state changes once the
# loop has taken its last piece (which ends the loop) and its multiplier and divider are done (they
# finish before that piece), so a few suffice; more cost nothing measurable.
IM2COL_SETTLE_CYCLES = 8
# Cycles the gated loop stays clocked after its last event: a queue's entry reaches the FIFO's
# output register a cycle or two after it was written, with no event of its own.
LOOP_SETTLE_CYCLES = 4
# The FSM states in which the loop only offers an operation (or, in IDLE, waits for a command):
# there its registers change only when the operation is taken or an input event arrives. So does
# LOAD_A, except in a CONV2D, where the loop takes the pieces its walker works out on its own.
WAITING_STATES = ("IDLE", "BIAS", "LOAD_B", "PREFETCH", "EXEC", "STORE")


# The loop's states kept as flip-flops beside the FSM's state (`goto`): the load queue's source
# and the EXEC's steps read them.
FLAGGED_STATES = ("BIAS", "LOAD_A", "LOAD_B", "PREFETCH", "EXEC", "STORE")


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


def _min(a, b):
    return Mux(a < b, a, b)


def _min_const(value: Value, bound: int) -> Value:
    """min(value, bound) for a non-negative ``value``, only as wide as ``bound``: below it,
    ``value`` fits those bits, so its upper bits need no multiplexer."""
    return Mux(value < bound, value[: bound.bit_length()], bound)


def _c_slot_rows(cfg: AccelConfig) -> int:
    """Rows of a C slot: two slots, a bank each where there are two or more banks. An M block
    has at most these rows."""
    return min(cfg.acc_bank_rows if cfg.acc_banks > 1 else cfg.acc_rows // 2, 0xFFFF)


def kernel_area(kh: Value, kw: Value) -> Value:
    """``kh · kw`` for kernels of at most 7 × 7, with adders only."""
    return sum((Mux(kh[bit], kw << bit, 0) for bit in range(KERNEL_MAX.bit_length())), Const(0, 6))


def k_tiles_max(cfg: AccelConfig) -> int:
    """K tiles of a loop command at most: CONV2D with the largest C_in and kernel."""
    return -(-MAX_DIM // cfg.rows) * KERNEL_MAX * KERNEL_MAX


class _Prefetch:
    """Registers of the stream that loads the next M block's A slices during the current block."""

    def __init__(self, sp_bits: int, block_bits: int, n_tiles_bits: int) -> None:
        self.done = Signal(16, name="pf_done")  # slices of the next block loaded
        self.due = Signal(16, name="pf_due")  # slices that may be loaded by now (one every N tiles steps)
        self.pc = Signal(n_tiles_bits, name="pf_pc")  # steps since the last slice came due (below N tiles)
        self.k0 = Signal(16, name="pf_k0")  # first K row of the next slice
        # Its offset from the current block's A address: the block stride (`a_m_step`) plus the
        # slice's offset in the next block (K rows of A, or rows of A^T). Kept as one register,
        # written wherever the stride is (`_strides`) and stepped by the slices, so the A load's
        # address adds it to the block's alone: the stride's sum beside it was a third carry chain
        # before the load queue (ECP5's longest path once the queue's write enable was gone).
        self.addr = Signal(32, name="pf_addr")
        # Transposed A: rows of the slice already loaded (fewer than the block's).
        self.chunk = Signal(block_bits, name="pf_chunk")
        # Its place: the other half's first row, then on (no half's row added per load).
        self.res = Signal(sp_bits, name="pf_res")
        self.step = Signal(name="pf_step")  # a slice went out in this step
        # done == 0 and done <= 1, kept beside it (read at a block change, not compared there).
        self.none, self.le1 = Signal(name="pf_none"), Signal(name="pf_le1")
        # done < due, done < K tiles and the previous block's EXECs finished, a cycle late (`pf_go`).
        self.may = Signal(name="pf_may")

    def restart(self, block_stride) -> list:
        """The next block's first slice (``res`` is set where the other half is known)."""
        regs = (self.done, self.due, self.pc, self.k0, self.chunk, self.step, self.may)
        return [sig.eq(0) for sig in regs] + [self.none.eq(1), self.le1.eq(1), self.addr.eq(block_stride)]

    def slice_done(self, rows: int, mb, k_step) -> list:
        return [
            self.chunk.eq(0),
            self.done.eq(self.done + 1),
            self.none.eq(0),
            self.le1.eq(self.none),
            self.k0.eq(self.k0 + rows),
            self.addr.eq(self.addr + k_step),
            self.res.eq(self.res + mb),
            self.step.eq(1),
        ]

    def after_step(self, n_tiles) -> list:
        wrap = self.pc + 1 >= n_tiles
        return [
            self.step.eq(0),
            self.pc.eq(Mux(wrap, 0, self.pc + 1)),
            self.due.eq(Mux(wrap & ~self.due.all(), self.due + 1, self.due)),
        ]


class _Plan:
    """Per-command sizes and steps, set in SETUP and read by the loop."""

    def __init__(self, cfg: AccelConfig, k_tiles_bits: int) -> None:
        a_rows = cfg.sp_layout.a_rows
        self.k_tiles = Signal(k_tiles_bits, name="k_tiles")
        self.mb = Signal(range(_c_slot_rows(cfg) + 1), name="mb")  # rows of a full M block
        self.streaming = Signal(name="streaming")
        self.prefetch = Signal(name="prefetch")  # GEMM: the next block's A is loaded during the current block
        # The first block's first GROUP N tiles run K-outer, in C slots of their own.
        self.grouped = Signal(name="grouped")
        self.multi = Signal(name="multi")  # M is more than one block
        self.n_tiles = Signal(range(-(-MAX_DIM // cfg.cols) + 1), name="n_tiles")
        # M's rows from the current block on, counted down by the loop; M itself during the setup
        # (the command's, or a CONV2D's output pixels once multiplied), so the command's field is
        # not kept beside it.
        self.rows_left = Signal(32, name="rows_left")
        self.steps = {n: Signal(32, name=f"{n}_step") for n in ("a_m", "c_m", "d_m", "a_k", "b_k", "b_n", "pos")}
        # Rows of the A region this command may use: all of it, or those below a resident B.
        self.a_rows = Signal(range(a_rows + 1), name="a_rows")
        # Where the odd M blocks' A starts: the region's upper half (apart from the even blocks'
        # rows, in another bank where there are several), or with a resident B right above the
        # even blocks' rows, so the A rows used are the least whatever `b` is: other data resident
        # in the scratchpad below `b` (another layer's weights) survives a command that fits below it.
        self.a_half = Signal(range(a_rows + 1), name="a_half")


class _Segments:
    """CONV2D with C_in < rows packs kernel positions into K tiles: its K tiles are ``rows``-wide
    slices of the whole (kh, kw, C_in) dimension, as for a GEMM, and a tile's A slice is walked as
    segments, each the channels of one kernel position, side by side in the scratchpad rows. These
    registers are the walk's cursor: the next segment's kernel position, first channel and column."""

    def __init__(self, rows: int) -> None:
        self.packed = Signal(name="packed")
        self.y, self.x = Signal(3, name="seg_y"), Signal(3, name="seg_x")
        self.c = Signal(16, name="seg_c")
        self.col = Signal(range(rows + 1), name="seg_col")  # at most the K tile's rows

    def restart(self) -> list:
        return [sig.eq(0) for sig in (self.y, self.x, self.c, self.col)]

    def bind(self, m: Module, cin, kslice) -> None:
        """The next segment of a K tile of ``kslice`` rows: ``width`` channels, whether they end
        its kernel position (``position_done``) and the K tile (``tile_done``). The two remainders
        are compared side by side, so no sum of the width is in the path to the loads.

        All three are registers following their inputs a cycle late: the subtracts, the compare
        and the minimum in front of the load queue's storage (the walker's ``elems``, its
        ``last``'s token) were the tile's longest ECP5 path. Never read stale: they are read only
        while a walk's pieces leave and at its last piece, and its inputs change only at a walk's
        last piece (``advance``), in a step's EXEC (the K slice) or outside the load states, each
        at least four cycles before the next walk's first piece (`Im2col`: its start takes a
        cycle for ``active``, then ``start``, ``bounds`` and ``calc``), nor change during a walk."""
        # The tile's columns left are at most kslice (col <= kslice), so they take kslice's bits;
        # C_in's channels left are compared with them on those bits, above them a test for zero.
        w = kslice.shape().width
        c_left, col_left = cin - self.c, kslice - self.col
        c_small = c_left[w:] == 0
        c_le = c_small & (c_left[:w] <= col_left)
        c_lt = c_small & (c_left[:w] < col_left)
        self.width = Signal(w, name="seg_width")  # at most kslice
        self.position_done, self.tile_done = Signal(name="seg_position_done"), Signal(name="seg_tile_done")
        m.d.sync += [
            self.width.eq(Mux(c_lt, c_left[:w], col_left)),
            self.position_done.eq(c_le),
            self.tile_done.eq(~c_lt),
        ]

    def advance(self, kw) -> list:
        """Past the segment (``bind`` first)."""
        done, width = self.position_done, self.width
        return [
            self.c.eq(Mux(done, 0, self.c + width)),
            self.x.eq(Mux(done, Mux(self.x + 1 == kw, 0, self.x + 1), self.x)),
            self.y.eq(Mux(done & (self.x + 1 == kw), self.y + 1, self.y)),
            self.col.eq(Mux(self.tile_done, 0, (self.col + width)[: len(self.col)])),
        ]


class _KSlice:
    """The K position of the step: its first row ``k0`` (of K, or of C_in at one kernel position),
    the rows of ``kdim`` from it on, and the step's K rows, min(left, rows). Stepped with ``k0``,
    so the loads and the segment walk read the K rows from a register, not through a subtract
    and a compare of the command's fields (the start of the tile's longest ECP5 path)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.k0 = Signal(16, name="k0")
        self.left = Signal(16, name="k_left")
        self.size = Signal(range(rows + 1), name="kslice")
        # The last slice (left <= rows), set with left: no compare after it on the step's path.
        self.last = Signal(name="k_last")
        # The next slice is the last (left <= 2 · rows), set with left: the next slice's rows are
        # then chosen by it, not by a minimum after the subtract (into kslice, a long ECP5 path).
        self.le2 = Signal(name="k_le2")

    def start(self, kdim) -> list:
        return [
            self.k0.eq(0),
            self.left.eq(kdim),
            self.size.eq(_min(kdim, self.rows)),
            self.last.eq(kdim <= self.rows),
            self.le2.eq(kdim <= 2 * self.rows),
        ]

    def next(self) -> list:
        # Only while left > rows (not the last slice): the next slice has min(left - rows, rows)
        # rows; left - rows where that is the last, at most rows, so the subtract's low bits suffice.
        width = len(self.size)
        return [
            self.k0.eq(self.k0 + self.rows),
            self.left.eq(self.left - self.rows),
            self.size.eq(Mux(self.le2, (self.left[:width] - self.rows)[:width], self.rows)),
            self.last.eq(self.le2),
            self.le2.eq(self.left <= 3 * self.rows),
        ]


class GemmLoop(wiring.Component):
    """``halt`` (an error) stops a running loop command at once: the loop issues nothing more and
    forgets its queued operations.

    ``gate_idle`` is for simulation speed (rtl/clock_gate.py), not for FPGAs, and changes nothing
    the loop does. It clocks the im2col walker only while a CONV2D runs (and IM2COL_SETTLE_CYCLES
    after): the walker's state changes only by a CONV2D's setup, walks and block steps, and by
    ``halt``. And it clocks the loop itself only while it works (`_loop_working`): during a long
    GEMM the loop mostly waits with an operation offered to a full queue."""

    def __init__(self, cfg: AccelConfig, sp_bits: int, acc_bits: int, *, gate_idle: bool = False) -> None:
        self.cfg, self.sp_bits, self.acc_bits, self.gate_idle = cfg, sp_bits, acc_bits, gate_idle
        super().__init__(
            {
                "cmd": In(stream.Signature(GemmCmd)),
                "halt": In(1),
                "load": Out(_gated(dma_desc_layout())),
                "exec": Out(_gated(exec_op_layout(sp_bits, acc_bits))),
                "store": Out(_gated(dma_desc_layout())),
                # An EXEC / a STORE completed (any: the loop runs alone).
                "exec_finished": In(1),
                "store_finished": In(1),
                # A command refused (a pulse, from a register, with its `seq`; `busy` meanwhile):
                "too_large": Out(1),  # CONV2D with more than 2**32 - 1 output pixels: nothing issued
                "sp_range": Out(1),  # a resident B outside the A region's rows it may use: nothing issued
                "seq": Out(16),  # sequence number of the loop command being run
                "busy": Out(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        R, C = cfg.rows, cfg.cols
        in_e, acc_e = cfg.in_bits // 8, cfg.acc_bits // 8
        narrow_e = element_bytes(cfg, DmaKind.ACC_MEM, out=0)
        layout = cfg.sp_layout
        S = layout.slots
        # One multiplier and one divider for the loop and its im2col walker: the walker uses them
        # during its setup (which the loop's CONV2D setup waits for) and multiplies after a block
        # change (which waits for the loop's block strides); the loop's own products and quotients
        # are its setup's and those strides. Each user's requests are zero while it does not ask.
        # The narrower user's divisions take the cycles its own divider would (`short`).
        # The loop's requests reach the units a cycle late, from registers (each product or quotient
        # a cycle later, a few per command): the state's choice of operands and their OR with the
        # walker's was one path with the divider's and multiplier's input logic. They never overlap
        # the walker's: its setup ends before the loop's first request, and its multiplies after a
        # block change follow the strides' last product (and the one cycle with no request after it).
        div_width = max(17, k_tiles_max(cfg).bit_length())
        m.submodules.div = div_unit = Divider(
            max(div_width, DIVIDER_WIDTH),
            short_width=min(div_width, DIVIDER_WIDTH) if div_width != DIVIDER_WIDTH else None,
        )
        div = DividerPort.requests_of(div_unit, div_width, "loop_div")
        m.submodules.mul = mul_unit = Multiplier(32, MUL_B_BITS)
        mul = MultiplierPort.requests_of(mul_unit, "loop_mul")
        im2col = Im2col(cfg, shared=True)
        late_requests = {}
        for unit, loop_port, prefix, requests, results in (
            (mul_unit, mul, "mul", ("start", "a", "b"), ("busy", "done", "product")),
            (div_unit, div, "div", ("start", "numerator", "denominator"), ("busy", "done", "quotient", "remainder")),
        ):
            for name in requests:  # the two users' requests ORed (each zero while it does not ask)
                asked = getattr(loop_port, name)
                late = Signal.like(asked, name=f"{asked.name}_r")
                m.d.sync += late.eq(asked)
                late_requests[name] = late
                request = late | getattr(im2col, f"{prefix}_{name}")
                m.d.comb += getattr(unit, name).eq(request)
            for name in results:
                m.d.comb += getattr(im2col, f"{prefix}_{name}").eq(getattr(unit, name))
        if div_unit.short_width is not None:
            m.d.comb += div_unit.short.eq(im2col.div_start if div_width > DIVIDER_WIDTH else late_requests["start"])

        c = Signal(GemmCmd)
        plan = _Plan(cfg, div.width)
        k_tiles, mb, streaming, prefetch = plan.k_tiles, plan.mb, plan.streaming, plan.prefetch
        n_tiles, steps, a_rows, a_half = plan.n_tiles, plan.steps, plan.a_rows, plan.a_half
        # Positions.
        # M's rows from the current block on: counted down, so no subtraction sits before the
        # block's size and the last-block test.
        rows_left, n0 = plan.rows_left, Signal(16)
        ks = _KSlice(R)
        k0 = ks.k0
        kx, ky = Signal(3, name="kx"), Signal(3, name="ky")
        first_k, odd_block = Signal(), Signal()
        tail_q = Signal(range(TAIL_EIGHTHS_MAX + 1))  # eighths of the last pair in its second part
        # The pair's C slot of two and which of the two an earlier pair used (its first EXEC then
        # waits for the STORE that frees it); a pair of the K-outer group has its own slot.
        slot, used = Signal(), Signal(2)
        grp = Signal()  # the pair is one of the first block's K-outer group
        # The command's last pair runs in two parts (see `tail` below): the second is running, and
        # rows of the second part's C (bias) address still to add (one `ldc` / bias stride per cycle).
        second, tail_left = Signal(name="tail_second"), Signal(len(mb), name="tail_left")  # (at most mb)
        # No C / bias / A address step pending (below, with the block's strides due: `block_due`).
        tail_zero, block_due = Signal(init=1, name="tail_zero"), Signal(name="block_due")
        g_f = Signal(range(GROUP))  # its place in the group
        chunk = Signal(len(mb))  # rows of a transposed A slice already loaded (fewer than mb)
        # Addresses, stepped by additions: a_m, c_m, d_m and b_n hold the operand's address at the
        # block (N tile) start, the others offsets within it, so each load adds at most two terms.
        # d_m is D's rows, and `bias_stride` the bias rows' stride (C's `ldc` when accumulating into
        # C, else D's; 0 for a one-row bias, which stays on its row): chosen once, when the command
        # comes, not multiplexed in every bias load. Accumulating into C, the bias rows are C's,
        # whose address c_m steps exactly as d_m would (by ldc, and mb · ldc): the bias load reads
        # c_m then, picked with the load's other sources, so d_m needs no choice of its own.
        bias_stride = Signal(32)
        off = {name: Signal(32, name=f"{name}_off") for name in ("a_m", "a_k", "b_k", "b_n", "c_m", "d_m")}
        # off["a_k"] is the A slice's offset in a GEMM and the kernel position's B offset in a
        # CONV2D (whose walker keeps its own A offsets): never both used, so one register on one
        # adder (`_next_k_tile`).
        # The weight slot's first row (from the slots' base on, so no base is added per use), and
        # the A rows' offsets in the A region.
        b_slot, ring, res = Signal(self.sp_bits), Signal(self.sp_bits), Signal(self.sp_bits)
        # K rows of the current block's A already in place (prefetched): their slices' count times
        # R, compared with the K position k0 (which in a GEMM, the only command prefetched, is the
        # step's K tile times R), so no K tile count of its own is kept.
        have = Signal(16, name="have_k")
        loaded = Signal()  # resident B: this step's last load (bias or A) gave EXEC its token
        pf = _Prefetch(self.sp_bits, len(mb), len(n_tiles))
        strides_go, strides_ready = Signal(), Signal()
        # Unfinished EXECs and STOREs, EXECs issued in the current M block, and in the previous
        # and the current one (saturating: counted with cur_steps, not added to it on the path to
        # the A loads' go).
        ex_out, st_out, older, cur_steps = (
            Signal(OUTSTANDING_BITS, name=n) for n in ("ex_out", "st_out", "older_steps", "cur_steps")
        )

        # The last block (rows_left <= mb): a register set with rows_left, from the tests that
        # already exist for it (several blocks; two or more blocks after this one), not a compare.
        last_m = Signal()
        # Rows from the next block on (while this one is not the last), and whether that is more
        # than a block: two or more blocks follow.
        rows_after = rows_left - mb
        # Two or more blocks follow, and the next block's rows (only read while not the last
        # block): copies a cycle late of their subtract-and-compare, which then is off the paths
        # that read them. rows_left and mb change only at a block change and in the setup, and
        # neither is read in the cycle after (no STORE follows at once; the prefetch has nothing
        # due at a block's first step), nor is the loop's clock gated before that cycle.
        # rows_after > mb as rows_left > 2 mb: one compare, beside the subtract, not after it.
        blocks_after_2, next_rows = Signal(name="blocks_after_2"), Signal(len(mb), name="next_rows")
        m.d.sync += [
            blocks_after_2.eq(rows_left > (mb << 1)),
            next_rows.eq(Mux(rows_left > (mb << 1), mb, rows_after[: len(mb)])),
        ]
        mb_rows = Mux(last_m, rows_left[: len(mb)], mb)  # rows_left fits mb's bits in the last block
        cols_left = c.n - n0
        # The last N tile: a register set wherever n0 changes (from the compare with the next
        # tile's columns that pairs_after_2 has anyway), not a compare after the subtract.
        last_n = Signal()
        cols_after_1 = cols_left > 2 * C  # two or more N tiles after this one
        one_n_tile = c.n <= C
        nw = Mux(last_n, cols_left[: C.bit_length()], C)  # the last N tile's columns fit C's bits
        seg = _Segments(R)
        kdim = Mux(c.conv & ~seg.packed, c.cin, c.k)
        kslice, last_slice = ks.size, ks.last  # K rows of this tile; the last slice of kdim

        # The last kernel position, as a register set wherever kx and ky are (from their new
        # values): its compares were in front of the K position's enable.
        def is_last_pos(x, y) -> Value:
            return ~c.conv | seg.packed | ((x + 1 == c.kw) & (y + 1 == c.kh))

        last_pos = Signal(name="last_pos")
        last_k = last_slice & last_pos
        # The command's last pair is cut in two where its block allows (`tail` below): each part
        # has at least `rows` rows, so every EXEC hides the next weight tile's preload (R cycles).
        # Its rows, and whether it is cut, as registers a cycle (first_rows and splits two) behind
        # mb_rows and tail_q: the product, the compare and the subtract were on the way to the
        # STORE's decisions (`tail`, the enables of res and tail_left), ECP5's longest loop path.
        # Both change only in READY and at a block change, and are read (in `tail`, `pairs_after_2`
        # and the parts' rows) only in a pair after the block's first (n0 != 0) or in STORE.
        second_rows, first_rows = Signal(len(mb), name="second_rows"), Signal(len(mb), name="first_rows")
        splits = Signal(name="splits")
        m.d.sync += [
            second_rows.eq((times_small(mb_rows, tail_q) >> 3)[: len(mb)]),
            splits.eq(~streaming & (tail_q != 0) & (second_rows >= R)),
            first_rows.eq(mb_rows - second_rows),
        ]
        # At least two pairs follow this one: then its STORE frees its C slot for a later EXEC.
        pairs_after_2 = (
            cols_after_1
            | (~last_m & (~one_n_tile | blocks_after_2))
            | (last_m & splits & ~last_n)  # the next pair is the last, cut in two
        )
        has_bias = (c.bias != 0) | c.acc_c
        a_off = Mux(streaming, ring, res)
        a_local = layout.a_base + a_off
        # A resident B's tile: N tiles `ldb` rows apart from row `b`, a K tile's rows contiguous.
        # The loads' DRAM address: one adder for the bias, weight and A descriptors, its operands
        # picked by the load's source (below). The block's term is queued beside the descriptor and
        # added at the queue's output (`_queue`): in front of the queue the sum was a second carry
        # chain after the A slice's, ECP5's longest path into the queue's storage.
        load_addr, load_block = Signal(32), Signal(32, name="load_block")
        b_local = Mux(c.b_sp, (off["b_n"] + off["b_k"])[: self.sp_bits], b_slot)
        # The STORE reads one C slot while the mesh accumulates into the other, every cycle using
        # that bank's read port: with two or more banks the slots sit in different banks. The
        # group's slots follow them in their banks (GROUP_SLOTS; in one bank, after both).
        banked = cfg.acc_banks > 1
        group_slot = Const(0)
        for f, (bank, place) in enumerate(GROUP_SLOTS):
            here = cfg.acc_bank_rows * bank + times(mb, place, 18) if banked else times(mb, 2 + f, 19)
            group_slot = Mux(g_f == f, here, group_slot)
        c_slot = Mux(grp, group_slot, Mux(slot, cfg.acc_bank_rows if banked else mb, 0))
        # Nothing overlaps the last pair's STORE, so that pair runs in two parts (rows), each a
        # pair of its own in the usual slot order: the first part's STORE drains under the second
        # part's EXECs, which accumulate in the other bank. Only a pair that loads no A (not a
        # block's first N tile, not streaming), with room for two parts.
        tail = splits & last_m & last_n & (n0 != 0) & ~grp
        row0 = Mux(second, first_rows, 0)  # the part's first row within the block
        part_rows = Mux(tail, Mux(second, second_rows, first_rows), mb_rows)
        slot_used = ~grp & used.bit_select(slot, 1)

        # Buffer reuse: a weight slot (and a streaming A slot) was last read by the EXEC S steps
        # back; a resident A half by the M block before the previous one. EXECs finish in order.
        # The two compares of the counts alone are registers, from the counts' next values
        # (exact, a cycle ahead): they are the offers' valid in BIAS and LOAD_B, which ran on into
        # the load queue's ready and count of held operations.
        slot_free, st_le1 = Signal(init=1, name="slot_free"), Signal(init=1, name="st_le1")
        a_free = Mux(streaming, slot_free, ex_out <= older)
        bias_free = ~slot_used | st_le1
        # The next block's K slice `pf.done`, into the other half, once every EXEC of the block
        # before this one has finished; at most one slice a step, as they come due.
        # Its compares, registered a cycle late (they were on the way to the load's go and the
        # prefetch registers' enables): a stale value is safe. Issuing an EXEC adds one to both
        # ex_out and cur_steps (which saturates only far above ex_out), a finish and `due` only
        # make the compares truer, and after `done` grows `pf.step` holds the go until the next
        # EXEC. Only a restart makes them false: it clears the register as well (`pf.restart`).
        # The slice's K rows are registered a cycle late as well (their subtract and minimum were
        # ECP5's longest path, into the load queue's storage): never read stale, as the go waits
        # a cycle after each change of `pf.k0` (for `pf.may` after a restart, for the next step
        # after a slice), and the command's K is set long before its first prefetch.
        pf_kslice = Signal(range(R + 1), name="pf_kslice")
        m.d.sync += pf_kslice.eq(_min_const(c.k - pf.k0, R))
        pf_go = (
            prefetch
            & tail_zero  # (a block change's restart of the registers below is pending)
            & strides_ready  # the next block's address needs the block stride
            & ~last_m
            & ~pf.step
            & pf.may
        )
        m.d.sync += pf.may.eq((pf.done < pf.due) & (pf.done < k_tiles) & (ex_out <= cur_steps))

        load, load_arriving = self._queue(m, self.load, "load", 4, load_block)
        ex, ex_arriving = self._queue(m, self.exec, "exec", max(4, S))
        store, store_arriving = self._queue(m, self.store, "store", 4)
        ex_after = self._count(m, ex_out, ex.valid & ex.ready, self.exec_finished)
        st_after = self._count(m, st_out, store.valid & store.ready, self.store_finished)
        m.d.sync += [slot_free.eq(ex_after < S), st_le1.eq(st_after <= 1)]

        def op(payload, **deps):
            return pack(load.p.shape(), op=payload, deps=pack(deps_layout, **deps), seq=c.seq)

        def desc(**fields):
            return pack(dma_desc_layout(), **fields)

        n_acc = times(n0, acc_e, 32)
        # A pair's first step loads A after its bias in its block's first N tile (or streaming);
        # a resident B's blocks are not prefetched.
        bias_then_a = (n0 == 0) | streaming
        bias_load = op(
            desc(
                kind=KIND["mem_to_acc"],
                dram_addr=load_addr,  # off["d_m"] (off["c_m"] accumulating into C) + n_acc
                dram_stride=bias_stride,
                rows=part_rows,
                elems=nw,
                local_addr=c_slot + row0,
            ),
            signal_next=c.b_sp & ~bias_then_a,  # resident B: the step's last load
        )
        b_load = op(
            desc(
                kind=KIND["mem_to_sp"],
                dram_addr=load_addr,  # off["b_n"] + off["b_k"]
                dram_stride=c.ldb,
                rows=Mux(c.trans_b, nw, kslice),
                elems=Mux(c.trans_b, kslice, nw),
                local_addr=b_local,
                transpose=c.trans_b,
            ),
            signal_next=1,  # the step's last load: its data is in place
        )
        # One descriptor for both A loads, with the slice's registers picked by the state: the
        # step's own slice (LOAD_A), or in PREFETCH one of the next block's, so the two share
        # their adders, minimum and multiplexers. `prefetching` is a flag set with the state
        # (in LOAD_B too, which goes on to PREFETCH when a slice is due: the transposed slice's
        # last-block register is then a cycle ahead of its first load). A transposed slice goes in blocks of
        # up to `dim` rows, `chunk` of them already loaded.
        prefetching = Signal()
        a_chunk = Mux(prefetching, pf.chunk, chunk)
        a_rows_all = Mux(prefetching, next_rows, mb_rows)
        a_kslice = Mux(prefetching, pf_kslice, kslice)
        # A transposed slice's rows still to load: the last block of them when at most `dim`.
        a_left = a_rows_all - a_chunk
        # The A slice's address from the block's: the next block's (the prefetch) or this one's; in
        # a CONV2D (whose block address is zero) the walker's piece's, so it takes the same adder
        # and needs no multiplexer of its own after it.
        a_slice = Mux(c.conv, im2col.desc.p.dram_addr, off["a_k"])
        a_from = Mux(prefetching, pf.addr, a_slice)
        a_place = Mux(prefetching, layout.a_base + pf.res, a_local)
        # A transposed slice's block: its address, place and rows left with the blocks already
        # loaded, as registers (its loads wait for them, `a_settled` below). Summed in front of the
        # load queue's entry, with the other sources' terms chosen before them, they were its
        # longest paths; the other A loads' chunk is always 0.
        a_from_chunk, a_place_chunk = Signal(32, name="a_from_chunk"), Signal(self.sp_bits, name="a_place_chunk")
        a_left_r = Signal(cfg.dim.bit_length(), name="a_left_r")
        m.d.sync += [
            a_from_chunk.eq(a_from + times(a_chunk, in_e, 32)),
            a_place_chunk.eq(a_place + a_chunk),
            a_left_r.eq(a_left),
        ]
        a_in_block = Mux(c.trans_a, a_from_chunk, a_from)
        # Its last block, registered (the subtract and the compare were on the way to the loads'
        # go and the prefetch's registers' enables). These registers are a cycle behind the slice's
        # registers, so a transposed A load waits until they stood still for a cycle (`a_settled`:
        # in the load state in the cycle before, with no load taken); the other A loads are never cut.
        a_last_block, a_settled = Signal(name="a_last_block"), Signal(name="a_settled")
        m.d.sync += a_last_block.eq(a_left <= cfg.dim)
        a_go = (~c.trans_a | a_settled) & tail_zero
        last_a = ~c.trans_a | a_last_block
        a_load = op(
            desc(
                kind=KIND["mem_to_sp"],
                dram_addr=load_addr,  # off["a_m"] + a_in_block
                dram_stride=c.lda,
                rows=Mux(c.trans_a, a_kslice, a_rows_all),
                elems=Mux(c.trans_a, Mux(a_last_block, a_left_r, cfg.dim), a_kslice),
                local_addr=Mux(c.trans_a, a_place_chunk, a_place)[: self.sp_bits],
                transpose=c.trans_a,
            ),
            signal_next=c.b_sp & last_a,  # resident B (never prefetched): the step's last load
        )
        seg.bind(m, c.cin, kslice)
        last_walk = ~seg.packed | seg.tile_done  # the step's last walk (segment)
        # Resident B: the last walk's last piece is always sent, and gives EXEC its token.
        m.d.comb += im2col.keep_last.eq(c.b_sp & last_walk)
        conv_a_load = op(im2col.desc.p.as_value(), signal_next=c.b_sp & last_walk & im2col.last)
        self._im2col_inputs(m, im2col, c, mb_rows, a_local, kx, ky, k0, kslice, seg)
        exec_op = pack(
            ex.p.shape(),
            op=pack(
                ex.p.op.shape(),
                b_addr=b_local,
                k_rows=kslice,
                a_addr=a_local + row0,
                m=part_rows,
                c_addr=c_slot + row0,
                accumulate=~first_k | has_bias,
                seq=c.seq,
            ),
            deps=pack(deps_layout, wait_prev=~c.b_sp | loaded, wait_next=first_k & slot_used, signal_next=last_k),
            seq=c.seq,
        )
        store_op = op(
            desc(
                kind=KIND["acc_to_mem"],
                dram_addr=off["c_m"] + Mux(c.out == 0, times(n0, narrow_e, 32), n_acc),
                dram_stride=c.ldc,
                rows=part_rows,
                elems=nw,
                local_addr=c_slot + row0,
                scale=c.scale,
                act=c.act,
                out=c.out,
            ),
            wait_prev=1,
            signal_prev=~grp & pairs_after_2,
        )

        # Whether the step being entered finds its A slice not prefetched (its K rows at or past
        # `have`), from registers: the compare behind the state's choice was on the loop's longest
        # ECP5 paths. After an EXEC (the next K tile, k0 + R): k0 + R >= have, registered, as
        # neither changed in the cycle before (an EXEC follows an EXEC at once only with a resident
        # B, which is never prefetched: `have` is 0). At a pair's bias load (K tile 0, tested as the
        # one after it, as the bias load always has): at most one slice prefetched, a flag set where
        # `have` is. At a block change without bias (K tile 0): no slice prefetched.
        next_unloaded, have_le1 = Signal(name="next_unloaded"), Signal(name="have_le1")
        m.d.sync += next_unloaded.eq(k0 + R >= have)

        # The loop's states as flip-flops beside the FSM's state, set by every transition into or
        # out of them (`goto`; the setup reaches them only through READY's): the load's source,
        # the A descriptor's choices and the EXEC's steps read them, not a decode of the state (a
        # LUT level more in front of the load queue's storage and of wide enables on ECP5).
        at = {name: Signal(name=f"at_{name.lower()}") for name in FLAGGED_STATES}

        def goto(state: str) -> None:
            m.next = state
            m.d.sync += [flag.eq(name == state) for name, flag in at.items()]
            m.d.sync += prefetching.eq(state in ("LOAD_B", "PREFETCH"))

        def go_data_loads(first_n, unloaded) -> None:
            """A step's loads: its A slice (first N tile of a block unless prefetched, or every step
            when streaming), then its weight tile (and maybe a slice of the next block's A). The
            arguments are those of the step being entered, not the registers still being updated."""
            with m.If((first_n & unloaded) | streaming):
                goto("LOAD_A")
            with m.Elif(c.b_sp):  # no weight load: the tile is in the scratchpad
                goto("EXEC")
            with m.Else():
                goto("LOAD_B")

        def go_pair(first_n, unloaded) -> None:
            with m.If(has_bias):
                goto("BIAS")
            with m.Else():
                go_data_loads(first_n, unloaded)

        def restart_k() -> None:
            """The first K tile of a pair."""
            m.d.sync += [*ks.start(kdim), kx.eq(0), ky.eq(0), first_k.eq(1), chunk.eq(0), *seg.restart()]
            m.d.sync += last_pos.eq(is_last_pos(0, 0))  # (IDLE's from the offer a cycle old: READY's again)
            m.d.sync += [off[n].eq(0) for n in ("a_k", "b_k")]

        def next_n_tile() -> list:
            return [n0.eq(n0 + C), off["b_n"].eq(off["b_n"] + steps["b_n"]), last_n.eq(~cols_after_1)]

        # A pair of the group with another after it (the group is the first block's first GROUP N
        # tiles at most): its EXECs and its STORE are followed by the next pair's.
        in_group = grp & ~last_n & (g_f != GROUP - 1)

        # The second part's C (and bias) rows start first_rows strides on: added while its first
        # loads and EXECs are issued (its bias load and STORE wait for it), not multiplied. That is
        # never at a block change (only the last block is cut), so the two share the adders.
        # tail_left == 0 as a register set with it (the zero test was on the bias load's and the
        # STORE's go, and on the C and bias addresses' enables).
        # A block change's A, C and bias strides are added the same way, in the cycle after it
        # (`block_due`), not from STORE's handshake and the block-change test: the enables of
        # those three 32-bit registers are then flip-flops. So `tail_zero` means "no address step
        # pending": the bias load, the STORE and the A loads (`a_go`) wait for it.
        with m.If(~tail_zero):
            with m.If(block_due):
                m.d.sync += [block_due.eq(0), tail_zero.eq(1)]
            with m.Else():
                m.d.sync += [tail_left.eq(tail_left - 1), tail_zero.eq(tail_left == 1)]
            m.d.sync += [
                off["c_m"].eq(off["c_m"] + Mux(block_due, steps["c_m"], c.ldc)),
                off["d_m"].eq(off["d_m"] + Mux(block_due, steps["d_m"], bias_stride)),
            ]
        with m.If(~tail_zero & block_due & ~c.conv):  # (a CONV2D's A addresses are the walker's)
            m.d.sync += off["a_m"].eq(off["a_m"] + steps["a_m"])
        # So do the block's EXEC counts and the prefetch's restart, for the block after next, into
        # the half the block left behind (odd_block has changed: the half is the new block's
        # other). Nothing reads or steps them in that cycle: its A loads, its bias load and the
        # prefetch's go wait for `tail_zero`, and its first EXEC follows a load state.
        with m.If(block_due):
            m.d.sync += [older.eq(cur_steps), cur_steps.eq(0)]
            m.d.sync += [*pf.restart(steps["a_m"]), pf.res.eq(Mux(odd_block, 0, a_half))]
        m.d.sync += [self.too_large.eq(0), self.sp_range.eq(0)]  # pulses (set by the setup)
        with m.FSM() as fsm:
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                # The command's fields and the addresses taken from them follow the offer in every
                # cycle of IDLE, taken or not: their enables are then the state alone, not the
                # decoder's offer (the command register's enable reached 379 flip-flops). Nothing
                # reads them in IDLE but `seq`, whose refusal is reported in IDLE's first cycle,
                # from the register as it was.
                p = self.cmd.p
                m.d.sync += [c.eq(p), rows_left.eq(p.m)]
                m.d.sync += [off[n].eq(getattr(p, n[0])) for n in ("b_n", "c_m")]
                # A CONV2D's A addresses are the walker's own: its block address stays zero.
                m.d.sync += off["a_m"].eq(Mux(p.conv, 0, p.a))
                m.d.sync += off["d_m"].eq(p.d)
                m.d.sync += bias_stride.eq(Mux(p.acc_c, p.ldc, Mux(p.bias == 2, 0, p.ldd)))
                # So do the loop's positions, which start from the same values whatever comes:
                # their enables are the state, not the offer's `valid`.
                m.d.sync += [n0.eq(0), odd_block.eq(0)]
                m.d.sync += [slot.eq(0), used.eq(0), g_f.eq(0), second.eq(0)]
                m.d.sync += [b_slot.eq(layout.b_base), ring.eq(0), res.eq(0)]
                m.d.sync += [older.eq(0), cur_steps.eq(0), have.eq(0), have_le1.eq(1)]
                # The finish strobes are every EXEC's and STORE's, a standalone command's too,
                # whose finishes would drive the counts below zero; a loop starts when every
                # earlier command has finished, so its own count starts from zero.
                m.d.sync += [ex_out.eq(0), st_out.eq(0), slot_free.eq(1), st_le1.eq(1)]
                m.d.sync += [*pf.restart(steps["a_m"]), strides_ready.eq(0), seg.packed.eq(0), loaded.eq(0)]
                # Garbage while a resident B's row is out of range: refused before anything is issued.
                rows_below_b = (p.b - layout.a_base)[: len(a_rows)]
                m.d.sync += a_rows.eq(Mux(p.b_sp, rows_below_b, layout.a_rows))
                restart_k()  # (its K rows are set again once the command's are known: K_TILES)
                with m.If(self.cmd.valid):
                    with m.If(p.conv):
                        m.d.comb += im2col.setup.eq(1)
                        m.next = "CONV_SIZE"
                    with m.Else():
                        m.next = "K_TILES"
            self._setup(m, c, im2col, div, mul, plan, strides_go, seg, ks)
            with m.State("READY"):
                m.d.sync += [grp.eq(plan.grouped & (c.n > C)), tail_q.eq(self._tail_eighths(c, k_tiles))]
                m.d.sync += [last_m.eq(~plan.multi), last_n.eq(one_n_tile)]  # n0 is 0 from the command on
                m.d.sync += pf.res.eq(a_half)  # the second block's A goes to the other half
                m.d.sync += last_pos.eq(is_last_pos(0, 0))  # the command's kernel, known now
                go_pair(1, 1)
            with m.State("BIAS"):
                # (Each state's own offer in its handshake, not `load.valid`, the states' choice.)
                bias_go = bias_free & tail_zero
                m.d.comb += load.valid.eq(bias_go)
                with m.If(bias_go & load.ready):
                    m.d.sync += loaded.eq(c.b_sp & ~bias_then_a)
                    go_data_loads(n0 == 0, have_le1)
            with m.State("LOAD_A"):
                self._load_a(m, c, load, im2col, chunk, last_a, a_free, a_go, seg, last_walk, loaded, goto)
            with m.State("LOAD_B"):
                # A slice of the next block's A that is due goes first, from a state of its own:
                # the load's source is then the state's flags alone, not the prefetch's go (a
                # choice among the sources' descriptors behind it ran into the load queue's entry).
                with m.If(pf_go):
                    goto("PREFETCH")
                with m.Else():
                    m.d.comb += load.valid.eq(slot_free)
                    with m.If(slot_free & load.ready):
                        goto("EXEC")
            with m.State("PREFETCH"):  # (pf_go holds until the slice's last load: `pf.step`)
                m.d.comb += load.valid.eq(a_go)
                with m.If(a_go & load.ready):
                    m.d.sync += pf.chunk.eq(pf.chunk + cfg.dim)
                    with m.If(last_a):
                        m.d.sync += pf.slice_done(R, mb, steps["a_k"])
                        goto("LOAD_B")
            with m.State("EXEC"):
                m.d.comb += ex.valid.eq(1)
                with m.If(ex.ready):  # (the EXEC's steps: after the FSM)
                    m.d.sync += loaded.eq(0)
                    with m.If(in_group):  # the group's next pair, at the same K tile
                        m.d.sync += [g_f.eq(g_f + 1), *next_n_tile()]
                        with m.If(first_k & has_bias):
                            goto("BIAS")
                        with m.Else():
                            go_data_loads(0, 0)
                    with m.Else():
                        with m.If(grp):  # back to the group's first pair
                            m.d.sync += [g_f.eq(0), n0.eq(0), off["b_n"].eq(c.b), last_n.eq(one_n_tile)]
                        with m.If(last_k):
                            goto("STORE")
                        with m.Else():
                            go_data_loads(grp | (n0 == 0), next_unloaded)
            with m.State("STORE"):
                # A block change needs the strides, which may still be being multiplied.
                m.d.comb += store.valid.eq((strides_ready | ~last_n | last_m) & tail_zero)
                # Every way out of STORE starts a pair at its first K tile, and nothing in STORE
                # reads the K position: it restarts in every cycle, its enables the state alone.
                # So does the A rows' offset: the other half at a block change, else the block's.
                restart_k()
                block_change = last_n & ~(tail & ~second) & ~last_m
                m.d.sync += res.eq(Mux(odd_block ^ block_change, a_half, 0))
                with m.If(store.valid & store.ready & in_group):  # the group's next pair's STORE
                    m.d.sync += [g_f.eq(g_f + 1), *next_n_tile()]
                with m.Elif(store.valid & store.ready):
                    # After the group the pairs take the slots from the second one, so the next
                    # pair accumulates in the bank other than the group's first two STOREs'.
                    m.d.sync += grp.eq(0)
                    with m.If(grp):
                        m.d.sync += slot.eq(1)
                    with m.Else():
                        m.d.sync += [slot.eq(~slot), used.bit_select(slot, 1).eq(1)]
                    with m.If(~last_n):
                        m.d.sync += next_n_tile()
                        go_pair(0, 0)
                    with m.Elif(tail & ~second):  # the last pair's second part
                        m.d.sync += [second.eq(1), tail_left.eq(first_rows), tail_zero.eq(first_rows == 0)]
                        go_pair(0, 0)
                    with m.Elif(~last_m):
                        m.d.sync += [n0.eq(0), rows_left.eq(rows_after), odd_block.eq(~odd_block)]
                        m.d.sync += last_n.eq(one_n_tile)
                        m.d.sync += last_m.eq(~blocks_after_2)
                        m.d.sync += off["b_n"].eq(c.b)
                        # The block's strides, EXEC counts and prefetch restart, next (`block_due`).
                        m.d.sync += [block_due.eq(1), tail_zero.eq(0)]
                        m.d.sync += [have.eq(pf.k0), have_le1.eq(pf.le1)]
                        m.d.comb += im2col.next_block.eq(c.conv)  # a GEMM leaves the walker as it is
                        go_pair(1, pf.none)
                    with m.Else():
                        goto("IDLE")
        self._strides(m, c, mul, mb, steps, bias_stride, strides_go, strides_ready, pf.addr)
        # An EXEC issued steps the weight slot, the prefetch's count and (unless it is a group's
        # or the pair's last) the K position: enabled from the EXEC flag, not the state's decode.
        issued = at["EXEC"] & ex.ready
        with m.If(issued):
            self._next_step(m, b_slot, ring, streaming, mb, cur_steps, older)
            m.d.sync += pf.after_step(n_tiles)
        with m.If(issued & ~in_group & ~last_k):
            self._next_k_tile(m, c, ks, kdim, kx, ky, first_k, chunk, res, mb, off, steps, last_pos, is_last_pos)
        m.d.sync += a_settled.eq((at["LOAD_A"] | prefetching) & ~(load.valid & load.ready))
        # The load's source, encoded once: each bit of the descriptor is then one four-way
        # multiplexer on two shared select bits, not a chain of the states' tests. 0: the A
        # descriptor (the step's slice in LOAD_A, the next block's in PREFETCH), 1: bias, 2:
        # weights (LOAD_B), 3: the walker's piece (in LOAD_A of a CONV2D, which is never
        # prefetched; outside the load states the source is not read). All from flip-flops.
        source = Signal(range(4))
        m.d.comb += [
            source[0].eq(at["BIAS"] | (c.conv & ~prefetching)),
            source[1].eq(at["LOAD_B"] | (c.conv & ~at["BIAS"] & ~prefetching)),
        ]
        # The address's source: the walker's pieces take the A descriptor's (see `a_in_block`).
        addr_src = Mux(source == 3, 0, source)
        # The block's address: A's, D's, B's, or C's for a bias read from C, on two select bits.
        block_sel = Cat(addr_src[0], addr_src[1] | (addr_src[0] & c.acc_c))
        m.d.comb += [
            load_block.eq(
                Mux(block_sel[1], Mux(block_sel[0], off["c_m"], off["b_n"]), Mux(block_sel[0], off["d_m"], off["a_m"]))
            ),
            load_addr.eq(Mux(addr_src[1], off["b_k"], Mux(addr_src[0], n_acc, a_in_block))),
        ]
        m.d.comb += [
            load.payload.eq(Mux(source[1], Mux(source[0], conv_a_load, b_load), Mux(source[0], bias_load, a_load))),
            load.p.op.dram_addr.eq(load_addr),  # every source's (the block's term beside it)
            ex.payload.eq(exec_op),
            store.payload.eq(store_op),
            self.seq.eq(c.seq),
        ]
        # FIFO levels, not r_rdy: a FIFO's output lags a write, and busy must not dip meanwhile.
        queues = [m.submodules[f"{name}_q"] for name in ("load", "exec", "store")]
        arriving = load_arriving | ex_arriving | store_arriving  # an operation on its way into its queue
        queued = arriving | Cat(q.level != 0 for q in queues).any()
        # A refusal is reported in the cycle after the loop went back to IDLE: busy until then, so
        # the decoder issues nothing meanwhile (and `seq` stays the refused command's).
        m.d.comb += self.busy.eq(~self.cmd.ready | queued | self.too_large | self.sp_range)
        walking = im2col.setup | (self.busy & c.conv) | self.halt
        if not self.gate_idle:
            m.submodules.im2col = im2col
            return ResetInserter(self.halt)(m)
        # The walker and the loop each on a clock of its own, both gated from the free-running
        # clock: a gate's enable is latched while its clock is low, and a clock derived from the
        # loop's would not fall in the cycle a command wakes the loop, so the walker would miss
        # the setup strobe of that cycle.
        top = Module()
        walker_active = settled_activity(top, walking, IM2COL_SETTLE_CYCLES, "im2col")
        gate_domain(top, "im2col", walker_active)
        top.submodules.im2col = ResetInserter({"im2col": self.halt})(DomainRenamer("im2col")(im2col))
        # The loop's own steps with no event: the tail's address additions, whatever the walker
        # does (its pieces, which the loop takes) and an operation's write into its queue.
        stepping = ~tail_zero | walker_active | arriving
        working = self._loop_working(fsm, c, (load, ex, store), queues, mul, div) | stepping
        top.submodules.loop = DomainRenamer("loop")(ResetInserter(self.halt)(m))
        gate_domain(top, "loop", settled_activity(top, working, LOOP_SETTLE_CYCLES, "loop"))
        return top

    def _loop_working(self, fsm, c, fronts, queues, mul: MultiplierPort, div: DividerPort) -> Value:
        """High in the cycles the loop's next state may differ from its state (with the caller's
        own steps): outside the WAITING_STATES, when an operation is taken by or from a queue, on
        an input event, and while the multiplier or the divider works (their ``done`` pulses are
        cleared a cycle later). The waiting states change registers only under the first two."""
        waiting = Cat(*(fsm.ongoing(state) for state in WAITING_STATES), fsm.ongoing("LOAD_A") & ~c.conv).any()
        issued = Cat(front.valid & front.ready for front in fronts).any()
        taken = Cat(q.r_en & q.r_rdy for q in queues).any()
        events = self.cmd.valid | self.halt | self.exec_finished | self.store_finished
        helpers = mul.busy | mul.done | div.busy | div.done
        return ~waiting | issued | taken | events | helpers

    def _setup(
        self,
        m: Module,
        c,
        im2col: Im2col,
        div: DividerPort,
        mul: MultiplierPort,
        plan: _Plan,
        strides_go,
        seg: _Segments,
        ks: _KSlice,
    ) -> None:
        """Once per command: the output size (CONV2D), the K tiles, the way A is kept and the block
        size, and the address steps. Products come from the sequential multiplier (no DSPs)."""
        k_tiles, mb, n_tiles, steps = plan.k_tiles, plan.mb, plan.n_tiles, plan.steps
        a_rows, a_half = plan.a_rows, plan.a_half
        cfg = self.cfg
        R, C = cfg.rows, cfg.cols
        in_e = cfg.in_bits // 8
        layout = cfg.sp_layout
        c_slot_rows = _c_slot_rows(cfg)
        slots_log2 = layout.slots.bit_length() - 1
        stream_rows = _min(a_rows >> slots_log2, c_slot_rows)
        # Larger M is cut into about four blocks, so the first block's A (loaded before any prefetch
        # can run) and the last block's STORE (after every EXEC) are short.
        mb_min = block_min_rows(cfg)
        multi = plan.multi
        k_all = Signal(24)  # CONV2D's whole K, kh · kw · C_in (GemmCmd's k holds only a packed one)

        def multiply(a, b) -> None:
            m.d.comb += [mul.start.eq(1), mul.a.eq(a), mul.b.eq(b)]

        def operands(a, b) -> None:
            """A setup state's operands, whether or not it starts a product in this cycle: the
            walker never multiplies in these states, so they need not be zero while not asked for
            (the shared multiplier's requests are ORed), and each state's are one term."""
            m.d.comb += [mul.a.eq(a), mul.b.eq(b)]

        def divide(numerator, denominator) -> None:
            m.d.comb += [div.start.eq(1), div.numerator.eq(numerator), div.denominator.eq(denominator)]

        with m.State("CONV_SIZE"), m.If(im2col.ready):
            multiply(c.batch, im2col.oh)  # M = batch · OH · OW output pixels
            m.next = "CONV_PIXELS"
        with m.State("CONV_PIXELS"):
            operands(mul.product[:32], im2col.ow)
            with m.If(mul.done):
                m.d.comb += mul.start.eq(1)
                m.next = "CONV_M"
                # batch · OH reaches 33 bits (OH up to 66,045): above 2^32 − 1, so is M (OW ≥ 1).
                with m.If(mul.product[32]):
                    m.d.sync += self.too_large.eq(1)
                    m.next = "IDLE"
        with m.State("CONV_M"):
            # B from one kernel position to the next: C_in rows (resident B) or C_in · ldb bytes.
            operands(Mux(c.b_sp, 1, c.ldb), c.cin)
            with m.If(mul.done):
                m.d.sync += plan.rows_left.eq(mul.product[:32])
                m.d.comb += mul.start.eq(1)
                m.next = "CONV_POS"
                with m.If(mul.product[32:] != 0):
                    m.d.sync += self.too_large.eq(1)
                    m.next = "IDLE"
        with m.State("CONV_POS"):
            operands(kernel_area(c.kh, c.kw), c.cin)
            with m.If(mul.done):
                m.d.sync += steps["pos"].eq(mul.product[:32])
                m.next = "K_TILES"
                # The whole K = kh · kw · C_in, where it is read: a packed K, a resident B's check
                # (the other CONV2Ds skip the product's cycles).
                with m.If(c.b_sp | (c.cin < R)):
                    m.d.comb += mul.start.eq(1)
                    m.next = "CONV_K"
        with m.State("CONV_K"), m.If(mul.done):
            m.d.sync += k_all.eq(mul.product)
            with m.If(c.cin < R):  # packed: K sliced as a GEMM's
                m.d.sync += [c.k.eq(mul.product), seg.packed.eq(1)]
            m.next = "K_TILES"
        kdim = Mux(c.conv & ~seg.packed, c.cin, c.k)
        slices = Signal(16)  # K slices (GEMM), C_in slices at one kernel position (CONV2D)
        with m.State("K_TILES"):
            # The K position as restart_k set it when the command came, now that kdim is known.
            m.d.sync += ks.start(kdim)
            if R & (R - 1):
                divide(kdim + R - 1, R)
                m.next = "K_TILES_DIV"
            else:
                m.d.sync += slices.eq((kdim + R - 1) >> (R.bit_length() - 1))
                m.next = "K_TILES_MUL"
        with m.State("K_TILES_DIV"), m.If(div.done):
            m.d.sync += slices.eq(div.quotient)
            m.next = "K_TILES_MUL"
        with m.State("K_TILES_MUL"):
            operands(kernel_area(c.kh, c.kw), slices)
            with m.If(c.conv & ~seg.packed):
                m.d.comb += mul.start.eq(1)
                m.next = "K_TILES_CONV"
            with m.Else():
                m.d.sync += k_tiles.eq(slices)
                divide(a_rows, slices)  # A rows that fit with all their K slices
                m.next = "BLOCK"
        with m.State("K_TILES_CONV"), m.If(mul.done):
            m.d.sync += k_tiles.eq(mul.product)
            divide(a_rows, mul.product)
            m.next = "BLOCK"
        # The block's size in two cycles: its tests of M and of the quotient (BLOCK), registered,
        # then the choice (BLOCK_SIZE); in one cycle they were the loop's longest setup path.
        m_rows = plan.rows_left  # M
        half_slot_bits = c_slot_rows.bit_length()
        whole, fits_stream, below_least = (Signal(name=n) for n in ("whole", "fits_stream", "below_least"))
        half_nz, target_narrow = Signal(name="half_nz"), Signal(name="target_narrow")
        half_slot, target = Signal(half_slot_bits, name="half_slot"), Signal(half_slot_bits, name="target")
        with m.State("BLOCK"), m.If(div.done):
            q = div.quotient
            half = q >> 1
            # About four blocks (eight for CONV2D, whose A walks cost the first block more bus time
            # per row than a GEMM's A loads, and whose blocks are not prefetched).
            rounded = m_rows + Mux(c.conv, 7, 3)  # rounded up for either division: one adder for both
            quarter = Mux(c.conv, rounded >> 3, rounded >> 2)
            full_target = Mux(quarter < mb_min, mb_min, quarter)
            # The split's block, min(target, half, c_slot_rows), shares min(half, c_slot_rows) with
            # the other case; that is at most c_slot_rows, so the target is compared on its bits only
            # (above them, a test for zero).
            m.d.sync += [
                whole.eq((m_rows <= q) & (m_rows <= c_slot_rows)),
                fits_stream.eq(m_rows <= stream_rows),
                below_least.eq(quarter < mb_min),
                half_nz.eq(half != 0),
                half_slot.eq(_min(half, c_slot_rows)[:half_slot_bits]),
                target.eq(full_target[:half_slot_bits]),
                target_narrow.eq(full_target[half_slot_bits:] == 0),
            ]
            m.next = "BLOCK_SIZE"
        with m.State("BLOCK_SIZE"):
            # A GEMM shorter than four least blocks stays one block where the K-outer group can
            # take it: the group hides that block's A loads, while a second block's A, prefetched
            # during the first, would make the first block wait on the bus (and B is loaded once
            # per block). CONV2D is cut too: it has no prefetch, but the next block's first N tile
            # (its A walks) is issued while the current block's later N tiles still run.
            short = ~c.conv & whole & below_least & self._group_fits(m_rows)
            # M above the target is M above the least block: a target above that is a quarter
            # (an eighth) of M, rounded up, below any M of two or more rows.
            assert mb_min >= 1
            split = (m_rows > mb_min) & half_nz & ~short
            target_fits = target_narrow & (target <= half_slot)
            block = Mux(
                split,
                Mux(target_fits, target, half_slot),
                Mux(whole, m_rows, Mux(half_nz, half_slot, Mux(fits_stream, m_rows, stream_rows))),
            )
            streaming = ~split & ~whole & ~half_nz
            # Several blocks (the block is below M): a split, or M more than one block holds;
            # known from the tests above, not from comparing the block just chosen with M.
            several = split | (~whole & (half_nz | ~fits_stream))
            m.d.sync += [
                mb.eq(block),
                a_half.eq(a_rows >> 1),
                multi.eq(several),
                plan.streaming.eq(streaming),
                plan.prefetch.eq(~c.conv & ~c.b_sp & (split | half_nz)),
                # Steps that need no multiplier: constant multiples (adders only) and shifts.
                steps["a_k"].eq(Mux(c.trans_a, times(c.lda, R, 32), R * in_e)),
                # A resident B steps in rows: a K tile's R rows, an N tile's ldb rows.
                steps["b_k"].eq(Mux(c.b_sp, R, Mux(c.trans_b, R * in_e, times(c.ldb, R, 32)))),
                steps["b_n"].eq(Mux(c.b_sp, c.ldb, Mux(c.trans_b, times(c.ldb, C, 32), C * in_e))),
            ]
            m.next = "N_TILES"

        def after_n_tiles() -> None:
            with m.If(c.b_sp):
                m.next = "B_SPAN"
            with m.Else():
                m.next = "STRIDES"

        with m.State("N_TILES"):  # the next block's A slices come due once every N tiles steps
            # From the block size as registered: the block's divide, minimums and this test in one
            # cycle were the tile's longest path on ECP5.
            m.d.sync += plan.grouped.eq(~c.conv & ~plan.streaming & self._group_fits(mb))
            if C & (C - 1):
                divide(c.n + C - 1, C)
                m.next = "N_TILES_DIV"
            else:
                m.d.sync += n_tiles.eq((c.n + C - 1) >> (C.bit_length() - 1))
                after_n_tiles()
        with m.State("N_TILES_DIV"), m.If(div.done):
            m.d.sync += n_tiles.eq(div.quotient)
            after_n_tiles()
        with m.State("B_SPAN"):  # a resident B's last N tile starts (N tiles - 1) · ldb rows on
            multiply(c.ldb, n_tiles - 1)
            m.next = "B_CHECK"
        # Its rows lie in the A region, with at least one A row per weight slot below them (the
        # least A region a loop command runs with, as SpLayout guarantees without B). Its top row,
        # registered: its adders and compare before the multiplier's start were the loop's longest path.
        # Then the test of it, registered too: its compare before the refusal and the multiplier's
        # start was the next longest.
        b_top = Signal(len(c.b + mul.product + Mux(c.conv, k_all, c.k)))
        fits = Signal(name="b_fits")
        with m.State("B_CHECK"), m.If(mul.done):
            m.d.sync += b_top.eq(c.b + mul.product + Mux(c.conv, k_all, c.k))
            m.next = "B_TOP"
        with m.State("B_TOP"):
            m.d.sync += fits.eq((c.b >= layout.a_base + layout.slots) & (b_top <= layout.a_base + layout.a_rows))
            m.next = "B_FITS"
        with m.State("B_FITS"):
            operands(k_tiles, mb)
            m.next = "STRIDES"
            with m.If(fits & multi):  # an M block's A rows, every K slice (one block reads no half)
                m.d.comb += mul.start.eq(1)
                m.next = "B_HALF"
            with m.If(~fits):
                m.d.sync += self.sp_range.eq(1)
                m.next = "IDLE"
        with m.State("B_HALF"), m.If(mul.done):  # (only read with two or more blocks: at most a_rows / 2)
            m.d.sync += a_half.eq(mul.product)
            m.next = "STRIDES"
        with m.State("STRIDES"):
            m.d.comb += strides_go.eq(multi)
            m.next = "READY"

    def _tail_eighths(self, c, k_tiles: Value) -> Value:
        """Eighths of the last pair's rows that go to its second part (0: not cut). A row takes
        ``k_tiles`` cycles of EXEC and ``s`` bus beats of STORE. The second part's EXECs should last
        as long as the first part's STORE, (8 - q) · s ≤ q · k_tiles, with q as small as that
        allows, since only the second part's STORE is left when the last EXEC ends. Where a row's
        STORE is no shorter than its EXECs (k_tiles ≤ s) the STOREs, not the last one, bound the
        end, and a cut only adds weight loads and accumulator port conflicts: not cut
        (docs/tile.md, "The GEMM loop")."""
        cfg = self.cfg
        bus_bytes = cfg.dma_bits // 8
        narrow, full = (-(-cfg.cols * element_bytes(cfg, DmaKind.ACC_MEM, out) // bus_bytes) for out in (0, 1))
        s = Mux(c.out == 0, narrow, full)
        q = Const(TAIL_EIGHTHS_MAX)
        for n in reversed(range(1, TAIL_EIGHTHS_MAX)):
            # (8 - n) · s ≤ n · k_tiles exactly when k_tiles ≥ ⌈(8 - n) · s / n⌉, a constant per `out`.
            least = Mux(c.out == 0, -(-(8 - n) * narrow // n), -(-(8 - n) * full // n))
            q = Mux(k_tiles >= least, n, q)
        return Mux(k_tiles > s, q, 0)

    def _group_fits(self, rows: Value) -> Value:
        """The K-outer group's C slots for blocks of ``rows`` rows fit the accumulator: three blocks'
        rows in a bank (the usual slot and two of the group's), or five in the one bank."""
        cfg = self.cfg
        # k · rows ≤ n exactly when rows ≤ ⌊n / k⌋: a comparison with a constant, no adder.
        return rows <= (cfg.acc_bank_rows // 3 if cfg.acc_banks > 1 else cfg.acc_rows // 5)

    def _strides(self, m: Module, c, mul: MultiplierPort, mb, steps, bias_stride, go, ready, pf_addr) -> None:
        """The block strides (mb rows of A, C and the bias), only needed at the first block change
        and by the prefetch: they are multiplied while the loop already runs; ``ready`` once known.
        A's is written to the prefetch's address as well: no slice is prefetched before ``ready``
        (nor a block changed), so its K offset is still zero then."""
        in_e = self.cfg.in_bits // 8
        with m.FSM(name="strides"):
            with m.State("IDLE"), m.If(go):
                m.d.sync += [ready.eq(0), steps["a_m"].eq(times(mb, in_e, 32)), pf_addr.eq(times(mb, in_e, 32))]
                m.d.comb += [mul.start.eq(1), mul.a.eq(c.ldc), mul.b.eq(mb)]
                m.next = "C"
            # Their operands are set for the whole state, whether or not it starts a product: the
            # walker never multiplies then (a block change waits for the strides).
            with m.State("C"):
                m.d.comb += [mul.a.eq(bias_stride), mul.b.eq(mb)]
                with m.If(mul.done):
                    m.d.sync += steps["c_m"].eq(mul.product[:32])
                    m.d.comb += mul.start.eq(1)
                    m.next = "D"
            with m.State("D"):
                m.d.comb += [mul.a.eq(c.lda), mul.b.eq(mb)]
                with m.If(mul.done):
                    m.d.sync += steps["d_m"].eq(mul.product[:32])
                    with m.If(c.trans_a):  # A^T: a block starts mb elements further along each row
                        m.d.sync += ready.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.comb += mul.start.eq(1)
                        m.next = "A"
            with m.State("A"), m.If(mul.done):
                m.d.sync += [steps["a_m"].eq(mul.product[:32]), pf_addr.eq(mul.product[:32]), ready.eq(1)]
                m.next = "IDLE"

    @staticmethod
    def _count(m: Module, counter: Signal, issued, finished) -> Value:
        """Steps ``counter``; its next value (the FSM's IDLE clears it after this)."""
        after = (counter + issued - finished)[: len(counter)]
        m.d.sync += counter.eq(after)
        return after

    @staticmethod
    def _queue(m: Module, port, name: str, depth: int, addend: Value | None = None):
        """A stream-shaped front of a ``depth``-deep FIFO that drives ``port``, and a flag that an
        operation is on its way in (it holds no place in the FIFO's level yet). ``addend``: a term
        queued beside each operation and added to its DRAM address at the FIFO's output (from its
        output register), so the sum is not in front of the FIFO.

        What is pushed is registered before it is written (one cycle): the payload is a choice by
        state among operations whose fields come through adders and multiplexers, and it had run
        on into every LUT-RAM cell of the storage. The front is ready while the FIFO and that
        register together hold fewer than ``depth``, so the FIFO (a slot deeper) always has room
        for the registered operation; that is a register too (from the operations held and the
        push and pop), as the states' enables take it."""
        layout = port.payload.shape()
        extra = 0 if addend is None else len(addend)
        q = Queue(width=layout.size + extra, depth=depth + 1, buffered=True)
        m.submodules[f"{name}_q"] = q
        front = stream.Signature(layout).create(path=(f"{name}_gen",))
        head = data.View(layout, q.r_data[: layout.size])
        arriving = Signal(name=f"{name}_arriving")
        entry = Signal(q.width, name=f"{name}_entry")
        room = Signal(init=1, name=f"{name}_room")
        held = Signal(range(depth + 1), name=f"{name}_held")  # the FIFO's level plus `arriving`
        push, pop = front.valid & front.ready, q.r_en & q.r_rdy
        m.d.sync += [
            arriving.eq(push),
            entry.eq(front.payload.as_value() if addend is None else Cat(front.payload, addend)),
            held.eq(held + push - pop),
            # (the compares are of the count as it is: the handshakes only choose among them)
            room.eq(Mux(push == pop, held < depth, Mux(push, held < depth - 1, 1))),
        ]
        m.d.comb += [
            q.w_en.eq(arriving),
            q.w_data.eq(entry),
            front.ready.eq(room),
            port.valid.eq(q.r_rdy),
            port.payload.eq(head),
            q.r_en.eq(port.ready),
        ]
        if addend is not None:
            m.d.comb += port.payload.op.dram_addr.eq(head.op.dram_addr + q.r_data[layout.size :])
        return front, arriving

    @staticmethod
    def _im2col_inputs(m: Module, im2col: Im2col, c, rows, local, kx, ky, k0, width, seg) -> None:
        shape = im2col.shape
        for name in ("batch", "cin", "h", "w", "kh", "kw", "stride", "pad", "a"):
            m.d.comb += getattr(shape, name).eq(getattr(c, name))
        m.d.comb += [
            im2col.rows.eq(rows),
            im2col.local.eq(local),
            im2col.kx.eq(Mux(seg.packed, seg.x, kx)),
            im2col.ky.eq(Mux(seg.packed, seg.y, ky)),
            im2col.c0.eq(Mux(seg.packed, seg.c, k0)),
            im2col.width.eq(Mux(seg.packed, seg.width, width)),
            im2col.col.eq(Mux(seg.packed, seg.col, 0)),
        ]

    def _load_a(
        self, m: Module, c, load, im2col: Im2col, chunk, last_a, a_free, a_go, seg, last_walk, loaded, goto
    ) -> None:
        """A's K slice for this step, once its rows are free: the walker's loads (CONV2D: one walk,
        or one per segment when packed), or up to ``dim`` rows per load (a transposed A). Then the
        weight tile's load, or with a resident B the EXEC, which the last A load gave its token."""

        def a_done() -> None:
            m.d.sync += loaded.eq(c.b_sp)
            with m.If(c.b_sp):
                goto("EXEC")
            with m.Else():
                goto("LOAD_B")

        # The step's last walk has ended (its last piece left in the cycle before): the state
        # changes from this register, not from the piece's handshake through the walker's flags
        # (a long ECP5 path into the state's and `loaded`'s enables). The walker is not let start
        # another walk meanwhile.
        walked = Signal(name="a_walked")
        m.d.sync += walked.eq(0)
        with m.If(c.conv):
            m.d.comb += [
                im2col.active.eq(a_free & ~walked),
                load.valid.eq(im2col.desc.valid),
                im2col.desc.ready.eq(load.ready),
            ]
            with m.If(im2col.step & im2col.last):
                with m.If(seg.packed):
                    m.d.sync += seg.advance(c.kw)
                m.d.sync += walked.eq(last_walk)
            with m.If(walked):
                a_done()
        with m.Else():
            m.d.comb += load.valid.eq(a_free & a_go)
            with m.If(a_free & a_go & load.ready):
                m.d.sync += chunk.eq(chunk + self.cfg.dim)
                with m.If(last_a):
                    m.d.sync += chunk.eq(0)
                    a_done()

    def _next_step(self, m: Module, b_slot, ring, streaming, mb, cur_steps, older) -> None:
        """After an EXEC: the next weight slot (and streaming A slot), in a ring of S."""
        cfg = self.cfg
        S, R = cfg.sp_layout.slots, cfg.rows
        first = cfg.sp_layout.b_base
        m.d.sync += b_slot.eq(Mux(b_slot == first + (S - 1) * R, first, b_slot + R))
        with m.If(streaming):
            # The ring's last slot is the one S - 1 slots on: the next would be S slots on (a shift,
            # S being a power of two, as SpLayout makes it).
            assert S & (S - 1) == 0
            m.d.sync += ring.eq(Mux(ring + mb == mb << (S.bit_length() - 1), 0, ring + mb))
        m.d.sync += [counter.eq(Mux(counter.all(), counter, counter + 1)) for counter in (cur_steps, older)]

    def _next_k_tile(
        self, m: Module, c, ks: _KSlice, kdim, kx, ky, first_k, chunk, res, mb, off, steps, last_pos, is_last_pos
    ) -> None:
        """The next K tile: the next slice of K (GEMM) or of C_in, then the next kernel position."""
        m.d.sync += [first_k.eq(0), chunk.eq(0), res.eq(res + mb)]
        # off["a_k"]: the next kernel position's (CONV2D), or the next A slice's (GEMM only: a
        # CONV2D leaves it on its kernel position).
        k_sum = off["a_k"] + Mux(ks.last, steps["pos"], steps["a_k"])
        with m.If(ks.last | ~c.conv):
            m.d.sync += off["a_k"].eq(k_sum)
        with m.If(ks.last):  # only CONV2D gets here without being at its last K tile
            m.d.sync += ks.start(kdim)
            m.d.sync += off["b_k"].eq(k_sum)
            with m.If(kx + 1 == c.kw):
                m.d.sync += [kx.eq(0), ky.eq(ky + 1), last_pos.eq(is_last_pos(0, ky + 1))]
            with m.Else():
                m.d.sync += [kx.eq(kx + 1), last_pos.eq(is_last_pos(kx + 1, ky))]
        with m.Else():
            m.d.sync += [*ks.next(), off["b_k"].eq(off["b_k"] + steps["b_k"])]

"""The tile's DMA: 2-D strided transfers between main memory (AXI4 master) and the local memories.

Two engines, one per direction, share an AXI4 port by channel (``share_axi``): ``DmaRead``
(memory → scratchpad / accumulator) owns AR/R, ``DmaWrite`` (scratchpad / accumulator → memory)
owns AW/W/B. The read engine is pipelined across descriptors: its address side checks a
descriptor and issues its bursts while its data side still writes the previous descriptors' rows,
so short loads do not each pay the memory latency. The write engine runs one descriptor at a
time: registered (1 cycle), checked and planned (1 cycle), transferred, reported on ``done``.
A refused descriptor is reported without any transfer. ``Dma`` puts both behind one descriptor
stream (the DMA test top). A zero-fill load (``zero``) reads no memory and writes zero rows.

Memory side. A transfer is a list of *segments*: the whole block when rows are contiguous in
memory (``dram_stride`` equals the row's byte length, or one row), else one segment per row. A
planner cuts segments into INCR bursts of at most 256 beats that never cross a 4 KiB boundary and
issues one burst per cycle on AR (or AW), as long as fewer than ``max_reads`` bursts are in flight.
Addresses are issued aligned down to the bus width; the lanes a burst really uses (first lane of
its first beat, end lane of its last) travel in a small FIFO next to the burst.

Data path. Element alignment only needs lanes of the smallest element (addresses, strides and
rows are whole elements, or the descriptor is refused), so both directions go through a
``Gearbox`` of such lanes: a 2-beat buffer that takes chunks of up to one beat at any lane and
gives chunks of up to one beat at any lane, one of each per cycle. Reads: R beats (useful lanes
only) in, row chunks of the row's length out (chunk ``j`` = row bytes ``[j·B, j·B+B)``; a mem→sp
row that fits a beat comes out at its column). Writes: row chunks in, W beats at their lanes out,
with byte strobes.

Local side (docs/tile.md): mem→sp and mem→acc write one assembled row per cycle; a transposed
mem→sp load keeps its block's memory rows but the last as columns (a cycle each) and hands the
block to a stage that writes its ``elems`` scratchpad rows whole, zeros past ``rows``, while the
next block's rows come in: a stream of blocks takes ``max(rows, elems)`` cycles a block.
acc→mem and sp→mem issue row reads under a credit count so that the valid-only scratchpad
responses always find room in a ``store_depth``-row FIFO.

Errors. A checked descriptor that fails gets its code without any transfer. An AXI error response
(SLVERR, DECERR) does not stop the transfer: every planned burst still completes, so nothing is
left outstanding, and ``done`` reports the first error. After a read error, local writes carry an
empty mask (the local memory is not changed further).
"""

import math

from amaranth.hdl import C, Cat, Const, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.axi import AXI_BURST_INCR, AXI_RESP_DECERR, AXI_RESP_SLVERR, Axi4Signature
from rtl.config import AccelConfig
from rtl.ops import dma_desc_layout
from rtl.queue import Queue
from rtl.signals import register_stage

__all__ = [
    "DESCRIPTOR",
    "DONE",
    "Dma",
    "DmaError",
    "DmaKind",
    "DmaRead",
    "DmaWrite",
    "Gearbox",
    "element_bytes",
    "share_axi",
]


class DmaKind:
    MEM_SP = 0
    MEM_ACC = 1
    ACC_MEM = 2
    SP_MEM = 3


class DmaError:
    OK = 0
    MISALIGNED = 1
    RANGE = 2
    SLVERR = 3
    DECERR = 4
    ZERO = 5
    TOO_LARGE = 6


DESCRIPTOR = dma_desc_layout()  # the descriptor format the LOAD/STORE units send (rtl/ops.py)
DONE = data.StructLayout({"error": 1, "code": 4})

BURST_MAX_BEATS = 256
PAGE_BYTES = 4096


def element_bytes(cfg: AccelConfig, kind: int, out: int = 1) -> int:
    """Bytes of one element in main memory for a descriptor of ``kind`` (and read-out ``out``)."""
    if kind in (DmaKind.MEM_SP, DmaKind.SP_MEM):
        return cfg.in_bits // 8
    if kind == DmaKind.ACC_MEM and out == 0:
        return 1 if cfg.acc_dtype == "int32" else 2
    return cfg.acc_bits // 8


def _log2(n: int) -> int:
    assert n & (n - 1) == 0
    return n.bit_length() - 1


class Gearbox(wiring.Component):
    """Realignment between two chunked streams of at most ``nbytes`` bytes per transfer, in lanes of
    ``unit`` bytes (``lane``, ``count`` and ``level`` count lanes, not bytes).

    ``inp`` delivers ``count`` lanes taken from lane ``lane`` of ``data``. A ``req`` asks for
    ``count`` lanes placed at lane ``lane`` of ``out``; ``out`` is valid once that many lanes are
    buffered and ``req`` is accepted together with ``out``. Lanes of ``out`` outside the request hold
    garbage. One input and one output chunk per cycle; an input waits while the buffer could not
    take a whole beat after this cycle's output.

    The DMA's transfers are element-aligned, so its lanes are its smallest element: with 16-bit
    elements every rotation below picks among half as many positions as with byte lanes.

    The lanes are held in a ring of twice a beat's lanes, so nothing held ever moves: an input
    chunk is rotated once to its place and written under lane enables, and an output is picked
    from the ring by two small steps (below). A buffer kept aligned at lane 0 instead shifts all
    it holds on every output and places each input by a shift as wide as the whole buffer: four
    wide shifters, 941 LUTs of xc7 at 8 byte lanes against 462 for the ring (the unit alone; 298
    with 16-bit lanes).
    """

    def __init__(self, nbytes: int, unit: int = 1, parallel: bool = False, held_window: bool = False) -> None:
        self.nbytes, self.unit, self.parallel, self.held_window = nbytes, unit, parallel, held_window
        self.lanes = nbytes // unit
        lane, count = range(self.lanes), range(self.lanes + 1)
        members = {
            "inp": In(stream.Signature(data.StructLayout({"data": 8 * nbytes, "lane": lane, "count": count}))),
            "req": In(stream.Signature(data.StructLayout({"lane": lane, "count": count}))),
            "out": Out(stream.Signature(8 * nbytes)),
            "level": Out(range(2 * self.lanes + 1)),
        }
        if parallel:
            # The request's count as it will be in the next cycle (the requester keeps the count in
            # a register, 0 after reset): `level >= count` is then a register too, and `out.valid`
            # starts at flip-flops. (The store DMA's W handshake: `beat_count` → that compare →
            # `wvalid` → the beat's and the gearbox's enables was 12.0-12.5 ns on ECP5.)
            members["req_next_count"] = In(count)
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        nb, lg, w = self.lanes, _log2(self.lanes), 8 * self.unit
        ring = [Signal(w, name=f"ring{i}") for i in range(2 * nb)]
        head = Signal(lg + 1)  # the ring position of the first lane held
        # The first free position, head + level modulo the ring, kept in a register of its own so
        # that placing an input needs no addition before its rotation.
        tail = Signal(lg + 1)
        cnt = self.level
        req, inp = self.req.payload, self.inp.payload

        if self.parallel:
            enough = Signal(init=1, name="enough")  # cnt >= req.count, set a cycle ahead (below)
            m.d.comb += self.out.valid.eq(self.req.valid & enough)
        else:
            m.d.comb += self.out.valid.eq(self.req.valid & (cnt >= req.count))
        out_fire = self.out.valid & self.out.ready
        m.d.comb += self.req.ready.eq(out_fire)
        # Accepting only when at most one beat stays buffered keeps ready independent of the
        # input's payload and can never deadlock: an output waits only while fewer than `nb` lanes
        # are held. `level - taken <= nb`, written without the output's `level >= count`: above
        # `nb` lanes held the output has enough for any request, so it fires exactly when it is
        # requested and taken, and below that the input is ready anyway. The request's count then
        # passes one compare with the registered level (not two carry chains in series) on its way
        # to `ready`, which the read engine's `rready` and its FIFO levels follow.
        # With more than `nb` held (`level` at most 2 · nb, `count` at most nb), `level - nb <= count`
        # is the low bits' compare, or at 2 · nb a whole-beat request: no adder.
        over_le = req.count[lg] | (~cnt[lg + 1] & (cnt[:lg] <= req.count[:lg]))
        m.d.comb += self.inp.ready.eq((cnt <= nb) | (self.req.valid & self.out.ready & over_le))
        in_fire = self.inp.valid & self.inp.ready

        # Output. Of ring positions c and c + nb exactly one lies among the nb from head on:
        # window[c] is that one, the held lane at offset (c - head) mod nb. Rotating the window
        # by head - lane puts offset 0 at the request's lane.
        upper = [(C(c, lg + 1) - head)[lg] for c in range(nb)]
        if self.held_window:
            # The window's choices as registers, set as the head steps (from the head and the
            # request's count, under the output's handshake): the head reaches every output bit
            # through the rotation only, one LUT fewer on the read engine's row data.
            stepped = head + req.count
            upper = [Signal(name=f"upper{c}") for c in range(nb)]
            with m.If(self.out.valid & self.out.ready):
                m.d.sync += [u.eq((C(c, lg + 1) - stepped)[lg]) for c, u in enumerate(upper)]
        window = [Mux(upper[c], ring[c + nb], ring[c]) for c in range(nb)]
        m.d.comb += self.out.payload.eq(_rotate_right(Cat(*window), (head - req.lane)[:lg], w))

        # Input: the chunk's lane at lane + o goes to position tail + o, for o below count; ring
        # positions i and i + nb take the same lane of the chunk rotated by tail - lane. A whole
        # beat's positions from tail are written, whatever the count: the lanes past the count are
        # garbage at free positions, each written again before it is held (an input is taken only
        # when at most nb lanes stay held after this cycle's output, so the nb positions from tail
        # hold none of them). The enables then depend on tail alone, not on a compare with the
        # count (which, where a register, came through the first/last choice of the chunk).
        placed = _rotate_right(inp.data, (inp.lane - tail)[:lg], w)
        for i, held in enumerate(ring):
            with m.If(in_fire & ~(C(i, lg + 1) - tail)[lg]):
                m.d.sync += held.eq(placed.word_select(i % nb, w))
        with m.If(in_fire):
            m.d.sync += tail.eq(tail + inp.count)
        if self.parallel:
            # The level's four candidates are summed beside the handshakes, which only choose among
            # them (where the request's count is a register, the handshakes are the late part).
            added = Signal.like(cnt)
            m.d.comb += added.eq(cnt + inp.count)
            both, out_only = added - req.count, cnt - req.count
            cnt_next = Mux(out_fire, Mux(in_fire, both, out_only), Mux(in_fire, added, cnt))
            m.d.sync += [cnt.eq(cnt_next), enough.eq(cnt_next >= self.req_next_count)]
            with m.If(out_fire):
                m.d.sync += head.eq(head + req.count)
        else:
            taken = Mux(out_fire, req.count, 0)
            m.d.sync += [head.eq(head + taken), cnt.eq(cnt - taken + Mux(in_fire, inp.count, 0))]
        return m


def _span(start: Value, count: Value, width: int, starts: int) -> Value:
    """``width`` bits, those from ``start`` on set, ``count`` of them. ``start`` is below ``starts``,
    so the bits from ``starts - 1`` on need no compare with it (one would lint as constant)."""
    return Cat(((i >= start) if i < starts - 1 else 1) & (i < start + count) for i in range(width))


def _rotate_right(value: Value, lanes_by, lane_bits: int) -> Value:
    """``value`` (whole lanes of ``lane_bits``) rotated right by ``lanes_by`` lanes."""
    return (Cat(value, value) >> Cat(C(0, _log2(lane_bits)), lanes_by))[: len(value)]


class _Engine(wiring.Component):
    """What the read and write engines share: the descriptor check and the burst planner."""

    def __init__(self, cfg: AccelConfig, members: dict, max_reads: int) -> None:
        self.cfg = cfg
        self.max_reads = max_reads
        self.beat_bytes = cfg.dma_bits // 8
        # Addresses, strides and row lengths are whole elements (checked, MISALIGNED), so the data
        # path and the planner count lanes of the smallest element instead of bytes.
        self.unit = min(element_bytes(cfg, DmaKind.ACC_MEM, out) for out in (0, 1))
        self.unit = min(self.unit, element_bytes(cfg, DmaKind.MEM_SP))
        self.lanes = self.beat_bytes // self.unit
        self.dim = cfg.dim
        self.sp_bits = self.dim * cfg.in_bits
        self.acc_bits_row = cfg.cols * cfg.acc_bits
        self.row_bits = max(self.sp_bits, self.acc_bits_row)
        self.row_bytes_max = self.row_bits // 8
        self.row_units_max = self.row_bytes_max // self.unit
        super().__init__(
            {
                "cmd": In(stream.Signature(DESCRIPTOR)),
                "done": Out(stream.Signature(DONE)),
                "m_axi": Out(Axi4Signature(cfg.dma_bits)),
                "idle": Out(1),  # no descriptor accepted and unfinished
                **members,
            }
        )

    def _burst_info(self, tagged: bool) -> data.StructLayout:
        nu = self.lanes
        fields = {"len": 8, "lane": range(nu), "end": range(nu + 1)}
        if tagged:
            return data.StructLayout({**fields, "tag": DmaRead.TAG_BITS})
        # The write engine's W valid is the gearbox's `level >= count` of the burst's first beat:
        # that beat's lane count and whether it is the last are computed as the burst is issued and
        # queued with it, so the W handshake (which enables the burst queue's head, the beat
        # counter and the gearbox) starts at registers, not behind the fields' zero test and
        # subtraction.
        return data.StructLayout({**fields, "first_count": range(nu + 1), "single": 1})

    def _elem_log2(self, d):
        cfg = self.cfg
        in_l = _log2(cfg.in_bits // 8)
        acc_l = _log2(cfg.acc_bits // 8)
        narrow_l = _log2(element_bytes(cfg, DmaKind.ACC_MEM, out=0))
        return Mux(d.kind[0] ^ d.kind[1], Mux(d.kind[1] & (d.out == 0), narrow_l, acc_l), in_l)

    def _row_units(self, d):
        """The row's length in lanes of ``unit`` bytes (of an accepted descriptor: ``elems`` is at
        most ``dim`` or it is refused, so only its low bits count)."""
        return self._in_units(d, self._elems(d))

    def _elems(self, d) -> Value:
        return d.elems[: Shape.cast(range(self.dim + 1)).width]

    def _in_units(self, d, elements):
        """``elements`` of ``d``'s kind in lanes of ``unit`` bytes: a choice among constant shifts,
        so that a product of element counts (the planner's ``rows · elems``) starts at registers
        and the kind's decode comes after it."""
        cfg, ul = self.cfg, _log2(self.unit)
        in_l = _log2(cfg.in_bits // 8) - ul
        acc_l = _log2(cfg.acc_bits // 8) - ul
        narrow_l = _log2(element_bytes(cfg, DmaKind.ACC_MEM, out=0)) - ul
        value = Value.cast(elements)
        acc = Mux(d.kind[1] & (d.out == 0), value << narrow_l, value << acc_l)
        return Mux(d.kind[0] ^ d.kind[1], acc, value << in_l)

    def _check(self, m: Module, d):
        """The error code of a descriptor (0 if it may run); zero, size, alignment, range, in that order.
        A zero-fill load reads no memory, so its address is not checked."""
        cfg = self.cfg
        to_sp = ~(d.kind[0] ^ d.kind[1])  # kinds 0 and 3 use the scratchpad
        transposed = (d.kind == DmaKind.MEM_SP) & d.transpose
        elem_max = Mux(to_sp, self.dim, cfg.cols)
        capacity = Mux(to_sp, cfg.sp_rows, cfg.acc_rows)
        local_rows = Mux(transposed, d.elems, d.rows)
        align = (C(1, 4) << self._elem_log2(d)) - 1
        result = Signal(4)
        with m.If((d.rows == 0) | (d.elems == 0)):
            m.d.comb += result.eq(DmaError.ZERO)
        with m.Elif((d.elems + d.col > elem_max) | (transposed & (d.rows > self.dim))):
            m.d.comb += result.eq(DmaError.TOO_LARGE)
        with m.Elif((((d.dram_addr | d.dram_stride) & align) != 0) & ~d.zero):
            m.d.comb += result.eq(DmaError.MISALIGNED)
        with m.Elif(d.local_addr + local_rows > capacity):
            m.d.comb += result.eq(DmaError.RANGE)
        return result

    def _planner(self, m: Module, d, setup, issuing, channel: str, bursts, info_fields: dict, shape, foresee: bool):
        """Cut the transfer into bursts on ``channel`` ("ar" or "aw"); push each burst's lanes (and
        ``info_fields``, latched at ``setup``) into ``bursts`` as it is issued. Returns whether bursts
        remain to be issued (a register). ``shape``: ``_shape(d)``, from registers where the
        engine keeps it with its descriptor. ``foresee``: whether the first burst may go in the
        cycle after ``setup`` (else a cycle later, with two adders fewer)."""
        # Everything here counts lanes of `unit` bytes (element-aligned: a transfer that is not
        # is refused, and a zero-fill load issues no burst).
        nu, lu, ul = self.lanes, _log2(self.lanes), _log2(self.unit)
        lb = _log2(self.beat_bytes)
        axi = self.m_axi
        seg_bits = 16 + (self.row_units_max).bit_length()
        addr = Signal(32 - ul)  # next lane to transfer
        base = Signal(32 - ul)  # start of the current segment
        left = Signal(seg_bits)  # lanes left in the current segment
        # The length of the next segment: only ever reloaded when there are several segments, and
        # then each is one row.
        seg_len = Signal(range(self.row_units_max + 1))
        segs = Signal(16)  # segments not yet finished
        # `segs != 0` and `segs == 1` as flags kept beside it: they feed AR/AW valid, and `more`
        # lets the next descriptor in (the load engine's setup).
        more = Signal(name="segs_more")
        last_seg = Signal(name="segs_last")

        stride = Signal(32 - ul)
        latched = {name: Signal(len(Value.cast(value)), name=f"burst_{name}") for name, value in info_fields.items()}

        lane = addr[:lu]
        page_units, page_beats = PAGE_BYTES // self.unit, PAGE_BYTES // self.beat_bytes
        in_page = addr[: 12 - ul]
        # A burst ends at the segment's end, the 4 KiB page end or after 256 beats, whichever comes
        # first. The 256 beats end first exactly when the burst starts more than 256 beats before
        # the page end (never on a bus of 16 bytes or more): one compare of the beat's place.
        before_last = page_beats - BURST_MAX_BEATS  # the beats of a page more than 256 from its end
        by_max = (addr[lu : 12 - ul] < before_last) if before_last > 0 else C(0, 1)
        # The segment ends with this burst if its last lane lies within the page and within 256
        # beats: two adders from registers, each followed by a zero test (no compare of a subtracted
        # limit in series with them, the planner's old critical path).
        # Both limits are below 2^low lanes, so only `left`'s low bits go through the adders: its
        # high bits are a zero test of registers beside them, and the sums' tests a few bits wide.
        low = max(lu + _log2(BURST_MAX_BEATS), 12 - ul)

        def last_lanes(start, lanes, name: str) -> tuple[Signal, Signal]:
            # The last of `lanes` from `start`: counted from the burst's first beat, and from the page start.
            from_beat, from_page = Signal(low + 1, name=f"{name}_last"), Signal(low + 1, name=f"{name}_page_last")
            m.d.comb += [from_beat.eq(start[:lu] + lanes[:low] - 1), from_page.eq(start[: 12 - ul] + lanes[:low] - 1)]
            return from_beat, from_page

        def ends_within(lanes, last_lane, last_in_page) -> Value:
            # The segment's `lanes` end within 256 beats of its burst's start and within the page.
            high = lanes[low:].any() if len(lanes) > low else C(0, 1)
            return ~high & ~last_lane[lu + _log2(BURST_MAX_BEATS) :].any() & ~last_in_page[12 - ul :].any()

        seg_last, page_last = last_lanes(addr, left, "seg")  # the segment's, from this burst

        # `fits` is a register, set a cycle ahead: it chooses every field and update of the burst
        # and the address registers' enables, a fan-out that had followed the adders above (the
        # store engine's critical path). It is foreseen as a segment's last burst goes (the next
        # segment's: a row, which never reaches 256 beats, so only its page is tested, from
        # `base + stride` and `seg_len`) and, by the load engine, at `setup` (its descriptor's
        # first burst: loads follow each other closely). Otherwise (after a cut burst, which ends
        # at a page or after 256 beats, and after a store's setup) the planner waits a cycle
        # (`armed`) and takes it from the registers.
        assert self.row_units_max <= min(page_units, BURST_MAX_BEATS * nu)
        fits = Signal(name="burst_fits")
        armed = Signal(init=1, name="burst_armed")
        to_page = Signal(range(page_units + 1))
        to_max = Signal(range(BURST_MAX_BEATS * nu + 1))
        m.d.comb += [to_page.eq(page_units - in_page), to_max.eq(BURST_MAX_BEATS * nu - lane)]
        limit = Signal(range(max(page_units, BURST_MAX_BEATS * nu) + 1))
        m.d.comb += limit.eq(Mux(by_max, to_max, to_page))
        # A cut burst ends on the last lane of a beat: 256 beats on, or the page's last beat.
        cut_len = Mux(by_max, BURST_MAX_BEATS - 1, ~addr[lu : 12 - ul])[:8]

        layout = self._burst_info("tag" in info_fields)
        info = Signal(layout.size)
        fields = {
            "len": Mux(fits, seg_last[lu:], cut_len)[:8],
            "lane": lane,
            "end": Mux(fits, seg_last[:lu] + 1, nu),
            **latched,
        }
        if "first_count" in layout.members:
            single = fields["len"] == 0
            fields["single"] = single
            fields["first_count"] = self._first_beat_count(single, lane, fields["end"])
        m.d.comb += info.eq(Cat(Value.cast(fields[name])[: Shape.cast(f.shape).width] for name, f in layout))
        room = bursts.w_rdy
        if self.max_reads >= 8:
            # Room as a register: the FIFO's level is below depth - 1, so it has room next cycle
            # whatever this cycle pushes (one entry of the many is given up for a shorter path).
            room = Signal(init=1, name="burst_room")
            m.d.sync += room.eq(bursts.level < self.max_reads - 1)
        valid = issuing & more & room & armed
        word = Cat(C(0, lb), addr[lu:])
        m.d.comb += [
            getattr(axi, f"{channel}valid").eq(valid),
            getattr(axi, f"{channel}addr").eq(word),
            getattr(axi, f"{channel}len").eq(fields["len"]),
            getattr(axi, f"{channel}size").eq(lb),
            getattr(axi, f"{channel}burst").eq(AXI_BURST_INCR),
            getattr(axi, f"{channel}cache").eq(0b0011),  # normal, non-cacheable, bufferable
        ]
        fire = valid & getattr(axi, f"{channel}ready")
        m.d.comb += [bursts.w_en.eq(fire), bursts.w_data.eq(info)]
        # The next address, each candidate from registers and `fits` choosing last: the next
        # segment (base + stride), or after a cut burst 256 beats on or the next page's start.
        hi = 12 - ul
        # (256 beats on stays within the page: a burst is cut there only if the page end is further.)
        after_max = Cat(C(0, lu), (addr[lu:hi] + BURST_MAX_BEATS)[: hi - lu], addr[hi:])
        after_page = Cat(C(0, hi), addr[hi:] + 1)[: len(addr)]
        next_seg = Signal(len(addr))
        m.d.comb += next_seg.eq(base + stride)
        next_page_end = Signal(12 - ul + 1, name="next_page_last")
        m.d.comb += next_page_end.eq(next_seg[: 12 - ul] + seg_len - 1)
        step = Mux(fits, next_seg, Mux(by_max, after_max, after_page))
        m.d.sync += [fits.eq(ends_within(left, seg_last, page_last)), armed.eq(1)]
        with m.If(fire):
            m.d.sync += addr.eq(step)
            with m.If(fits):
                m.d.sync += [base.eq(next_seg), segs.eq(segs - 1), left.eq(seg_len)]
                m.d.sync += [more.eq(~last_seg), last_seg.eq(segs == 2)]
                m.d.sync += fits.eq(~next_page_end[12 - ul])
            with m.Else():
                m.d.sync += [left.eq(left - limit), armed.eq(0)]
        with m.If(setup):
            m.d.sync += [addr.eq(d.dram_addr[ul:]), base.eq(d.dram_addr[ul:])]
        # After the updates above (a setup while a burst goes would win, though neither engine does that).
        with m.If(setup):
            row = self._row_units(d)
            contiguous, product = shape
            first = Signal(seg_bits, name="first_left")
            m.d.comb += first.eq(Mux(contiguous, self._in_units(d, product), row))
            if foresee:
                m.d.sync += fits.eq(ends_within(first, *last_lanes(d.dram_addr[ul:], first, "first")))
            m.d.sync += [
                armed.eq(foresee),
                stride.eq(d.dram_stride[ul:]),
                left.eq(first),
                seg_len.eq(row),
                segs.eq(Mux(d.zero, 0, Mux(contiguous, 1, d.rows))),
                more.eq(~d.zero & (d.rows != 0)),
                last_seg.eq(~d.zero & contiguous),
            ]
            m.d.sync += [latched[name].eq(value) for name, value in info_fields.items()]
        return more

    def _shape(self, d) -> tuple[Value, Value]:
        """Whether ``d``'s rows are contiguous in memory (one segment), and ``rows · elems``."""
        ul = _log2(self.unit)
        contiguous = (d.rows == 1) | (d.dram_stride[ul:] == self._row_units(d))
        return contiguous, d.rows * self._elems(d)

    def _shape_registers(self, offered) -> tuple[tuple[Signal, Signal], list]:
        """Registers for ``_shape(offered)`` and the statements that load them (each engine loads
        them with its descriptor register), so the planner's setup starts at flip-flops."""
        shape = self._shape(offered)
        registers = Signal(name="contiguous"), Signal(shape[1].shape(), name="rows_elems")
        return registers, [Cat(*registers).eq(Cat(*shape))]

    def _first_beat_count(self, single, lane, end) -> Value:
        """Lanes of a burst's first beat, from its first lane: to ``end`` if it is the burst's only
        beat (``single``), else to the end of the bus."""
        n = Shape.cast(range(self.lanes + 1)).width
        return Mux(single, (end - lane)[:n], (self.lanes - lane)[:n])

    def _beat_lanes(self, m: Module, info, fire):
        """First lane and end lane of the current beat of the burst ``info``, and whether it is the
        last; the beat advances on ``fire``. Whether a later beat is the last is registered as the
        beat before it goes (``beat + 1 == len``), so ``last`` is a register or, on a burst's first
        beat, the zero test of its registered length: it feeds the gearbox's count and handshake."""
        beat = Signal(8, name="beat")
        first = Signal(init=1, name="beat_first")
        later_last = Signal(name="beat_later_last")  # the current beat (not the first) is the last
        precounted = "first_count" in info.shape().members
        single = info.single if precounted else info.len == 0
        last = Mux(first, single, later_last)
        lane = Signal(range(self.lanes), name="beat_lane")
        end = Signal(range(self.lanes + 1), name="beat_end")
        m.d.comb += [lane.eq(Mux(first, info.lane, 0)), end.eq(Mux(last, info.end, self.lanes))]
        # The beat's lane count, `end - lane`, with the subtractions side by side on the registered
        # fields and the first/last choice after them (it feeds the gearbox's handshake).
        count = Signal(range(self.lanes + 1), name="beat_count")
        whole = info.first_count if precounted else self._first_beat_count(single, info.lane, info.end)
        m.d.comb += count.eq(Mux(first, whole, Mux(later_last, info.end, self.lanes)))
        self._beat_count = count
        with m.If(fire):
            m.d.sync += [beat.eq(Mux(last, 0, beat + 1)), first.eq(last), later_last.eq(beat + 1 == info.len)]
        return lane, end, last

    def _count_bytes(self, m: Module, counter, fire) -> None:
        """The statistics ``counter`` advanced by the beat's bytes a cycle after the beat (``fire``):
        the beat's lane count and the handshake are registered first, so the counter's 32-bit adder
        and its enable start at flip-flops, not behind the W handshake through the gearbox. (The
        tile's perf events take the counter's differences, and a store is reported cycles after
        its last beat, so the lag is not seen.) The read engine keeps its counter under the R
        handshake: the same registers there cost ~190 xc7 LUTs, Yosys then mapping the read
        gearbox's multiplexers differently."""
        moved = Signal(len(self._beat_count), name=f"{counter.name}_moved")
        fired = Signal(name=f"{counter.name}_fired")
        m.d.sync += [moved.eq(self._beat_count), fired.eq(fire)]
        with m.If(fired):
            m.d.sync += counter.eq(counter + (moved << _log2(self.unit)))

    def _chunk_count(self, remaining, row_units):
        """Lanes in the next chunk of a row with ``remaining`` lanes left (of ``row_units``), and
        whether it is the last. When every row fits a beat, the only chunk is the whole row: the
        chunk index is then constant and its multiplexers and the chunk registers vanish.
        Otherwise "the last chunk" is a register kept beside ``remaining`` (``_remaining``), as it
        feeds the gearbox's count and handshake."""
        if self.row_units_max <= self.lanes:
            return row_units, C(1, 1)
        last = Signal(name="chunk_last")
        return Mux(last, remaining, self.lanes), last

    def _remaining(self, remaining, last, value=None) -> list:
        """``remaining`` set to ``value`` (a new row), or stepped past a chunk (None), and the
        last-chunk flag ``last`` of ``_chunk_count`` with it."""
        if value is None:
            value, now_last = remaining - self.lanes, remaining <= 2 * self.lanes
        else:
            now_last = value <= self.lanes
        return [remaining.eq(value)] + ([] if isinstance(last, Const) else [last.eq(now_last)])


class DmaRead(_Engine):
    """Memory → scratchpad / accumulator (kinds 0 and 1), pipelined across descriptors.

    An address side checks each descriptor and issues its bursts; a data side takes the checked
    descriptors from a small queue and writes their rows locally. So the next descriptor's bursts
    go out while the previous one's data is still on its way, and a stream of short loads keeps
    the read channel busy instead of paying the memory latency once per descriptor. Bursts carry
    a small tag of their descriptor so that an AXI error is reported for the right one.
    """

    # Checked descriptors waiting for the data side: with short loads (a 4-row weight tile every 4
    # cycles) about latency / 4 of them are in flight at once.
    PENDING = 16
    TAG_BITS = 5  # enough to tell apart the PENDING + 2 descriptors in work

    def __init__(self, cfg: AccelConfig, max_reads: int = 4) -> None:
        sp_addr, acc_addr = range(cfg.sp_rows), range(cfg.acc_rows)
        sp_row = data.ArrayLayout(cfg.in_bits, cfg.dim)
        acc_row = data.ArrayLayout(cfg.acc_bits, cfg.cols)
        members = {
            "sp_write": Out(stream.Signature(data.StructLayout({"addr": sp_addr, "data": sp_row, "mask": cfg.dim}))),
            "acc_write": Out(
                stream.Signature(
                    data.StructLayout({"addr": acc_addr, "data": acc_row, "mask": cfg.cols, "accumulate": 1})
                )
            ),
            "bytes_read": Out(32),
        }
        super().__init__(cfg, members, max_reads)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.rgear = rgear = Gearbox(self.beat_bytes, self.unit, held_window=True)
        info_layout = self._burst_info(tagged=True)
        m.submodules.bursts = bursts = fifo.SyncFIFOBuffered(width=info_layout.size, depth=self.max_reads)
        entry = data.StructLayout(
            {"desc": self.DESC, "code": 4, "row_units": range(self.row_units_max + 1), "tag": self.TAG_BITS}
        )
        m.submodules.pending = pending = fifo.SyncFIFO(width=entry.size, depth=self.PENDING)
        errors = _AxiErrors(m, self.TAG_BITS)

        # Address side, two stages: the accepted descriptor is checked (and queued for the data
        # side) while the planner still issues the previous one's bursts; it moves on to the planner
        # in the cycle after the last of those bursts goes. (Not in that cycle: the last burst's
        # test goes through the planner's adders and AR's handshake, and as the enable of this
        # descriptor register, the input buffer's head and the pending queue it was the tile's
        # latest net. One AR cycle a descriptor; the bursts of one descriptor still go one a cycle.)
        cmd, cmd_level = self._input_buffer(m)
        d = Signal(self.DESC)
        held = Signal()
        tag = Signal(self.TAG_BITS)
        # The descriptor's check is registered with it, so the planner's setup (whose first address
        # goes through the planner's adder) does not start behind the check's carry chains.
        code = Signal(4)
        checked = self._check(m, cmd.payload)
        more = Signal()  # the planner's bursts remain to be issued (a register)
        advance = held & pending.w_rdy & ((code != 0) | ~more)
        queue_entry = Signal(entry)
        m.d.comb += [queue_entry.desc.eq(d), queue_entry.code.eq(code), queue_entry.tag.eq(tag)]
        m.d.comb += queue_entry.row_units.eq(self._row_units(d))
        m.d.comb += [
            cmd.ready.eq(~held | advance),
            pending.w_en.eq(advance),
            pending.w_data.eq(queue_entry),
        ]
        with m.If(advance):
            m.d.sync += held.eq(0)
        # The planner's segment shape is registered with it too: the product `rows · elems` and the
        # stride's compare with the row start at the input buffer's registers.
        shape, load_shape = self._shape_registers(cmd.payload)
        with m.If(cmd.valid & cmd.ready):  # a new tag, held while it is checked and issued
            m.d.sync += [d.eq(cmd.payload), code.eq(checked), tag.eq(tag + 1), held.eq(1)]
            m.d.sync += load_shape
        setup = advance & (code == 0)
        planning = self._planner(m, d, setup, 1, "ar", bursts, {"tag": tag}, shape, foresee=True)
        m.d.comb += more.eq(planning)

        # Data side, two stages joined by a queue of two held rows: the assembler builds a
        # descriptor's rows from the read gearbox (or zeros), the writer writes each held row with
        # the parameters it carries. So the assembler starts the next descriptor while the last row
        # of the previous one is still being written, and short loads follow each other without a
        # bubble. Two rows, not one: the assembler's room is then the queue's registered level, not
        # the writer's release, which came from the local write ports' ready (shared with the mesh
        # and the vector engine) and ran through the gearbox to `rready`: a long path on FPGAs.
        # The queue's head is read into `nxt` whenever that is empty or `cur` is, so the queue's
        # read does not wait for the assembler's handover (`finished` comes through the read
        # gearbox's handshake): `cur` takes `nxt` as its descriptor is finished. A descriptor of
        # one row (or a refused one) right after another may then wait a cycle for `nxt`.
        cur, nxt = Signal(entry), Signal(entry)
        have, nxt_valid = Signal(), Signal()
        finished = Signal()  # the assembler hands over the current descriptor's last row (or its refusal)
        setup = nxt_valid & (~have | finished)
        m.d.comb += pending.r_en.eq(pending.r_rdy & ~(nxt_valid & have))
        with m.If(setup):
            m.d.sync += [cur.eq(nxt), have.eq(1)]
        with m.Elif(finished):
            m.d.sync += have.eq(0)
        with m.If(pending.r_en):
            m.d.sync += [nxt.eq(pending.r_data), nxt_valid.eq(1)]
        with m.Elif(setup):
            m.d.sync += nxt_valid.eq(0)

        self._read_beats(m, rgear, bursts, info_layout, errors)
        held_row = self._held_layout()
        m.submodules.rows = rows = Queue(width=held_row.size, depth=2)
        self._assemble_rows(m, cur, have, nxt, rgear, setup, finished, rows)
        writing_block = self._write_rows(m, data.View(held_row, rows.r_data), errors, rows.r_rdy, rows.r_en)
        # Idle: nothing buffered, checked, issued, assembled or written (the block stage included).
        quiet = ~held & ~more & ~have & ~nxt_valid & (pending.level == 0) & ~rows.r_rdy & ~writing_block
        m.d.comb += self.idle.eq(quiet & (cmd_level == 0))
        return m

    # The descriptor as the read engine keeps it: the read-out fields (scale, act) are the write
    # engine's, and dropping them narrows the input buffer, the descriptor register and the queue.
    DESC = data.StructLayout({name: f.shape for name, f in DESCRIPTOR if name not in ("scale", "act")})

    def _input_buffer(self, m: Module):
        """Descriptors enter through a small FIFO, so ``cmd.ready`` comes from its registered level:
        the planner's last-burst logic, which lets the next descriptor in, no longer reaches back
        through the LOAD gate into the decoder (the ECP5 critical path after the decoder's). Three
        deep: its inner two entries take one descriptor per cycle while one leaves."""
        m.submodules.cmd_buffer = buf = Queue(width=self.DESC.size, depth=3, buffered=True)
        cmd = stream.Signature(self.DESC).create(path=("cmd_buffered",))
        kept = Cat(getattr(self.cmd.payload, name) for name, _ in self.DESC)
        m.d.comb += [
            buf.w_en.eq(self.cmd.valid),
            buf.w_data.eq(kept),
            self.cmd.ready.eq(buf.w_rdy),
            cmd.valid.eq(buf.r_rdy),
            cmd.payload.eq(buf.r_data),
            # A load's kind is 0 or 1 and its read-out field unused (rtl/decode.py): the check
            # and the row length need not decode the store kinds.
            cmd.payload.kind[1].eq(0),
            cmd.payload.out.eq(0),
            buf.r_en.eq(cmd.ready),
        ]
        return cmd, buf.level

    def _read_beats(self, m: Module, rgear, bursts, info_layout, errors) -> None:
        """R beats into the read gearbox, only their useful lanes; errors noted against the burst's tag."""
        axi = self.m_axi
        info = data.View(info_layout, bursts.r_data)
        fire = Signal()
        lane, _end, last = self._beat_lanes(m, info, fire)
        m.d.comb += [
            rgear.inp.valid.eq(bursts.r_rdy & axi.rvalid),
            rgear.inp.payload.data.eq(axi.rdata),
            rgear.inp.payload.lane.eq(lane),
            rgear.inp.payload.count.eq(self._beat_count),
            axi.rready.eq(bursts.r_rdy & rgear.inp.ready),
        ]
        m.d.comb += fire.eq(rgear.inp.valid & rgear.inp.ready)
        m.d.comb += bursts.r_en.eq(fire & last)
        with m.If(fire):
            moved = self._beat_count << _log2(self.unit)
            m.d.sync += self.bytes_read.eq(self.bytes_read + moved)
        # An error response is noted a cycle after its beat, from registers: the note enables the
        # error queue's level and last tag, and the R handshake came to them through the gearbox.
        # The beat's row reaches the writer two cycles after it at the earliest (the gearbox's ring,
        # then the rows queue), as does the note.
        bad, tag, decerr = Signal(name="r_bad"), Signal(self.TAG_BITS, name="r_bad_tag"), Signal(name="r_decerr")
        m.d.sync += [bad.eq(fire & ((axi.rresp == AXI_RESP_SLVERR) | (axi.rresp == AXI_RESP_DECERR)))]
        m.d.sync += [tag.eq(info.tag), decerr.eq(axi.rresp == AXI_RESP_DECERR)]
        errors.note(m, bad, tag, decerr)

    def _held_layout(self) -> data.StructLayout:
        """A row between assembler and writer, with everything needed to write it and report.
        The fields a written row uses are only as wide as an accepted descriptor needs (elems +
        col <= dim, a local address below the capacity, a transposed block at most dim rows); a
        refused descriptor's row writes nothing."""
        cfg = self.cfg
        return data.StructLayout(
            {
                "data": self.row_bits,
                # The row's lanes (of `unit` bytes) kept: from its place, its length (none in a
                # zero row). Decoded as the row is queued: the place's and the end's compares
                # after the queue's read ran on into the scratchpad's write data.
                "lanes": self.row_units_max,
                "kind": 2,
                "local": range(max(cfg.sp_rows, cfg.acc_rows)),  # the row's address (transposed: the block's first)
                "row": range(self.dim),  # the row's index within a transposed block
                "elems": range(self.dim + 1),
                "col": range(self.dim),
                "transpose": 1,
                "accumulate": 1,
                "last": 1,  # the descriptor's last row: `done` follows its write
                "skip": 1,  # no write: a refused descriptor, reported in order
                # What the writer does with the row, decoded as it is queued (kind, transpose, skip)
                # so that the writer's release, which reaches the queue's pointers and level, starts
                # at the queue's read with no decode behind it: write a scratchpad row, keep it as a
                # column of a transposed block, or write an accumulator row.
                "sp_row": 1,
                "sp_col": 1,
                "acc_row": 1,
                "code": 4,
                "tag": self.TAG_BITS,
            }
        )

    def _place(self, d) -> Value:
        """The lane a row of ``d`` starts at in its held row: a mem→sp row that fits a beat (not
        transposed) is placed at its column by the read gearbox, so it needs no shifter of its own;
        other rows start at lane 0."""
        if self.row_units_max > self.lanes:
            return C(0, 1)
        col_lanes = d.col << (_log2(self.cfg.in_bits // 8) - _log2(self.unit))
        return Mux((d.kind == DmaKind.MEM_SP) & ~d.transpose, col_lanes, 0)[: max(1, _log2(self.lanes))]

    def _assemble_rows(self, m: Module, cur, have, nxt, rgear, setup, finished, rows) -> None:
        """Row chunks from the read gearbox (or zero rows) into whole rows, handed to the writer
        through the queue ``rows``."""
        nb = self.beat_bytes
        d, row_units = cur.desc, cur.row_units
        place = self._place(d)
        next_row_units, next_rows = nxt.row_units, nxt.desc.rows
        chunks = math.ceil(self.row_bytes_max / nb)
        row = Signal(self.row_bits)
        chunk = Signal(range(max(chunks, 2)))
        remaining = Signal(range(self.row_units_max + 1))
        rows_in = Signal(16)
        out = data.View(self._held_layout(), rows.w_data)
        room = rows.w_rdy

        count, last = self._chunk_count(remaining, row_units)
        # What the current descriptor still does, as flags set up with it and kept beside `rows_in`
        # (its compares with the descriptor's row count, and the code's and kind's decode, fed the
        # gearbox request and through it `finished`, the enable of `cur` and the rows queue): rows
        # remain to come from the gearbox (`gear_rows`) or as zeros (`zero_rows`), or it is refused
        # and waits to be reported (`refusing`); `last_row`: the next row is its last.
        gear_rows = Signal(name="gear_rows")
        zero_rows = Signal(name="zero_rows")
        refusing = Signal(name="refusing")
        last_row = Signal(name="last_row")
        m.d.comb += [
            rgear.req.valid.eq(gear_rows),
            rgear.req.payload.lane.eq(place),
            rgear.req.payload.count.eq(count),
            rgear.out.ready.eq(~last | room),
        ]
        slots = [row[k * 8 * nb : (k + 1) * 8 * nb] for k in range(chunks)]
        merged = Cat(Mux(chunk == k, rgear.out.payload[: len(s)], s) for k, s in enumerate(slots))
        # A row's last chunk goes when the gearbox holds the lanes left (`level >= remaining`, the
        # gearbox's own `out.valid` for that request, written out so that no choice of the
        # request's count stands before the compare).
        enough = rgear.level >= (count if isinstance(last, Const) else remaining)
        from_gearbox = gear_rows & last & enough & room
        zero_row = zero_rows & room
        refused = refusing & room
        complete = from_gearbox | zero_row
        with m.If(rgear.out.valid & rgear.out.ready):
            m.d.sync += row.eq(merged)
            with m.If(last):
                m.d.sync += [chunk.eq(0), *self._remaining(remaining, last, row_units)]
            with m.Else():
                m.d.sync += [chunk.eq(chunk + 1), *self._remaining(remaining, last)]
        m.d.comb += finished.eq((complete & last_row) | refused)
        m.d.comb += rows.w_en.eq(complete | refused)
        m.d.comb += [
            # A zero row is the gearbox's word with no byte of it kept: the writer zero-fills past
            # `row_units` anyway, so the row needs no multiplexer of its own.
            out.data.eq(merged),
            out.lanes.eq(Mux(from_gearbox, _span(place, row_units, self.row_units_max, self.lanes), 0)),
            out.kind.eq(d.kind),
            out.local.eq(d.local_addr + Mux(d.transpose, 0, rows_in)),
            out.row.eq(rows_in),
            out.elems.eq(d.elems),
            out.col.eq(d.col),
            out.transpose.eq(d.transpose),
            out.accumulate.eq(d.accumulate),
            out.last.eq(refused | last_row),
            out.skip.eq(refused),
            out.sp_row.eq(~refusing & (d.kind == DmaKind.MEM_SP) & ~d.transpose),
            out.sp_col.eq(~refusing & (d.kind == DmaKind.MEM_SP) & d.transpose),
            out.acc_row.eq(~refusing & (d.kind == DmaKind.MEM_ACC)),
            out.code.eq(cur.code),
            out.tag.eq(cur.tag),
        ]
        with m.If(complete):
            m.d.sync += [rows_in.eq(rows_in + 1), last_row.eq(rows_in + 2 == d.rows)]
            with m.If(last_row):
                m.d.sync += [gear_rows.eq(0), zero_rows.eq(0)]
        with m.If(refused):
            m.d.sync += refusing.eq(0)
        with m.If(setup):  # (a refused descriptor's row flags are never used)
            m.d.sync += [chunk.eq(0), rows_in.eq(0), *self._remaining(remaining, last, next_row_units)]
            accepted = nxt.code == 0
            m.d.sync += [
                gear_rows.eq(accepted & ~nxt.desc.zero),
                zero_rows.eq(accepted & nxt.desc.zero),
                refusing.eq(~accepted),
                last_row.eq(next_rows == 1),
            ]

    def _write_rows(self, m: Module, out, errors, full, release) -> Signal:
        """Write the held row locally; after a descriptor's last row, report it on ``done``.
        Returns whether a transposed block is still to be written (the block stage's).

        A transposed mem→sp block is written by its own stage (``_write_block``): the held row's
        path only keeps its rows as columns and hands the finished block over, so the next block's
        rows come in while this one's ``elems`` rows are written, and a stream of blocks takes
        max(rows, elems) cycles each, not rows − 1 + elems."""
        cfg, n = self.cfg, self.dim
        # No row is taken in the cycle a descriptor's error leaves the error queue (the cycle after
        # its last row, so only after a descriptor with an AXI error): the next row's lookup then
        # sees the next error at the head.
        full = full & ~errors.retiring
        failed, decerr = errors.of(out.tag)
        keep = ~failed  # after an AXI error the local memory is left alone
        error = Mux(out.skip, out.code, Mux(failed, Mux(decerr, DmaError.DECERR, DmaError.SLVERR), 0))
        errors.retire(m, release & out.last & failed)
        # Lanes outside the row are zero: the scratchpad row is zero-filled beyond `elems`.
        w = 8 * self.unit
        filled = Cat(Mux(out.lanes[i], out.data.word_select(i, w), 0) for i in range(self.row_units_max))
        sp = self._sp_request = stream.Signature(self.sp_write.payload.shape()).create(path=("sp_request",))
        self._done_request = stream.Signature(DONE).create(path=("done_request",))
        held = self._register_sp_write(m, sp, self._done_request)
        elems = [filled.word_select(e, cfg.in_bits) for e in range(n)]
        block = _Block(cfg.in_bits, n)
        # mem→sp, transposed: every row of the block is kept as a column of `block.kept` (one cycle
        # each, nothing written); after the last, the block stage copies the columns whole (no
        # multiplexer: the last row is a column by then) and writes its `elems` local rows, zero
        # past the block's rows.
        keeping = full & out.sp_col & (~block.complete | block.taken)
        index = out.row[: max(1, (n - 1).bit_length())]
        with m.If(block.taken):
            m.d.sync += block.complete.eq(0)
        with m.If(keeping):
            # (Kept whatever the AXI response: after an error the block is written with no
            # element enabled, `block.keep`, so its columns' enables need not wait for the lookup.)
            for e in range(n):
                m.d.sync += block.kept[e][index].eq(elems[e])
            with m.If(out.last):
                m.d.sync += [block.complete.eq(1), block.count.eq(out.elems), block.local.eq(out.local)]
                m.d.sync += [
                    block.rows.eq(Cat(1, *(index >= k for k in range(1, n)))),
                    block.keep.eq(keep),
                    block.code.eq(error),
                ]
        busy, block_done = self._write_block(m, block)
        # Every other row waits for the block stage and a block waiting for it: the stage owns the
        # write port and reports its block first, so descriptors complete in order.
        free = ~busy & ~block.complete
        may = free & (~out.last | self._done_request.ready)  # the last write waits until `done` can be taken
        # A row placed at column `col` > 0 writes only its own elements (the CONV2D loop packs
        # several kernel positions into one row; the one at column 0 zero-fills the rest).
        if self.row_units_max <= self.lanes:  # the gearbox placed the row at its column
            shifted = filled[: self.sp_bits]
        else:
            shifted = (filled[: self.sp_bits] << Cat(C(0, _log2(cfg.in_bits)), out.col))[: self.sp_bits]
        placed = _span(out.col, out.elems, n, n)  # (col < n)
        row_offer = full & out.sp_row & may
        with m.If(free):
            m.d.comb += [
                sp.valid.eq(row_offer),
                sp.payload.addr.eq(out.local),
                sp.payload.data.eq(shifted),
                sp.payload.mask.eq(Mux(keep, Mux(out.col == 0, (1 << n) - 1, placed), 0)),
            ]
        acc = self.acc_write
        m.d.comb += [
            acc.valid.eq(full & out.acc_row & may),
            acc.payload.addr.eq(out.local),
            acc.payload.data.eq(filled[: self.acc_bits_row]),
            acc.payload.mask.eq(Mux(keep, Cat(k < out.elems for k in range(cfg.cols)), 0)),
            acc.payload.accumulate.eq(out.accumulate),
        ]
        written = (free & row_offer & sp.ready) | (acc.valid & acc.ready)  # (as in `_write_block`)
        reported = (full & out.skip & may) | written  # rows that end their descriptor here
        m.d.comb += [
            release.eq(keeping | (reported & (~out.last | self._done_request.ready))),
            self._done_request.valid.eq(block_done | (full & out.last & reported)),
        ]
        with m.If(free):
            m.d.comb += [self._done_request.payload.code.eq(error), self._done_request.payload.error.eq(error != 0)]
        return busy | block.complete | held

    def _register_sp_write(self, m: Module, request, done) -> Value:
        """``sp_write`` and ``done`` from registers that take ``request`` and ``done`` whenever they
        are empty or taken: the scratchpad's column enables, addresses and data then start at
        flip-flops, not at the rows queue's LUT-RAM through the writer's masks (the tile's
        scratchpad always takes a write, and its gate a report, so neither register holds one
        back). A descriptor's last row and its report leave together, so ``done`` still comes
        after the write it reports (a reader told by it reads the row as written). Returns whether
        a write or a report is held (the engine is not idle)."""
        register_stage(m, request, self.sp_write)
        register_stage(m, done, self.done)
        return self.sp_write.valid | self.done.valid

    def _write_block(self, m: Module, block: "_Block"):
        """The transposed block stage: takes a complete block when it is free or writing its last
        row, writes one local row per cycle, then reports the descriptor. Returns (busy, done):
        busy while it owns the write port, done when its descriptor is reported (``done`` carries
        its code). Drives ``block.taken``."""
        cfg, n, sp = self.cfg, self.dim, self._sp_request
        rows = Signal(data.ArrayLayout(data.ArrayLayout(cfg.in_bits, n), n))
        busy = Signal()
        row = Signal(range(n))
        count = Signal(range(n + 1))
        local = Signal(16)
        kept = Signal()  # no AXI error: the rows are written with a full mask
        code = Signal(4)
        inside = Signal(n)  # the elements within the block's rows (zeros past them)
        final = row + 1 == count
        offer = ~final | self._done_request.ready
        with m.If(busy):
            m.d.comb += [
                sp.valid.eq(offer),
                sp.payload.addr.eq(local + row),
                sp.payload.data.eq(Cat(Mux(inside[k], rows[row][k], 0) for k in range(n))),
                sp.payload.mask.eq(Mux(kept, (1 << n) - 1, 0)),
                self._done_request.payload.code.eq(code),
                self._done_request.payload.error.eq(code != 0),
            ]
        # From the stage's own offer, not `sp.valid`: that also carries the held row's offer (the
        # rows queue's LUT-RAM read), which the timing analysis follows into `block.taken` and the
        # enables of the whole block although `busy` masks it.
        written = busy & offer & sp.ready
        done = written & final
        m.d.comb += block.taken.eq(block.complete & (~busy | done))
        with m.If(written):
            m.d.sync += row.eq(row + 1)
            with m.If(final):
                m.d.sync += busy.eq(0)
        with m.If(block.taken):  # after the lines above: a block may come in as the previous one ends
            m.d.sync += [busy.eq(1), row.eq(0), count.eq(block.count), local.eq(block.local), kept.eq(block.keep)]
            m.d.sync += [code.eq(block.code), inside.eq(block.rows)] + [rows[e].eq(block.kept[e]) for e in range(n)]
        return busy, done


class _AxiErrors:
    """The first AXI error response of each descriptor in work, for the writer to look up by tag.

    Responses come in descriptor order (one AXI ID), and so do the rows the writer writes, so the
    errors form a queue of (tag, DECERR): one is noted as its response arrives, unless the error
    noted last, still queued, is the same tag's; the head is the writer's if its tag is that of
    the row being written, and leaves in the cycle after the descriptor's last row (from a
    register: the writer's release comes from the local memories' ready and ran into the queue's
    level and read pointer; the writer takes no row in that cycle). Every descriptor whose
    rows are yet to be written issued its bursts after every queued one's, so the queue never
    holds more than the tags in work (fewer than 2^tag_bits). This takes a small LUT-RAM queue
    instead of a register pair per tag, each decoded for set and clear, behind a tag multiplexer."""

    def __init__(self, m: Module, tag_bits: int) -> None:
        self.layout = data.StructLayout({"tag": tag_bits, "decerr": 1})
        self.q = m.submodules.axi_errors = fifo.SyncFIFO(width=self.layout.size, depth=1 << tag_bits)
        self.last = Signal(tag_bits, name="axi_error_last")  # the tag noted last
        self.retiring = Signal(name="axi_error_retiring")  # the head leaves in this cycle

    def note(self, m: Module, error, tag, decerr) -> None:
        """An error response for ``tag`` in this cycle (``error``)."""
        again = self.q.r_rdy & (self.last == tag)
        m.d.comb += [self.q.w_en.eq(error & ~again), self.q.w_data.eq(Cat(tag, decerr))]
        with m.If(self.q.w_en):
            m.d.sync += self.last.eq(tag)

    def of(self, tag) -> tuple[Value, Value]:
        """(an AXI error, it was a DECERR) for the descriptor of ``tag``, the writer's."""
        head = data.View(self.layout, self.q.r_data)
        return self.q.r_rdy & (head.tag == tag), head.decerr

    def retire(self, m: Module, leaves) -> None:
        """The head's descriptor leaves the writer (its last row, with the head its error); the
        head leaves the queue in the next cycle (``retiring``)."""
        m.d.sync += self.retiring.eq(leaves)
        m.d.comb += self.q.r_en.eq(self.retiring)


class _Block:
    """A transposed block being kept: its columns, and once its last row is in (``complete``) the
    parameters the block stage takes with it (``taken``)."""

    def __init__(self, in_bits: int, n: int) -> None:
        self.kept = [Signal(data.ArrayLayout(in_bits, n), name=f"kept_{e}") for e in range(n)]
        self.complete, self.taken = Signal(name="block_complete"), Signal(name="block_taken")
        self.count = Signal(range(n + 1), name="block_count")
        self.rows = Signal(n, name="block_rows")  # which of its n element places hold a row
        self.local = Signal(16, name="block_local")
        self.keep = Signal(name="block_keep")
        self.code = Signal(4, name="block_code")


class DmaWrite(_Engine):
    """Scratchpad / accumulator → memory (kinds 2 and 3), one descriptor at a time: registered
    (1 cycle), checked and planned (1 cycle), transferred, reported. Local rows are read under a
    credit count so that the valid-only scratchpad responses always find room in a
    ``store_depth``-row FIFO."""

    def __init__(self, cfg: AccelConfig, store_depth: int = 4) -> None:
        self.store_depth = store_depth
        sp_row = data.ArrayLayout(cfg.in_bits, cfg.dim)
        acc_row = data.ArrayLayout(cfg.acc_bits, cfg.cols)
        valid_only = wiring.Signature({"valid": Out(1), "payload": Out(data.StructLayout({"data": sp_row}))})
        members = {
            "sp_read": Out(stream.Signature(data.StructLayout({"addr": range(cfg.sp_rows)}))),
            "sp_read_data": In(valid_only),
            "acc_read": Out(
                stream.Signature(data.StructLayout({"addr": range(cfg.acc_rows), "scale": 32, "act": 2, "out": 2}))
            ),
            "acc_read_data": In(stream.Signature(data.StructLayout({"data": acc_row}))),
            "bytes_written": Out(32),
        }
        super().__init__(cfg, members, max_reads=4)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.wgear = wgear = Gearbox(self.beat_bytes, self.unit, parallel=True)
        info_layout = self._burst_info(tagged=False)
        m.submodules.bursts = bursts = _BurstQueue(info_layout.size, self.max_reads)

        # The descriptor register; the engine reads it as a store's (`d`, `_as_store`).
        held = Signal(DESCRIPTOR)
        d, offered = self._as_store(m, held, "d"), self._as_store(m, self.cmd.payload, "offered")
        code = Signal(4)
        row_units = Signal(range(self.row_units_max + 1))
        write_done = Signal()
        axi_error = Signal(4)  # code of an AXI error response seen this cycle, else 0
        # The check runs on the registered descriptor in `checking` (what is offered comes through
        # the store gate from the loop's queues): the planner and the row reader are set up in that
        # state whatever the check says, so their setup does not wait for its carry chains, and a
        # refused descriptor goes to `report` without issuing anything.
        check = Signal(4)
        # A plain state register compared in if-chains rather than m.FSM/m.Switch: Yosys prints
        # switches as case statements without a default, which Verilator's CASEINCOMPLETE flags.
        idle, checking, write, report = range(4)
        state = Signal(range(4))
        setup, writing = state == checking, state == write
        m.d.comb += [
            self.cmd.ready.eq(state == idle),
            self.idle.eq(state == idle),
            self.done.valid.eq(state == report),
            self.done.payload.code.eq(code),
            self.done.payload.error.eq(code != 0),
        ]
        # The descriptor register follows the command while idle, so its enable is the registered
        # state alone: `cmd.valid` comes through the store gate's token logic from the decoder.
        # So does the segment shape (`rows · elems`, a multiplier, and the stride's compare), as the
        # load engine's is registered: the planner's setup then starts at flip-flops (the
        # descriptor → multiplier → `left` path was 13.57 ns at seed 2).
        shape, load_shape = self._shape_registers(offered)
        with m.If(state == idle):
            m.d.sync += [held.eq(self.cmd.payload), *load_shape]
        m.d.comb += check.eq(self._check(m, d))
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += state.eq(checking)
        with m.If(setup):
            m.d.sync += [code.eq(check), row_units.eq(self._row_units(d))]
            m.d.sync += state.eq(Mux(check != 0, report, write))
        with m.If(writing & write_done):
            m.d.sync += state.eq(report)
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += state.eq(idle)
        with m.If((code == 0) & (axi_error != 0) & writing):
            m.d.sync += code.eq(axi_error)

        more = self._planner(m, d, setup, writing, "aw", bursts, {}, shape, foresee=False)
        self._read_local(m, d, wgear, row_units, setup, writing, check != 0)
        self._write_beats(m, wgear, bursts, info_layout, setup, writing, more, write_done, axi_error)
        return m

    @staticmethod
    def _as_store(m: Module, desc, name: str):
        """``desc`` as a store's: kind 2 or 3, not transposed, no zero-fill, no accumulation
        (rtl/decode.py), so the check and the planner do not decode the load-only cases."""
        d = Signal(DESCRIPTOR, name=name)
        m.d.comb += [d.eq(desc), d.kind[1].eq(1), d.transpose.eq(0), d.zero.eq(0), d.accumulate.eq(0)]
        return d

    def _read_local(self, m: Module, d, wgear, row_units, setup, writing, refused) -> None:
        """Local rows (under credits) into a FIFO, then as chunks into the write gearbox."""
        cfg, nb = self.cfg, self.beat_bytes
        depth = self.store_depth
        m.submodules.rows = rows = fifo.SyncFIFO(width=self.row_bits, depth=depth)
        # The read request comes straight from registers (it feeds the memories' arbitration and
        # block RAM address): the next row's address is kept as it counts up, and "rows left to
        # request" and "room for another row" as flags. "Rows left" is set only for a descriptor
        # that goes on to `write`, and is clear again before it leaves (its last burst's response
        # waits for every row), so the request's valid needs no state decode.
        # The request's ready comes from the memories' arbitration in other blocks, late: it reaches
        # two flip-flops (`issued`, `stepped`) and the small credit count, not the wide registers.
        # The address and the rows left are brought up to date a cycle later, from those: the row
        # requested is `nxt` in the cycle after a request or the setup (`stepped`), which then
        # moves into `address` as `nxt` steps on, and `address` otherwise.
        issued = Signal()  # a row was requested in the cycle before
        stepped = Signal()  # ... or the descriptor was set up
        to_issue = Signal(16)  # rows not yet requested before the cycle before
        one_left = Signal()  # to_issue == 1
        more_sp, more_acc = Signal(), Signal()  # rows left to request before the cycle before, by memory
        local_rows = range(max(cfg.sp_rows, cfg.acc_rows))
        address, nxt = Signal(local_rows), Signal(local_rows)
        current = Mux(stepped, nxt, address)  # the row to request
        gone = issued & one_left  # the last row went in the cycle before
        credits = Signal(range(depth + 1))  # rows requested and not yet consumed
        room = Signal()  # credits < depth
        m.d.comb += [
            self.sp_read.valid.eq(room & more_sp & ~gone),
            self.sp_read.payload.addr.eq(current),
            self.acc_read.valid.eq(room & more_acc & ~gone),
            self.acc_read.payload.addr.eq(current),
            self.acc_read.payload.scale.eq(d.scale),
            self.acc_read.payload.act.eq(d.act),
            self.acc_read.payload.out.eq(d.out),
            # Always ready: every row requested has its place in `rows` (the credits), as the
            # scratchpad's valid-only responses need.
            self.acc_read_data.ready.eq(1),
            rows.w_en.eq(self.sp_read_data.valid | self.acc_read_data.valid),
            rows.w_data.eq(
                Mux(self.sp_read_data.valid, self.sp_read_data.payload.data, self.acc_read_data.payload.data)
            ),
        ]
        issue = (self.sp_read.valid & self.sp_read.ready) | (self.acc_read.valid & self.acc_read.ready)

        # Memory bytes of the row: scratchpad rows and full read-outs as they are; a narrow
        # read-out keeps the low bits of each accumulator slot.
        narrow_bits = 8 * element_bytes(cfg, DmaKind.ACC_MEM, out=0)
        narrow = Cat(rows.r_data[k * cfg.acc_bits : k * cfg.acc_bits + narrow_bits] for k in range(cfg.cols))
        packed = Signal(self.row_bits)
        # Whether the read-out is narrow, a register set up with the descriptor: it chooses every
        # bit of the row on its way to the gearbox's ring, not the descriptor's decode.
        narrow_out = Signal(name="narrow_out")
        with m.If(setup):
            m.d.sync += narrow_out.eq((d.kind == DmaKind.ACC_MEM) & (d.out == 0))
        m.d.comb += packed.eq(Mux(narrow_out, narrow, rows.r_data))
        chunks = math.ceil(self.row_bytes_max / nb)
        chunk = Signal(range(max(chunks, 2)))
        remaining = Signal(range(self.row_units_max + 1))
        count, last = self._chunk_count(remaining, row_units)
        padded = Cat(packed, C(0, chunks * 8 * nb - self.row_bits))
        m.d.comb += [
            wgear.inp.valid.eq(writing & rows.r_rdy),
            wgear.inp.payload.data.eq(padded.word_select(chunk, 8 * nb)),
            wgear.inp.payload.count.eq(count),
        ]
        consumed = wgear.inp.valid & wgear.inp.ready & last
        m.d.comb += rows.r_en.eq(consumed)
        with m.If(wgear.inp.valid & wgear.inp.ready):
            with m.If(last):
                m.d.sync += [chunk.eq(0), *self._remaining(remaining, last, row_units)]
            with m.Else():
                m.d.sync += [chunk.eq(chunk + 1), *self._remaining(remaining, last)]
        m.d.sync += credits.eq(credits + issue - consumed)
        # Full after this cycle only if full now, or one short and a row is requested, with none consumed.
        m.d.sync += room.eq(consumed | (room & ~(issue & (credits == depth - 1))))
        m.d.sync += [issued.eq(issue), stepped.eq(issue)]
        with m.If(stepped):
            m.d.sync += [address.eq(nxt), nxt.eq(nxt + 1)]
        with m.If(issued):
            m.d.sync += [to_issue.eq(to_issue - 1), one_left.eq(to_issue == 2)]
            with m.If(one_left):
                m.d.sync += [more_sp.eq(0), more_acc.eq(0)]
        with m.If(setup):  # a refused descriptor's other registers are never used: it never writes
            m.d.sync += [
                issued.eq(0),
                stepped.eq(1),
                to_issue.eq(d.rows),
                one_left.eq(d.rows == 1),
                more_sp.eq((d.kind == DmaKind.SP_MEM) & ~refused),
                more_acc.eq((d.kind == DmaKind.ACC_MEM) & ~refused),
                nxt.eq(d.local_addr),
                credits.eq(0),
                room.eq(1),
                chunk.eq(0),
                *self._remaining(remaining, last, self._row_units(d)),
            ]

    def _write_beats(self, m: Module, wgear, bursts, burst_info, setup, writing, issue_more, write_done, axi_error):
        """W beats from the write gearbox at their lanes, with strobes; B responses counted."""
        axi, nu = self.m_axi, self.lanes
        info = data.View(burst_info, bursts.r_data)
        fire = Signal()
        # The beat's first lane, lane count and whether it is the last, as registers: loaded from
        # the burst queue's entry as it moves into the head (its lane, `first_count`, `single`),
        # and as a beat goes, the next beat's (lane 0, to the end of the bus or to the burst's end).
        # So the gearbox's request count, its `level >= count` and the W handshake (which enables
        # the queue's head, the gearbox's level and head) start at flip-flops.
        # The beats after the current one are counted down (`after`), and whether the next is the
        # last (`after == 1`) is a register beside them, so the next beat's count is chosen by it.
        nxt = data.View(burst_info, bursts.r_next)
        after = Signal(8, name="beats_after")
        next_last = Signal(name="beat_next_last")
        lane = Signal(range(nu), name="beat_lane")
        count = Signal(range(nu + 1), name="beat_count")
        last = Signal(name="beat_last")
        end = Mux(last, info.end, nu)
        self._beat_count = count
        # (The next count also goes to the gearbox, which keeps `level >= count` as a register.)
        count_next = Mux(bursts.loading, nxt.first_count, Mux(writing & fire, Mux(next_last, info.end, nu), count))
        m.d.sync += count.eq(count_next)
        m.d.comb += wgear.req_next_count.eq(count_next)
        with m.If(bursts.loading):
            m.d.sync += [lane.eq(nxt.lane), last.eq(nxt.single)]
            m.d.sync += [after.eq(nxt.len), next_last.eq(nxt.len == 1)]
        with m.Elif(writing & fire):
            m.d.sync += [lane.eq(0), last.eq(next_last)]
            m.d.sync += [after.eq(after - 1), next_last.eq(after == 2)]
        ones = (1 << nu) - 1
        used = (C(ones, nu) << lane)[:nu] & ~(C(ones, nu) << end)[:nu]  # the beat's lanes
        m.d.comb += [
            wgear.req.valid.eq(writing & bursts.r_rdy),
            wgear.req.payload.lane.eq(lane),
            wgear.req.payload.count.eq(self._beat_count),
            axi.wvalid.eq(wgear.out.valid),
            axi.wdata.eq(wgear.out.payload),
            axi.wstrb.eq(Cat(used[k].replicate(self.unit) for k in range(nu))),
            axi.wlast.eq(last),
            wgear.out.ready.eq(axi.wready),
        ]
        m.d.comb += fire.eq(axi.wvalid & axi.wready)
        with m.If(writing & fire & last):
            m.d.comb += bursts.r_en.eq(1)
        self._count_bytes(m, self.bytes_written, writing & fire)

        outstanding = Signal(18)  # bursts issued on AW whose B response has not arrived
        aw_fire = axi.awvalid & axi.awready
        m.d.comb += axi.bready.eq(1)
        b_fire = axi.bvalid
        m.d.sync += outstanding.eq(outstanding + aw_fire - b_fire)
        with m.If(b_fire & (axi.bresp == AXI_RESP_SLVERR)):
            m.d.comb += axi_error.eq(DmaError.SLVERR)
        with m.If(b_fire & (axi.bresp == AXI_RESP_DECERR)):
            m.d.comb += axi_error.eq(DmaError.DECERR)
        m.d.comb += write_done.eq(~issue_more & (outstanding == 0))


class _BurstQueue(wiring.Component):
    """The write engine's burst queue: cycle for cycle ``SyncFIFOBuffered(depth=depth)`` (the head
    in the register ``r_data``), and besides it the entry that moves into the head in this cycle
    (``r_next``, the storage's asynchronous read) and when (``loading``), so that the engine keeps
    registers computed from the head as it is loaded."""

    def __init__(self, width: int, depth: int) -> None:
        assert depth >= 2
        self.width, self.depth = width, depth
        super().__init__(
            {
                "w_en": In(1),
                "w_data": In(width),
                "w_rdy": Out(1),
                "r_en": In(1),
                "r_data": Out(width),
                "r_rdy": Out(1),
                "r_next": Out(width),
                "loading": Out(1),
                "level": Out(range(depth + 1)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        held = self.depth - 1  # entries in the storage, the head aside
        slots = 1 << (held - 1).bit_length()  # a power of two: the pointers wrap by themselves
        inner = Signal(range(held + 1))
        m.submodules.storage = storage = Memory(shape=self.width, depth=slots, init=[])
        w_port, r_port = storage.write_port(), storage.read_port(domain="comb")
        produce, consume = Signal(range(slots)), Signal(range(slots))
        do_write = self.w_en & self.w_rdy
        do_read = (inner != 0) & (~self.r_rdy | self.r_en)
        m.d.comb += [
            self.w_rdy.eq(inner != held),
            w_port.addr.eq(produce),
            w_port.data.eq(self.w_data),
            w_port.en.eq(do_write),
            r_port.addr.eq(consume),
            self.r_next.eq(r_port.data),
            self.loading.eq(do_read),
            self.level.eq(inner + self.r_rdy),
        ]
        with m.If(do_write):
            m.d.sync += produce.eq(produce + 1)
        with m.If(do_read):
            m.d.sync += [consume.eq(consume + 1), self.r_data.eq(r_port.data), self.r_rdy.eq(1)]
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        with m.If(do_write & ~do_read):
            m.d.sync += inner.eq(inner + 1)
        with m.Elif(do_read & ~do_write):
            m.d.sync += inner.eq(inner - 1)
        return m


def share_axi(m: Module, port, reader: _Engine, writer: _Engine) -> None:
    """One AXI4 port for two engines: the reader owns AR/R, the writer AW/W/B."""
    for name, member in port.signature.members.items():
        engine = reader if name.startswith(("ar", "r")) else writer
        inner = getattr(engine.m_axi, name)
        if member.flow == Out:  # ``port`` is the enclosing component's own master port
            m.d.comb += getattr(port, name).eq(inner)
        else:
            m.d.comb += inner.eq(getattr(port, name))


class Dma(wiring.Component):
    """Both directions behind one descriptor stream, as the DMA test top uses them: a read engine
    and a write engine on one AXI4 port. Descriptors of one direction pipeline; a change of
    direction waits until the other engine is idle, so ``done`` reports in descriptor order."""

    def __init__(self, cfg: AccelConfig, max_reads: int = 4, store_depth: int = 4) -> None:
        self.cfg, self.max_reads, self.store_depth = cfg, max_reads, store_depth
        reader, writer = DmaRead(cfg, max_reads), DmaWrite(cfg, store_depth)
        self._engines = reader, writer
        members = {
            "cmd": In(stream.Signature(DESCRIPTOR)),
            "done": Out(stream.Signature(DONE)),
            "m_axi": Out(Axi4Signature(cfg.dma_bits)),
        }
        for engine in (reader, writer):
            for name, member in engine.signature.members.items():
                if name not in (*members, "idle"):
                    members[name] = member
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        reader, writer = self._engines
        m.submodules.read, m.submodules.write = reader, writer
        share_axi(m, self.m_axi, reader, writer)
        for engine in (reader, writer):
            for name in engine.signature.members:
                if name in ("cmd", "done", "m_axi", "idle"):
                    continue
                outer, inner = getattr(self, name), getattr(engine, name)
                if engine.signature.members[name].is_signature:
                    wiring.connect(m, wiring.flipped(outer), inner)
                else:
                    m.d.comb += outer.eq(inner)  # the byte counters
        write = self.cmd.payload.kind[1]
        for engine, mine, other in ((reader, ~write, writer), (writer, write, reader)):
            m.d.comb += [
                engine.cmd.valid.eq(self.cmd.valid & mine & other.idle),
                engine.cmd.payload.eq(self.cmd.payload),
                engine.done.ready.eq(self.done.ready),
            ]
        m.d.comb += [
            self.cmd.ready.eq(Mux(write, writer.cmd.ready & reader.idle, reader.cmd.ready & writer.idle)),
            self.done.valid.eq(reader.done.valid | writer.done.valid),
            self.done.payload.eq(Mux(reader.done.valid, reader.done.payload, writer.done.payload)),
        ]
        return m

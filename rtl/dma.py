"""The tile's DMA: 2-D strided transfers between main memory (AXI4 master) and the local memories.

One descriptor runs at a time, in four phases: the descriptor is registered (1 cycle), checked and
turned into a memory plan (1 cycle), transferred, and reported on ``done``. A refused descriptor
goes straight from the check to ``done``.

Memory side. A transfer is a list of *segments*: the whole block when rows are contiguous in
memory (``dram_stride`` equals the row's byte length, or one row), else one segment per row. A
planner cuts segments into INCR bursts of at most 256 beats that never cross a 4 KiB boundary and
issues one burst per cycle on AR (or AW), as long as fewer than ``max_reads`` bursts are in flight.
Addresses are issued aligned down to the bus width; the lanes a burst really uses (first lane of
its first beat, end lane of its last) travel in a small FIFO next to the burst.

Data path. Element alignment only needs byte lanes, so both directions go through a ``Gearbox``:
a 2-beat byte buffer that takes chunks of up to one beat at any lane and gives chunks of up to one
beat at any lane, one of each per cycle. Reads: R beats (useful lanes only) in, row chunks of the
row's byte length out (chunk ``j`` = row bytes ``[j·B, j·B+B)``). Writes: row chunks in, W beats at
their lanes out, with byte strobes.

Local side (docs/tile.md): mem→sp and mem→acc write one assembled row per cycle; a transposed
mem→sp load writes memory row ``r`` as one element (column ``r``) of ``elems`` scratchpad rows, so
it takes ``rows · elems`` write cycles (row ``r = 0`` writes whole rows, which zero-fills them).
acc→mem and sp→mem issue row reads under a credit count so that the valid-only scratchpad
responses always find room in a ``store_depth``-row FIFO.

Errors. A checked descriptor that fails gets its code without any transfer. An AXI error response
(SLVERR, DECERR) does not stop the transfer: every planned burst still completes, so nothing is
left outstanding, and ``done`` reports the first error. After a read error, local writes carry an
empty mask (the local memory is not changed further).
"""

import math

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.axi import AXI_BURST_INCR, AXI_RESP_DECERR, AXI_RESP_SLVERR, Axi4Signature
from rtl.config import AccelConfig
from rtl.ops import dma_desc_layout

__all__ = [
    "DESCRIPTOR",
    "DONE",
    "Dma",
    "DmaError",
    "DmaKind",
    "Gearbox",
    "element_bytes",
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
    """Byte realignment between two chunked streams of at most ``nbytes`` bytes per transfer.

    ``inp`` delivers ``count`` bytes taken from byte lane ``lane`` of ``data``. A ``req`` asks for
    ``count`` bytes placed at lane ``lane`` of ``out``; ``out`` is valid once that many bytes are
    buffered and ``req`` is accepted together with ``out``. Lanes of ``out`` outside the request hold
    garbage. One input and one output chunk per cycle; an input waits while the buffer could not
    take a whole beat after this cycle's output.
    """

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        lane, count = range(nbytes), range(nbytes + 1)
        super().__init__(
            {
                "inp": In(stream.Signature(data.StructLayout({"data": 8 * nbytes, "lane": lane, "count": count}))),
                "req": In(stream.Signature(data.StructLayout({"lane": lane, "count": count}))),
                "out": Out(stream.Signature(8 * nbytes)),
                "level": Out(range(2 * nbytes + 1)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        nb = self.nbytes
        buf = Signal(16 * nb)
        cnt = self.level

        m.d.comb += self.out.valid.eq(self.req.valid & (cnt >= self.req.payload.count))
        m.d.comb += self.out.payload.eq(buf[: 8 * nb] << Cat(C(0, 3), self.req.payload.lane))
        out_fire = self.out.valid & self.out.ready
        m.d.comb += self.req.ready.eq(out_fire)

        taken = Signal(range(nb + 1))
        m.d.comb += taken.eq(Mux(out_fire, self.req.payload.count, 0))
        rest = Signal(16 * nb)
        after = Signal(range(2 * nb + 1))
        m.d.comb += [rest.eq(buf >> Cat(C(0, 3), taken)), after.eq(cnt - taken)]

        # Accepting only when at most one beat stays buffered keeps ready independent of the
        # input's payload and can never deadlock: an output waits only while fewer than `nb` bytes are held.
        m.d.comb += self.inp.ready.eq(after <= nb)
        in_fire = self.inp.valid & self.inp.ready
        aligned = Signal(8 * nb)
        placed = Signal(16 * nb)
        m.d.comb += [
            aligned.eq(self.inp.payload.data >> Cat(C(0, 3), self.inp.payload.lane)),
            placed.eq(aligned << Cat(C(0, 3), after)),
        ]
        merged = Cat(Mux(i < after, rest.word_select(i, 8), placed.word_select(i, 8)) for i in range(2 * nb))
        m.d.sync += [
            buf.eq(Mux(in_fire, merged, rest)),
            cnt.eq(after + Mux(in_fire, self.inp.payload.count, 0)),
        ]
        return m


class Dma(wiring.Component):
    """See the module docstring and docs/tile.md "DMA". ``max_reads`` bursts may be in flight."""

    def __init__(self, cfg: AccelConfig, max_reads: int = 4, store_depth: int = 4) -> None:
        self.cfg = cfg
        self.max_reads = max_reads
        self.store_depth = store_depth
        self.beat_bytes = cfg.dma_bits // 8
        self.dim = cfg.dim
        self.sp_bits = self.dim * cfg.in_bits
        self.acc_bits_row = cfg.cols * cfg.acc_bits
        self.row_bits = max(self.sp_bits, self.acc_bits_row)
        self.row_bytes_max = self.row_bits // 8
        sp_addr = range(cfg.sp_rows)
        acc_addr = range(cfg.acc_rows)
        sp_row = data.ArrayLayout(cfg.in_bits, self.dim)
        acc_row = data.ArrayLayout(cfg.acc_bits, cfg.cols)
        valid_only = wiring.Signature({"valid": Out(1), "payload": Out(data.StructLayout({"data": sp_row}))})
        super().__init__(
            {
                "cmd": In(stream.Signature(DESCRIPTOR)),
                "done": Out(stream.Signature(DONE)),
                "m_axi": Out(Axi4Signature(cfg.dma_bits)),
                "sp_write": Out(
                    stream.Signature(data.StructLayout({"addr": sp_addr, "data": sp_row, "mask": self.dim}))
                ),
                "sp_read": Out(stream.Signature(data.StructLayout({"addr": sp_addr}))),
                "sp_read_data": In(valid_only),
                "acc_write": Out(
                    stream.Signature(
                        data.StructLayout({"addr": acc_addr, "data": acc_row, "mask": cfg.cols, "accumulate": 1})
                    )
                ),
                "acc_read": Out(
                    stream.Signature(data.StructLayout({"addr": acc_addr, "scale": 32, "act": 2, "out": 2}))
                ),
                "acc_read_data": In(stream.Signature(data.StructLayout({"data": acc_row}))),
                "bytes_read": Out(32),
                "bytes_written": Out(32),
            }
        )

    # -- top level ------------------------------------------------------------------------------

    def elaborate(self, platform) -> Module:
        m = Module()
        nb = self.beat_bytes
        m.submodules.rgear = rgear = Gearbox(nb)
        m.submodules.wgear = wgear = Gearbox(nb)
        burst_info = data.StructLayout({"len": 8, "lane": range(nb), "end": range(nb + 1)})
        m.submodules.bursts = bursts = fifo.SyncFIFOBuffered(width=burst_info.size, depth=self.max_reads)

        d = Signal(DESCRIPTOR)
        code = Signal(4)
        row_bytes = Signal(range(self.row_bytes_max + 1))
        setup = Signal()  # one cycle: reset the per-transfer counters
        reading = Signal()
        writing = Signal()
        read_done = Signal()
        write_done = Signal()
        axi_error = Signal(4)  # code of an AXI error response seen this cycle, else 0

        check = self._check(m, d)
        # A plain state register compared in if-chains rather than m.FSM/m.Switch: Yosys prints
        # switches as case statements without a default, which Verilator's CASEINCOMPLETE flags.
        idle, checking, read, write, report = range(5)
        state = Signal(range(5))
        m.d.comb += [
            self.cmd.ready.eq(state == idle),
            setup.eq(state == checking),
            reading.eq(state == read),
            writing.eq(state == write),
            self.done.valid.eq(state == report),
            self.done.payload.code.eq(code),
            self.done.payload.error.eq(code != 0),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [d.eq(self.cmd.payload), state.eq(checking)]
        with m.If(setup):
            m.d.sync += [code.eq(check), row_bytes.eq(self._row_bytes(d))]
            m.d.sync += state.eq(Mux(check != 0, report, Mux(d.kind[1], write, read)))
        with m.If((reading & read_done) | (writing & write_done)):
            m.d.sync += state.eq(report)
        with m.If(self.done.valid & self.done.ready):
            m.d.sync += state.eq(idle)
        with m.If(((code == 0) & (axi_error != 0)) & (reading | writing)):
            m.d.sync += code.eq(axi_error)

        issue_more = self._planner(m, d, row_bytes, setup, reading, writing, bursts, burst_info)
        self._read_beats(m, rgear, bursts, burst_info, setup, reading, axi_error)
        self._assemble_rows(m, d, rgear, row_bytes, code, setup, reading, read_done)
        self._read_local(m, d, wgear, row_bytes, setup, writing)
        self._write_beats(m, wgear, bursts, burst_info, setup, writing, issue_more, write_done, axi_error)
        return m

    # -- descriptor check -----------------------------------------------------------------------

    def _elem_log2(self, d):
        cfg = self.cfg
        in_l = _log2(cfg.in_bits // 8)
        acc_l = _log2(cfg.acc_bits // 8)
        narrow_l = _log2(element_bytes(cfg, DmaKind.ACC_MEM, out=0))
        return Mux(d.kind[0] ^ d.kind[1], Mux(d.kind[1] & (d.out == 0), narrow_l, acc_l), in_l)

    def _row_bytes(self, d):
        return d.elems << self._elem_log2(d)

    def _check(self, m: Module, d):
        """The error code of a descriptor (0 if it may run); zero, size, alignment, range, in that order."""
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
        with m.Elif((d.elems > elem_max) | (transposed & (d.rows > self.dim))):
            m.d.comb += result.eq(DmaError.TOO_LARGE)
        with m.Elif(((d.dram_addr | d.dram_stride) & align) != 0):
            m.d.comb += result.eq(DmaError.MISALIGNED)
        with m.Elif(d.local_addr + local_rows > capacity):
            m.d.comb += result.eq(DmaError.RANGE)
        return result

    # -- burst planner (AR or AW) ---------------------------------------------------------------

    def _planner(self, m: Module, d, row_bytes, setup, reading, writing, bursts, burst_info):
        """Cut the transfer into bursts; push each burst's lanes into ``bursts`` as it is issued.

        Returns a signal that is 1 while bursts remain to be issued.
        """
        nb, lb = self.beat_bytes, _log2(self.beat_bytes)
        axi = self.m_axi
        seg_bits = 16 + (self.row_bytes_max).bit_length()
        addr = Signal(32)  # next byte to transfer
        base = Signal(32)  # start of the current segment
        left = Signal(seg_bits)  # bytes left in the current segment
        seg_len = Signal(seg_bits)
        segs = Signal(17)  # segments not yet finished

        with m.If(setup):
            contiguous = (d.rows == 1) | (d.dram_stride == self._row_bytes(d))
            length = Mux(contiguous, d.rows * self._row_bytes(d), self._row_bytes(d))
            m.d.sync += [
                addr.eq(d.dram_addr),
                base.eq(d.dram_addr),
                left.eq(length),
                seg_len.eq(length),
                segs.eq(Mux(contiguous, 1, d.rows)),
            ]

        lane = addr[:lb]
        to_page = Signal(range(PAGE_BYTES + 1))
        to_max = Signal(range(BURST_MAX_BEATS * nb + 1))
        m.d.comb += [to_page.eq(PAGE_BYTES - addr[:12]), to_max.eq(BURST_MAX_BEATS * nb - lane)]
        # Bytes of this burst: the rest of the segment, up to the 4 KiB page end and 256 beats.
        limit = Mux(to_max < to_page, to_max, to_page)
        take = Signal(seg_bits)
        m.d.comb += take.eq(Mux(left > limit, limit, left))
        last_byte = Signal(range(BURST_MAX_BEATS * nb))  # offset of the burst's last byte from its first beat
        m.d.comb += last_byte.eq(lane + take - 1)

        info = Signal(burst_info)
        m.d.comb += [info.len.eq(last_byte >> lb), info.lane.eq(lane), info.end.eq(last_byte[:lb] + 1)]
        more = segs != 0
        ar_valid = reading & more & bursts.w_rdy
        aw_valid = writing & more & bursts.w_rdy
        word = Cat(C(0, lb), addr[lb:])
        for ch, valid in (("ar", ar_valid), ("aw", aw_valid)):
            m.d.comb += [
                getattr(axi, f"{ch}valid").eq(valid),
                getattr(axi, f"{ch}addr").eq(word),
                getattr(axi, f"{ch}len").eq(info.len),
                getattr(axi, f"{ch}size").eq(lb),
                getattr(axi, f"{ch}burst").eq(AXI_BURST_INCR),
                getattr(axi, f"{ch}cache").eq(0b0011),  # normal, non-cacheable, bufferable
            ]
        fire = (ar_valid & axi.arready) | (aw_valid & axi.awready)
        m.d.comb += [bursts.w_en.eq(fire), bursts.w_data.eq(info)]
        with m.If(fire):
            with m.If(take == left):
                m.d.sync += [segs.eq(segs - 1), base.eq(base + d.dram_stride), left.eq(seg_len)]
                m.d.sync += addr.eq(base + d.dram_stride)
            with m.Else():
                m.d.sync += [addr.eq(addr + take), left.eq(left - take)]
        return more

    # -- read direction -------------------------------------------------------------------------

    def _beat_lanes(self, m: Module, info, beat):
        """First lane and byte count of beat ``beat`` of a burst, and whether it is the last."""
        first = beat == 0
        last = beat == info.len
        lane = Signal(range(self.beat_bytes), name="beat_lane")
        end = Signal(range(self.beat_bytes + 1), name="beat_end")
        m.d.comb += [lane.eq(Mux(first, info.lane, 0)), end.eq(Mux(last, info.end, self.beat_bytes))]
        return lane, end, last

    def _read_beats(self, m: Module, rgear, bursts, burst_info, setup, reading, axi_error) -> None:
        """R beats into the read gearbox, only their useful lanes."""
        axi = self.m_axi
        info = data.View(burst_info, bursts.r_data)
        beat = Signal(8)
        lane, end, last = self._beat_lanes(m, info, beat)
        active = reading & bursts.r_rdy
        m.d.comb += [
            rgear.inp.valid.eq(active & axi.rvalid),
            rgear.inp.payload.data.eq(axi.rdata),
            rgear.inp.payload.lane.eq(lane),
            rgear.inp.payload.count.eq(end - lane),
            axi.rready.eq(active & rgear.inp.ready),
        ]
        fire = rgear.inp.valid & rgear.inp.ready
        with m.If(fire & last):
            m.d.comb += bursts.r_en.eq(1)
        with m.If(fire):
            m.d.sync += [beat.eq(Mux(last, 0, beat + 1)), self.bytes_read.eq(self.bytes_read + end - lane)]
            with m.If(axi.rresp == AXI_RESP_SLVERR):
                m.d.comb += axi_error.eq(DmaError.SLVERR)
            with m.If(axi.rresp == AXI_RESP_DECERR):
                m.d.comb += axi_error.eq(DmaError.DECERR)
        with m.If(setup):
            m.d.sync += beat.eq(0)

    def _chunk_count(self, remaining):
        """Bytes in the next chunk of a row with ``remaining`` bytes left, and whether it is the last."""
        last = remaining <= self.beat_bytes
        return Mux(last, remaining, self.beat_bytes), last

    def _assemble_rows(self, m: Module, d, rgear, row_bytes, code, setup, reading, read_done) -> None:
        """Row chunks from the read gearbox into whole rows, then into the scratchpad or accumulator."""
        nb = self.beat_bytes
        chunks = math.ceil(self.row_bytes_max / nb)
        row = Signal(self.row_bits)
        held = Signal(self.row_bits)  # the complete row being written locally
        full = Signal()
        chunk = Signal(range(max(chunks, 2)))
        remaining = Signal(range(self.row_bytes_max + 1))
        rows_in = Signal(16)
        rows_out = Signal(16)
        release = Signal()  # the held row's (last) local write is accepted this cycle

        count, last = self._chunk_count(remaining)
        m.d.comb += [
            rgear.req.valid.eq(reading & (rows_in != d.rows)),
            rgear.req.payload.count.eq(count),
            rgear.out.ready.eq(~last | ~full | release),
        ]
        slots = [row[k * 8 * nb : (k + 1) * 8 * nb] for k in range(chunks)]
        merged = Cat(Mux(chunk == k, rgear.out.payload[: len(s)], s) for k, s in enumerate(slots))
        with m.If(release):
            m.d.sync += [full.eq(0), rows_out.eq(rows_out + 1)]
        with m.If(rgear.out.valid & rgear.out.ready):
            m.d.sync += row.eq(merged)
            with m.If(last):
                m.d.sync += [held.eq(merged), full.eq(1), chunk.eq(0), remaining.eq(row_bytes)]
                m.d.sync += rows_in.eq(rows_in + 1)
            with m.Else():
                m.d.sync += [chunk.eq(chunk + 1), remaining.eq(remaining - nb)]

        # Bytes past the row's length are zero: the scratchpad row is zero-filled beyond `elems`.
        filled = Cat(Mux(i < row_bytes, held.word_select(i, 8), 0) for i in range(self.row_bytes_max))
        keep = code == 0  # after an AXI error the local memory is left alone
        self._write_sp(m, d, filled, full, keep, rows_out, setup, release)
        self._write_acc(m, d, filled, full, keep, rows_out, release)
        m.d.comb += read_done.eq(rows_out == d.rows)
        with m.If(setup):
            m.d.sync += [full.eq(0), chunk.eq(0), remaining.eq(self._row_bytes(d)), rows_in.eq(0), rows_out.eq(0)]

    def _write_sp(self, m: Module, d, filled, full, keep, rows_out, setup, release) -> None:
        cfg, n = self.cfg, self.dim
        port = self.sp_write
        elem = Signal(range(n))  # transposed: the element of the held row being written
        transposed = d.transpose
        value = filled.word_select(elem, cfg.in_bits)
        column = Cat(Mux(rows_out == k, value, 0) for k in range(n))
        all_ones = (1 << n) - 1
        one_column = C(1, n) << rows_out[: max(1, (n - 1).bit_length())]
        m.d.comb += [
            port.valid.eq(full & (d.kind == DmaKind.MEM_SP)),
            port.payload.addr.eq(d.local_addr + Mux(transposed, elem, rows_out)),
            port.payload.data.eq(Mux(transposed, column, filled[: self.sp_bits])),
            # Memory row 0 of a transposed block writes whole rows, zero-filling the other columns.
            port.payload.mask.eq(Mux(keep, Mux(~transposed | (rows_out == 0), all_ones, one_column), 0)),
        ]
        fire = port.valid & port.ready
        with m.If(fire):
            m.d.sync += elem.eq(Mux(elem + 1 == d.elems, 0, elem + 1))
            m.d.comb += release.eq(~transposed | (elem + 1 == d.elems))
        with m.If(setup):
            m.d.sync += elem.eq(0)

    def _write_acc(self, m: Module, d, filled, full, keep, rows_out, release) -> None:
        cfg = self.cfg
        port = self.acc_write
        mask = Cat(k < d.elems for k in range(cfg.cols))
        m.d.comb += [
            port.valid.eq(full & (d.kind == DmaKind.MEM_ACC)),
            port.payload.addr.eq(d.local_addr + rows_out),
            port.payload.data.eq(filled[: self.acc_bits_row]),
            port.payload.mask.eq(Mux(keep, mask, 0)),
            port.payload.accumulate.eq(d.accumulate),
        ]
        with m.If(port.valid & port.ready):
            m.d.comb += release.eq(1)

    # -- write direction ------------------------------------------------------------------------

    def _read_local(self, m: Module, d, wgear, row_bytes, setup, writing) -> None:
        """Local rows (under credits) into a FIFO, then as chunks into the write gearbox."""
        cfg, nb = self.cfg, self.beat_bytes
        depth = self.store_depth
        m.submodules.rows = rows = fifo.SyncFIFOBuffered(width=self.row_bits, depth=depth)
        issued = Signal(16)
        credits = Signal(range(depth + 1))  # rows requested and not yet consumed
        can = writing & (issued != d.rows) & (credits != depth)
        m.d.comb += [
            self.sp_read.valid.eq(can & (d.kind == DmaKind.SP_MEM)),
            self.sp_read.payload.addr.eq(d.local_addr + issued),
            self.acc_read.valid.eq(can & (d.kind == DmaKind.ACC_MEM)),
            self.acc_read.payload.addr.eq(d.local_addr + issued),
            self.acc_read.payload.scale.eq(d.scale),
            self.acc_read.payload.act.eq(d.act),
            self.acc_read.payload.out.eq(d.out),
            self.acc_read_data.ready.eq(rows.w_rdy),
            rows.w_en.eq(self.sp_read_data.valid | (self.acc_read_data.valid & self.acc_read_data.ready)),
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
        m.d.comb += packed.eq(Mux((d.kind == DmaKind.ACC_MEM) & (d.out == 0), narrow, rows.r_data))
        chunks = math.ceil(self.row_bytes_max / nb)
        chunk = Signal(range(max(chunks, 2)))
        remaining = Signal(range(self.row_bytes_max + 1))
        count, last = self._chunk_count(remaining)
        padded = Cat(packed, C(0, chunks * 8 * nb - self.row_bits))
        m.d.comb += [
            wgear.inp.valid.eq(writing & rows.r_rdy),
            wgear.inp.payload.data.eq(padded.word_select(chunk, 8 * nb)),
            wgear.inp.payload.count.eq(count),
        ]
        consumed = wgear.inp.valid & wgear.inp.ready & last
        m.d.comb += rows.r_en.eq(consumed)
        with m.If(wgear.inp.valid & wgear.inp.ready):
            m.d.sync += [chunk.eq(Mux(last, 0, chunk + 1)), remaining.eq(Mux(last, row_bytes, remaining - nb))]
        m.d.sync += [issued.eq(issued + issue), credits.eq(credits + issue - consumed)]
        with m.If(setup):
            m.d.sync += [issued.eq(0), credits.eq(0), chunk.eq(0), remaining.eq(self._row_bytes(d))]

    def _write_beats(self, m: Module, wgear, bursts, burst_info, setup, writing, issue_more, write_done, axi_error):
        """W beats from the write gearbox at their lanes, with strobes; B responses counted."""
        axi, nb = self.m_axi, self.beat_bytes
        info = data.View(burst_info, bursts.r_data)
        beat = Signal(8)
        lane, end, last = self._beat_lanes(m, info, beat)
        ones = (1 << nb) - 1
        m.d.comb += [
            wgear.req.valid.eq(writing & bursts.r_rdy),
            wgear.req.payload.lane.eq(lane),
            wgear.req.payload.count.eq(end - lane),
            axi.wvalid.eq(wgear.out.valid),
            axi.wdata.eq(wgear.out.payload),
            axi.wstrb.eq((C(ones, nb) << lane)[:nb] & ~(C(ones, nb) << end)[:nb]),
            axi.wlast.eq(last),
            wgear.out.ready.eq(axi.wready),
        ]
        fire = axi.wvalid & axi.wready
        with m.If(writing & fire & last):
            m.d.comb += bursts.r_en.eq(1)
        with m.If(writing & fire):
            m.d.sync += [beat.eq(Mux(last, 0, beat + 1)), self.bytes_written.eq(self.bytes_written + end - lane)]

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
        with m.If(setup):
            m.d.sync += beat.eq(0)

"""The EXEC unit: runs EXEC operations (docs/isa.md) on the mesh.

For each operation it reads the weight tile from the scratchpad (read port B) into the mesh's
weight stream and the activation rows (read port A) into the mesh's input stream, then turns the
mesh's output rows into accumulator writes. Both feeders run ahead independently, so the next
operation's weights load while the current one streams, and the mesh switches tiles without a
bubble. Scratchpad reads have a fixed latency and no backpressure, so each feeder only issues a
read when its small buffer has room for the answer (credits).

Operations arrive validated (the decoder checks ranges), with a sequence number; ``done`` reports
each one after its last result row is written to the accumulator.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.mesh import Mesh, mesh_latency
from rtl.queue import Queue
from rtl.scratchpad import SP_READ_LATENCY
from rtl.signals import delayed

__all__ = ["ExecUnit", "exec_op_layout"]

# Rows buffered per feeder: covers the scratchpad's read latency plus the mesh's ready turnaround.
BUFFER = SP_READ_LATENCY + 3


def exec_op_layout(sp_addr_bits: int, acc_addr_bits: int) -> data.StructLayout:
    return data.StructLayout(
        {
            "b_addr": sp_addr_bits,
            "k_rows": 16,  # weight rows used; the rest enter the mesh as zeros (0: all rows)
            "a_addr": sp_addr_bits,
            "m": 16,
            "c_addr": acc_addr_bits,
            "accumulate": 1,
            "keep_weights": 1,
            "seq": 16,
        }
    )


class _Feeder:
    """Issues scratchpad reads for a run of rows and buffers the answers for a downstream stream."""

    def __init__(
        self, m: Module, name: str, width: int, extra_bits: int, depth: int = BUFFER, buffered: bool = True
    ) -> None:
        self.fifo = Queue(width=width + extra_bits, depth=depth, buffered=buffered)
        m.submodules[f"{name}_buf"] = self.fifo
        # Slots taken: rows in the buffer plus reads in flight (one counter, not the buffer's
        # level plus one of its own: no adder in front of the compare).
        self.used = Signal(range(depth + 1), name=f"{name}_used")
        self.room = Signal(name=f"{name}_room")
        m.d.comb += self.room.eq(self.used < depth)

    def count(self, m: Module, fire) -> None:
        """A read issued (``fire``) takes a slot; a row leaving the buffer frees one."""
        m.d.sync += self.used.eq(self.used + fire - (self.fifo.r_en & self.fifo.r_rdy))


class ExecUnit(wiring.Component):
    def __init__(self, cfg: AccelConfig, sp_addr_bits: int, acc_addr_bits: int) -> None:
        self.cfg = cfg
        self.sp_addr_bits, self.acc_addr_bits = sp_addr_bits, acc_addr_bits
        dim = max(cfg.rows, cfg.cols)
        sp_row = data.ArrayLayout(cfg.in_bits, dim)
        read_req = stream.Signature(data.StructLayout({"addr": sp_addr_bits}))
        read_rsp = wiring.Signature({"valid": Out(1), "payload": Out(data.StructLayout({"data": sp_row}))})
        acc_write = data.StructLayout(
            {"addr": acc_addr_bits, "data": data.ArrayLayout(cfg.acc_bits, cfg.cols), "accumulate": 1}
        )
        super().__init__(
            {
                "op": In(stream.Signature(exec_op_layout(sp_addr_bits, acc_addr_bits))),
                "done": Out(stream.Signature(data.StructLayout({"seq": 16}))),
                "sp_a": Out(read_req),
                "sp_a_data": In(read_rsp),
                "sp_b": Out(read_req),
                "sp_b_data": In(read_rsp),
                "acc_write": Out(wiring.Signature({"valid": Out(1), "payload": Out(acc_write)})),
                "rows_issued": Out(1),  # a valid activation row entered the mesh this cycle
                "busy": Out(1),  # an operation offered or in work
                "working": Out(1),  # an operation in work (taken, its last row not yet written)
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        tag = data.StructLayout({"addr": self.acc_addr_bits, "accumulate": 1, "last": 1})
        m.submodules.mesh = mesh = Mesh(cfg, tag_bits=tag.size, zero_d=True)  # d is never driven: zero

        # Each operation goes to both feeders, each queue holding the fields its feeder reads; the
        # weight side skips it when weights are kept.
        op = self.op.payload
        # K arrives checked (at most `rows`, rtl/decode.py), so its queue keeps the row counter's
        # width: the zero-row test is a compare of a few bits, not a carry chain of 16 into `fire`.
        w_fields = {"b_addr": op.b_addr, "k_rows": op.k_rows[: cfg.rows.bit_length()]}
        a_fields = {name: op[name] for name in ("a_addr", "c_addr", "accumulate", "keep_weights")}
        # The row feeder counts down from m - 1 and tests m == 1 here, on the way into its queue.
        a_fields |= {"m_less": (op.m - 1)[:16], "one_row": op.m == 1}
        w_layout = data.StructLayout({name: len(Value.cast(value)) for name, value in w_fields.items()})
        a_layout = data.StructLayout({name: len(Value.cast(value)) for name, value in a_fields.items()})
        m.submodules.w_ops = w_ops = fifo.SyncFIFOBuffered(width=w_layout.size, depth=4)
        m.submodules.a_ops = a_ops = fifo.SyncFIFOBuffered(width=a_layout.size, depth=4)
        m.submodules.seqs = seqs = fifo.SyncFIFOBuffered(width=16, depth=8)
        # Ready from the queues' levels alone, not from valid: the gate's offer runs on through
        # it into the loop's queue otherwise (part of the tile's longest ECP5 path).
        room = w_ops.w_rdy & a_ops.w_rdy & seqs.w_rdy
        take = self.op.valid & room
        m.d.comb += [
            self.op.ready.eq(room),
            w_ops.w_data.eq(Cat(*w_fields.values())),
            a_ops.w_data.eq(Cat(*a_fields.values())),
            seqs.w_data.eq(self.op.payload.seq),
            w_ops.w_en.eq(take & ~self.op.payload.keep_weights),
            a_ops.w_en.eq(take),
            seqs.w_en.eq(take),
        ]

        self._weight_feeder(m, mesh, data.View(w_layout, w_ops.r_data), w_ops)
        self._row_feeder(m, mesh, data.View(a_layout, a_ops.r_data), a_ops, tag)

        out_tag = data.View(tag, mesh.out.payload.tag)
        m.d.comb += [
            self.acc_write.valid.eq(mesh.out.valid),
            self.acc_write.payload.addr.eq(out_tag.addr),
            self.acc_write.payload.accumulate.eq(out_tag.accumulate),
            self.acc_write.payload.data.eq(mesh.out.payload.c),
        ]
        # Finished operations wait here for the token logic; it is as deep as `seqs`, so the last
        # row of an operation can always report at once.
        m.submodules.finished = finished = fifo.SyncFIFOBuffered(width=16, depth=8)
        m.d.comb += [
            finished.w_data.eq(seqs.r_data),
            finished.w_en.eq(mesh.out.valid & out_tag.last),
            seqs.r_en.eq(mesh.out.valid & out_tag.last),
            self.done.valid.eq(finished.r_rdy),
            self.done.payload.seq.eq(finished.r_data),
            finished.r_en.eq(self.done.ready),
        ]
        # Rows inside the mesh: it takes at most one a cycle and holds each `latency` cycles.
        in_mesh = Signal(range(mesh_latency(cfg) + 2))
        entered = mesh.inp.valid & mesh.inp.ready
        left = mesh.out.valid
        m.d.sync += in_mesh.eq(in_mesh + entered - left)
        m.d.comb += [
            self.rows_issued.eq(entered),
            # FIFO levels, not r_rdy: outputs lag writes, and busy must not dip in between.
            self.working.eq(
                (w_ops.level != 0) | (a_ops.level != 0) | (seqs.level != 0) | (in_mesh != 0) | (finished.level != 0)
            ),
            self.busy.eq(self.op.valid | self.working),
        ]
        return m

    def _weight_feeder(self, m: Module, mesh: Mesh, op, ops) -> None:
        """Read the `rows` rows of each weight tile and push them into the mesh's weight stream."""
        cfg = self.cfg
        # A whole next tile fits in the buffer while the mesh still holds the one after the current:
        # the mesh takes it the moment it flips, so steps of only `rows` activation rows stay back to back.
        # Its buffer's head is read from the storage as it is addressed (not buffered in a
        # register): the mesh registers the row it takes anyway, and a head register's enable
        # was the mesh's `ready`, one net to every bit of the row across the columns (ECP5:
        # 8.5 ns of routing).
        f = _Feeder(m, "w", cfg.cols * cfg.in_bits, 0, depth=max(BUFFER, 2 * cfg.rows), buffered=False)
        row = Signal(range(cfg.rows + 1))
        # Rows past the tile's K extent are zeros made here, so stale scratchpad data (a NaN times
        # a zero activation is still NaN) never reaches the sums.
        zero = (op.k_rows != 0) & (row >= op.k_rows)
        issue = ops.r_rdy & f.room & (row < cfg.rows)
        # The address steps in a register (the tile's first row reads `b_addr` as queued): no adder
        # between the counter and the scratchpad's port arbitration, whose ready comes back here.
        b_next = Signal(self.sp_addr_bits, name="b_next")
        b_first = Signal(init=1, name="b_first")  # row == 0, as a register: the address's select
        b_now = Mux(b_first, op.b_addr, b_next)
        m.d.comb += [self.sp_b.valid.eq(issue & ~zero), self.sp_b.payload.addr.eq(b_now)]
        fire = issue & (zero | self.sp_b.ready)
        with m.If(fire):
            m.d.sync += [row.eq(row + 1), b_next.eq(b_now + 1), b_first.eq(0)]
        with m.If(fire & (row == cfg.rows - 1)):
            m.d.sync += [row.eq(0), b_first.eq(1)]
        m.d.comb += ops.r_en.eq(fire & (row == cfg.rows - 1))
        zero_q = delayed(m, fire & zero, SP_READ_LATENCY, "zero")  # a zero row "answers" like a read
        answer = Mux(zero_q, 0, self.sp_b_data.payload.data.as_value()[: cfg.cols * cfg.in_bits])
        m.d.comb += [f.fifo.w_en.eq(self.sp_b_data.valid | zero_q), f.fifo.w_data.eq(answer)]
        f.count(m, fire)
        m.d.comb += [
            mesh.weights.valid.eq(f.fifo.r_rdy),
            mesh.weights.payload.eq(f.fifo.r_data),
            f.fifo.r_en.eq(mesh.weights.ready),
        ]

    def _row_feeder(self, m: Module, mesh: Mesh, op, ops, tag) -> None:
        """Read the activation rows of each operation and push them, tagged, into the mesh."""
        cfg = self.cfg
        a_bits = cfg.rows * cfg.in_bits
        f = _Feeder(m, "a", a_bits, tag.size + 1)
        issue = ops.r_rdy & f.room
        fire = issue & self.sp_a.ready
        # Whether this row is the operation's last, without a compare of the counter with `m`
        # (a carry chain that ran on into the queues' levels): the first row of an operation is
        # last if m == 1 (a compare with a constant); a later row's flag was decided when the row
        # before it issued, from `left`, the rows still to come after that one, counted down.
        first = Signal(init=1, name="a_first")
        last_q = Signal(name="a_last")
        left = Signal(16, name="a_left")
        last = Mux(first, op.one_row, last_q)
        left_now = Mux(first, op.m_less, left)  # rows after this one
        # The addresses step in registers (an operation's first row reads them as queued): no
        # adder between the counter and the scratchpad's port arbitration, whose ready comes back.
        a_next = Signal(self.sp_addr_bits, name="a_next")
        c_next = Signal(self.acc_addr_bits, name="c_next")
        a_now = Mux(first, op.a_addr, a_next)
        c_now = Mux(first, op.c_addr, c_next)
        m.d.comb += [self.sp_a.valid.eq(issue), self.sp_a.payload.addr.eq(a_now)]
        with m.If(fire):
            m.d.sync += [
                a_next.eq(a_now + 1),
                c_next.eq(c_now + 1),
                first.eq(last),
                left.eq(left_now - 1),
                last_q.eq(left_now == 1),
            ]
        m.d.comb += ops.r_en.eq(fire & last)

        # What the row will carry, captured at issue and aligned with the read's answer.
        meta = Signal(data.StructLayout({"tag": tag, "flip": 1}))
        m.d.comb += [
            meta.tag.addr.eq(c_now),
            meta.tag.accumulate.eq(op.accumulate),
            meta.tag.last.eq(last),
            meta.flip.eq(first & ~op.keep_weights),
        ]
        meta_q = delayed(m, meta, SP_READ_LATENCY, "meta")
        self._collect(m, f, fire, self.sp_a_data, [self.sp_a_data.payload.data.as_value()[:a_bits], meta_q])
        fields = data.View(
            data.StructLayout({"a": data.ArrayLayout(cfg.in_bits, cfg.rows), "meta": meta.shape()}), f.fifo.r_data
        )
        m.d.comb += [
            mesh.inp.valid.eq(f.fifo.r_rdy),
            mesh.inp.payload.a.eq(fields.a),
            mesh.inp.payload.flip.eq(fields.meta.flip),
            mesh.inp.payload.tag.eq(fields.meta.tag),
            f.fifo.r_en.eq(mesh.inp.ready),
        ]  # d stays zero: the accumulator adds partial sums, the mesh starts each row from +0

    @staticmethod
    def _collect(m: Module, f: _Feeder, fire, rsp, parts) -> None:
        """Count the read's slot; push each answer (with its side data) into the buffer."""
        m.d.comb += [f.fifo.w_en.eq(rsp.valid), f.fifo.w_data.eq(Cat(*parts))]
        f.count(m, fire)

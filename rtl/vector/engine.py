"""The vector engine: element-wise operations over scratchpad and accumulator rows (docs/tile.md).

A VEC operation (docs/isa.md) streams ``rows`` rows through ``cfg.lanes`` copies of the lane ALU
(``rtl/vector/lane.py``), ``lanes`` elements per cycle, and writes each result row back:

* readers fetch the rows of A and B (scratchpad read ports, or the accumulator's read port through
  the read-out set to the identity) ahead of the lanes, as far as their row buffers have room;
* the lanes take one beat of ``lanes`` elements of the head rows per cycle, widened to 32-bit
  work values (fp32 for bf16 tiles, int32 for int8 tiles);
* the writer narrows each finished row to the destination's type (bf16 round to nearest even,
  int8 saturation; the accumulator's own type) and writes its first ``elems`` elements, or adds
  them into the accumulator row with the accumulator's adder.

Operations run one after another: the next one starts once every row of the previous one is
written, so a VEC operation sees the results of the one before it. Checked bit for bit against
``rtl/vector/engine_model.py``.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.accumulator import ACC_READ_LATENCY
from rtl.config import AccelConfig
from rtl.fp import round_bf16
from rtl.gate import EngineDone
from rtl.readout import readout_controls
from rtl.shared import add_shared
from rtl.vector.engine_model import REQUANT_ROWS
from rtl.vector.function_unit import FunctionUnit
from rtl.vector.lane import LATENCY, VectorLane
from rtl.vector.ops import VecOp
from rtl.vector.update_unit import ADDS, MULS, UpdateUnit

__all__ = ["ROW_BUFFER", "SETTLE_CYCLES", "VectorEngine", "vec_op_layout"]

# Rows buffered per operand and for results: covers the accumulator's read latency plus the
# buffers' own, so one row per cycle streams when a row is one beat.
ROW_BUFFER = ACC_READ_LATENCY + 3
ONE_F32 = 0x3F800000  # the read-out's identity scale for float accumulators (int32: shift 0)
# Cycles after `busy` falls in which the engine's state may still change: its pipelines (lanes,
# update units, function units) shift on with inputs that no longer change. Once they have, the
# engine stands still until `busy` rises, so its clock may stop (rtl/clock_gate.py, Tile).
SETTLE_CYCLES = 32
assert max(LATENCY.values()) + UpdateUnit.LATENCY + 1 < SETTLE_CYCLES


def vec_op_layout() -> data.StructLayout:
    """A decoded VEC command (docs/isa.md, "VEC"); rows are 16-bit addresses in either memory."""
    return data.StructLayout(
        {
            "op": 5,
            "scalar": 32,
            "shift": 5,
            "rows": 16,
            "elems": 16,
            "a": 16,
            "b": 16,
            "d": 16,
            "a_acc": 1,
            "b_acc": 1,
            "d_acc": 1,
            "b_one": 1,  # B is one row, used with every row of A
            "d_one": 1,  # every result row is added into one row of D
            "accumulate": 1,
            "reduce": 1,  # each result row is folded into its element 0 (a row reduction)
            "reduce_max": 1,  # the fold: 0 sum, 1 max
            "uses_b": 1,
            "update": 1,  # op UPDATE: A θ, B θ̄, D λ, g below; scalar η | α << 16 (bf16)
            "g": 16,  # UPDATE: first row of the gradient
            "kappa": 16,  # UPDATE: 1/(2α), bf16
            "requant": 1,  # op REQUANT: B is two accumulator rows, the multipliers and the shifts
        }
    )


def _read_req(rows: int) -> stream.Signature:
    return stream.Signature(data.StructLayout({"addr": range(rows)}))


class VectorEngine(wiring.Component):
    def __init__(self, cfg: AccelConfig) -> None:
        self.cfg = cfg
        self.width = cfg.dim  # work rows are as wide as the wider memory row
        # Bits per element in the operand buffers: a tile whose memories both hold bf16 stores the
        # bf16 bits and widens them after the buffer, so the work values' low 16 bits are constant
        # zeros that synthesis propagates into the lanes; otherwise the 32-bit work values.
        self.stored = 16 if cfg.in_bits == 16 and cfg.acc_bits == 16 else 32
        sp_row = data.ArrayLayout(cfg.in_bits, cfg.dim)
        acc_row = data.ArrayLayout(cfg.acc_bits, cfg.cols)
        sp_rsp = wiring.Signature({"valid": Out(1), "payload": Out(data.StructLayout({"data": sp_row}))})
        # Addresses as wide as the memories' own ports (the decoder has checked every row).
        sp_addr, acc_addr = range(cfg.sp_rows), range(cfg.acc_rows)
        acc_req = stream.Signature(data.StructLayout({"addr": acc_addr, **readout_controls()}))
        acc_rsp = stream.Signature(data.StructLayout({"data": acc_row}))
        super().__init__(
            {
                "op": In(stream.Signature(vec_op_layout())),
                "done": Out(stream.Signature(EngineDone)),
                "sp_a": Out(_read_req(cfg.sp_rows)),
                "sp_a_data": In(sp_rsp),
                "sp_b": Out(_read_req(cfg.sp_rows)),
                "sp_b_data": In(sp_rsp),
                "acc_a": Out(acc_req),
                "acc_a_data": In(acc_rsp),
                "acc_b": Out(acc_req),
                "acc_b_data": In(acc_rsp),
                "sp_write": Out(
                    stream.Signature(data.StructLayout({"addr": sp_addr, "data": sp_row, "mask": cfg.dim}))
                ),
                "acc_write": Out(
                    stream.Signature(
                        data.StructLayout({"addr": acc_addr, "data": acc_row, "mask": cfg.cols, "accumulate": 1})
                    )
                ),
                "elements": Out(range(max(cfg.lanes, cfg.update_lanes) + 1)),  # elements computed this cycle
                # An operation offered or running: with SETTLE_CYCLES after it, every cycle in which
                # the engine's state may change.
                "busy": Out(1),
                "running": Out(1),  # an operation taken and not finished
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        if not self.cfg.vector:  # left out: the decoder refuses every VEC command, none arrives
            return m
        self._lanes: list[VectorLane] = []  # filled by _lane; the update units borrow their adders
        cmd = Signal(vec_op_layout())
        running = Signal()
        start = self.op.valid & self.op.ready
        m.d.comb += self.op.ready.eq(~running)
        with m.If(start):
            m.d.sync += [cmd.eq(self.op.payload), running.eq(1)]

        # UPDATE reads two rows of each port per row: θ then λ on A's, θ̄ then g on B's.
        a_rows = self._reader(
            m, "a", cmd, running, start, (cmd.a, cmd.d), self.sp_a, self.sp_a_data, self.acc_a, self.acc_a_data
        )
        b_rows = self._reader(
            m, "b", cmd, running & (cmd.uses_b | cmd.update | cmd.requant), start, (cmd.b, cmd.g),
            self.sp_b, self.sp_b_data, self.acc_b, self.acc_b_data,
        )  # fmt: skip
        params = self._requant_params(m, cmd, running, start, b_rows)
        # A row reduction's fold steps borrow lane 0 (see ``_fold``).
        fold = Signal(data.StructLayout({"valid": 1, "a": 32, "b": 32}), name="fold_step")
        results, lane_pop, lane_elems, lane0 = self._compute(
            m, cmd, running & ~cmd.update, start, a_rows, b_rows, fold, params
        )
        updates, update_pop, update_elems = self._update(m, cmd, running & cmd.update, start, a_rows, b_rows)
        m.d.comb += [
            a_rows.r_en.eq(lane_pop | update_pop),
            b_rows.r_en.eq((lane_pop & cmd.uses_b) | update_pop | (params.pop if params else 0)),
            self.elements.eq(lane_elems | update_elems),
        ]
        finished = self._writer(m, cmd, running, start, results, updates, fold, lane0, self.op.payload)
        with m.If(finished):
            m.d.sync += running.eq(0)
        m.d.comb += [
            self.done.valid.eq(finished),
            self.done.payload.error.eq(0),
            self.busy.eq(running | self.op.valid),
            self.running.eq(running),
        ]
        return m

    # -- readers --------------------------------------------------------------------------------

    def _reader(self, m: Module, name: str, cmd, enable, start, bases, sp_req, sp_rsp, acc_req, acc_rsp):
        """Issue the operand's row reads while its buffer has room; the buffer holds widened rows.
        ``bases``: the operand's first row, and UPDATE's second tensor read through this port (its
        rows alternate with the first's: row r of the first, then row r of the second)."""
        cfg = self.cfg
        buf = fifo.SyncFIFOBuffered(width=self.stored * self.width, depth=ROW_BUFFER)
        m.submodules[f"{name}_rows"] = buf
        issued = Signal(17, name=f"{name}_issued")
        in_flight = Signal(range(ROW_BUFFER + 1), name=f"{name}_in_flight")
        from_acc = cmd.a_acc if name == "a" else cmd.b_acc
        one_row = Const(0) if name == "a" else cmd.b_one
        params_only = cmd.requant if name == "b" else Const(0)  # REQUANT's B: its two rows, once
        total = Mux(cmd.update, Cat(Const(0, 1), cmd.rows), Mux(params_only, REQUANT_ROWS, cmd.rows))
        want = enable & (issued != total) & (buf.level + in_flight < ROW_BUFFER)
        pair = Mux(issued[0], bases[1], bases[0]) + issued[1:]
        addr = Mux(cmd.update, pair, bases[0] + Mux(one_row, 0, issued))
        identity = 0 if cfg.acc_dtype == "int32" else ONE_F32
        m.d.comb += [
            sp_req.valid.eq(want & ~from_acc),
            sp_req.payload.addr.eq(addr),
            acc_req.valid.eq(want & from_acc),
            acc_req.payload.addr.eq(addr),
            acc_req.payload.scale.eq(identity),
            acc_req.payload.out.eq(1),  # full width: the accumulator's own type
            acc_rsp.ready.eq(1),  # room was reserved when the read was issued
        ]
        fired = Mux(from_acc, acc_req.ready, sp_req.ready) & want
        arrived = sp_rsp.valid | acc_rsp.valid
        m.d.sync += in_flight.eq(in_flight + fired - arrived)
        with m.If(fired):
            m.d.sync += issued.eq(issued + 1)
        with m.If(start):
            m.d.sync += issued.eq(0)
        m.d.comb += [
            buf.w_en.eq(arrived),
            buf.w_data.eq(
                Mux(sp_rsp.valid, self._stored_sp(sp_rsp.payload.data), self._stored_acc(acc_rsp.payload.data))
            ),
        ]
        return buf

    def _stored_sp(self, row) -> Cat:
        """A scratchpad row as the operand buffer stores it (``self.stored`` bits per element)."""
        cfg = self.cfg
        if self.stored == 16:
            return Cat(*(row[k] for k in range(cfg.dim)))
        if cfg.dtype == "bf16":
            return Cat(*(Cat(Const(0, 16), row[k]) for k in range(cfg.dim)))
        return Cat(*(Cat(row[k], row[k][7].replicate(24)) for k in range(cfg.dim)))  # int8 → int32

    def _stored_acc(self, row) -> Cat:
        """An accumulator row as the operand buffer stores it, zero past its ``cols`` elements."""
        cfg = self.cfg
        if self.stored == 16 or cfg.acc_bits == 32:
            elems = [row[k] for k in range(cfg.cols)]
        else:
            elems = [Cat(Const(0, 16), row[k]) for k in range(cfg.cols)]
        return Cat(*elems, Const(0, self.stored * (self.width - cfg.cols)))

    def _work_row(self, stored) -> data.View:
        """An operand buffer's row as 32-bit work values (fp32 for bf16 tiles, int32 for int8)."""
        if self.stored == 16:
            stored = Cat(*(Cat(Const(0, 16), stored[16 * k : 16 * k + 16]) for k in range(self.width)))
        return data.View(data.ArrayLayout(32, self.width), stored)

    # -- REQUANT's parameters -------------------------------------------------------------------

    def _requant_params(self, m: Module, cmd, running, start, b_rows) -> "RequantParams | None":
        """REQUANT (int8 tiles): B's two rows, taken from the head of B's buffer before the first
        beat, the multipliers into one row register and the shifts (saturated to the lanes' 6
        bits) into another; the lanes then read them with every row of A, so A streams one row a
        cycle as for any op. None on bf16 tiles (no REQUANT)."""
        if self.cfg.dtype != "int8":
            return None
        width = self.width
        taken = Signal(range(REQUANT_ROWS + 1), name="rq_taken")
        mult = Signal(data.ArrayLayout(32, width), name="rq_mult")
        shift = Signal(data.ArrayLayout(6, width), name="rq_shifts")
        pop = running & cmd.requant & (taken != REQUANT_ROWS) & b_rows.r_rdy
        row = self._work_row(b_rows.r_data)
        with m.If(pop & (taken == 0)):
            m.d.sync += mult.eq(row.as_value())
        with m.If(pop & (taken == 1)):
            for k in range(width):
                v = row[k].as_signed()
                m.d.sync += shift[k].eq(Mux(v < -32, -32, Mux(v > 31, 31, v)))
        with m.If(pop):
            m.d.sync += taken.eq(taken + 1)
        with m.If(start):
            m.d.sync += taken.eq(0)
        return RequantParams(mult, shift, ~cmd.requant | (taken == REQUANT_ROWS), pop)

    # -- lanes ----------------------------------------------------------------------------------

    def _compute(self, m: Module, cmd, running, start, a_rows, b_rows, fold, params):
        """One beat of ``lanes`` elements of the head rows per cycle; results collect into rows.
        A cycle with a valid ``fold`` step gives lane 0 to it and issues no beat. Returns the result
        rows, the pulse that takes the head rows, the elements computed and lane 0's result."""
        _cfg, lanes = self.cfg, self.cfg.lanes
        beats = -(-self.width // lanes)
        beat_range = range(max(beats, 2))  # one beat per row still gets a 1-bit counter (no zero-width wires)
        out = fifo.SyncFIFOBuffered(width=32 * self.width, depth=ROW_BUFFER)
        m.submodules.results = out
        beat = Signal(beat_range, name="beat")
        computed = Signal(16, name="rows_computed")
        in_pipe = Signal(range(ROW_BUFFER + 1), name="rows_in_pipe")
        mid_row = beat != 0
        heads = a_rows.r_rdy & (b_rows.r_rdy | ~cmd.uses_b) & (params.ready if params else 1)
        room = out.level + in_pipe < ROW_BUFFER
        issue = running & heads & (computed != cmd.rows) & (mid_row | room) & ~fold.valid
        last = (beat + 1) * lanes >= cmd.elems
        with m.If(issue):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))
        with m.If(issue & last):
            m.d.sync += computed.eq(computed + 1)
        with m.If(start):
            m.d.sync += computed.eq(0)
        elements = Mux(issue, Mux(last, cmd.elems - beat * lanes, lanes), 0)

        a_row, b_row = self._work_row(a_rows.r_data), self._work_row(b_rows.r_data)
        if params:  # REQUANT: the multipliers in B's place, the shifts in the command's
            b_row = data.View(b_row.shape(), Mux(cmd.requant, params.mult.as_value(), b_row.as_value()))
        ys = []
        for k in range(lanes):
            a, b = self._pick(m, a_row, beat, k, beats), self._pick(m, b_row, beat, k, beats)
            shift = Mux(cmd.requant, self._pick(m, params.shift, beat, k, beats, 6), cmd.shift) if params else cmd.shift
            ys.append(self._lane(m, k, cmd, a, b, shift, fold))

        # The beat's position and row end travel beside the lanes' pipeline.
        latency = LATENCY[self.cfg.dtype]
        meta = [Signal(data.StructLayout({"valid": 1, "beat": beat_range, "last": 1}), name=f"beat_{i}")
                for i in range(latency + 1)]  # fmt: skip
        m.d.comb += [meta[0].valid.eq(issue), meta[0].beat.eq(beat), meta[0].last.eq(last)]
        for i in range(latency):
            m.d.sync += meta[i + 1].eq(meta[i])
        done_beat = meta[latency]

        collect = Signal(data.ArrayLayout(32, self.width), name="collect")
        for j in range(beats):
            with m.If(done_beat.valid & (done_beat.beat == j)):
                m.d.sync += [collect[j * lanes + k].eq(ys[k]) for k in range(lanes) if j * lanes + k < self.width]
        push = _collected(m, out, collect, done_beat.valid & done_beat.last, "push")
        m.d.sync += in_pipe.eq(in_pipe + (issue & ~mid_row) - push)
        return out, issue & last, elements, ys[0]

    def _pick(self, m: Module, row, beat, k: int, beats: int, bits: int = 32) -> Signal:
        """Element ``beat · lanes + k`` of a row of ``bits``-wide elements (0 past its end)."""
        lanes = self.cfg.lanes
        value = Signal(bits, name=f"pick{k}")
        with m.Switch(beat):
            for j in range(beats):
                if j * lanes + k < self.width:
                    with m.Case(j):
                        m.d.comb += value.eq(row[j * lanes + k])
        return value

    def _lane(self, m: Module, k: int, cmd, a, b, shift, fold) -> Signal:
        dtype = self.cfg.dtype
        # Both memories bf16: every operand a lane multiplies (a, and the update unit's ext_a) is bf16.
        bf16_a = dtype == "bf16" and self.cfg.acc_dtype == "bf16"
        key = f"pyard_vector_lane_{dtype}" + ("_bf16a" if bf16_a else "")
        lane = add_shared(m, f"lane{k}", key, lambda: VectorLane(dtype, bf16_a))
        self._lanes.append(lane)
        if k == 0:  # a fold step: the lane's ADD or MAX of the fold and the next element
            fold_op = Mux(cmd.reduce_max, VecOp.MAX, VecOp.ADD)
            op, a, b = Mux(fold.valid, fold_op, cmd.op), Mux(fold.valid, fold.a, a), Mux(fold.valid, fold.b, b)
        else:
            op = cmd.op
        m.d.comb += [
            lane.op.eq(op),
            lane.a.eq(a),
            lane.b.eq(b),
            lane.s.eq(cmd.scalar),
            lane.shift.eq(shift),
        ]
        if self.cfg.dtype == "bf16":
            # The unit registers x and fn together (FunctionUnit.latency = 1): fn comes from the op
            # of the cycle whose fn_x it takes, and its y reaches the lane in the lane's stage 2.
            fn = add_shared(m, f"functions{k}", "pyard_vector_functions", FunctionUnit)
            m.d.comb += [fn.x.eq(lane.fn_x), fn.fn.eq(cmd.op - VecOp.SIGMOID), lane.fn_y.eq(fn.y)]
        return lane.y

    # -- FPTT update ----------------------------------------------------------------------------

    def _update(self, m: Module, cmd, running, start, a_rows, b_rows):
        """UPDATE: a row's θ, θ̄ (at the heads of A's and B's buffers) and then its λ, g are taken
        into a row register in two cycles, while ``update_lanes`` update units work through the row
        before, that many parameters per cycle; the three result rows (θ', θ̄', λ') collect into one
        entry of the returned buffer. Returns it, the pulse that takes the heads and the
        parameters computed this cycle."""
        lanes, width = self.cfg.update_lanes, self.width
        if not lanes:  # no unit: the decoder refuses UPDATE, and no buffer exists that nothing writes
            return None, Const(0), Const(0)
        out = fifo.SyncFIFOBuffered(width=3 * 16 * width, depth=ROW_BUFFER)
        m.submodules.updates = out
        bf16_row = data.ArrayLayout(16, width)
        tensors = data.StructLayout({"th": bf16_row, "tb": bf16_row, "lm": bf16_row, "g": bf16_row})
        nxt, cur = Signal(tensors, name="update_next"), Signal(tensors, name="update_row")
        half, full, cur_valid = Signal(name="update_half"), Signal(name="update_full"), Signal(name="update_busy")
        take = running & a_rows.r_rdy & b_rows.r_rdy & ~full
        a_row, b_row = self._work_row(a_rows.r_data), self._work_row(b_rows.r_data)
        a_bf16, b_bf16 = (Cat(*(r[k][16:] for k in range(width))) for r in (a_row, b_row))
        with m.If(take & ~half):
            m.d.sync += [nxt.th.eq(a_bf16), nxt.tb.eq(b_bf16), half.eq(1)]
        with m.If(take & half):
            m.d.sync += [nxt.lm.eq(a_bf16), nxt.g.eq(b_bf16), half.eq(0), full.eq(1)]

        beats = -(-width // lanes)
        beat = Signal(range(max(beats, 2)), name="update_beat")
        in_pipe = Signal(range(ROW_BUFFER + 1), name="update_rows_in_pipe")
        room = out.level + in_pipe < ROW_BUFFER
        issue = cur_valid & ((beat != 0) | room)
        last = (beat + 1) * lanes >= cmd.elems
        with m.If(issue):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))
        with m.If(full & (~cur_valid | (issue & last))):
            m.d.sync += [cur.eq(nxt), cur_valid.eq(1), full.eq(0)]
        with m.Elif(issue & last):
            m.d.sync += cur_valid.eq(0)

        results = [self._update_unit(m, k, cmd, cur, beat, beats) for k in range(lanes)]
        latency = UpdateUnit.LATENCY
        meta = [Signal(data.StructLayout({"valid": 1, "beat": range(max(beats, 2)), "last": 1}),
                       name=f"update_beat_{i}") for i in range(latency + 1)]  # fmt: skip
        m.d.comb += [meta[0].valid.eq(issue), meta[0].beat.eq(beat), meta[0].last.eq(last)]
        for i in range(latency):
            m.d.sync += meta[i + 1].eq(meta[i])
        done = meta[latency]
        collect = Signal(data.ArrayLayout(bf16_row, 3), name="update_collect")
        for j in range(beats):
            with m.If(done.valid & (done.beat == j)):
                for k in range(lanes):
                    if j * lanes + k < width:
                        m.d.sync += [collect[t][j * lanes + k].eq(results[k][t]) for t in range(3)]
        push = _collected(m, out, collect, done.valid & done.last, "update_push")
        m.d.sync += in_pipe.eq(in_pipe + (issue & (beat == 0)) - push)
        with m.If(start):
            m.d.sync += [half.eq(0), full.eq(0), cur_valid.eq(0), beat.eq(0)]
        return out, take, Mux(issue, Mux(last, cmd.elems - beat * lanes, lanes), 0)

    def _update_unit(self, m: Module, k: int, cmd, cur, beat, beats: int) -> tuple:
        """Update unit ``k``: parameter ``beat · update_lanes + k`` of the row; its three results.
        UPDATE leaves the lanes idle, so the units share out the lanes' fp32 adders and multipliers
        (up to ``ADDS`` and ``MULS`` each): lane ``k · n + i`` does unit k's addition i and its
        product i."""
        lanes = self.cfg.update_lanes
        n = len(self._lanes) // lanes
        unit = m.submodules[f"update{k}"] = UpdateUnit(lane_adds=min(ADDS, n), lane_muls=min(MULS, n))
        for i, lane in enumerate(self._lanes[k * n : k * n + min(ADDS, n)]):
            m.d.comb += lane.ext.eq(cmd.update)
            if i < unit.lane_adds:
                m.d.comb += [lane.ext_acc.eq(unit.lane_acc[i]), lane.ext_x.eq(unit.lane_x[i])]
                m.d.comb += unit.lane_sum[i].eq(lane.sum)
            if i < unit.lane_muls:
                m.d.comb += [lane.ext_a.eq(unit.lane_a[i]), lane.ext_b.eq(unit.lane_b[i])]
                m.d.comb += unit.lane_p[i].eq(lane.product)
        m.d.comb += [unit.eta.eq(cmd.scalar[:16]), unit.alpha.eq(cmd.scalar[16:]), unit.kappa.eq(cmd.kappa)]
        with m.Switch(beat):
            for j in range(beats):
                if j * lanes + k < self.width:
                    with m.Case(j):
                        i = j * lanes + k
                        m.d.comb += [unit.theta.eq(cur.th[i]), unit.theta_bar.eq(cur.tb[i]),
                                     unit.lam.eq(cur.lm[i]), unit.grad.eq(cur.g[i])]  # fmt: skip
        return unit.theta_o, unit.theta_bar_o, unit.lam_o

    # -- writer ---------------------------------------------------------------------------------

    def _writer(self, m: Module, cmd, running, start, results, updates, fold, lane0, new_cmd) -> Signal:
        """Narrow and write each result row (or, reducing, its fold), or UPDATE's three rows (θ to
        A, θ̄ to B, λ to D) of each entry of ``updates``; returns the pulse of the last write.
        ``new_cmd`` is the command being accepted at ``start``: the write addresses start from it."""
        cfg = self.cfg
        written = Signal(16, name="rows_written")
        part = Signal(2, name="update_part")  # UPDATE: which of the three rows is written next
        # The next row's address in each of the three streams is a register stepped once per row:
        # an adder between the command and the memories' address inputs was the tile's longest
        # path on ECP5 (command register, base select, + rows written, bank decode, write port).
        next_a, next_b, next_d = (Signal(16, name=f"write_{k}") for k in "abd")
        row = data.View(data.ArrayLayout(32, self.width), results.r_data)
        folded, fold_done = self._fold(m, cmd, running & results.r_rdy, row, fold, lane0)
        ready = results.r_rdy & Mux(cmd.reduce, fold_done, 1)
        if updates is not None:
            new = data.View(data.ArrayLayout(data.ArrayLayout(16, self.width), 3), updates.r_data)
            ready = Mux(cmd.update, updates.r_rdy, ready)
        value = [Mux(cmd.reduce, folded if k == 0 else 0, row[k]) for k in range(self.width)]
        mask = [Mux(cmd.reduce & ~cmd.update, k == 0, Const(k, 16) < cmd.elems) for k in range(self.width)]
        addr = Mux(cmd.update, Mux(part == 0, next_a, Mux(part == 1, next_b, next_d)), next_d)
        sp, acc = self.sp_write, self.acc_write
        m.d.comb += [
            sp.valid.eq(running & ready & ~cmd.d_acc),
            sp.payload.addr.eq(addr),
            sp.payload.mask.eq(Cat(mask[: cfg.dim])),
            acc.valid.eq(running & ready & cmd.d_acc),
            acc.payload.addr.eq(addr),
            acc.payload.mask.eq(Cat(mask[: cfg.cols])),
            acc.payload.accumulate.eq(cmd.accumulate),
        ]
        for k in range(cfg.dim):
            narrowed = self._narrow(m, value[k], cfg.in_bits, f"sp{k}")
            if updates is not None:
                updated = Mux(part == 0, new[0][k], Mux(part == 1, new[1][k], new[2][k]))
                narrowed = Mux(cmd.update, updated, narrowed)
            m.d.comb += sp.payload.data[k].eq(narrowed)
        for k in range(cfg.cols):
            m.d.comb += acc.payload.data[k].eq(self._narrow(m, value[k], cfg.acc_bits, f"acc{k}"))
        fired = (sp.valid & sp.ready) | (acc.valid & acc.ready)
        row_done = fired & (~cmd.update | (part == 2))
        m.d.comb += results.r_en.eq(fired & ~cmd.update)
        if updates is not None:
            m.d.comb += updates.r_en.eq(row_done & cmd.update)
        with m.If(fired & cmd.update):
            m.d.sync += part.eq(Mux(part == 2, 0, part + 1))
        with m.If(row_done):
            m.d.sync += written.eq(written + 1)
            with m.If(~cmd.d_one):  # d_one: every row goes into D's one row
                m.d.sync += [next_a.eq(next_a + 1), next_b.eq(next_b + 1), next_d.eq(next_d + 1)]
        with m.If(start):
            m.d.sync += [written.eq(0), part.eq(0), next_a.eq(new_cmd.a), next_b.eq(new_cmd.b), next_d.eq(new_cmd.d)]
        return row_done & (written == cmd.rows - 1)

    def _fold(self, m: Module, cmd, have_row, row, step, lane0) -> tuple[Signal, Signal]:
        """A row reduction: ``acc = y[0]``, then ``acc = op(acc, y[k])`` for k = 1 … elems − 1 in
        order, op ADD or MAX. Each step is lane 0's own op (the lanes' rounding by construction, and
        no adder of its own): ``step`` takes lane 0 for one cycle, in which the lanes issue no beat,
        and its result is taken the lane's latency later, one element per latency + 1 cycles.
        Returns the fold and a level that is high once it is complete for the row at the head
        (until that row is written)."""
        folded = Signal(32, name="folded")
        k = Signal(16, name="fold_k")
        latency = LATENCY[self.cfg.dtype]
        wait = Signal(range(latency), name="fold_wait")
        busy, in_lane, done = Signal(name="fold_busy"), Signal(name="fold_in_lane"), Signal(name="fold_done")
        m.d.comb += [step.valid.eq(busy & ~in_lane), step.a.eq(folded), step.b.eq(row[k])]
        with m.If(have_row & cmd.reduce & ~busy & ~done):  # a new row: its first element
            m.d.sync += [folded.eq(row[0]), k.eq(1), busy.eq(cmd.elems != 1), done.eq(cmd.elems == 1)]
        with m.If(step.valid):
            m.d.sync += [in_lane.eq(1), wait.eq(latency - 1)]
        with m.If(in_lane):
            m.d.sync += wait.eq(wait - 1)
            with m.If(wait == 0):  # lane 0's result for (folded, row[k]) is out
                m.d.sync += [folded.eq(lane0), k.eq(k + 1), in_lane.eq(0)]
                with m.If(k + 1 == cmd.elems):
                    m.d.sync += [busy.eq(0), done.eq(1)]
        written = (self.sp_write.valid & self.sp_write.ready) | (self.acc_write.valid & self.acc_write.ready)
        with m.If(written):
            m.d.sync += done.eq(0)
        return folded, done

    def _narrow(self, m: Module, value, bits: int, name: str):
        """A 32-bit work value in a ``bits``-wide element: as it is, bf16 (round to nearest even,
        NaN canonical) or int8 (saturated)."""
        if bits == 32:
            return value
        if bits == 8:
            v = value.as_signed()
            return Mux(v > 127, 127, Mux(v < -128, -128, v))[:8]
        return round_bf16(m, value, name)


@dataclass(frozen=True)
class RequantParams:
    """REQUANT's per-column multipliers and shifts, ``ready`` once both are in (or for other ops),
    and the pulse that takes a row of them from B's buffer."""

    mult: Signal
    shift: Signal
    ready: Signal
    pop: Signal


def _collected(m: Module, out: fifo.SyncFIFOBuffered, collect: Signal, last, name: str) -> Signal:
    """Push the row ``collect`` into ``out`` in the cycle after its ``last`` beat was registered
    into it: each beat's register takes the results straight from the units (a clock enable, no
    multiplexer per bit to merge the last beat into the pushed row). Returns the push."""
    push = Signal(name=name)
    m.d.sync += push.eq(last)
    m.d.comb += [out.w_en.eq(push), out.w_data.eq(collect)]
    return push

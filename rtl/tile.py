"""The accelerator tile: AXI4-Lite command slave, AXI4 DMA master, one interrupt (docs/tile.md).

Commands flow registers → queue → decoder → one dependency gate per unit (LOAD, EXEC, STORE).
LOAD and STORE each have a DMA engine; they share the AXI port by channel (reads for loads,
writes for stores), so DMA in both directions overlaps. Four token counters carry the dependencies between
neighbouring units.
"""

from typing import TypeVar

from amaranth.hdl import Cat, DomainRenamer, Module, Mux, Signal, Value
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out, connect

from rtl.accumulator import ACC_READ_DEPTH, Accumulator
from rtl.axi import Axi4Signature, AxiLiteSignature
from rtl.axil import AxiLiteRegs
from rtl.clock_gate import gate_domain, settled_activity
from rtl.cmd import ERR, ERROR_EVENTS, CommandInterface
from rtl.config import AccelConfig
from rtl.decode import Decoder
from rtl.dma import DmaError, DmaRead, DmaWrite, share_axi
from rtl.exec_unit import ExecUnit
from rtl.gate import EngineDone, Gate
from rtl.gemm_loop import GemmLoop
from rtl.ops import dma_desc_layout
from rtl.scratchpad import Scratchpad
from rtl.signals import register_stage
from rtl.vector.engine import SETTLE_CYCLES as VECTOR_SETTLE_CYCLES
from rtl.vector.engine import VectorEngine, vec_op_layout

__all__ = ["Tile"]

_Engine = TypeVar("_Engine", DmaRead, DmaWrite)

UNIT_LOAD, UNIT_EXEC, UNIT_STORE, UNIT_VEC = 2, 3, 4, 6
# Read bursts the load engine keeps in flight: A's K slices arrive as one short row per burst, so
# covering a 32-cycle memory latency at one beat per cycle takes about 32 of them.
LOAD_READS_IN_FLIGHT = 64
# Cycles ``active`` stays high after the tile has gone quiet: longer than any pipeline that drains
# on its own (mesh skew, accumulator read-modify-write, counter updates), so the state is settled.
SETTLE_CYCLES = 64
# Cycles a gated DMA engine stays clocked after it went idle: its last registers (byte counts, the
# done report) are written in the cycle it does, so two suffice.
DMA_SETTLE_CYCLES = 2
# Tokens that can wait in one direction: 2**TOKEN_BITS - 1 (docs/isa.md, "Dependency tokens").
TOKEN_BITS = 8
DMA_TO_ISA = {
    DmaError.MISALIGNED: ERR["MISALIGNED"],
    DmaError.RANGE: ERR["SP_RANGE"],
    DmaError.SLVERR: ERR["AXI_SLVERR"],
    DmaError.DECERR: ERR["AXI_DECERR"],
    DmaError.ZERO: ERR["ZERO_DIM"],
    DmaError.TOO_LARGE: ERR["TOO_LARGE"],
}


class Tile(wiring.Component):
    """``gate_idle`` clocks the vector engine, the GEMM loop and its im2col walker, the DMA
    engines and the command queue only while they are active (rtl/clock_gate.py;
    ``vector_clocked`` says in which cycles the engine was): for simulation speed (``TileSim``,
    ``SocSim``), not for FPGAs. Gating the idle engine saves a fifth of an int8 tile's simulation
    time, the walker outside CONV2Ds about 2 %, the queue (and with it the decoder's rule checks)
    about 8 %, the DMA engines and the loop while they wait more (docs/tile.md)."""

    def __init__(self, cfg: AccelConfig, queue_depth: int = 16, *, gate_idle: bool = False) -> None:
        self.cfg, self.queue_depth, self.gate_idle = cfg, queue_depth, gate_idle
        super().__init__(
            {
                "s_axil": In(AxiLiteSignature()),
                "m_axi": Out(Axi4Signature(cfg.dma_bits)),
                "irq": Out(1),
                # Low: the tile's outputs and every state it will ever show stay as they are until
                # an AXI4-Lite request arrives, so its clock may stop (the simulation top does so).
                "active": Out(1),
                **({"vector_clocked": Out(1)} if gate_idle else {}),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.regs = regs = AxiLiteRegs()
        m.submodules.cmdif = cmdif = CommandInterface(
            cfg, queue_depth=self.queue_depth, sp_rows=cfg.sp_rows, acc_rows=cfg.acc_rows, gate_queue=self.gate_idle
        )
        m.submodules.decoder = dec = Decoder(cfg)
        # The pipelined load engine holds up to ~20 short loads (a weight tile each) at once.
        m.submodules.g_load = g_load = Gate(dma_desc_layout(), UNIT_LOAD, in_flight=32)
        m.submodules.g_exec = g_exec = Gate(dec.exec.p.op.shape(), UNIT_EXEC)
        m.submodules.g_store = g_store = Gate(dma_desc_layout(), UNIT_STORE)
        m.submodules.g_vec = g_vec = Gate(vec_op_layout(), UNIT_VEC)
        m.submodules.exec_unit = ex = ExecUnit(cfg, dec.sp_bits, dec.acc_bits)
        m.submodules.vector = vec = self._vector_engine(m)
        m.submodules.sp = sp = Scratchpad(cfg, read_ports=5)
        m.submodules.accumulator = acc = Accumulator(cfg)  # not "acc": the adders have ports of that name
        # An error stops a running loop command at once: it issues nothing more and forgets its
        # queued operations (units holding one finish it, or drop it when the error is cleared).
        m.submodules.gemm = gemm = GemmLoop(cfg, dec.sp_bits, dec.acc_bits, gate_idle=self.gate_idle)
        m.d.comb += gemm.halt.eq(cmdif.halted)

        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        wiring.connect(m, regs.req, cmdif.req)
        m.d.comb += [regs.rsp.valid.eq(cmdif.rsp.valid), regs.rsp.rdata.eq(cmdif.rsp.rdata)]
        # While a loop command runs it owns the gates; the decoder holds the commands behind it.
        # The decoder pops a command only after it has handed it over (the loop command itself is
        # popped once the loop has started), so its ready is not gated.
        connect(m, cmdif.cmd, dec.cmd)
        m.d.comb += dec.hold.eq(gemm.busy)
        connect(m, dec.loop, gemm.cmd)
        # The two sources never offer at once: the loop's queues hold operations only while it is
        # busy, and the decoder offers only while it is not (`hold`). So each gate takes whichever
        # offers, picked by the loop queue's own output flag, not by the loop's busy (a function
        # of all its queues' levels, which fanned out to every gate's operation bits).
        for source_dec, source_loop, gate in (
            (dec.load, gemm.load, g_load),
            (dec.exec, gemm.exec, g_exec),
            (dec.store, gemm.store, g_store),
        ):
            m.d.comb += [
                gate.inp.valid.eq(source_loop.valid | source_dec.valid),
                gate.inp.payload.eq(Mux(source_loop.valid, source_loop.payload, source_dec.payload)),
                source_loop.ready.eq(gate.inp.ready),
                source_dec.ready.eq(gate.inp.ready),
            ]
        m.d.comb += [
            gemm.exec_finished.eq(g_exec.engine_done.valid),
            gemm.store_finished.eq(g_store.engine_done.valid),
        ]
        dma_load, dma_store = self._dma_engines(m, g_load, g_store)
        connect(m, g_exec.engine, ex.op)
        m.d.comb += [
            g_exec.engine_done.valid.eq(ex.done.valid),
            ex.done.ready.eq(g_exec.engine_done.ready),
        ]
        connect(m, dec.vec, g_vec.inp)
        connect(m, g_vec.engine, vec.op)
        connect(m, vec.done, g_vec.engine_done)
        self._memories(m, sp, acc, dma_load, dma_store, ex)
        self._vector_memories(m, sp, acc, dma_load, dma_store, vec)
        self._tokens(m, g_load, g_exec, g_store, g_vec, cmdif.flush, cfg.vector)

        gates = (g_load, g_exec, g_store, g_vec)
        deadlock = self._deadlock(m, dec, gates, ex, vec, gemm)
        error = self._errors(m, gates, dec, deadlock, gemm, cmdif)
        # Work anywhere, from registers only: an operation offered to a unit is still held by its
        # source, the command queue (which the command interface counts itself) or a loop queue
        # (gemm.busy), until the cycle after its gate takes it, when the gate holds it. So the
        # offers, a chain of handshakes from the loop's queues through the decoder, the gates and
        # the units, do not run on into `done`, the idle flag and the activity counter (the
        # tile's longest ECP5 path, 26 ns).
        busy = Cat(g.busy for g in gates).any() | ex.working | vec.running | gemm.busy
        # The decoder sees the units idle a cycle late: FENCE and the loop commands wait for it.
        # That is still exact: a unit becomes busy only by a command the decoder issues, `busy`
        # rises in the next cycle, and the decoder issues nothing while its head command waits for
        # idle, nor in the four cycles (POP, CHECK twice, VERIFY) before it offers the next.
        # The command interface sees it a cycle late too (its `done`, the busy counter): work that
        # leaves its queue is in a gate a cycle before the queue's count drops, so the flag does
        # not dip. No `done` before a held error is recorded.
        idle = Signal()
        m.d.sync += idle.eq(~(busy | error.valid))
        m.d.comb += [
            cmdif.busy.eq(~idle),
            dec.units_idle.eq(idle),
            dec.flush.eq(cmdif.flush),
            self.irq.eq(cmdif.irq),
        ]
        for g in gates:
            m.d.comb += g.flush.eq(cmdif.flush)
        self._events(m, cmdif, dma_load, dma_store, ex, g_load, g_exec, g_store)
        m.d.comb += [cmdif.events.vec_elems.eq(vec.elements), cmdif.events.vec_busy.eq(vec.busy)]
        self._activity(m, cmdif.pending | ~dma_load.idle | ~dma_store.idle)
        return m

    def _vector_engine(self, m: Module) -> VectorEngine:
        engine = VectorEngine(self.cfg)
        if not (self.gate_idle and self.cfg.vector):
            return engine
        # The engine's state stands still once it has been idle for its SETTLE_CYCLES; an operation
        # offered to it (its `busy`) wakes it in the same cycle.
        active = settled_activity(m, engine.busy, VECTOR_SETTLE_CYCLES, "vector")
        m.d.comb += self.vector_clocked.eq(gate_domain(m, "vector", active))
        return DomainRenamer("vector")(engine)

    def _activity(self, m: Module, working) -> None:
        """``active`` while work is queued or running, a register access is under way, or less
        than SETTLE_CYCLES have passed since; a register request wakes it in the same cycle."""
        bus = self.s_axil
        request = bus.awvalid | bus.wvalid | bus.arvalid
        busy = working | request | bus.bvalid | bus.rvalid
        m.d.comb += self.active.eq(settled_activity(m, busy, SETTLE_CYCLES, "tile"))

    def _dma_engines(self, m: Module, g_load: Gate, g_store: Gate) -> tuple[DmaRead, DmaWrite]:
        """Two DMA engines on one AXI port: loads use only the read channels and stores only the
        write channels, so a store never holds up the next weight load (and vice versa)."""
        m.submodules.dma_load = load = self._clocked_while_busy(
            m, DmaRead(self.cfg, max_reads=LOAD_READS_IN_FLIGHT), "dma_load"
        )
        m.submodules.dma_store = store = self._clocked_while_busy(m, DmaWrite(self.cfg), "dma_store")
        share_axi(m, self.m_axi, load, store)
        for gate, engine, name in ((g_load, load, "load"), (g_store, store, "store")):
            connect(m, gate.engine, engine.cmd)
            # The done report is registered before its gate: the load engine's comes from its row
            # writer (the rows queue's output, the AXI error queue, the local write handshake) and
            # ran on into the gate's in-flight queue and dependency tokens in the same cycle.
            # The gate always takes a report, so the register never holds one back.
            report = Signal(EngineDone, name=f"{name}_done_report")  # the DMA's code as the ISA's
            m.d.comb += report.error.eq(engine.done.payload.error)
            for dma_code, isa_code in DMA_TO_ISA.items():
                with m.If(engine.done.payload.code == dma_code):
                    m.d.comb += report.code.eq(isa_code)
            register_stage(m, engine.done, gate.engine_done, report)
        return load, store

    def _clocked_while_busy(self, m: Module, engine: _Engine, name: str) -> _Engine:
        """With ``gate_idle``, the engine clocked only while it holds or is offered a descriptor
        and DMA_SETTLE_CYCLES after: an idle engine's state (its ``idle``: nothing buffered,
        issued, in flight or being written) changes only by a descriptor it accepts."""
        if not self.gate_idle:
            return engine
        gate_domain(m, name, settled_activity(m, engine.cmd.valid | ~engine.idle, DMA_SETTLE_CYCLES, name))
        return DomainRenamer(name)(engine)

    @staticmethod
    def _memories(m: Module, sp: Scratchpad, acc: Accumulator, load: DmaRead, store: DmaWrite, ex: ExecUnit) -> None:
        # Read port 0: activations (EXEC), 1: weights (EXEC), 2: DMA store from the scratchpad.
        connect(m, ex.sp_a, sp.read[0])
        connect(m, ex.sp_b, sp.read[1])
        connect(m, store.sp_read, sp.read[2])
        for consumer, port in ((ex.sp_a_data, 0), (ex.sp_b_data, 1), (store.sp_read_data, 2)):
            m.d.comb += [
                consumer.valid.eq(sp.read_data[port].valid),
                consumer.payload.data.eq(sp.read_data[port].payload.data),
            ]
        m.d.comb += [
            acc.mesh_write.valid.eq(ex.acc_write.valid),
            acc.mesh_write.payload.eq(ex.acc_write.payload),
        ]

    @staticmethod
    def _vector_memories(m: Module, sp: Scratchpad, acc: Accumulator, load: DmaRead, store: DmaWrite, vec) -> None:
        """The vector engine's accesses beside the DMA's: scratchpad read ports 3 and 4 (the lowest
        priority), the scratchpad's low-priority write port, the accumulator's write stream after
        the load DMA, and the accumulator's read port after the store DMA, its answers routed by who
        asked."""
        for req, rsp, port in ((vec.sp_a, vec.sp_a_data, 3), (vec.sp_b, vec.sp_b_data, 4)):
            connect(m, req, sp.read[port])
            connect(m, sp.read_data[port], rsp)
        connect(m, load.sp_write, sp.write)
        connect(m, vec.sp_write, sp.write_low)
        # The accumulator's write stream: the load DMA first, the engine when it is idle. The
        # payload is the DMA's unless only the engine writes, so a tile without the engine has no
        # multiplexer on it.
        first, second, target = load.acc_write, vec.acc_write, acc.dma_write
        m.d.comb += [
            target.valid.eq(first.valid | second.valid),
            target.payload.eq(Mux(second.valid & ~first.valid, second.payload, first.payload)),
            first.ready.eq(target.ready),
            second.ready.eq(target.ready & ~first.valid),
        ]
        readers = (store.acc_read, vec.acc_a, vec.acc_b)
        answers = (store.acc_read_data, vec.acc_a_data, vec.acc_b_data)
        # Every read the accumulator accepts is answered in order; its reader waits here.
        m.submodules.acc_readers = owners = fifo.SyncFIFOBuffered(width=2, depth=ACC_READ_DEPTH + 1)
        chosen = Signal(2)
        for k in reversed(range(len(readers))):  # the lowest-numbered reader wins
            with m.If(readers[k].valid):
                m.d.comb += chosen.eq(k)
        for k, r in enumerate(readers):
            with m.If(chosen == k):
                m.d.comb += acc.read.payload.eq(r.payload)
        m.d.comb += [
            acc.read.valid.eq(Cat(r.valid for r in readers).any() & owners.w_rdy),
            owners.w_data.eq(chosen),
            owners.w_en.eq(acc.read.valid & acc.read.ready),
        ]
        for k, r in enumerate(readers):
            m.d.comb += r.ready.eq(acc.read.ready & owners.w_rdy & (chosen == k))
        for k, a in enumerate(answers):
            m.d.comb += [a.valid.eq(acc.read_data.valid & (owners.r_data == k)), a.payload.eq(acc.read_data.payload)]
        for k, a in enumerate(answers):
            with m.If(owners.r_data == k):
                m.d.comb += acc.read_data.ready.eq(a.ready)
        m.d.comb += owners.r_en.eq(acc.read_data.valid & acc.read_data.ready)

    @staticmethod
    def _errors(m: Module, gates, dec: Decoder, deadlock, gemm: GemmLoop, cmdif) -> wiring.PureInterface:
        """The error events into the command interface, one a cycle, each through one register:
        the gates' (the first gate's wins a tie) in one, the decoder's, DEADLOCK and the loop's
        refusals (the later ones first) in another, and the second wins a tie with the first
        after the registers (the decoder's command is the oldest). So no source's logic (an
        engine's completion: the gate's token check, its error code) runs on through a priority
        into the status register's enables, nor through the other sources' priority. An event is
        recorded a cycle later; ``cmdif.busy`` holds meanwhile (an engine that reports an error is
        still busy in that cycle: its gate counts the operation in flight), and nothing an error
        stops is issued in that cycle (the decoder pops the bad command first; the loop has issued
        nothing for a command it refuses). Events of the flush's cycle and the one before it are
        dropped: the flush comes a cycle after the write that clears the error (rtl/cmd.py), so
        they were raised before the clear, which would otherwise record them anew."""
        flush = cmdif.flush
        engine = ERROR_EVENTS.create(path=("engine_error",))
        m.d.sync += engine.valid.eq(0)
        for g in reversed(gates):
            with m.If(g.error.valid & ~flush):
                m.d.sync += [engine.valid.eq(1), engine.payload.eq(g.error.payload)]
        raised = ERROR_EVENTS.create(path=("error_raised",))
        with m.If(dec.error.valid):
            m.d.comb += [raised.valid.eq(1), raised.payload.eq(dec.error.payload)]
        refusals = (
            (deadlock, "DEADLOCK", dec.cmd.payload.seq),
            (gemm.too_large, "TOO_LARGE", gemm.seq),  # the loop refused a command it had accepted
            (gemm.sp_range, "SP_RANGE", gemm.seq),
        )
        for cond, code, seq in refusals:
            with m.If(cond):
                m.d.comb += [
                    raised.valid.eq(1),
                    raised.payload.unit.eq(1),
                    raised.payload.code.eq(ERR[code]),
                    raised.payload.seq.eq(seq),
                ]
        held = ERROR_EVENTS.create(path=("error_held",))
        m.d.sync += [held.valid.eq(raised.valid & ~flush), held.payload.eq(raised.payload)]
        any_held = ERROR_EVENTS.create(path=("error_any",))
        m.d.comb += [
            any_held.valid.eq(held.valid | engine.valid),
            any_held.payload.eq(Mux(held.valid, held.payload, engine.payload)),
            cmdif.error.valid.eq(any_held.valid & ~flush),
            cmdif.error.payload.eq(any_held.payload),
        ]
        return any_held

    @staticmethod
    def _deadlock(m: Module, dec: Decoder, gates, ex: ExecUnit, vec: VectorEngine, gemm: GemmLoop) -> Value:
        """DEADLOCK (a pulse) when nothing can ever move: no engine runs, every gate holding an
        operation waits for a token, and the next command cannot be dispatched (so it cannot bring
        one). An empty queue is not a deadlock: software may still push the command that gives the
        token."""
        waiting = [~g.holding | g.waiting_prev | g.waiting_next | g.waiting_side for g in gates]
        quiet = ~ex.busy & ~vec.busy & ~gemm.busy
        for g in gates:
            quiet = quiet & ~g.running
        for w in waiting:
            quiet = quiet & w
        stuck = quiet & dec.cmd.valid & ~dec.cmd.ready & Cat(g.busy for g in gates).any()
        # Registered before it is counted: ``stuck`` gathers every engine's and gate's state, and
        # as the count's synchronous reset it was a 12 ns path of the tile on ECP5.
        was_stuck, count = Signal(name="was_stuck"), Signal(3)
        m.d.sync += [was_stuck.eq(stuck), count.eq(Mux(was_stuck, Mux(count == 7, 7, count + 1), 0))]
        return count == 4  # held for several cycles: not a token in transit

    @staticmethod
    def _tokens(m: Module, g_load: Gate, g_exec: Gate, g_store: Gate, g_vec: Gate, flush, vector: bool) -> None:
        """Token counters LOAD→EXEC, EXEC→LOAD, EXEC→STORE, STORE→EXEC, and the vector unit's with
        EXEC (its previous unit), STORE (its next) and LOAD (its side link, as the vector unit is
        LOAD's, EXEC's and STORE's); a flush empties them. A full counter makes the giving operation
        fail (BAD_DEPS) rather than wrap."""
        links = (
            ("load_exec", g_load.give_next, g_load.next_full, g_exec.take_prev, g_exec.prev_avail),
            ("exec_load", g_exec.give_prev, g_exec.prev_full, g_load.take_next, g_load.next_avail),
            ("exec_store", g_exec.give_next, g_exec.next_full, g_store.take_prev, g_store.prev_avail),
            ("store_exec", g_store.give_prev, g_store.prev_full, g_exec.take_next, g_exec.next_avail),
            ("exec_vec", g_exec.give_side, g_exec.side_full, g_vec.take_prev, g_vec.prev_avail),
            ("vec_exec", g_vec.give_prev, g_vec.prev_full, g_exec.take_side, g_exec.side_avail),
            ("vec_store", g_vec.give_next, g_vec.next_full, g_store.take_side, g_store.side_avail),
            ("store_vec", g_store.give_side, g_store.side_full, g_vec.take_next, g_vec.next_avail),
            ("load_vec", g_load.give_side, g_load.side_full, g_vec.take_side, g_vec.side_avail),
            ("vec_load", g_vec.give_side, g_vec.side_full, g_load.take_side, g_load.side_avail),
        )
        for name, give, full, take, avail in links:
            if name.startswith("vec_") and not vector:  # the vector unit is left out: never a token
                m.d.comb += [avail.eq(0), full.eq(0)]
                continue
            count = Signal(TOKEN_BITS, name=f"tokens_{name}")
            # `avail` is a register of its own (count ≠ 0 after the update, from the old count's
            # compare with 1, not the sum's with 0): the taker's token test then starts at a
            # flip-flop, not at a reduction of the count. A token is taken only while one is there.
            # `full` likewise (a give to a full counter fails, so it is never given then).
            has, at_max = Signal(name=f"tokens_{name}_avail"), Signal(name=f"tokens_{name}_full")
            m.d.comb += [avail.eq(has), full.eq(at_max)]
            m.d.sync += count.eq(Mux(flush, 0, count + give - take))
            m.d.sync += has.eq(~flush & (give | (has & ~(take & (count == 1)))))
            m.d.sync += at_max.eq(~flush & ~take & (at_max | (give & (count == 2**TOKEN_BITS - 2))))

    def _events(
        self, m: Module, cmdif, load: DmaRead, store: DmaWrite, ex: ExecUnit, g_load: Gate, g_exec: Gate, g_store: Gate
    ) -> None:
        cfg = self.cfg
        last_rd, last_wr = Signal(32), Signal(32)
        m.d.sync += [last_rd.eq(load.bytes_read), last_wr.eq(store.bytes_written)]
        axi = self.m_axi
        ev = cmdif.events
        m.d.comb += [
            ev.macs.eq(Mux(ex.rows_issued, cfg.rows * cfg.cols, 0)),
            ev.dma_rd_bytes.eq(load.bytes_read - last_rd),
            ev.dma_wr_bytes.eq(store.bytes_written - last_wr),
            # EXEC stalls: no row entered the mesh while the next EXEC waits for a token.
            ev.stall[0].eq(g_exec.waiting_prev & ~ex.rows_issued),
            ev.stall[1].eq(g_exec.waiting_next & ~ex.rows_issued),
            # DMA stalls: the engine holds a load (store) but no read (write) beat moves this cycle.
            # Not the gate's busy: operations waiting there for a token are not the DMA's stall.
            ev.stall[2].eq(~load.idle & ~(axi.rvalid & axi.rready)),
            ev.stall[3].eq(~store.idle & ~(axi.wvalid & axi.wready)),
            # Queue stall: the mesh idles while the DMA units are busy.
            ev.stall[4].eq(~g_exec.busy & ~ex.busy & (g_load.busy | g_store.busy)),
        ]

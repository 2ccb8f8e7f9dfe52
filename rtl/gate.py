"""A unit's dependency gate (docs/isa.md, "Dependency tokens").

Holds the unit's next operation (in a register: an offer ends here, so a source's handshake does
not run on through the token test into the engine, nor the engine's ready back into the source)
until the tokens it waits for are available, takes them as it hands the operation to the engine
(DMA or EXEC unit), and gives the tokens it promises when the engine reports the operation
finished. An engine error becomes an error event for the tile's status. A flush drops the
operation that has not started; operations already with the engine finish and still report.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.cmd import ERR, ERROR_EVENTS
from rtl.ops import deps_layout

__all__ = ["EngineDone", "Gate"]

EngineDone = data.StructLayout({"error": 1, "code": 8})
IN_FLIGHT = 8


class Gate(wiring.Component):
    """``in_flight``: operations the engine may hold at once (handed over, not yet reported)."""

    def __init__(self, op_layout: data.Layout, unit: int, in_flight: int = IN_FLIGHT) -> None:
        self.op_layout, self.unit, self.in_flight = op_layout, unit, in_flight
        super().__init__(
            {
                "inp": In(stream.Signature(data.StructLayout({"op": op_layout, "deps": deps_layout, "seq": 16}))),
                "engine": Out(stream.Signature(op_layout)),
                "engine_done": In(stream.Signature(EngineDone)),
                "prev_avail": In(1),
                "next_avail": In(1),
                "side_avail": In(1),
                "take_prev": Out(1),
                "take_next": Out(1),
                "take_side": Out(1),
                "give_prev": Out(1),
                "give_next": Out(1),
                "give_side": Out(1),
                # The token counter towards the previous / next unit holds its maximum: a token
                # given now would be lost, so the operation reports BAD_DEPS instead.
                "prev_full": In(1),
                "next_full": In(1),
                "side_full": In(1),
                "error": Out(ERROR_EVENTS),
                "waiting_prev": Out(1),  # has an operation, waits for a token from the previous unit
                "waiting_next": Out(1),
                "waiting_side": Out(1),
                "busy": Out(1),
                "running": Out(1),  # an operation is with the engine
                "holding": Out(1),  # an operation is held, not yet handed to the engine
                "flush": In(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.flight = flight = fifo.SyncFIFOBuffered(width=deps_layout.size + 16, depth=self.in_flight)
        # The held operation. Taken only while none is held (from a register: a source sees its
        # offer taken regardless of tokens or the engine), so operations pass at most one every
        # two cycles; an operation waiting for a token is held, and goes in the cycle it arrives.
        # While none is held the register follows the input in every cycle, offered or not: its
        # enable is then `holding` alone, not the sources' offers (a LUT driving 117 to 184
        # enables, ECP5's latest nets after 13 ns of the sources' logic).
        held = Signal(self.inp.p.shape(), name="held")
        holding = self.holding
        deps = held.deps
        with m.If(~holding):
            m.d.sync += [held.eq(self.inp.payload), holding.eq(self.inp.valid & ~self.flush)]

        tokens_ok = (
            (~deps.wait_prev | self.prev_avail)
            & (~deps.wait_next | self.next_avail)
            & (~deps.wait_side | self.side_avail)
        )
        can = tokens_ok & flight.w_rdy & ~self.flush
        go = holding & can
        m.d.comb += [
            self.engine.valid.eq(go),
            self.engine.payload.eq(held.op),
            # From the register alone (not the flush: the sources drop their own offers then).
            self.inp.ready.eq(~holding),
        ]
        started = go & self.engine.ready
        m.d.comb += [
            self.take_prev.eq(started & deps.wait_prev),
            self.take_next.eq(started & deps.wait_next),
            self.take_side.eq(started & deps.wait_side),
            flight.w_en.eq(started),
            flight.w_data.eq(Cat(deps.as_value(), held.seq)),
        ]
        with m.If(started | self.flush):
            m.d.sync += holding.eq(0)

        done = self.engine_done
        fin = data.View(data.StructLayout({"deps": deps_layout, "seq": 16}), flight.r_data)
        overflow = (
            (fin.deps.signal_prev & self.prev_full)
            | (fin.deps.signal_next & self.next_full)
            | (fin.deps.signal_side & self.side_full)
        )
        failed = done.p.error | overflow
        m.d.comb += [
            done.ready.eq(1),
            flight.r_en.eq(done.valid),
            self.give_prev.eq(done.valid & fin.deps.signal_prev & ~failed),
            self.give_next.eq(done.valid & fin.deps.signal_next & ~failed),
            self.give_side.eq(done.valid & fin.deps.signal_side & ~failed),
            self.error.valid.eq(done.valid & failed),
            self.error.payload.unit.eq(self.unit),
            self.error.payload.code.eq(Mux(done.p.error, done.p.code, ERR["BAD_DEPS"])),
            self.error.payload.seq.eq(fin.seq),
            self.waiting_prev.eq(holding & deps.wait_prev & ~self.prev_avail),
            self.waiting_next.eq(holding & deps.wait_next & ~self.next_avail),
            self.waiting_side.eq(holding & deps.wait_side & ~self.side_avail),
            # The level, not r_rdy: the FIFO's output lags a write and busy must not dip meanwhile.
            self.busy.eq(holding | (flight.level != 0)),
            self.running.eq(flight.level != 0),
        ]
        return m

"""The fetch unit: sequential instruction requests on the fetch bus, delivered in order to decode.

It keeps up to ``depth`` requests in flight or buffered (a credit count, because the bus has no
response back-pressure), so with a one-cycle memory it fetches one instruction per cycle. A
redirect (taken branch, trap, mret) restarts fetch at the new address in the same cycle; responses
to requests made before the redirect are counted and dropped as they arrive.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .bus import AmoOp, BusSignature

__all__ = ["Fetch"]


class Fetch(wiring.Component):
    """Fetch port master plus the instruction buffer that decode reads from.

    ``valid``/``instr``/``pc``/``err`` present the next instruction; decode takes it with ``pop``.
    ``redirect`` (with ``target``) discards everything fetched so far.
    """

    bus: Out(BusSignature())
    valid: Out(1)
    instr: Out(32)
    pc: Out(32)
    err: Out(1)
    pop: In(1)
    redirect: In(1)
    target: In(32)

    def __init__(self, reset_pc: int, depth: int) -> None:
        self._reset_pc, self._depth = reset_pc, depth
        super().__init__()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        depth = self._depth
        inflight, drop = Signal(range(depth + 1)), Signal(range(depth + 2))
        count = Signal(range(depth + 1))
        fifo = (
            Array(Signal(32, name=f"fifo_instr{n}") for n in range(depth)),
            Array(Signal(name=f"fifo_err{n}") for n in range(depth)),
        )
        fpc, dpc = Signal(32, init=self._reset_pc), Signal(32, init=self._reset_pc)
        hold, hold_addr = Signal(), Signal(32)
        bus = self.bus

        # Request side: a request not yet accepted stays on the bus unchanged (``hold``).
        room = (inflight + Mux(self.redirect, 0, count)) < depth
        new_addr = Mux(self.redirect, self.target, fpc)
        m.d.comb += [
            bus.req_valid.eq(hold | room),
            bus.addr.eq(Mux(hold, hold_addr, new_addr)),
            bus.mask.eq(0b1111),
            bus.write.eq(0),
            bus.amo.eq(AmoOp.NONE),
        ]
        accepted = bus.req_valid & bus.req_ready
        presented_new = ~hold & room
        with m.If(presented_new):
            m.d.sync += fpc.eq(new_addr + 4)
        with m.Elif(self.redirect):
            m.d.sync += fpc.eq(self.target)
        with m.If(presented_new & ~bus.req_ready):
            m.d.sync += [hold.eq(1), hold_addr.eq(new_addr)]
        with m.If(hold & bus.req_ready):
            m.d.sync += hold.eq(0)
        m.d.sync += inflight.eq(inflight + accepted - bus.rsp_valid)

        # Response side: stale responses are dropped, the rest queue up for decode.
        live = bus.rsp_valid & (drop == 0)
        with m.If(self.redirect):
            m.d.sync += drop.eq(inflight + hold - bus.rsp_valid)
        with m.Elif(bus.rsp_valid & (drop != 0)):
            m.d.sync += drop.eq(drop - 1)
        m.d.comb += [
            self.valid.eq((count != 0) | live),
            self.instr.eq(Mux(count != 0, fifo[0][0], bus.rdata)),
            self.err.eq(Mux(count != 0, fifo[1][0], bus.err)),
            self.pc.eq(dpc),
        ]
        self._queue(m, fifo, count, live)
        with m.If(self.redirect):
            m.d.sync += dpc.eq(self.target)
        with m.Elif(self.pop):
            m.d.sync += dpc.eq(dpc + 4)
        return m

    def _queue(self, m: Module, fifo: tuple[Array, Array], count: Signal, live: Signal) -> None:
        popped = self.pop & (count != 0)
        bypassed = self.pop & (count == 0)  # decode took the response straight off the bus
        push = live & ~bypassed
        with m.If(popped):
            for n in range(self._depth - 1):
                m.d.sync += [fifo[0][n].eq(fifo[0][n + 1]), fifo[1][n].eq(fifo[1][n + 1])]
        with m.If(push):
            slot = count - popped
            m.d.sync += [fifo[0][slot].eq(self.bus.rdata), fifo[1][slot].eq(self.bus.err)]
        with m.If(self.redirect):
            m.d.sync += count.eq(0)
        with m.Else():
            m.d.sync += count.eq(count + push - popped)

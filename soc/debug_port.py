"""The harness' port into a simulation top: a registered four-phase handshake onto a core bus.

Simulation tops (``SocSim``, ``TileSim``) take the harness' requests through it, so no logic of the
design depends on a top-level input other than the clock, and Verilator need not evaluate any of
it again on every ``eval`` (the input-combinational region).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from soc.rv32.bus import BusSignature

__all__ = ["DEBUG_PORT", "DebugPort"]


# The harness' debug port (master side): a four-phase handshake, see DebugPort.
DEBUG_PORT = wiring.Signature(
    {"valid": Out(1), "addr": Out(32), "write": Out(1), "wdata": Out(32), "done": In(1), "rdata": In(32), "err": In(1)}
)


class DebugPort(wiring.Component):
    """The harness' side of a core bus: every input lands in a register first (see the module).

    A four-phase handshake: the harness raises ``valid`` with the request, the port answers with
    ``done`` (and ``rdata``/``err``), the harness drops ``valid``, the port drops ``done``.
    """

    host: In(DEBUG_PORT)
    bus: Out(BusSignature())

    def elaborate(self, platform: object) -> Module:
        m = Module()
        host, bus = self.host, self.bus
        valid = Signal()
        m.d.sync += [valid.eq(host.valid), bus.addr.eq(host.addr), bus.write.eq(host.write), bus.wdata.eq(host.wdata)]
        m.d.comb += bus.mask.eq(0xF)
        with m.FSM():
            with m.State("IDLE"), m.If(valid):
                m.next = "REQUEST"
            with m.State("REQUEST"):
                m.d.comb += bus.req_valid.eq(1)
                with m.If(bus.req_ready):
                    m.next = "RESPONSE"
            with m.State("RESPONSE"), m.If(bus.rsp_valid):
                m.d.sync += [host.done.eq(1), host.rdata.eq(bus.rdata), host.err.eq(bus.err)]
                m.next = "DONE"
            with m.State("DONE"), m.If(~valid):
                m.d.sync += host.done.eq(0)
                m.next = "IDLE"
        return m

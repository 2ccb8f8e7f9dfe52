"""AXI4-Lite slave in front of the register port of ``rtl/cmd.py``.

One write and one read transaction at a time; write address and data may arrive in either order
or together. Registers are written whole (``wstrb`` is not used: every register is one word and
software writes it as one). Every access is answered OKAY, unmapped ones included, so a CPU can
never hang on the tile.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.axi import AxiLiteSignature
from rtl.cmd import RegRequest

__all__ = ["AxiLiteRegs"]


class AxiLiteRegs(wiring.Component):
    s_axil: In(AxiLiteSignature())
    req: Out(stream.Signature(RegRequest))
    rsp: In(wiring.Signature({"valid": Out(1), "rdata": Out(32)}))

    def elaborate(self, platform) -> Module:
        m = Module()
        bus = self.s_axil
        have_aw, have_w, waddr, wdata = Signal(), Signal(), Signal(10), Signal(32)
        m.d.comb += [bus.awready.eq(~have_aw & ~bus.bvalid), bus.wready.eq(~have_w & ~bus.bvalid)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [have_aw.eq(1), waddr.eq(bus.awaddr[2:12])]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [have_w.eq(1), wdata.eq(bus.wdata)]

        # The request is registered: the register file's address decode (the command push, the
        # staging words, the queue's counters) then starts from registers, not from this adapter's
        # handshake flags through the address multiplexer. A write's effect and a read's answer
        # come a cycle later; the order of accesses is kept (one request register).
        reading = Signal()  # a read request is with the registers, not yet answered
        req_valid, req_write, req_addr = Signal(), Signal(), Signal(10)
        room = ~req_valid | self.req.ready
        write_go = have_aw & have_w & room
        read_go = bus.arvalid & ~bus.rvalid & ~reading & ~write_go & room
        m.d.comb += [
            bus.arready.eq(read_go),
            self.req.valid.eq(req_valid),
            self.req.p.write.eq(req_write),
            self.req.p.addr.eq(req_addr),
            # The write's data register holds until a cycle after the request's: the next W
            # beat is accepted only once the B response has been taken.
            self.req.p.wdata.eq(wdata),
        ]
        with m.If(room):
            m.d.sync += [req_valid.eq(write_go | read_go), req_write.eq(write_go)]
            with m.If(write_go):
                m.d.sync += req_addr.eq(waddr)
            with m.Else():
                m.d.sync += req_addr.eq(bus.araddr[2:12])

        with m.If(write_go):
            m.d.sync += [have_aw.eq(0), have_w.eq(0), bus.bvalid.eq(1), bus.bresp.eq(0)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        with m.If(read_go):
            m.d.sync += reading.eq(1)
        with m.Elif(self.rsp.valid):
            m.d.sync += reading.eq(0)
        with m.If(self.rsp.valid):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(self.rsp.rdata), bus.rresp.eq(0)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m

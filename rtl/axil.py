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

        reading = Signal()  # a read request went to the registers last cycle
        write_go = have_aw & have_w
        read_go = bus.arvalid & ~bus.rvalid & ~reading & ~write_go
        m.d.comb += [
            bus.arready.eq(read_go),
            self.req.valid.eq(write_go | read_go),
            self.req.p.write.eq(write_go),
            self.req.p.addr.eq(0),
            self.req.p.wdata.eq(wdata),
        ]
        with m.If(write_go):
            m.d.comb += self.req.p.addr.eq(waddr)
        with m.Else():
            m.d.comb += self.req.p.addr.eq(bus.araddr[2:12])

        with m.If(write_go & self.req.ready):
            m.d.sync += [have_aw.eq(0), have_w.eq(0), bus.bvalid.eq(1), bus.bresp.eq(0)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        m.d.sync += reading.eq(read_go & self.req.ready)
        with m.If(self.rsp.valid):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(self.rsp.rdata), bus.rresp.eq(0)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        return m

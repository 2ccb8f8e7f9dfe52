"""Core bus → AXI4 / AXI4-Lite: one single-beat word transaction at a time."""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.axi import AXI_BURST_INCR, AXI_RESP_OKAY, Axi4Signature, AxiLiteSignature
from soc.rv32.bus import AmoOp, BusSignature

__all__ = ["BusToAxi"]


class BusToAxi(wiring.Component):
    """Turns each core-bus request into one AXI read or write of the addressed word.

    ``axi`` is an :class:`Axi4Signature` (single-beat INCR bursts of 4 bytes, ID 0) or an
    :class:`AxiLiteSignature`. On a bus wider than 32 bits the word travels on its byte lanes.
    ``offset`` is subtracted from the address (the tile's registers decode from 0). AMOs are not
    supported (uncached memory and registers): they answer ``err`` without a transfer, as does any
    non-OKAY AXI response.
    """

    def __init__(self, axi: Axi4Signature | AxiLiteSignature, offset: int = 0) -> None:
        self.full = isinstance(axi, Axi4Signature)
        self.lanes = axi.data_bits // 32
        self.offset = offset
        super().__init__({"bus": In(BusSignature()), "axi": Out(axi)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus, axi = self.bus, self.axi
        addr, wdata, mask = Signal(32), Signal(32), Signal(4)
        rdata, err, rsp = Signal(32), Signal(), Signal()
        lane = addr[2 : 2 + (self.lanes - 1).bit_length()] if self.lanes > 1 else Const(0, 1)
        m.d.comb += [bus.rdata.eq(rdata), bus.err.eq(err), bus.rsp_valid.eq(rsp)]
        m.d.comb += [axi.araddr.eq(addr), axi.awaddr.eq(addr)]
        m.d.comb += [axi.wdata.eq(wdata.replicate(self.lanes)), axi.wstrb.eq(mask << (lane * 4))]
        if self.full:
            m.d.comb += [axi.arsize.eq(2), axi.awsize.eq(2), axi.arburst.eq(AXI_BURST_INCR)]
            m.d.comb += [axi.awburst.eq(AXI_BURST_INCR), axi.wlast.eq(1)]
        m.d.sync += rsp.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += bus.req_ready.eq(1)
                with m.If(bus.req_valid):
                    m.d.sync += [addr.eq(bus.addr - self.offset), wdata.eq(bus.wdata), mask.eq(bus.mask)]
                    with m.If(bus.amo != AmoOp.NONE):
                        m.d.sync += [rsp.eq(1), err.eq(1), rdata.eq(0)]
                    with m.Elif(bus.write):
                        m.next = "WRITE"
                    with m.Else():
                        m.next = "READ"
            with m.State("READ"):
                m.d.comb += axi.arvalid.eq(1)
                with m.If(axi.arready):
                    m.next = "R"
            with m.State("R"):
                m.d.comb += axi.rready.eq(1)
                with m.If(axi.rvalid):
                    word = axi.rdata.word_select(lane, 32) if self.lanes > 1 else axi.rdata
                    m.d.sync += [rsp.eq(1), err.eq(axi.rresp != AXI_RESP_OKAY), rdata.eq(word)]
                    m.next = "IDLE"
            with m.State("WRITE"):  # address and data together; either may be taken first
                aw_done, w_done = Signal(), Signal()
                m.d.comb += [axi.awvalid.eq(~aw_done), axi.wvalid.eq(~w_done)]
                aw_now = aw_done | axi.awready
                w_now = w_done | axi.wready
                m.d.sync += [aw_done.eq(aw_now), w_done.eq(w_now)]
                with m.If(aw_now & w_now):
                    m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                    m.next = "B"
            with m.State("B"):
                m.d.comb += axi.bready.eq(1)
                with m.If(axi.bvalid):
                    m.d.sync += [rsp.eq(1), err.eq(axi.bresp != AXI_RESP_OKAY), rdata.eq(0)]
                    m.next = "IDLE"
        return m

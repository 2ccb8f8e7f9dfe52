"""Main memory in block RAM: an AXI4 slave for a board's SoC, one burst at a time."""

from collections.abc import Sequence

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from rtl.axi import AXI_RESP_DECERR, AXI_RESP_OKAY, Axi4Signature

__all__ = ["AxiBlockRam"]


class AxiBlockRam(wiring.Component):
    """``size`` bytes at ``base``, ``data_bits`` wide, INCR bursts of any length and size.

    Simple rather than fast: a read beat takes two cycles (address, then data held until
    ``rready``), a write beat one; reads and writes alternate by burst, a waiting read first.
    Addresses outside [base, base + size) answer DECERR (reads give zero, writes are dropped),
    as the simulated main memory does. ``init`` is the first 32-bit words (little-endian).
    """

    def __init__(self, base: int, size: int, data_bits: int, id_bits: int, init: Sequence[int] = ()) -> None:
        self.base, self.size, self.data_bits = base, size, data_bits
        self.lane_bits = (data_bits // 8 - 1).bit_length()
        self.depth = size // (data_bits // 8)
        if len(init) * 4 > size:
            raise ValueError(f"init of {len(init) * 4} bytes does not fit a main memory of {size} bytes")
        per_row = data_bits // 32
        words = list(init) + [0] * (-len(init) % per_row)
        self.init = [
            sum(w << (32 * i) for i, w in enumerate(words[r : r + per_row])) for r in range(0, len(words), per_row)
        ]
        super().__init__({"axi": In(Axi4Signature(data_bits, id_bits=id_bits))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        axi = self.axi
        m.submodules.mem = mem = Memory(shape=self.data_bits, depth=self.depth, init=self.init)
        rp, wp = mem.read_port(), mem.write_port(granularity=8)
        addr, left, size = Signal(32), Signal(8), Signal(3)
        offset = (addr - self.base)[:32]  # wraps: an address below base is far outside
        inside = offset < self.size
        m.d.comb += [rp.addr.eq(offset[self.lane_bits :]), wp.addr.eq(offset[self.lane_bits :]), rp.en.eq(0)]
        next_addr = addr + (Const(1, 8) << size)
        inside_r = Signal()
        m.d.comb += axi.rdata.eq(Mux(inside_r, rp.data, 0))
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += axi.arready.eq(1)
                with m.If(axi.arvalid):
                    m.d.sync += [addr.eq(axi.araddr), left.eq(axi.arlen), size.eq(axi.arsize), axi.rid.eq(axi.arid)]
                    m.next = "READ"
                with m.Elif(axi.awvalid):
                    m.d.comb += axi.awready.eq(1)
                    m.d.sync += [addr.eq(axi.awaddr), size.eq(axi.awsize), axi.bid.eq(axi.awid)]
                    m.d.sync += axi.bresp.eq(AXI_RESP_OKAY)
                    m.next = "WRITE"
            with m.State("READ"):  # the beat's address goes to the block RAM
                m.d.comb += rp.en.eq(1)
                m.d.sync += [inside_r.eq(inside), axi.rresp.eq(Mux(inside, AXI_RESP_OKAY, AXI_RESP_DECERR))]
                m.d.sync += axi.rlast.eq(left == 0)
                m.next = "RDATA"
            with m.State("RDATA"):  # the data is held (read port disabled) until taken
                m.d.comb += axi.rvalid.eq(1)
                with m.If(axi.rready):
                    m.d.sync += [addr.eq(next_addr), left.eq(left - 1)]
                    with m.If(left == 0):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "READ"
            with m.State("WRITE"):
                m.d.comb += axi.wready.eq(1)
                with m.If(axi.wvalid):
                    m.d.comb += [wp.en.eq(Mux(inside, axi.wstrb, 0)), wp.data.eq(axi.wdata)]
                    m.d.sync += addr.eq(next_addr)
                    with m.If(~inside):
                        m.d.sync += axi.bresp.eq(AXI_RESP_DECERR)
                    with m.If(axi.wlast):
                        m.next = "BRESP"
            with m.State("BRESP"):
                m.d.comb += axi.bvalid.eq(1)
                with m.If(axi.bready):
                    m.next = "IDLE"
        return m

"""Simulation model of the main memory: an AXI4 slave with a read latency and one beat per cycle.

The protocol, latency and bandwidth are modelled here in Amaranth, so the whole SoC runs inside
Verilator; the words themselves live in the C++ harness behind ``pyard_sim_ram`` (soc/sim_ram.v).

* Read bursts are accepted as they come (up to ``READS_IN_FLIGHT``) and time-stamped; a burst's
  first R beat is valid exactly ``latency`` cycles after its AR handshake, unless an earlier burst
  still occupies R. So several bursts in flight overlap their latencies, as in a DRAM controller.
* Each channel moves one beat of ``data_bits`` per cycle: the bandwidth.
* Writes: AW then its W beats, one beat per cycle, B after the last.
* Addresses outside [base, base + size) answer DECERR (reads give zero, writes are dropped).
"""

from amaranth.hdl import ClockSignal, Const, Instance, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In

from rtl.axi import AXI_RESP_DECERR, AXI_RESP_OKAY, Axi4Signature

__all__ = ["READS_IN_FLIGHT", "MainMemory"]

READS_IN_FLIGHT = 64
WRITES_QUEUED = 4


def _burst_layout(id_bits: int) -> data.StructLayout:
    return data.StructLayout({"id": id_bits, "addr": 32, "len": 8, "size": 3, "stamp": 32})


class MainMemory(wiring.Component):
    def __init__(self, base: int, size: int, data_bits: int, id_bits: int, latency: int) -> None:
        if latency < 4:
            raise ValueError(f"latency = {latency} is invalid: allowed 4 or more")
        self.base, self.size, self.data_bits, self.latency = base, size, data_bits, latency
        self.id_bits = id_bits
        self.lane_bits = (data_bits // 8 - 1).bit_length()
        self.abits = (size // (data_bits // 8) - 1).bit_length()
        super().__init__({"axi": In(Axi4Signature(data_bits, id_bits=id_bits))})

    def _inside(self, addr) -> object:
        return (addr >> (self.size.bit_length() - 1)) == (self.base >> (self.size.bit_length() - 1))

    def _index(self, addr) -> object:
        return addr[self.lane_bits : self.lane_bits + self.abits]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        ram = {
            "ren": Signal(),
            "raddr": Signal(self.abits),
            "rdata": Signal(self.data_bits),
            "wstrb": Signal(self.data_bits // 8),
            "waddr": Signal(self.abits),
            "wdata": Signal(self.data_bits),
        }
        m.submodules.store = Instance(
            "pyard_sim_ram",
            p_WIDTH=self.data_bits,
            p_ABITS=self.abits,
            i_clk=ClockSignal(),
            i_ren=ram["ren"],
            i_raddr=ram["raddr"],
            o_rdata=ram["rdata"],
            i_wstrb=ram["wstrb"],
            i_waddr=ram["waddr"],
            i_wdata=ram["wdata"],
        )
        self._reads(m, now, ram)
        self._writes(m, ram)
        return m

    def _reads(self, m: Module, now: Signal, ram: dict) -> None:
        axi, layout = self.axi, _burst_layout(self.id_bits)
        m.submodules.ar = ar = fifo.SyncFIFOBuffered(width=layout.size, depth=READS_IN_FLIGHT)
        entry = Signal(layout)
        m.d.comb += [entry.id.eq(axi.arid), entry.addr.eq(axi.araddr), entry.len.eq(axi.arlen)]
        m.d.comb += [entry.size.eq(axi.arsize), entry.stamp.eq(now)]
        m.d.comb += [ar.w_data.eq(entry), ar.w_en.eq(axi.arvalid), axi.arready.eq(ar.w_rdy)]
        head = layout(ar.r_data)
        # The burst on R: its next beat's address, beats left after it, id.
        active, addr, left, size, rid = Signal(), Signal(32), Signal(8), Signal(3), Signal(self.id_bits)
        advance = ~axi.rvalid | axi.rready  # the R register can take a new beat
        due = ar.r_rdy & ((now - head.stamp)[:32] >= self.latency - 1)
        beat_addr = Mux(active, addr, head.addr)
        beat_left = Mux(active, left, head.len)
        beat_size = Mux(active, size, head.size)
        beat = advance & (active | due)
        m.d.comb += [ar.r_en.eq(advance & ~active & due), ram["raddr"].eq(self._index(beat_addr))]
        m.d.comb += ram["ren"].eq(beat)
        with m.If(beat):
            m.d.sync += [
                axi.rvalid.eq(1),
                axi.rid.eq(Mux(active, rid, head.id)),
                axi.rlast.eq(beat_left == 0),
                axi.rresp.eq(Mux(self._inside(beat_addr), AXI_RESP_OKAY, AXI_RESP_DECERR)),
                active.eq(beat_left != 0),
                addr.eq(beat_addr + (Const(1, 8) << beat_size)),
                left.eq(beat_left - 1),
                size.eq(beat_size),
                rid.eq(Mux(active, rid, head.id)),
            ]
        with m.Elif(advance):
            m.d.sync += axi.rvalid.eq(0)
        inside_r = Signal()
        m.d.sync += inside_r.eq(Mux(beat, self._inside(beat_addr), inside_r))
        m.d.comb += axi.rdata.eq(Mux(inside_r, ram["rdata"], 0))

    def _writes(self, m: Module, ram: dict) -> None:
        axi = self.axi
        layout = _burst_layout(self.id_bits)
        m.submodules.aw = aw = fifo.SyncFIFOBuffered(width=layout.size, depth=WRITES_QUEUED)
        m.submodules.b = b = fifo.SyncFIFOBuffered(width=self.id_bits + 2, depth=WRITES_QUEUED)
        entry = Signal(layout)
        m.d.comb += [entry.id.eq(axi.awid), entry.addr.eq(axi.awaddr), entry.len.eq(axi.awlen)]
        m.d.comb += [entry.size.eq(axi.awsize), aw.w_data.eq(entry), aw.w_en.eq(axi.awvalid)]
        m.d.comb += axi.awready.eq(aw.w_rdy)
        head = layout(aw.r_data)
        started, addr, err = Signal(), Signal(32), Signal()
        beat_addr = Mux(started, addr, head.addr)
        inside = self._inside(beat_addr)
        m.d.comb += axi.wready.eq(aw.r_rdy & b.w_rdy)
        take = axi.wvalid & axi.wready
        m.d.comb += [
            ram["waddr"].eq(self._index(beat_addr)),
            ram["wdata"].eq(axi.wdata),
            ram["wstrb"].eq(Mux(take & inside, axi.wstrb, 0)),
        ]
        with m.If(take):
            m.d.sync += [started.eq(~axi.wlast), addr.eq(beat_addr + (Const(1, 8) << head.size))]
            m.d.sync += err.eq(Mux(axi.wlast, 0, (started & err) | ~inside))
        bad = (started & err) | ~inside
        m.d.comb += [
            b.w_en.eq(take & axi.wlast),
            b.w_data.eq(Mux(bad, AXI_RESP_DECERR, AXI_RESP_OKAY) << self.id_bits | head.id),
        ]
        m.d.comb += aw.r_en.eq(take & axi.wlast)
        m.d.comb += [
            axi.bvalid.eq(b.r_rdy),
            axi.bid.eq(b.r_data[: self.id_bits]),
            axi.bresp.eq(b.r_data[self.id_bits :]),
        ]
        m.d.comb += b.r_en.eq(axi.bready)

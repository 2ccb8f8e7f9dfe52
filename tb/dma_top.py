"""Test top for the DMA: ``Dma`` plus behavioural stand-ins for the scratchpad and accumulator.

The stand-ins have the DMA-facing ports of docs/tile.md, kept deliberately simple:

* scratchpad: one ``Memory`` of ``sp_rows`` rows; writes with element enables, always ready; reads
  answer one cycle after the request (valid-only), as the real one does.
* accumulator: one ``Memory``; a DMA write takes two cycles (read, then add-or-overwrite under the
  mask), so ``dma_write.ready`` drops every other cycle and the DMA's backpressure path is exercised.
  "Accumulate" adds bit patterns as ``acc_bits``-wide integers (enough to see the flag arrive; the
  real accumulator adds with the PE's adder). Read-out ignores ``scale``/``act`` (they are shown
  on ``acc_last_scale``/``acc_last_act``), returns the slot for ``out = 1`` and, for ``out = 0``,
  its low 8 bits (int32) or its upper 16 bits (fp32, i.e. truncation to bf16) in the slot's low bits.

Backdoor ports let the testbench read (one-cycle latency) and write rows of both memories, and an
AXI4-Lite slave ``s_axil`` reads the byte counters (0x0 read, 0x4 written) and a scratch register
(0x8, writable), so the AXI4-Lite bundle is exercised with cocotbext-axi too.
"""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.axi import Axi4Signature, AxiLiteSignature
from rtl.config import AccelConfig
from rtl.dma import DESCRIPTOR, DONE, Dma

__all__ = ["DmaTop"]


class DmaTop(wiring.Component):
    def __init__(self, cfg: AccelConfig, max_reads: int = 4) -> None:
        self.cfg = cfg
        self.max_reads = max_reads
        self.sp_bits = max(cfg.rows, cfg.cols) * cfg.in_bits
        self.acc_bits = cfg.cols * cfg.acc_bits
        super().__init__(
            {
                "cmd": In(stream.Signature(DESCRIPTOR)),
                "done": Out(stream.Signature(DONE)),
                "m_axi": Out(Axi4Signature(cfg.dma_bits)),
                "s_axil": In(AxiLiteSignature()),
                "bytes_read": Out(32),
                "bytes_written": Out(32),
                "sp_dbg_addr": In(range(cfg.sp_rows)),
                "sp_dbg_rdata": Out(self.sp_bits),
                "sp_dbg_we": In(1),
                "sp_dbg_wdata": In(self.sp_bits),
                "acc_dbg_addr": In(range(cfg.acc_rows)),
                "acc_dbg_rdata": Out(self.acc_bits),
                "acc_dbg_we": In(1),
                "acc_dbg_wdata": In(self.acc_bits),
                "acc_last_scale": Out(32),
                "acc_last_act": Out(2),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.dma = dma = Dma(cfg, max_reads=self.max_reads)
        wiring.connect(m, wiring.flipped(self.cmd), dma.cmd)
        wiring.connect(m, wiring.flipped(self.done), dma.done)
        wiring.connect(m, wiring.flipped(self.m_axi), dma.m_axi)
        m.d.comb += [self.bytes_read.eq(dma.bytes_read), self.bytes_written.eq(dma.bytes_written)]
        self._scratchpad(m, dma)
        self._accumulator(m, dma)
        self._axil(m)
        return m

    def _scratchpad(self, m: Module, dma: Dma) -> None:
        cfg = self.cfg
        m.submodules.sp = sp = memory.Memory(shape=self.sp_bits, depth=cfg.sp_rows, init=[])
        wr = sp.write_port(granularity=cfg.in_bits)
        m.d.comb += [
            dma.sp_write.ready.eq(1),
            wr.addr.eq(dma.sp_write.payload.addr),
            wr.data.eq(dma.sp_write.payload.data),
            wr.en.eq(Mux(dma.sp_write.valid, dma.sp_write.payload.mask, 0)),
        ]
        rd = sp.read_port()
        m.d.comb += [dma.sp_read.ready.eq(1), rd.addr.eq(dma.sp_read.payload.addr)]
        m.d.comb += dma.sp_read_data.payload.data.eq(rd.data)
        m.d.sync += dma.sp_read_data.valid.eq(dma.sp_read.valid)
        self._backdoor(m, sp, self.sp_dbg_addr, self.sp_dbg_rdata, self.sp_dbg_we, self.sp_dbg_wdata)

    @staticmethod
    def _backdoor(m: Module, mem, addr, rdata, we, wdata) -> None:
        rd = mem.read_port()
        wr = mem.write_port()
        m.d.comb += [rd.addr.eq(addr), rdata.eq(rd.data), wr.addr.eq(addr), wr.data.eq(wdata), wr.en.eq(we)]

    def _accumulator(self, m: Module, dma: Dma) -> None:
        cfg = self.cfg
        m.submodules.acc = acc = memory.Memory(shape=self.acc_bits, depth=cfg.acc_rows, init=[])
        self._acc_write(m, dma, acc)
        self._acc_read(m, dma, acc)
        self._backdoor(m, acc, self.acc_dbg_addr, self.acc_dbg_rdata, self.acc_dbg_we, self.acc_dbg_wdata)

    def _acc_write(self, m: Module, dma: Dma, acc) -> None:
        cfg, w = self.cfg, self.cfg.acc_bits
        rd = acc.read_port()
        wr = acc.write_port(granularity=w)
        port = dma.acc_write
        second = Signal()  # the cycle after a write was accepted: old row read, new row written
        req = Signal.like(port.payload)
        m.d.comb += [port.ready.eq(~second), rd.addr.eq(port.payload.addr)]
        with m.If(port.valid & port.ready):
            m.d.sync += [second.eq(1), req.eq(port.payload)]
        with m.Else():
            m.d.sync += second.eq(0)
        new = Cat(
            Mux(req.accumulate, (rd.data.word_select(k, w) + req.data[k])[:w], req.data[k]) for k in range(cfg.cols)
        )
        m.d.comb += [wr.addr.eq(req.addr), wr.data.eq(new), wr.en.eq(Mux(second, req.mask, 0))]

    def _acc_read(self, m: Module, dma: Dma, acc) -> None:
        cfg, w = self.cfg, self.cfg.acc_bits
        rd = acc.read_port()
        busy = Signal()  # a request is being read or its row waits in read_data
        fetched = Signal()
        out = Signal(2)
        m.d.comb += [dma.acc_read.ready.eq(~busy), rd.addr.eq(dma.acc_read.payload.addr)]
        with m.If(dma.acc_read.valid & dma.acc_read.ready):
            m.d.sync += [busy.eq(1), fetched.eq(1), out.eq(dma.acc_read.payload.out)]
            m.d.sync += [
                self.acc_last_scale.eq(dma.acc_read.payload.scale),
                self.acc_last_act.eq(dma.acc_read.payload.act),
            ]
        held = Signal(self.acc_bits)
        valid = Signal()
        with m.If(fetched):
            slots = [rd.data.word_select(k, w) for k in range(cfg.cols)]
            if cfg.acc_dtype == "int32":
                low = Cat(Cat(s[:8], C(0, w - 8)) for s in slots)
            elif cfg.acc_dtype == "fp32":
                low = Cat(Cat(s[16:], C(0, 16)) for s in slots)
            else:
                low = rd.data
            m.d.sync += [held.eq(Mux(out == 0, low, rd.data)), valid.eq(1), fetched.eq(0)]
        m.d.comb += [dma.acc_read_data.valid.eq(valid), dma.acc_read_data.payload.data.eq(held)]
        with m.If(valid & dma.acc_read_data.ready):
            m.d.sync += [valid.eq(0), busy.eq(0)]

    def _axil(self, m: Module) -> None:
        """A minimal AXI4-Lite register file: counters (read-only) and one scratch register."""
        bus = self.s_axil
        scratch = Signal(32)
        m.d.comb += [bus.arready.eq(~bus.rvalid), bus.awready.eq(~bus.bvalid & bus.wvalid)]
        m.d.comb += bus.wready.eq(~bus.bvalid & bus.awvalid)
        with m.If(bus.arvalid & bus.arready):
            regs = Array([self.bytes_read, self.bytes_written, scratch, C(0, 32)])
            value = regs[bus.araddr[2:4]]
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(value)]
        with m.Elif(bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(bus.awvalid & bus.awready):
            with m.If(bus.awaddr[2:4] == 2):
                m.d.sync += scratch.eq(bus.wdata)
            m.d.sync += bus.bvalid.eq(1)
        with m.Elif(bus.bready):
            m.d.sync += bus.bvalid.eq(0)

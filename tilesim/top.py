"""``tile_sim``: the tile with the simulated main memory on its AXI4 master port.

The memory model is the SoC's (soc/main_memory.py): a read latency, several bursts in flight, one
beat per cycle, the words in the harness behind DPI. The harness reaches the tile's registers (its
AXI4-Lite slave port) through a registered four-phase port (``dbg``, soc/debug_port.py) and a bus →
AXI4-Lite bridge, so the clock is the only top-level input any logic depends on (Verilator then
evaluates none of the tile again for a changed input), and watches the interrupt. No reset:
Verilator starts every register at its initial value, as in the SoC simulator. The vector engine,
the GEMM loop and its im2col walker, the DMA engines and the command queue are clocked only while
they are active (``Tile``'s ``gate_idle``; ``gate_idle=False`` clocks them on every cycle, for the
test that this changes nothing); ``vector_clocked`` says in which cycles the engine was, and the
harness counts them.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from rtl.axi import AxiLiteSignature
from rtl.config import AccelConfig
from rtl.tile import Tile
from soc.bridge import BusToAxi
from soc.debug_port import DEBUG_PORT, DebugPort
from soc.main_memory import MainMemory

__all__ = ["ID_BITS", "TileSim"]

ID_BITS = 4  # the tile's AXI4 IDs (rtl/axi.py's default)


class TileSim(wiring.Component):
    def __init__(self, cfg: AccelConfig, mem_bytes: int, latency: int, *, gate_idle: bool = True) -> None:
        self.cfg, self.mem_bytes, self.latency, self.gate_idle = cfg, mem_bytes, latency, gate_idle
        super().__init__({"clk": In(1), "dbg": In(DEBUG_PORT), "irq": Out(1), "vector_clocked": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.domains.sync = ClockDomain(reset_less=True)
        m.d.comb += ClockSignal().eq(self.clk)
        m.submodules.tile = tile = Tile(self.cfg, gate_idle=self.gate_idle)
        m.submodules.mem = mem = MainMemory(0, self.mem_bytes, self.cfg.dma_bits, ID_BITS, self.latency)
        connect(m, tile.m_axi, mem.axi)
        m.submodules.port = port = DebugPort()
        m.submodules.bridge = bridge = BusToAxi(AxiLiteSignature())
        connect(m, wiring.flipped(self.dbg), port.host)
        connect(m, port.bus, bridge.bus)
        connect(m, bridge.axi, tile.s_axil)
        clocked = tile.vector_clocked if self.gate_idle else self.cfg.vector  # ungated: every cycle
        m.d.comb += [self.irq.eq(tile.irq), self.vector_clocked.eq(clocked)]
        return m

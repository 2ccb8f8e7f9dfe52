"""``tile_sim``: the tile with the simulated main memory on its AXI4 master port.

The memory model is the SoC's (soc/main_memory.py): a read latency, several bursts in flight, one
beat per cycle, the words in the harness behind DPI. The AXI4-Lite slave port and the interrupt are
the ports the harness drives and watches. No reset: Verilator starts every register at its initial
value, as in the SoC simulator. The vector engine is clocked only while it is active (``Tile``'s
``gate_vector``); ``vector_clocked`` says in which cycles, and the harness counts them.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from rtl.axi import AxiLiteSignature
from rtl.config import AccelConfig
from rtl.tile import Tile
from soc.main_memory import MainMemory

__all__ = ["ID_BITS", "TileSim"]

ID_BITS = 4  # the tile's AXI4 IDs (rtl/axi.py's default)


class TileSim(wiring.Component):
    def __init__(self, cfg: AccelConfig, mem_bytes: int, latency: int) -> None:
        self.cfg, self.mem_bytes, self.latency = cfg, mem_bytes, latency
        super().__init__({"clk": In(1), "s_axil": In(AxiLiteSignature()), "irq": Out(1), "vector_clocked": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.domains.sync = ClockDomain(reset_less=True)
        m.d.comb += ClockSignal().eq(self.clk)
        m.submodules.tile = tile = Tile(self.cfg, gate_vector=True)
        m.submodules.mem = mem = MainMemory(0, self.mem_bytes, self.cfg.dma_bits, ID_BITS, self.latency)
        connect(m, tile.m_axi, mem.axi)
        connect(m, wiring.flipped(self.s_axil), tile.s_axil)
        m.d.comb += [self.irq.eq(tile.irq), self.vector_clocked.eq(tile.vector_clocked)]
        return m

"""The SoC top: harts with private ITCMs, the banked data RAM, MMIO, the accelerator tiles and main memory.

``Soc`` is what an FPGA user instantiates: its main memory is an AXI4 master port (``m_axi``),
shared by the harts (through a core-bus → AXI4 bridge) and the tiles' DMA (docs/tiles.md).
``SocSim`` adds the simulated main memory (soc/main_memory.py) for Verilator runs, and is built for
simulation speed (no reset, registered inputs, each tile's clock gated while it is idle). See
docs/soc.md for the memory map and the blocks.

``Soc`` has a debug bus (``dbg``, a core-bus slave; ``SocSim`` puts a registered four-phase port in
front of it) used by the program loader before the harts are released (``hold``) and to read
results after the run: it reaches the data RAM, MMIO, the accelerator registers and main memory
like a hart does, and writes to ITCM addresses go to every hart's ITCM.
"""

from functools import reduce
from operator import or_

from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Module, ResetInserter, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out, connect

from rtl.axi import Axi4Signature, AxiLiteSignature
from rtl.clock_gate import gate_domain
from soc.arbiter import BusArbiter
from soc.axi_arbiter import Axi4Arbiter
from soc.bridge import BusToAxi
from soc.config import SocConfig
from soc.debug_port import DEBUG_PORT, DebugPort
from soc.decoder import BusDecoder
from soc.dram import BankedRam
from soc.image import MemoryImage
from soc.itcm import Itcm
from soc.main_memory import MainMemory
from soc.memmap import ACCEL_BASE, ACCEL_SIZE, DRAM_BASE, ITCM_BASE, MEM_BASE, MMIO_BASE, MMIO_SIZE, accel_base
from soc.mmio import Mmio
from soc.rv32 import Core
from soc.rv32.bus import BusSignature, forward_request

__all__ = ["TILE_ID_BITS", "Soc", "SocSim", "address_regions", "mem_id_bits"]

TILE_ID_BITS = 4  # the tile's AXI ID width; the SoC's main-memory port adds the bits of who asked


def mem_id_bits(tiles: int) -> int:
    """ID width of the SoC's main-memory port: a tile's ID, one bit for harts-or-tiles, and the
    depth of the balanced tree of two-way arbiters over the tiles (docs/tiles.md)."""
    return TILE_ID_BITS + 1 + (tiles - 1).bit_length()


def address_regions(cfg: SocConfig) -> dict[str, tuple[tuple[int, int], ...]]:
    """What a hart's data bus decodes: its ITCM, the data RAM, and the peripherals (MMIO, every
    tile's register window, main memory) behind the shared bus."""
    return {
        "itcm": ((ITCM_BASE, cfg.itcm_bytes),),
        "dram": ((DRAM_BASE, cfg.dram_bytes),),
        "periph": ((MMIO_BASE, MMIO_SIZE), (ACCEL_BASE, ACCEL_SIZE * cfg.tiles), (MEM_BASE, cfg.mem_bytes)),
    }


def _tile_name(t: int) -> str:
    """Tile 0 keeps the single-tile SoC's names, so a 1-tile SoC's Verilog (and builds) stay as they were."""
    return "tile" if t == 0 else f"tile{t}"


def _connect_unless(m: Module, master: wiring.PureInterface, slave: wiring.PureInterface, block: Value) -> None:
    """Connect two core-bus ports, refusing requests while ``block``: a hart held in reset still
    drives its request lines, and a memory that took those requests would answer the hart with
    responses it never asked for once it is released."""
    m.d.comb += forward_request(slave, master)
    for name in ("rsp_valid", "rdata", "err"):
        m.d.comb += getattr(master, name).eq(getattr(slave, name))
    m.d.comb += [slave.req_valid.eq(master.req_valid & ~block), master.req_ready.eq(slave.req_ready & ~block)]


class _ItcmLoader(wiring.Component):
    """The debug bus' view of the ITCMs: word writes broadcast to every hart's load port; reads err."""

    def __init__(self, harts: int, addr_bits: int) -> None:
        self.addr_bits = addr_bits
        super().__init__({"bus": In(BusSignature()), "en": Out(1), "addr": Out(addr_bits), "data": Out(32)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus = self.bus
        m.d.comb += [bus.req_ready.eq(1), self.addr.eq(bus.addr[2 : 2 + self.addr_bits]), self.data.eq(bus.wdata)]
        m.d.comb += self.en.eq(bus.req_valid & bus.write)
        m.d.sync += [bus.rsp_valid.eq(bus.req_valid), bus.err.eq(~bus.write)]
        return m


def _gated_tile(m: Module, tile: wiring.Component, name: str) -> tuple[wiring.Component, Signal]:
    """Clock ``tile`` only while it is active (rtl/clock_gate.py): the tile then costs a simulator
    nothing while idle; its behaviour is unchanged because an inactive tile's next state equals its
    state. Simulation only: the gated domains have no reset (registers start at their initial values)."""
    return DomainRenamer(name)(tile), gate_domain(m, name, tile.active)


def _run_ports(cfg: SocConfig) -> dict:
    """The ports a run is watched through: console, exit and each hart's retired instructions."""
    return {
        "console_valid": Out(1),
        "console_data": Out(8),
        "exit_valid": Out(1),
        "exit_code": Out(32),
        "instret": Out(data.ArrayLayout(64, cfg.cores)),
    }


class Soc(wiring.Component):
    """``gate_tile`` stops the tile's clock while it is idle, and its vector engine's, GEMM
    loop's, im2col walker's, DMA engines' and command queue's while those are (``Tile``'s
    ``gate_idle``), and leaves them
    without a reset: for simulation speed (``SocSim``), not for FPGAs, where a clock made of logic
    is a timing hazard.
    ``image`` preloads the ITCMs and the data RAM (a program on an FPGA, where no harness loads it)."""

    def __init__(self, cfg: SocConfig, *, gate_tile: bool = False, image: MemoryImage | None = None) -> None:
        self.cfg, self.gate_tile, self.image = cfg, gate_tile, image or MemoryImage()
        members = {
            "m_axi": Out(Axi4Signature(cfg.mem_bits, id_bits=mem_id_bits(cfg.tiles))),
            "dbg": In(BusSignature()),
            "hold": In(1),
            "console_ready": In(1, init=1),  # low: a console write waits (a board's UART is busy)
            **_run_ports(cfg),
        }
        if gate_tile:
            members["tile_clocked"] = Out(1)  # a tile's clock runs this cycle
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg, n = self.cfg, self.cfg.cores
        regions = address_regions(cfg)
        data_targets = (regions["itcm"], regions["dram"], regions["periph"])
        m.submodules.dram = dram = BankedRam(cfg.dram_bytes, cfg.dram_banks, n + 1, self.image.dram)
        m.submodules.periph_arbiter = arbiter = BusArbiter(n + 1)
        m.submodules.mmio = mmio = self._mmio(m)
        from rtl.tile import Tile  # the tile pulls in every accelerator block

        tiles, enables = [Tile(cfg.accel, gate_idle=self.gate_tile) for _ in range(cfg.tiles)], []
        for t, tile in enumerate(tiles):
            if self.gate_tile:
                m.submodules[_tile_name(t)], enable = _gated_tile(m, tile, _tile_name(t))
                enables.append(enable)
            else:
                m.submodules[_tile_name(t)] = tile
        if self.gate_tile:
            m.d.comb += self.tile_clocked.eq(reduce(or_, enables))
        self._peripheral_bus(m, arbiter, mmio, tiles)
        # One external interrupt for the harts (no PLIC): the tiles' lines ORed. A hart waiting on
        # a tile masks that tile's line at the tile (IRQ_ENABLE), so the others stay visible.
        ext_irq = reduce(or_, [tile.irq for tile in tiles])

        for h in range(n):
            core = Core(cfg.core.__class__(hart_id=h, reset_pc=ITCM_BASE, fetch_depth=cfg.core.fetch_depth))
            m.submodules[f"core{h}"] = ResetInserter({"sync": self.hold})(core)
            m.submodules[f"itcm{h}"] = itcm = Itcm(cfg.itcm_bytes, self.image.itcm)
            m.submodules[f"dec{h}"] = dec = BusDecoder(data_targets)
            _connect_unless(m, core.ibus, itcm.fetch, self.hold)
            _connect_unless(m, core.dbus, dec.bus, self.hold)
            connect(m, dec.out[0], itcm.data)
            connect(m, dec.out[1], dram.ports[h])
            connect(m, dec.out[2], arbiter.masters[h])
            m.d.comb += [
                core.timer_irq.eq(mmio.timer_irq[h]),
                core.soft_irq.eq(mmio.soft_irq[h]),
                core.ext_irq.eq(ext_irq),
                self.instret[h].eq(core.instret),
            ]
            self._itcms = [*getattr(self, "_itcms", []), itcm]
            self._cores = [*getattr(self, "_cores", []), core]
        self._debug_bus(m, data_targets, dram, arbiter)
        return m

    def _mmio(self, m: Module) -> Mmio:
        mmio = Mmio(self.cfg.cores)
        m.d.comb += [
            self.console_valid.eq(mmio.console_valid),
            self.console_data.eq(mmio.console_data),
            self.exit_valid.eq(mmio.exit_valid),
            self.exit_code.eq(mmio.exit_code),
            mmio.console_ready.eq(self.console_ready),
        ]
        return mmio

    def _peripheral_bus(self, m: Module, arbiter: BusArbiter, mmio: Mmio, tiles: list[wiring.Component]) -> None:
        cfg, n = self.cfg, len(tiles)
        windows = tuple(((accel_base(t), ACCEL_SIZE),) for t in range(n))
        targets = (((MMIO_BASE, MMIO_SIZE),), *windows, ((MEM_BASE, cfg.mem_bytes),))
        m.submodules.periph_dec = dec = BusDecoder(targets)
        bridges = [BusToAxi(AxiLiteSignature(), offset=accel_base(t)) for t in range(n)]
        for t, bridge in enumerate(bridges):
            m.submodules["accel_bridge" if t == 0 else f"accel_bridge{t}"] = bridge
        m.submodules.mem_bridge = mem = BusToAxi(Axi4Signature(cfg.mem_bits, id_bits=TILE_ID_BITS))
        dma, dma_id_bits = self._dma_tree(m, [tile.m_axi for tile in tiles], "dma_arbiter")
        # The harts' bridge and the tiles' DMA (one master, or the tree over them) share main memory.
        m.submodules.axi_arbiter = axi_arb = Axi4Arbiter(cfg.mem_bits, TILE_ID_BITS, dma_id_bits)
        connect(m, arbiter.slave, dec.bus)
        connect(m, dec.out[0], mmio.bus)
        for t, bridge in enumerate(bridges):
            connect(m, dec.out[1 + t], bridge.bus)
        connect(m, dec.out[n + 1], mem.bus)
        for bridge, tile in zip(bridges, tiles, strict=True):
            connect(m, bridge.axi, tile.s_axil)
        connect(m, mem.axi, axi_arb.m0)
        connect(m, dma, axi_arb.m1)
        connect(m, axi_arb.out, wiring.flipped(self.m_axi))

    def _dma_tree(self, m: Module, masters: list, name: str) -> tuple[wiring.PureInterface, int]:
        """A balanced tree of two-way arbiters over the tiles' DMA masters (the larger half on
        ``m0``): each node alternates between its halves, so with a power-of-two tile count every
        tile gets the same share of main memory when all compete. Returns the root's master port and
        its ID width."""
        if len(masters) == 1:
            return masters[0], TILE_ID_BITS
        half = (len(masters) + 1) // 2
        left, left_bits = self._dma_tree(m, masters[:half], f"{name}_0")
        right, right_bits = self._dma_tree(m, masters[half:], f"{name}_1")
        m.submodules[name] = node = Axi4Arbiter(self.cfg.mem_bits, left_bits, right_bits)
        connect(m, left, node.m0)
        connect(m, right, node.m1)
        return node.out, node.id_bits + 1

    def _debug_bus(self, m: Module, data_targets: tuple, dram: BankedRam, arbiter: BusArbiter) -> None:
        n = self.cfg.cores
        m.submodules.dbg_dec = dec = BusDecoder(data_targets)
        m.submodules.itcm_loader = loader = _ItcmLoader(n, (self.cfg.itcm_bytes // 4 - 1).bit_length())
        connect(m, wiring.flipped(self.dbg), dec.bus)
        connect(m, dec.out[0], loader.bus)
        connect(m, dec.out[1], dram.ports[n])
        connect(m, dec.out[2], arbiter.masters[n])
        for itcm in self._itcms:
            m.d.comb += [itcm.load.en.eq(loader.en), itcm.load.addr.eq(loader.addr), itcm.load.data.eq(loader.data)]


class SocSim(wiring.Component):
    """The SoC with the simulated main memory on ``m_axi``: the top the Verilator harness drives.

    Built for simulation speed: there is no reset (Verilator starts every register at its initial
    value), the tile's clock (and its vector engine's) is gated while idle (``gate_tile``), and
    ``hold`` and the debug port are registered, so the clock is the only input any logic depends on.
    """

    def __init__(self, cfg: SocConfig, *, gate_tile: bool = True) -> None:
        self.cfg, self.gate_tile = cfg, gate_tile
        super().__init__(
            {
                "clk": In(1),
                "dbg": In(DEBUG_PORT),
                "hold": In(1),
                **_run_ports(cfg),
                "tile_clocked": Out(1),  # the tile's clock runs this cycle (always, ungated)
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        m.domains.sync = ClockDomain(reset_less=True)
        m.d.comb += ClockSignal().eq(self.clk)
        m.submodules.soc = soc = Soc(cfg, gate_tile=self.gate_tile)
        id_bits = mem_id_bits(cfg.tiles)
        m.submodules.mem = mem = MainMemory(MEM_BASE, cfg.mem_bytes, cfg.mem_bits, id_bits, cfg.mem_latency)
        m.submodules.dbg = dbg = DebugPort()
        connect(m, soc.m_axi, mem.axi)
        connect(m, dbg.bus, soc.dbg)
        connect(m, wiring.flipped(self.dbg), dbg.host)
        hold = Signal(init=1)  # the harts wait from the first cycle on, until the harness lets go
        m.d.sync += hold.eq(self.hold)
        m.d.comb += soc.hold.eq(hold)
        m.d.comb += [getattr(self, name).eq(getattr(soc, name)) for name in _run_ports(cfg)]
        m.d.comb += self.tile_clocked.eq(soc.tile_clocked if self.gate_tile else 1)
        return m

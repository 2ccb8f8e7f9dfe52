"""The SoC on a board: clock and reset, main memory in block RAM, the console on a UART, LEDs.

The simulation-only parts of ``SocSim`` (the DPI main memory, the registered debug port, the
gated tile clock, no reset) are left out: ``Soc`` itself is the FPGA block, and this top gives it
what the harness gives ``SocSim`` in simulation.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import connect

from boards.block_ram import AxiBlockRam
from boards.boards import Board
from boards.uart import UartTx
from soc.config import SocConfig
from soc.image import MemoryImage
from soc.memmap import MEM_BASE
from soc.soc import TILE_ID_BITS, Soc

__all__ = ["BAUD", "BoardTop"]

BAUD = 115_200


class BoardTop(Elaboratable):
    """``Soc`` with ``image`` preloaded, ``mem_bytes`` of block RAM as main memory, and:

    * the clock: the board's oscillator, or its clock generator's output;
    * reset: the board's button (synchronized; also held until a clock generator locks);
    * the console on the UART's ``tx`` at :data:`BAUD` baud, 8N1 (a console write waits while
      the transmitter is busy, so every byte the firmware writes is sent);
    * LED 0: the program has exited; LED 1: it exited with code 0; LED 2: the UART is sending.
    """

    def __init__(self, board: Board, cfg: SocConfig, image: MemoryImage, mem_bytes: int, baud: float = BAUD) -> None:
        self.board, self.cfg, self.image, self.mem_bytes = board, cfg, image, mem_bytes
        # Made here, not in elaborate, so that a simulation can watch the UART's line and the exit.
        self.soc = Soc(cfg, image=image)
        self.uart = UartTx(round(board.clock_hz / baud))  # a test simulates a faster line

    def elaborate(self, platform) -> Module:
        m = Module()
        m.domains.sync = ClockDomain()
        self._clock_and_reset(m, platform)
        cfg = self.cfg
        m.submodules.soc = soc = self.soc
        m.submodules.mem = mem = AxiBlockRam(MEM_BASE, self.mem_bytes, cfg.mem_bits, TILE_ID_BITS + 1, self.image.mem)
        m.submodules.uart = uart = self.uart
        connect(m, soc.m_axi, mem.axi)
        # The byte on console_valid reaches the UART a cycle after the write was accepted: a write
        # in that cycle must wait too, or it would find the transmitter busy and be lost.
        m.d.comb += [uart.valid.eq(soc.console_valid), uart.data.eq(soc.console_data)]
        m.d.comb += soc.console_ready.eq(uart.ready & ~soc.console_valid)
        if platform is not None:
            lights = (soc.exit_valid, soc.exit_valid & (soc.exit_code == 0), ~uart.ready)
            outputs = [(platform.request("uart", 0, dir="-").tx, uart.tx)]
            outputs += [
                (platform.request("led", n, dir="-"), light) for n, light in enumerate(lights[: self.board.leds])
            ]
            for n, (port, value) in enumerate(outputs):
                m.submodules[f"out{n}"] = buffer = io.Buffer("o", port)
                m.d.comb += buffer.o.eq(value)
        return m

    def _clock_and_reset(self, m: Module, platform) -> None:
        """In a test (no platform) the sync domain is driven by the simulator."""
        if platform is None:
            return
        board = self.board
        m.submodules.osc = osc_buffer = io.Buffer("i", platform.request(board.clock, 0, dir="-"))
        m.submodules.button = button_buffer = io.Buffer("i", platform.request(board.reset, 0, dir="-"))
        osc, button = osc_buffer.i, button_buffer.i
        if board.clock_gen is None:
            clock, locked = osc, Signal(init=1)
        else:
            clock, locked = board.clock_gen(m, osc)
        m.d.comb += ClockSignal("sync").eq(clock)
        m.submodules.reset_sync = ResetSynchronizer(button | ~locked, domain="sync")

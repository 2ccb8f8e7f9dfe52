"""Clock gates for simulation speed: a unit whose state stands still while it is inactive is clocked
only while it is active, so a simulator evaluates none of its logic while it is idle.

Verilator evaluates every process of a clock domain at every edge of its clock, busy or not: an
idle unit costs a simulation as much as a working one (a clock enable does not change that, as the
logic in front of the held registers is still evaluated). A gated clock does. The unit's behaviour
is unchanged when its ``active`` signal follows the contract of :func:`settled_activity`.

For simulation tops only (``SocSim``, ``TileSim``): on an FPGA a clock made of logic is a timing
hazard. The gated domains have no reset (their registers start at their initial values).
"""

from amaranth.hdl import ClockDomain, ClockSignal, Module, Mux, Signal, Value

__all__ = ["gate_domain", "settled_activity"]


def settled_activity(m: Module, working: Value, settle_cycles: int, name: str) -> Signal:
    """High while ``working`` and for ``settle_cycles`` after it falls: as long as a unit's pipelines
    may still move. ``working`` must cover everything that changes the unit's state on its own (its
    operation running, a request arriving, an answer it waits for), so once this falls the unit's
    next state equals its state until ``working`` rises again, which it does in the same cycle."""
    active = Signal(name=f"{name}_active")
    if settle_cycles == 0:
        m.d.comb += active.eq(working)
        return active
    # The count restarts from ``working`` a cycle late (registered, one cycle of the settling
    # covered by that register), so ``working``, an OR over a whole unit, reaches one flip-flop
    # and not the count's synchronous reset (12.4 ns of the tile's ECP5 path, routed).
    was_working = Signal(init=1, name=f"{name}_was_working")
    settle = Signal(range(settle_cycles), init=settle_cycles - 1, name=f"{name}_settle")
    m.d.sync += [
        was_working.eq(working),
        settle.eq(Mux(was_working, settle_cycles - 1, Mux(settle == 0, 0, settle - 1))),
    ]
    m.d.comb += active.eq(working | was_working | (settle != 0))
    return active


def gate_domain(m: Module, name: str, active: Value) -> Signal:
    """Domain ``name`` clocked by ``sync`` in the cycles ``active`` is high; its enable (returned) is
    latched while the clock is low, so the gated clock never glitches and an ``active`` that rises
    in a cycle clocks the domain at that cycle's end."""
    latch = f"{name}_gate"
    m.domains += [
        ClockDomain(latch, clk_edge="neg", local=True, reset_less=True),
        ClockDomain(name, local=True, reset_less=True),
    ]
    enable = Signal(init=1, name=f"{name}_enable")
    m.d[latch] += enable.eq(active)
    m.d.comb += [ClockSignal(latch).eq(ClockSignal()), ClockSignal(name).eq(ClockSignal() & enable)]
    return enable

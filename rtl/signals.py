"""Values as named signals: the helpers the blocks share for naming and delaying their logic."""

from amaranth.hdl import Module, Signal, Value

__all__ = ["delayed", "named", "register_stage"]


def named(m: Module, value, name: str, domain: str = "comb") -> Signal:
    """``value`` as a signal named ``name`` (registered in ``domain`` if not "comb"). Two reasons
    to name a value:

    * An expression used more than once: Amaranth writes it out again at every use, so a chain of
      steps each reading the last one twice (a log shifter, a leading-zero tree) grows
      exponentially in the Verilog. Without such signals Verilator took 71 s instead of 3 to lint
      the 4x4-bf16 mesh (Yosys merges the copies, so the area is the same either way).
    * A sum's operand that is logic (a multiplexer) where the other is a register: Yosys orders a
      sum's operands by name and feeds the first to the xc7 carry chain's DI pins. An unnamed
      expression sorts first (its internal name starts with "$") and then costs a LUT per bit for
      DI besides the one that merges it into the sum's bits. Named to sort after the register, it
      merges into those alone. Flattened into the tile the order turns round (Yosys creates a
      submodule's names last to first), so operands tuned for the tile are named to sort before
      their registers (rtl/decode.py's "a_..." names)."""
    signal = Signal.like(Value.cast(value), name=name)
    m.d[domain] += signal.eq(value)
    return signal


def delayed(m: Module, value, cycles: int, name: str):
    """``value`` delayed by ``cycles`` registers named ``{name}_d{k}`` (the value itself when
    ``cycles`` is 0)."""
    for k in range(cycles):
        reg = Signal.like(value, name=f"{name}_d{k}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


def register_stage(m: Module, inp, out, payload=None) -> None:
    """The stream ``out`` as one register stage of the stream ``inp``: it takes ``inp`` whenever it
    is empty or its content is taken, so its valid and payload start at flip-flops and it never
    holds back a source whose sink is always ready. ``payload``: what is registered instead of
    ``inp``'s payload (a conversion on the way)."""
    m.d.comb += inp.ready.eq(~out.valid | out.ready)
    with m.If(inp.ready):
        m.d.sync += [out.valid.eq(inp.valid), out.payload.eq(inp.payload if payload is None else payload)]

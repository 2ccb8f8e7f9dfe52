"""The arithmetic of the A extension's read-modify-write atomics, shared by every slave that does them."""

from amaranth.hdl import Mux, Value

from soc.rv32.bus import AmoOp

__all__ = ["amo_result"]


def amo_result(op: Value, old: Value, src: Value) -> Value:
    """The value an AMO stores, given the old memory word and the register operand."""
    lt = old.as_signed() < src.as_signed()
    ltu = old < src
    cases = (
        (AmoOp.SWAP, src),
        (AmoOp.ADD, old + src),
        (AmoOp.XOR, old ^ src),
        (AmoOp.AND, old & src),
        (AmoOp.OR, old | src),
        (AmoOp.MIN, Mux(lt, old, src)),
        (AmoOp.MAX, Mux(lt, src, old)),
        (AmoOp.MINU, Mux(ltu, old, src)),
    )
    value = Mux(ltu, src, old)  # MAXU
    for kind, result in reversed(cases):
        value = Mux(op == kind, result, value)
    return value[:32]

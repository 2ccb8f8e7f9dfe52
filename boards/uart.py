"""A UART transmitter: 8 data bits, no parity, one stop bit (8N1), least significant bit first."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx"]


class UartTx(wiring.Component):
    """Sends ``data`` when ``valid`` and ``ready`` are both high; ``tx`` idles high.

    ``divisor`` is the clock cycles per bit (clock / baud, rounded): 217 at 25 MHz and 115,200
    baud, 0.01 % fast. ``ready`` is high only while the line is idle, so a byte is taken in one
    cycle and the next one waits for the stop bit to end.
    """

    valid: In(1)
    data: In(8)
    ready: Out(1)
    tx: Out(1, init=1)

    def __init__(self, divisor: int) -> None:
        if divisor < 2:
            raise ValueError(f"divisor = {divisor} is invalid: allowed 2 or more clock cycles per bit")
        self.divisor = divisor
        super().__init__()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        count = Signal(range(self.divisor))  # cycles left in the current bit
        bits = Signal(10)  # stop bit, data bits, start bit: shifted out from bit 0
        left = Signal(range(11))  # bits still to send, the one on the line included
        m.d.comb += self.ready.eq(left == 0)
        with m.If(self.valid & self.ready):
            m.d.sync += [bits.eq(1 << 9 | self.data << 1), left.eq(10), count.eq(self.divisor - 1), self.tx.eq(0)]
        with m.Elif(left != 0):
            with m.If(count == 0):
                m.d.sync += [count.eq(self.divisor - 1), left.eq(left - 1), bits.eq(bits >> 1)]
                m.d.sync += self.tx.eq(bits[1] | (left == 1))  # the line idles high after the stop bit
            with m.Else():
                m.d.sync += count.eq(count - 1)
        return m

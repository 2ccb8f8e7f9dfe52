"""MMIO registers: console, exit, hart count and a CLINT-style timer (docs/soc.md)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from soc.memmap import MMIO, MMIO_BASE, MSIP_STRIDE, MTIMECMP_STRIDE
from soc.rv32.bus import AmoOp, BusSignature

__all__ = ["Mmio"]


class Mmio(wiring.Component):
    """Answers every access one cycle later; unmapped offsets and AMOs answer ``err``.

    ``console_valid`` pulses for one cycle with the byte written; ``exit_valid`` rises at the first
    EXIT write and holds with ``exit_code``. MTIME counts cycles since reset; hart h's timer
    interrupt is MTIME >= MTIMECMP[h] (MTIMECMP resets to all ones: no interrupt), its software
    interrupt is MSIP[h] bit 0.

    ``console_ready`` low holds a CONSOLE write (the request waits, unanswered) until it rises: a
    console slower than the harts (a board's UART) stalls the writer instead of losing bytes. It
    is sampled when the write is accepted, so a receiver that cannot take a byte right after the
    one on ``console_valid`` must lower it in that cycle. Left undriven it is 1 (simulation).
    """

    def __init__(self, harts: int) -> None:
        self.harts = harts
        super().__init__(
            {
                "bus": In(BusSignature()),
                "console_valid": Out(1),
                "console_data": Out(8),
                "console_ready": In(1, init=1),
                "exit_valid": Out(1),
                "exit_code": Out(32),
                "timer_irq": Out(harts),
                "soft_irq": Out(harts),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus, n = self.bus, self.harts
        mtime = Signal(64)
        mtimecmp = Signal(data.ArrayLayout(64, n), init=[(1 << 64) - 1] * n)
        msip = Signal(n)
        m.d.sync += mtime.eq(mtime + 1)
        for h in range(n):
            m.d.comb += [self.timer_irq[h].eq(mtime >= mtimecmp[h]), self.soft_irq[h].eq(msip[h])]

        rdata, err = Signal(32), Signal()
        console = bus.addr == MMIO_BASE + MMIO["CONSOLE"]
        valid = Signal()  # a request accepted this cycle
        m.d.comb += bus.req_ready.eq(~(bus.req_valid & bus.write & console & ~self.console_ready))
        m.d.comb += [valid.eq(bus.req_valid & bus.req_ready), bus.rdata.eq(rdata), bus.err.eq(err)]
        access = valid & (bus.amo == AmoOp.NONE)
        write = access & bus.write
        m.d.sync += [bus.rsp_valid.eq(valid), err.eq(valid), rdata.eq(0), self.console_valid.eq(0)]
        # Registers as (offset, read value, write target or None); the per-hart ones are unrolled.
        regs = [
            (MMIO["CONSOLE"], 0, None),
            (MMIO["EXIT"], 0, None),
            (MMIO["NHARTS"], n, None),
            (MMIO["MTIME"], mtime[:32], mtime[:32]),
            (MMIO["MTIMEH"], mtime[32:], mtime[32:]),
        ]
        for h in range(n):
            regs.append((MMIO["MTIMECMP"] + MTIMECMP_STRIDE * h, mtimecmp[h][:32], mtimecmp[h][:32]))
            regs.append((MMIO["MTIMECMPH"] + MTIMECMP_STRIDE * h, mtimecmp[h][32:], mtimecmp[h][32:]))
            regs.append((MMIO["MSIP"] + MSIP_STRIDE * h, msip[h], msip[h]))
        with m.Switch(bus.addr[:12]):  # the decoder only sends MMIO addresses
            for offset, value, target in regs:
                with m.Case(offset):
                    with m.If(access):
                        m.d.sync += [err.eq(0), rdata.eq(value)]
                    if target is not None:
                        with m.If(write):
                            m.d.sync += target.eq(bus.wdata)
        with m.If(write & console & bus.mask[0]):
            m.d.sync += [self.console_valid.eq(1), self.console_data.eq(bus.wdata[:8])]
        with m.If(write & (bus.addr == MMIO_BASE + MMIO["EXIT"]) & ~self.exit_valid):
            m.d.sync += [self.exit_valid.eq(1), self.exit_code.eq(bus.wdata)]
        return m

"""Machine-mode CSRs, trap entry/return and interrupt selection."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CSR", "MISA", "CsrFile"]

MISA = (1 << 30) | (1 << 0) | (1 << 8) | (1 << 12)  # RV32, A, I, M

CSR = {
    "mstatus": 0x300,
    "misa": 0x301,
    "mie": 0x304,
    "mtvec": 0x305,
    "mstatush": 0x310,
    "mscratch": 0x340,
    "mepc": 0x341,
    "mcause": 0x342,
    "mtval": 0x343,
    "mip": 0x344,
    "mcycle": 0xB00,
    "minstret": 0xB02,
    "mcycleh": 0xB80,
    "minstreth": 0xB82,
    "cycle": 0xC00,
    "time": 0xC01,
    "instret": 0xC02,
    "cycleh": 0xC80,
    "timeh": 0xC81,
    "instreth": 0xC82,
    "mvendorid": 0xF11,
    "marchid": 0xF12,
    "mimpid": 0xF13,
    "mhartid": 0xF14,
}

# Interrupt bits of mie/mip, highest priority first (external, software, timer).
IRQ_BITS = (11, 3, 7)
MIE_MASK = sum(1 << b for b in IRQ_BITS)


class CsrFile(wiring.Component):
    """The CSR state of one hart.

    Execute reads ``rdata`` for ``addr`` in the same cycle (``exists``/``read_only`` let it raise an
    illegal-instruction trap) and commits a write with ``we``. ``trap`` enters the trap handler
    (``cause``/``tval``/``epc``); ``mret`` returns. ``irq`` says an enabled interrupt is pending,
    with its ``irq_cause``. ``retire``/``unretire`` adjust minstret (a load that faults after its
    execute stage counted it is taken back).
    """

    addr: In(12)
    rdata: Out(32)
    exists: Out(1)
    read_only: Out(1)
    we: In(1)
    wdata: In(32)

    trap: In(1)
    cause: In(32)
    tval: In(32)
    epc: In(32)
    mret: In(1)
    trap_vector: Out(32)  # handler address for ``cause`` (vectored mode offsets interrupts)
    mepc: Out(32)

    retire: In(1)
    unretire: In(1)
    timer_irq: In(1)
    soft_irq: In(1)
    ext_irq: In(1)
    irq: Out(1)
    irq_cause: Out(32)
    minstret: Out(64)  # for the SoC's run statistics

    def __init__(self, hart_id: int) -> None:
        self._hart_id = hart_id
        super().__init__()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        regs = self._registers(m)
        self._read(m, regs)
        self._write(m, regs)
        self._trap(m, regs)
        self._interrupts(m, regs)
        return m

    def _registers(self, m: Module) -> dict[str, Signal]:
        regs = {name: Signal(32, name=name) for name in ("mscratch", "mepc", "mcause", "mtval", "mtvec")}
        regs |= {"mie": Signal(32, name="mie"), "mip": Signal(32, name="mip")}
        regs |= {"mcycle": Signal(64, name="mcycle"), "minstret": Signal(64, name="minstret")}
        regs |= {"mstatus_mie": Signal(name="mstatus_mie"), "mstatus_mpie": Signal(name="mstatus_mpie")}
        m.d.comb += regs["mip"].eq(
            Cat(Const(0, 3), self.soft_irq, Const(0, 3), self.timer_irq, Const(0, 3), self.ext_irq)
        )
        m.d.comb += [self.mepc.eq(regs["mepc"]), self.minstret.eq(regs["minstret"])]
        return regs

    def _read(self, m: Module, r: dict[str, Signal]) -> None:
        mstatus = Cat(
            Const(0, 3), r["mstatus_mie"], Const(0, 3), r["mstatus_mpie"], Const(0, 3), Const(0b11, 2)
        )  # MPP is hardwired to machine mode
        values = {
            "mstatus": mstatus,
            "misa": Const(MISA, 32),
            "mie": r["mie"],
            "mtvec": r["mtvec"],
            "mstatush": Const(0, 32),
            "mscratch": r["mscratch"],
            "mepc": r["mepc"],
            "mcause": r["mcause"],
            "mtval": r["mtval"],
            "mip": r["mip"],
            "mcycle": r["mcycle"][0:32],
            "minstret": r["minstret"][0:32],
            "mcycleh": r["mcycle"][32:64],
            "minstreth": r["minstret"][32:64],
            # time has no separate mtime here: it counts core cycles like cycle.
            "cycle": r["mcycle"][0:32],
            "time": r["mcycle"][0:32],
            "instret": r["minstret"][0:32],
            "cycleh": r["mcycle"][32:64],
            "timeh": r["mcycle"][32:64],
            "instreth": r["minstret"][32:64],
            "mvendorid": Const(0, 32),
            "marchid": Const(0, 32),
            "mimpid": Const(0, 32),
            "mhartid": Const(self._hart_id, 32),
        }
        m.d.comb += self.read_only.eq(self.addr[10:12] == 0b11)
        with m.Switch(self.addr):
            for name, value in values.items():
                with m.Case(CSR[name]):
                    m.d.comb += [self.rdata.eq(value), self.exists.eq(1)]

    def _write(self, m: Module, r: dict[str, Signal]) -> None:
        w = self.wdata
        self._counter(m, r["mcycle"], 1, "mcycle")
        self._counter(m, r["minstret"], self.retire - self.unretire, "minstret")
        with m.If(self.we), m.Switch(self.addr):
            with m.Case(CSR["mstatus"]):
                m.d.sync += [r["mstatus_mie"].eq(w[3]), r["mstatus_mpie"].eq(w[7])]
            with m.Case(CSR["mie"]):
                m.d.sync += r["mie"].eq(w & MIE_MASK)
            with m.Case(CSR["mtvec"]):
                m.d.sync += r["mtvec"].eq(Cat(w[0], Const(0, 1), w[2:32]))  # direct (0) or vectored (1)
            with m.Case(CSR["mepc"]):
                m.d.sync += r["mepc"].eq(Cat(Const(0, 2), w[2:32]))
            for name in ("mscratch", "mcause", "mtval"):
                with m.Case(CSR[name]):
                    m.d.sync += r[name].eq(w)

    def _counter(self, m: Module, counter: Signal, increment, name: str) -> None:
        """A 64-bit counter written as two halves. A CSR write replaces that cycle's increment of
        the whole counter (privileged spec, "Hardware Performance Monitor": the write takes effect
        after the writing instruction has otherwise completed): the written half takes the value,
        the other half keeps its own, and nothing carries between them."""
        with m.If(self.we & (self.addr == CSR[name])):
            m.d.sync += counter[0:32].eq(self.wdata)
        with m.Elif(self.we & (self.addr == CSR[name + "h"])):
            m.d.sync += counter[32:64].eq(self.wdata)
        with m.Else():
            m.d.sync += counter.eq(counter + increment)

    def _trap(self, m: Module, r: dict[str, Signal]) -> None:
        base = Cat(Const(0, 2), r["mtvec"][2:32])
        vectored = r["mtvec"][0] & self.cause[31]
        m.d.comb += self.trap_vector.eq(base + Mux(vectored, self.cause[0:30] << 2, 0))
        with m.If(self.trap):
            m.d.sync += [
                r["mepc"].eq(self.epc),
                r["mcause"].eq(self.cause),
                r["mtval"].eq(self.tval),
                r["mstatus_mpie"].eq(r["mstatus_mie"]),
                r["mstatus_mie"].eq(0),
            ]
        with m.Elif(self.mret):
            m.d.sync += [r["mstatus_mie"].eq(r["mstatus_mpie"]), r["mstatus_mpie"].eq(1)]

    def _interrupts(self, m: Module, r: dict[str, Signal]) -> None:
        pending = r["mip"] & r["mie"]
        m.d.comb += self.irq.eq(r["mstatus_mie"] & (pending != 0))
        for bit in reversed(IRQ_BITS):  # last assignment wins: highest priority listed first
            with m.If(pending[bit]):
                m.d.comb += self.irq_cause.eq((1 << 31) | bit)
        return

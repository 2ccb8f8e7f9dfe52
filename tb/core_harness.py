"""A small test top around one core, simulated with Amaranth's Python simulator.

Everything that happens per cycle is hardware inside the top (memories, MMIO, the cycle budget);
Python only starts the simulation, waits for the ``done`` signal and reads results back.

Memory map of the top:

* ``0x0000_0000`` RAM (``ram_bytes``), shared by the fetch and data ports, supports atomics;
* ``0x1000_0000`` EXIT: a write ends the run with the written value (1 = pass, else failure code);
* ``0x1000_0004`` IRQ: bits 0/1/2 drive the core's soft/timer/external interrupt lines (r/w);
* ``0x1000_0008`` TIMER: writing N sets IRQ bit 1 after N cycles (for asynchronous interrupts);
* anything else answers with a bus error (access fault).

With ``stall=True`` a free-running LFSR withholds ``req_ready`` and delays responses on both ports
at random, exercising the variable-latency side of the bus protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from soc.amo import amo_result
from soc.rv32 import AmoOp, Core, CoreConfig

__all__ = [
    "EXIT_ADDR",
    "IRQ_ADDR",
    "TIMER_ADDR",
    "CycleBudgetExceeded",
    "HarnessConfig",
    "RunResult",
    "TestTop",
    "run_program",
]

EXIT_ADDR, IRQ_ADDR, TIMER_ADDR = 0x1000_0000, 0x1000_0004, 0x1000_0008
PASS = 1


class CycleBudgetExceeded(AssertionError):
    """The program did not write EXIT within its cycle budget."""


@dataclass(frozen=True)
class HarnessConfig:
    ram_bytes: int = 64 * 1024
    stall: bool = False
    core: CoreConfig = field(default_factory=CoreConfig)


class TestTop(Elaboratable):
    """Core + RAM + MMIO + cycle budget; ``done`` rises on EXIT or when the budget runs out."""

    def __init__(self, cfg: HarnessConfig, image: list[int], budget: int) -> None:
        self.cfg, self.budget = cfg, budget
        self.core = Core(cfg.core)
        self.ram = Memory(shape=32, depth=cfg.ram_bytes // 4, init=image)
        self.done, self.exited = Signal(), Signal()
        self.exit_code, self.cycles = Signal(32), Signal(32)
        self.irq = Signal(3)
        self.protocol_error = Signal(2)  # bit 0: fetch port, bit 1: data port broke the request rule

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.core, m.submodules.ram = core, _ = self.core, self.ram
        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:16], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))
        stall = self.cfg.stall
        self._fetch_port(m, Const(1) if not stall else lfsr[0] | lfsr[3], Const(1) if not stall else lfsr[5] | lfsr[9])
        self._data_port(m, Const(1) if not stall else lfsr[1] | lfsr[7], Const(1) if not stall else lfsr[4] | lfsr[11])
        for n, bus in enumerate((core.ibus, core.dbus)):
            self._check_request_rule(m, bus, n)
        m.d.comb += [core.soft_irq.eq(self.irq[0]), core.timer_irq.eq(self.irq[1]), core.ext_irq.eq(self.irq[2])]
        m.d.sync += self.cycles.eq(self.cycles + 1)
        m.d.comb += self.done.eq(self.exited | (self.cycles >= self.budget))
        return m

    def _check_request_rule(self, m: Module, bus: object, bit: int) -> None:
        """Flag a request that was withdrawn or changed before the slave accepted it."""
        waiting = Signal(name=f"waiting{bit}")
        payload = Cat(bus.addr, bus.write, bus.wdata, bus.mask, bus.amo)
        last = Signal(len(payload), name=f"last_payload{bit}")
        m.d.sync += [waiting.eq(bus.req_valid & ~bus.req_ready), last.eq(payload)]
        with m.If(waiting & (~bus.req_valid | (payload != last))):
            m.d.sync += self.protocol_error[bit].eq(1)

    def _in_ram(self, addr: Value) -> Value:
        return addr < self.cfg.ram_bytes

    def _fetch_port(self, m: Module, may_accept: Value, may_answer: Value) -> None:
        bus, rp = self.core.ibus, self.ram.read_port()
        busy, err = Signal(), Signal()
        answer = busy & may_answer
        m.d.comb += [
            bus.rsp_valid.eq(answer),
            bus.rdata.eq(rp.data),
            bus.err.eq(err),
            bus.req_ready.eq((~busy | answer) & may_accept),
        ]
        accept = bus.req_valid & bus.req_ready
        m.d.comb += [rp.addr.eq(bus.addr[2:]), rp.en.eq(accept)]
        with m.If(accept):
            m.d.sync += [busy.eq(1), err.eq(~self._in_ram(bus.addr))]
        with m.Elif(answer):
            m.d.sync += busy.eq(0)

    def _data_port(self, m: Module, may_accept: Value, may_answer: Value) -> None:
        bus, rp = self.core.dbus, self.ram.read_port()
        wp = self.ram.write_port(granularity=8)
        busy, err, from_ram, mmio_data = Signal(), Signal(), Signal(), Signal(32)
        amo_pending, amo_op, amo_src, amo_addr = Signal(), Signal(AmoOp), Signal(32), Signal(32)
        resv_valid, resv_addr = Signal(), Signal(32)
        answer = busy & may_answer & ~amo_pending
        m.d.comb += [
            bus.rsp_valid.eq(answer),
            bus.err.eq(err),
            bus.rdata.eq(Mux(from_ram, rp.data, mmio_data)),
            bus.req_ready.eq((~busy | answer) & may_accept & ~amo_pending),
        ]
        accept = bus.req_valid & bus.req_ready
        in_ram, is_mmio = self._in_ram(bus.addr), (bus.addr >> 4) == (EXIT_ADDR >> 4)
        m.d.comb += [rp.addr.eq(bus.addr[2:]), rp.en.eq(accept)]
        with m.If(accept):
            m.d.sync += [
                busy.eq(1),
                from_ram.eq(in_ram & (bus.amo != AmoOp.SC)),
                err.eq(~(in_ram | (is_mmio & (bus.amo == AmoOp.NONE)))),
            ]
        with m.Elif(answer):
            m.d.sync += busy.eq(0)
        # Plain stores and successful SCs write in the accept cycle; other AMOs read the old word
        # first and write one cycle later, holding the port (no other access in between).
        sc_ok = resv_valid & (resv_addr == bus.addr)
        plain_write = accept & in_ram & bus.write & ((bus.amo == AmoOp.NONE) | ((bus.amo == AmoOp.SC) & sc_ok))
        rmw = accept & in_ram & (bus.amo != AmoOp.NONE) & (bus.amo != AmoOp.LR) & (bus.amo != AmoOp.SC)
        with m.If(rmw):
            m.d.sync += [amo_pending.eq(1), amo_op.eq(bus.amo), amo_src.eq(bus.wdata), amo_addr.eq(bus.addr)]
        with m.If(amo_pending):
            m.d.sync += amo_pending.eq(0)
            m.d.comb += [wp.addr.eq(amo_addr[2:]), wp.data.eq(amo_result(amo_op, rp.data, amo_src)), wp.en.eq(0b1111)]
        with m.Else():
            m.d.comb += [wp.addr.eq(bus.addr[2:]), wp.data.eq(bus.wdata), wp.en.eq(Mux(plain_write, bus.mask, 0))]
        self._reservation(m, accept, in_ram, sc_ok, resv_valid, resv_addr, mmio_data)
        self._mmio(m, accept & is_mmio & (bus.amo == AmoOp.NONE), mmio_data)

    def _reservation(
        self,
        m: Module,
        accept: Value,
        in_ram: Value,
        sc_ok: Value,
        resv_valid: Signal,
        resv_addr: Signal,
        mmio_data: Signal,
    ) -> None:
        bus = self.core.dbus
        with m.If(accept & in_ram & (bus.amo == AmoOp.LR)):
            m.d.sync += [resv_valid.eq(1), resv_addr.eq(bus.addr)]
        with m.Elif(accept & (bus.amo == AmoOp.SC)):
            m.d.sync += resv_valid.eq(0)
        with m.Elif(accept & bus.write & (bus.addr == resv_addr)):
            m.d.sync += resv_valid.eq(0)  # any other write to the word breaks the reservation
        with m.If(accept & (bus.amo == AmoOp.SC)):
            m.d.sync += mmio_data.eq(~sc_ok)  # the SC answer travels in the non-RAM data path

    def _mmio(self, m: Module, access: Value, mmio_data: Signal) -> None:
        bus = self.core.dbus
        timer = Signal(32)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
            with m.If(timer == 1):
                m.d.sync += self.irq[1].eq(1)
        with m.If(access), m.Switch(bus.addr):
            with m.Case(EXIT_ADDR), m.If(bus.write):
                m.d.sync += [self.exited.eq(1), self.exit_code.eq(bus.wdata)]
            with m.Case(IRQ_ADDR):
                m.d.sync += mmio_data.eq(self.irq)
                with m.If(bus.write):
                    m.d.sync += self.irq.eq(bus.wdata[0:3])
            with m.Case(TIMER_ADDR):
                m.d.sync += mmio_data.eq(timer)
                with m.If(bus.write):
                    m.d.sync += timer.eq(bus.wdata)


@dataclass
class RunResult:
    exit_code: int
    cycles: int
    memory: dict[int, int]  # word address -> value, for the words asked for


def run_program(
    image: list[int], cfg: HarnessConfig | None = None, *, budget: int = 100_000, read_words: tuple[int, ...] = ()
) -> RunResult:
    """Run until the program writes EXIT; raise :class:`CycleBudgetExceeded` after ``budget`` cycles."""
    cfg = cfg or HarnessConfig()
    words = cfg.ram_bytes // 4
    if len(image) > words:
        raise ValueError(f"image of {len(image)} words does not fit {cfg.ram_bytes} bytes of RAM")
    top = TestTop(cfg, list(image) + [0] * (words - len(image)), budget)
    sim = Simulator(top)
    sim.add_clock(1e-6)
    out: dict[str, object] = {}

    async def testbench(ctx: object) -> None:
        await ctx.tick().until(top.done)
        out["exited"], out["code"], out["cycles"] = ctx.get(top.exited), ctx.get(top.exit_code), ctx.get(top.cycles)
        out["mem"] = {a: ctx.get(top.ram.data[a // 4]) for a in read_words}
        out["pc"] = ctx.get(top.core.debug_pc)
        out["protocol"] = ctx.get(top.protocol_error)

    sim.add_testbench(testbench)
    sim.run()
    if out["protocol"]:
        port = "fetch" if out["protocol"] & 1 else "data"
        raise AssertionError(f"the core withdrew or changed an unaccepted request on its {port} port")
    if not out["exited"]:
        raise CycleBudgetExceeded(f"no EXIT write within {budget} cycles (execute-stage pc {out['pc']:#010x})")
    return RunResult(int(out["code"]), int(out["cycles"]), dict(out["mem"]))


def describe_exit(code: int) -> str:
    """Human-readable meaning of an EXIT code written by the ISA test framework (macros.h)."""
    if code == PASS:
        return "pass"
    if code & 0x8000_0000:
        cause = (code >> 16) & 0x7F
        kind = "interrupt" if code & (1 << 23) else "exception"
        return f"unexpected trap ({kind} mcause {cause}) in case {(code & 0xFFFF) >> 1}"
    return f"case {code >> 1} failed"

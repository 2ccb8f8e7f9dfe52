"""The pipelined RV32IMA + Zicsr machine-mode core.

Four stages (see ``docs/core.md``)::

    F  fetch   request on the fetch bus (fetch.py); the response is decoded in the next cycle
    D  decode  decode the instruction, read the register file (write-through from the write port)
    X  execute ALU, branch resolution, CSR access, traps, data request, multiplier stage 1,
               start of the iterative divider
    W  writeback  data response (loads, atomics, access faults), multiplier stage 2, register write

Forwarding: results of ALU/CSR/jump instructions in W reach X combinationally; load, atomic and
multiply results are written at the end of W and captured by a stalled X, so a dependent
instruction right behind them waits one cycle. Branches are predicted not taken and resolved in X
(two-cycle penalty when taken). Traps are precise: exceptions and interrupts are taken in X, data
access faults in W, which kills the younger instruction in X before it has any side effect.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .alu import Alu, BranchUnit
from .bus import AmoOp, BusSignature
from .csr import CsrFile
from .decode import Ctrl, Decoder
from .fetch import Fetch
from .muldiv import Divider, mul_operands, mul_result

__all__ = ["Cause", "Core", "CoreConfig"]


class Cause:
    """mcause values of the exceptions the core raises."""

    FETCH_MISALIGNED, FETCH_FAULT, ILLEGAL, BREAKPOINT = 0, 1, 2, 3
    LOAD_MISALIGNED, LOAD_FAULT, STORE_MISALIGNED, STORE_FAULT, ECALL_M = 4, 5, 6, 7, 11


@dataclass(frozen=True)
class CoreConfig:
    """Parameters of one hart.

    ``fetch_depth`` is how many fetch requests may be in flight or buffered; 2 sustains one
    instruction per cycle on a one-cycle memory, more hides longer fetch latency.
    """

    hart_id: int = 0
    reset_pc: int = 0
    fetch_depth: int = 2

    def __post_init__(self) -> None:
        if not 0 <= self.hart_id < 1 << 32:
            raise ValueError(f"hart_id = {self.hart_id!r} is invalid: allowed 0 to 2**32-1")
        if not (0 <= self.reset_pc < 1 << 32 and self.reset_pc % 4 == 0):
            raise ValueError(f"reset_pc = {self.reset_pc!r} is invalid: allowed a word-aligned 32-bit address")
        if not 1 <= self.fetch_depth <= 8:
            raise ValueError(f"fetch_depth = {self.fetch_depth!r} is invalid: allowed 1 to 8")


class _XStage:
    """Execute-stage pipeline registers."""

    def __init__(self) -> None:
        self.valid, self.pc, self.instr = Signal(name="x_valid"), Signal(32, name="x_pc"), Signal(32, name="x_instr")
        self.ctrl = Signal(Ctrl, name="x_ctrl")
        self.rs1, self.rs2 = Signal(32, name="x_rs1"), Signal(32, name="x_rs2")
        self.fetch_err = Signal(name="x_fetch_err")


class _WStage:
    """Writeback-stage pipeline registers."""

    def __init__(self) -> None:
        self.valid, self.pc = Signal(name="w_valid"), Signal(32, name="w_pc")
        self.rd, self.we, self.result = Signal(5, name="w_rd"), Signal(name="w_we"), Signal(32, name="w_result")
        self.mem, self.store_like = Signal(name="w_mem"), Signal(name="w_store_like")
        self.funct3, self.addr = Signal(3, name="w_funct3"), Signal(32, name="w_addr")
        self.mul = Signal(name="w_mul")
        self.mul_a, self.mul_b = Signal(33, name="w_mul_a"), Signal(33, name="w_mul_b")


class Core(wiring.Component):
    """One hart. ``ibus``/``dbus`` follow the protocol in :mod:`soc.rv32.bus`; the interrupt inputs
    are level-sensitive and appear in ``mip`` (MTIP, MSIP, MEIP)."""

    ibus: Out(BusSignature())
    dbus: Out(BusSignature())
    timer_irq: In(1)
    soft_irq: In(1)
    ext_irq: In(1)
    instret: Out(64)  # minstret, for run statistics outside the core

    def __init__(self, config: CoreConfig) -> None:
        self.config = config
        super().__init__()

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.config
        m.submodules.fetch = fetch = Fetch(cfg.reset_pc, cfg.fetch_depth)
        m.submodules.decoder = dec = Decoder()
        m.submodules.csr = csr = CsrFile(cfg.hart_id)
        m.submodules.div = div = self._div = Divider()
        m.submodules.regfile = rf = Memory(shape=32, depth=32, init=[])
        wiring.connect(m, wiring.flipped(self.ibus), fetch.bus)
        m.d.comb += [
            csr.timer_irq.eq(self.timer_irq),
            csr.soft_irq.eq(self.soft_irq),
            csr.ext_irq.eq(self.ext_irq),
            dec.instr.eq(fetch.instr),
            self.instret.eq(csr.minstret),
        ]
        x, w = _XStage(), _WStage()
        self.debug_pc = x.pc  # for test harness messages only
        wp = rf.write_port()
        self.div_rd = Signal(5)
        self._writeback(m, w, wp, div)
        ex = self._execute(m, x, w, csr, div, wp)
        self._control(m, x, w, ex, fetch, csr)
        self._decode_to_execute(m, x, ex, fetch, dec, rf, wp)
        return m

    # ---- W: data response, multiplier stage 2, register write ----------------------------------

    def _writeback(self, m: Module, w: _WStage, wp: object, div: Divider) -> None:
        bus = self.dbus
        self.w_fire = w.valid & (~w.mem | bus.rsp_valid)
        self.w_busy = w.valid & w.mem & ~bus.rsp_valid
        self.w_trap = w.valid & w.mem & bus.rsp_valid & bus.err
        raw = Signal(32)
        m.d.comb += raw.eq(bus.rdata >> Cat(Const(0, 3), w.addr[0:2]))
        loaded = Mux(
            w.funct3[1],
            raw,
            Mux(
                w.funct3[0],
                Cat(raw[0:16], Mux(w.funct3[2], 0, raw[15].replicate(16))),
                Cat(raw[0:8], Mux(w.funct3[2], 0, raw[7].replicate(24))),
            ),
        )
        value = Mux(
            w.mem, loaded, Mux(w.mul, mul_result(m, w.mul_a.as_signed(), w.mul_b.as_signed(), w.funct3), w.result)
        )
        w_write = self.w_fire & w.we & ~self.w_trap
        div_write = div.done & ~w_write  # the divider uses write slots W leaves free
        m.d.comb += [
            wp.en.eq(w_write | div_write),
            wp.addr.eq(Mux(w_write, w.rd, self.div_rd)),
            wp.data.eq(Mux(w_write, value, div.result)),
            div.ack.eq(div_write),
        ]

    # ---- X: operands, ALU, branches, memory request, CSR, exceptions ---------------------------

    def _execute(self, m: Module, x: _XStage, w: _WStage, csr: CsrFile, div: Divider, wp: object) -> dict:
        c = x.ctrl
        m.submodules.alu = alu = Alu()
        m.submodules.branch = br = BranchUnit()
        a, b = Signal(32), Signal(32)
        fwd_ok = w.valid & ~w.mem & ~w.mul & w.we  # early results in W, forwarded combinationally
        m.d.comb += [
            a.eq(Mux(fwd_ok & (w.rd == c.rs1), w.result, x.rs1)),
            b.eq(Mux(fwd_ok & (w.rd == c.rs2), w.result, x.rs2)),
            alu.a.eq(Mux(c.a_zero, 0, Mux(c.a_pc, x.pc, a))),
            alu.b.eq(Mux(c.b_four, 4, Mux(c.b_imm, c.imm, b))),
            alu.op.eq(Mux(c.alu_add, 0, c.funct3)),
            alu.alt.eq(c.alu_alt & ~c.alu_add),
            br.a.eq(a),
            br.b.eq(b),
            br.funct3.eq(c.funct3),
        ]
        target = Signal(32)
        m.d.comb += target.eq(Cat(Const(0, 1), (Mux(c.jalr, a, x.pc) + c.imm)[1:32]))
        jump = c.jal | c.jalr | c.fence_i | (c.branch & br.taken)  # fence.i: to pc + 4, refetched
        ex = {"a": a, "b": b, "alu": alu.out, "target": target, "jump": jump}
        ex |= self._memory_access(m, x, alu.out, b)
        ex |= self._csr_access(m, x, csr, a)
        ex["exc"], ex["cause"], ex["tval"] = self._exceptions(m, x, ex)
        ex["hazard"] = self._hazards(m, x, w, div)
        return ex

    def _memory_access(self, m: Module, x: _XStage, addr: Value, b: Value) -> dict:
        c, bus = x.ctrl, self.dbus
        size, lane = c.funct3[0:2], addr[0:2]
        is_amo = c.amo != AmoOp.NONE
        mem = c.load | c.store | is_amo
        misaligned = ((size == 1) & addr[0]) | ((size == 2) & (lane != 0))
        store_like = c.store | (is_amo & (c.amo != AmoOp.LR))
        m.d.comb += [
            bus.addr.eq(Cat(Const(0, 2), addr[2:32])),
            bus.write.eq(store_like),
            bus.amo.eq(c.amo),
            bus.wdata.eq(Mux(size == 0, b[0:8].replicate(4), Mux(size == 1, b[0:16].replicate(2), b))),
            bus.mask.eq(Mux(size == 0, Const(1, 4) << lane, Mux(size == 1, Const(3, 4) << lane, 0b1111))),
        ]
        return {"mem": mem, "misaligned": mem & misaligned, "store_like": store_like}

    def _csr_access(self, m: Module, x: _XStage, csr: CsrFile, a: Value) -> dict:
        c = x.ctrl
        src = Mux(c.csr_imm, c.rs1, a)
        m.d.comb += [
            csr.addr.eq(c.imm[0:12]),
            csr.wdata.eq(Mux(c.funct3[1], Mux(c.funct3[0], csr.rdata & ~src, csr.rdata | src), src)),
        ]
        bad = c.csr & (~csr.exists | (csr.read_only & c.csr_write))
        return {"csr_bad": bad}

    def _exceptions(self, m: Module, x: _XStage, ex: dict) -> tuple[Value, Signal, Signal]:
        c = x.ctrl
        cause, tval = Signal(32), Signal(32)
        target_misaligned = ex["jump"] & ex["target"][1]
        # Listed lowest priority first: the last matching assignment wins.
        checks = [
            (ex["misaligned"] & ex["store_like"], Cause.STORE_MISALIGNED, ex["alu"]),
            (ex["misaligned"] & ~ex["store_like"], Cause.LOAD_MISALIGNED, ex["alu"]),
            (target_misaligned, Cause.FETCH_MISALIGNED, ex["target"]),
            (c.ebreak, Cause.BREAKPOINT, x.pc),
            (c.ecall, Cause.ECALL_M, 0),
            (c.illegal | ex["csr_bad"], Cause.ILLEGAL, x.instr),
            (x.fetch_err, Cause.FETCH_FAULT, x.pc),
        ]
        exc = Signal()
        for cond, code, value in checks:
            with m.If(cond):
                m.d.comb += [cause.eq(code), tval.eq(value), exc.eq(1)]
        return exc, cause, tval

    def _hazards(self, m: Module, x: _XStage, w: _WStage, div: Divider) -> Value:
        c = x.ctrl

        def reads(reg: Value) -> Value:
            return (c.uses_rs1 & (c.rs1 == reg)) | (c.uses_rs2 & (c.rs2 == reg))

        late = w.valid & (w.mem | w.mul) & w.we & reads(w.rd)
        div_pending = div.busy | div.done
        div_hazard = div_pending & (reads(self.div_rd) | (c.writes_rd & (c.rd == self.div_rd)) | c.div)
        return late | div_hazard

    # ---- control: stall, trap, redirect, stage advance -----------------------------------------

    def _control(self, m: Module, x: _XStage, w: _WStage, ex: dict, fetch: Fetch, csr: CsrFile) -> None:
        c, bus = x.ctrl, self.dbus
        dreq_hold = Signal()  # a data request is on the bus and must stay until accepted
        ctx_ok = ~ex["hazard"] & ~self.w_busy & ~self.w_trap
        take_irq = x.valid & csr.irq & ~dreq_hold & ~self.w_busy & ~self.w_trap
        go = x.valid & ctx_ok & ~take_irq
        x_trap = (go & ex["exc"]) | take_irq
        clean = go & ~ex["exc"]
        m.d.comb += bus.req_valid.eq(clean & ex["mem"])
        m.d.sync += dreq_hold.eq(bus.req_valid & ~bus.req_ready)
        self.x_fire = clean & (~ex["mem"] | bus.req_ready)
        x_redirect = clean & (ex["jump"] | c.mret)
        trap = self.w_trap | x_trap
        m.d.comb += [
            csr.trap.eq(trap),
            csr.cause.eq(
                Mux(
                    self.w_trap,
                    Mux(w.store_like, Cause.STORE_FAULT, Cause.LOAD_FAULT),
                    Mux(take_irq, csr.irq_cause, ex["cause"]),
                )
            ),
            csr.tval.eq(Mux(self.w_trap, w.addr, Mux(take_irq, 0, ex["tval"]))),
            csr.epc.eq(Mux(self.w_trap, w.pc, x.pc)),
            csr.mret.eq(self.x_fire & c.mret),
            csr.we.eq(self.x_fire & c.csr & c.csr_write),
            csr.retire.eq(self.x_fire),
            csr.unretire.eq(self.w_trap),
            fetch.redirect.eq(trap | x_redirect),
            fetch.target.eq(Mux(trap, csr.trap_vector, Mux(c.mret, csr.mepc, ex["target"]))),
        ]
        self.flush_x = trap | x_redirect
        self._advance_w(m, x, w, ex, csr)
        self._start_divide(m, x, ex)

    def _start_divide(self, m: Module, x: _XStage, ex: dict) -> None:
        c, div = x.ctrl, self._div
        start = self.x_fire & c.div & c.writes_rd  # a divide into x0 has no effect at all
        m.d.comb += [div.start.eq(start), div.a.eq(ex["a"]), div.b.eq(ex["b"]), div.funct3.eq(c.funct3)]
        with m.If(start):
            m.d.sync += self.div_rd.eq(c.rd)

    def _advance_w(self, m: Module, x: _XStage, w: _WStage, ex: dict, csr: CsrFile) -> None:
        c = x.ctrl
        mul_a, mul_b = mul_operands(ex["a"], ex["b"], c.funct3)
        with m.If(~w.valid | self.w_fire):
            m.d.sync += [
                w.valid.eq(self.x_fire),
                w.pc.eq(x.pc),
                w.rd.eq(c.rd),
                w.we.eq(c.writes_rd & ~c.div),
                w.result.eq(Mux(c.csr, csr.rdata, ex["alu"])),
                w.mem.eq(ex["mem"]),
                w.store_like.eq(ex["store_like"]),
                w.funct3.eq(Mux(c.amo != AmoOp.NONE, 0b010, c.funct3)),
                w.addr.eq(ex["alu"]),
                w.mul.eq(c.mul),
                w.mul_a.eq(mul_a),
                w.mul_b.eq(mul_b),
            ]

    # ---- D -> X ---------------------------------------------------------------------------------

    def _decode_to_execute(
        self, m: Module, x: _XStage, ex: dict, fetch: Fetch, dec: Decoder, rf: Memory, wp: object
    ) -> None:
        rp1, rp2 = rf.read_port(domain="comb"), rf.read_port(domain="comb")
        d = dec.ctrl

        def read(port: object, reg: Value) -> Value:
            m.d.comb += port.addr.eq(reg)
            return Mux(wp.en & (wp.addr == reg), wp.data, port.data)

        d_rs1, d_rs2 = read(rp1, d.rs1), read(rp2, d.rs2)
        take = ~x.valid | self.x_fire
        m.d.comb += fetch.pop.eq(fetch.valid & take & ~self.flush_x)
        with m.If(self.flush_x):
            m.d.sync += x.valid.eq(0)
        with m.Elif(take):
            m.d.sync += [
                x.valid.eq(fetch.valid),
                x.pc.eq(fetch.pc),
                x.instr.eq(fetch.instr),
                x.ctrl.eq(d),
                x.rs1.eq(d_rs1),
                x.rs2.eq(d_rs2),
                x.fetch_err.eq(fetch.err),
            ]
        with m.Else():
            # A stalled instruction picks up results as they are written behind it.
            with m.If(wp.en & (wp.addr == x.ctrl.rs1)):
                m.d.sync += x.rs1.eq(wp.data)
            with m.If(wp.en & (wp.addr == x.ctrl.rs2)):
                m.d.sync += x.rs2.eq(wp.data)

"""The tile's register file and command queue (docs/isa.md, "Registers").

The register file sits behind a plain word-addressed request/response port; the AXI4-Lite adapter
in front of it only converts the protocol. Commands are staged in 16 words and pushed as one
512-bit entry into a FIFO that the dispatcher drains. Pushing into a full queue or an error from a
unit sets the sticky error status; clearing the error discards the queued commands, so the tile
never hangs and accepts new work afterwards.
"""

import operator
from functools import reduce

from amaranth.hdl import Cat, Const, DomainRenamer, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.clock_gate import gate_domain, settled_activity
from rtl.config import AccelConfig
from rtl.queue import Queue

__all__ = ["CMD_WORDS", "ERR", "ERROR_EVENTS", "REG", "CommandInterface", "CounterEvents", "ErrorEvent", "hwcfg_word"]

CMD_WORDS = 16
ID_VALUE = 0x50594144  # "PYAD"

# Byte offsets of the registers (docs/isa.md).
REG = {
    "ID": 0x000,
    "HWCFG": 0x004,
    "STATUS": 0x008,
    "CONTROL": 0x00C,
    "IRQ_ENABLE": 0x010,
    "ERROR_SEQ": 0x014,
    "SP_ROWS": 0x018,
    "ACC_ROWS": 0x01C,
    "CMD0": 0x040,
    "CMD_PUSH": 0x080,
    "CYCLES_BUSY": 0x100,
    "MACS_LO": 0x104,
    "MACS_HI": 0x108,
    "DMA_RD_BYTES": 0x10C,
    "DMA_WR_BYTES": 0x110,
    "STALL_EXEC_ON_LOAD": 0x114,
    "STALL_EXEC_ON_STORE": 0x118,
    "STALL_DMA_READ": 0x11C,
    "STALL_DMA_WRITE": 0x120,
    "STALL_QUEUE": 0x124,
    "VEC_ELEMS": 0x128,
    "VEC_CYCLES": 0x12C,
}

# Error codes (docs/isa.md, "Errors"); units: 1 decode, 2 load, 3 exec, 4 store, 5 queue, 6 vector.
ERR = {
    "BAD_OPCODE": 0x01,
    "ZERO_DIM": 0x02,
    "TOO_LARGE": 0x03,
    "SP_RANGE": 0x04,
    "ACC_RANGE": 0x05,
    "MISALIGNED": 0x06,
    "AXI_SLVERR": 0x07,
    "AXI_DECERR": 0x08,
    "BAD_DEPS": 0x09,
    "QUEUE_FULL": 0x0A,
    "BAD_SHAPE": 0x0B,
    "DEADLOCK": 0x0C,
    "BAD_FIELD": 0x0D,
}
UNIT_QUEUE = 5

STALLS = ("exec_on_load", "exec_on_store", "dma_read", "dma_write", "queue")

ErrorEvent = data.StructLayout({"unit": 3, "code": 8, "seq": 16})
# Error events as a unit reports them (an event a cycle, no back-pressure): the decoder's, a gate's,
# the tile's register of the gates' ones, the command interface's input.
ERROR_EVENTS = wiring.Signature({"valid": Out(1), "payload": Out(ErrorEvent)})
CounterEvents = data.StructLayout(
    {
        "macs": 32,  # MACs issued this cycle
        "dma_rd_bytes": 16,
        "dma_wr_bytes": 16,
        "stall": len(STALLS),
        "vec_elems": 8,  # elements the vector engine computed this cycle (at most lanes ≤ 64)
        "vec_busy": 1,  # the vector engine holds an operation
    }
)
RegRequest = data.StructLayout({"addr": 10, "write": 1, "wdata": 32})  # word address


def hwcfg_word(cfg: AccelConfig, queue_depth: int) -> int:
    dtype = {"int8": 0, "bf16": 1}[cfg.dtype]
    acc = {"int32": 0, "fp32": 1, "bf16": 2}[cfg.acc_dtype]
    beat = (cfg.dma_bits // 8).bit_length() - 1
    return cfg.rows | cfg.cols << 8 | dtype << 16 | acc << 18 | beat << 20 | (queue_depth.bit_length() - 1) << 24


# Registers read back are multiplexed by pages of 2**PAGE_BITS words (see `_readback`).
PAGE_BITS = 4

# Cycles the gated command queue stays clocked after a write or read: its buffered output takes the
# next entry within two; more cost nothing measurable.
QUEUE_SETTLE_CYCLES = 4


class CommandInterface(wiring.Component):
    """Registers, command staging and the command queue.

    Ports: ``req``/``rsp`` the register port (response one cycle after a request, always ready),
    ``cmd`` the queued commands (16 words, word 0 first) with their sequence numbers, ``busy`` from
    the units, ``error`` error events from the units, ``events`` per-cycle counter increments,
    ``flush`` a one-cycle pulse telling the units to drop their work (in the cycle after the
    CONTROL write that clears an error), ``irq`` the interrupt.

    ``gate_queue`` clocks the command queue only in the cycles a command enters or leaves it (and
    QUEUE_SETTLE_CYCLES after), for simulation speed (rtl/clock_gate.py), not for FPGAs: the head
    command's words are then registers of that clock, so the decoder's rule checks and field
    decoding, which read nothing else, are evaluated only when the head changes, not every cycle.
    """

    def __init__(
        self, cfg: AccelConfig, *, queue_depth: int = 8, sp_rows: int = 0, acc_rows: int = 0, gate_queue: bool = False
    ) -> None:
        assert queue_depth & (queue_depth - 1) == 0
        self.cfg, self.queue_depth, self.gate_queue = cfg, queue_depth, gate_queue
        self.sp_rows, self.acc_rows = sp_rows, acc_rows
        super().__init__(
            {
                "req": In(stream.Signature(RegRequest)),
                "rsp": Out(wiring.Signature({"valid": Out(1), "rdata": Out(32)})),
                "cmd": Out(stream.Signature(data.StructLayout({"words": data.ArrayLayout(32, CMD_WORDS), "seq": 16}))),
                "busy": In(1),
                "error": In(ERROR_EVENTS),
                "events": In(CounterEvents),
                "flush": Out(1),
                "irq": Out(1),
                "pending": Out(1),  # work accepted and not yet reported done, or a queue drain
                "halted": Out(1),  # an error is pending: a running loop command stops issuing work
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        # Refilled late (rtl/queue.py), so the head register's enable is a flip-flop: a cycle more
        # per command, of the decoder's five at least (CHECK twice, VERIFY, ISSUE, POP).
        queue = Queue(width=CMD_WORDS * 32 + 16, depth=self.queue_depth, buffered=True, refill_late=True)
        if self.gate_queue:
            # The FIFO's state changes only by a write or a read, and the move of the next entry
            # into its output register in the cycles after one.
            active = settled_activity(m, queue.w_en | queue.r_en, QUEUE_SETTLE_CYCLES, "cmd_queue")
            gate_domain(m, "cmd_queue", active)
            queue = DomainRenamer("cmd_queue")(queue)
        m.submodules.queue = queue

        staging = [Signal(32, name=f"cmd{k}") for k in range(CMD_WORDS)]
        seq = Signal(16)
        status = self._status(m)
        words = {name: off // 4 for name, off in REG.items()}

        write = self.req.valid & self.req.p.write
        m.d.comb += self.req.ready.eq(1)
        push = write & (self.req.p.addr == words["CMD_PUSH"])
        cmd_base = words["CMD0"]
        for k, word in enumerate(staging):
            with m.If(write & (self.req.p.addr == cmd_base + k)):
                m.d.sync += word.eq(self.req.p.wdata)

        # Commands are accepted only while no error is pending, so nothing runs past an error.
        overflow = push & ~queue.w_rdy
        m.d.comb += [
            queue.w_data.eq(Cat(*staging, seq)),
            queue.w_en.eq(push & ~status["error"]),
        ]
        with m.If(push & queue.w_rdy & ~status["error"]):
            m.d.sync += seq.eq(seq + 1)
            m.d.sync += status["had_work"].eq(1)

        draining = Signal()
        m.d.comb += [
            self.cmd.p.eq(queue.r_data),
            self.cmd.valid.eq(queue.r_rdy & ~status["error"] & ~draining),
            # Not from cmd.valid: a pop while an error holds the head back (the dispatcher pops only
            # a head it has handed over) or a drain takes it all the same; the FIFO ignores a read
            # while empty.
            queue.r_en.eq(self.cmd.ready | draining),
        ]
        with m.If(draining & (queue.level == 0)):  # (between two reads the head register is empty)
            m.d.sync += draining.eq(0)

        # Busy counts queued commands by the FIFO's level: its output lags a push by a cycle, and
        # `done` must not flash in between.
        # The free entries are counted here (the FIFO's level is a sum of two of its registers, and
        # the free entries a difference of that: two carry chains before STATUS's multiplexer).
        free = Signal(range(self.queue_depth + 1), name="queue_free", init=self.queue_depth)
        pushed, popped = queue.w_en & queue.w_rdy, queue.r_en & queue.r_rdy
        # Both neighbours from the register alone, chosen by the handshakes (not added to them).
        fewer, more = Signal.like(free, name="queue_fewer"), Signal.like(free, name="queue_more")
        m.d.comb += [fewer.eq(free - 1), more.eq(free + 1)]
        with m.If(pushed & ~popped):
            m.d.sync += free.eq(fewer)
        with m.Elif(popped & ~pushed):
            m.d.sync += free.eq(more)
        busy = Signal()
        m.d.comb += busy.eq(self.busy | (free != self.queue_depth))
        self._control(m, write, status, draining, overflow, seq, busy)
        m.d.comb += self.pending.eq(busy | status["had_work"] | draining | self.rsp.valid)
        m.d.comb += self.halted.eq(status["error"])
        self._readback(m, status, free, words, busy)
        return m

    @staticmethod
    def _status(m: Module) -> dict:
        names = ("done", "error", "had_work", "irq_done", "irq_error", "zero_counters")
        status = {n: Signal(name=n) for n in names}
        return status | {"unit": Signal(3, name="err_unit"), "code": Signal(8, name="err_code"), "seq": Signal(16)}

    def _control(self, m: Module, write, status: dict, draining, overflow, seq, busy) -> None:
        """CONTROL and IRQ_ENABLE writes, error capture, done detection, interrupt."""
        addr, wdata = self.req.p.addr, self.req.p.wdata
        with m.If(write & (addr == REG["IRQ_ENABLE"] // 4)):
            m.d.sync += [status["irq_done"].eq(wdata[0]), status["irq_error"].eq(wdata[1])]

        # The first error wins; later ones (e.g. from units finishing their command) are dropped.
        with m.If(~status["error"]):
            with m.If(self.error.valid):
                m.d.sync += [
                    status["error"].eq(1),
                    status["unit"].eq(self.error.payload.unit),
                    status["code"].eq(self.error.payload.code),
                    status["seq"].eq(self.error.payload.seq),
                ]
            with m.Elif(overflow):
                m.d.sync += [
                    status["error"].eq(1),
                    status["unit"].eq(UNIT_QUEUE),
                    status["code"].eq(ERR["QUEUE_FULL"]),
                    status["seq"].eq(seq),
                ]

        with m.If(~busy & status["had_work"]):
            m.d.sync += [status["done"].eq(1), status["had_work"].eq(0)]

        control = write & (addr == REG["CONTROL"] // 4)
        with m.If(control & wdata[0]):
            m.d.sync += status["done"].eq(0)
        with m.If(control & wdata[1]):
            m.d.sync += [status["error"].eq(0), status["code"].eq(0), status["unit"].eq(0), draining.eq(1)]
        # The flush is registered: it fans out to the decoder, the gates and the token counters,
        # whose handshakes run on into the units, and behind the register port's address decode
        # that chain was the tile's longest ECP5 path (26.5 ns). The status changes in the write's
        # cycle as before, so software reads the clear at once; the units drop their work a cycle
        # later, which they could not tell from a later write (the tile drops the errors raised in
        # the write's cycle and the flush's, in ``_errors``).
        m.d.sync += self.flush.eq(control & wdata[1])
        m.d.comb += status["zero_counters"].eq(control & wdata[2])
        m.d.comb += self.irq.eq((status["done"] & status["irq_done"]) | (status["error"] & status["irq_error"]))

    def _readback(self, m: Module, status: dict, free, words: dict, busy) -> None:
        counters = self._counters(m, status["zero_counters"], busy)
        status_word = Cat(busy, status["done"], status["error"], Const(0, 1), status["unit"], Const(0, 1))
        values = {
            "ID": Const(ID_VALUE, 32),
            "HWCFG": Const(hwcfg_word(self.cfg, self.queue_depth), 32),
            "STATUS": Cat(status_word, status["code"], free, Const(0, 8 - len(free)), self.irq),
            "IRQ_ENABLE": Cat(status["irq_done"], status["irq_error"]),
            "ERROR_SEQ": status["seq"],
            "SP_ROWS": Const(self.sp_rows, 32),
            "ACC_ROWS": Const(self.acc_rows, 32),
            **counters,
        }
        m.d.sync += self.rsp.valid.eq(self.req.valid & ~self.req.p.write)
        # A multiplexer per page of 16 words on the address's low bits, then the page's: not one
        # case per register on the whole address (ten levels of logic on ECP5 behind the AXI4-Lite
        # address). Unmapped and write-only registers read as zero.
        addr = self.req.p.addr
        pages: dict[int, dict[int, Value]] = {}
        for name, value in values.items():
            pages.setdefault(words[name] >> PAGE_BITS, {})[words[name] & (1 << PAGE_BITS) - 1] = value
        rdata = []
        for page, regs in pages.items():
            word = Signal(32, name=f"rdata_page{page}")
            with m.Switch(addr[:PAGE_BITS]):
                for index, value in regs.items():
                    with m.Case(index):
                        m.d.comb += word.eq(value)
            rdata.append(Mux(addr[PAGE_BITS:] == page, word, 0))
        m.d.sync += self.rsp.rdata.eq(reduce(operator.or_, rdata))

    def _counters(self, m: Module, zero, busy) -> dict:
        ev = self.events
        incs = {
            "CYCLES_BUSY": busy,
            "MACS": ev.macs,
            "DMA_RD_BYTES": ev.dma_rd_bytes,
            "DMA_WR_BYTES": ev.dma_wr_bytes,
            "VEC_ELEMS": ev.vec_elems,
            "VEC_CYCLES": ev.vec_busy,
            **{f"STALL_{s.upper()}": ev.stall[k] for k, s in enumerate(STALLS)},
        }
        regs = {}
        for name, inc in incs.items():
            counter = Signal(64 if name == "MACS" else 32, name=name.lower())
            # The increment is registered: an event is the end of long paths through the units (a
            # stall is a ready chain), which then do not run on into the counter's carry chain. The
            # counters lag the events by a cycle, long before anyone can read them.
            inc_q = Signal.like(Value.cast(inc), name=f"{name.lower()}_inc")
            m.d.sync += inc_q.eq(Mux(zero, 0, inc))
            with m.If(zero):
                m.d.sync += counter.eq(0)
            with m.Else():
                m.d.sync += counter.eq(counter + inc_q)
            if name == "MACS":
                regs["MACS_LO"], regs["MACS_HI"] = counter[:32], counter[32:]
            else:
                regs[name] = counter
        return regs

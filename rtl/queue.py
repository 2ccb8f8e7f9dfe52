"""A synchronous FIFO whose storage is written every cycle: the drop-in for Amaranth's ``SyncFIFO``
and ``SyncFIFOBuffered`` where entries are wide.

Amaranth's FIFOs enable the storage's write with ``w_en & w_rdy``. Where ``w_en`` is a producer's
handshake (logic) and the entry is wide, that enable is one net to every LUT-RAM cell of the
storage (116 to 528 on the 4x4 tile), and on ECP5 it was the last, longest net of the tile's
latest paths (nextpnr's routed report: 964 LUT-RAM write enables arriving after 9.85 ns). Here the
storage keeps one slot more than the FIFO holds, the slot at ``produce``, which holds no entry: the
input is written there in every cycle, and a write only moves ``produce`` on. So the storage's
write enable is constant and the handshake reaches a pointer of a few bits, never the data.

Every port behaves cycle for cycle as in the Amaranth FIFO it replaces (``tests/test_queue.py``
runs both side by side), so swapping one for the other changes no cycle count.

``refill_late`` (buffered only) is the one departure: the head register takes the next entry in the
cycle after a read, never in the cycle of one, so its enable is a flip-flop of its own rather than
the reader's ``r_en`` through the queue's level. Where the entry is wide and its reader's ready is
logic (the command queue: 360 bits popped by the decoder's state machine), that enable was a net
to hundreds of flip-flops behind two levels of logic, the tile's ECP5 critical path (13.99 ns, 8.34
of it that net's routing). A read then leaves ``r_rdy`` low for a cycle: at most one entry every
two cycles, for a reader that takes no more.
"""

from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib.fifo import FIFOInterface
from amaranth.lib.memory import Memory

__all__ = ["Queue"]


def _step(pointer: Signal, slots: int):
    """``pointer + 1`` modulo ``slots``."""
    if slots == 2 ** len(pointer):
        return pointer + 1
    return Mux(pointer == slots - 1, 0, pointer + 1)


class Queue(Elaboratable, FIFOInterface):
    """``depth`` entries of ``width`` bits. ``buffered``: as ``SyncFIFOBuffered`` (the head in a
    register, so ``r_data`` and ``r_rdy`` start at flip-flops); otherwise as ``SyncFIFO`` (the head
    read from the storage as it is addressed)."""

    def __init__(self, *, width: int, depth: int, buffered: bool = False, refill_late: bool = False) -> None:
        if depth < 1 + buffered:
            raise ValueError(f"Queue depth must be at least {1 + buffered}, not {depth}")
        if refill_late and not buffered:
            raise ValueError("Queue refill_late needs buffered=True (it is the head register's refill)")
        super().__init__(width=width, depth=depth)
        self.buffered, self.refill_late = buffered, refill_late
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform) -> Module:
        m = Module()
        # Entries in the storage: all of them, or all but the head in the output register.
        held = self.depth - 1 if self.buffered else self.depth
        slots = held + 1  # and the slot being written
        inner = Signal(range(held + 1))
        m.submodules.storage = storage = Memory(shape=self.width, depth=slots, init=[])
        w_port, r_port = storage.write_port(), storage.read_port(domain="comb")
        produce, consume = Signal(range(slots)), Signal(range(slots))

        do_write = self.w_en & self.w_rdy
        m.d.comb += [
            self.w_rdy.eq(inner != held),
            w_port.addr.eq(produce),
            w_port.data.eq(self.w_data),
            w_port.en.eq(1),
            r_port.addr.eq(consume),
        ]
        with m.If(do_write):
            m.d.sync += produce.eq(_step(produce, slots))

        if self.refill_late:
            # The head moves into the output register when that is empty, from a register set a
            # cycle ahead: there will be an entry inside (`inner` after this cycle's moves) and the
            # output register will be empty (taken now, or empty and not being refilled).
            do_read = Signal(name="refill")
            emptied = ~do_read & (~self.r_rdy | self.r_en)
            m.d.sync += do_read.eq(emptied & (do_write | (inner > do_read)))
        elif self.buffered:
            # The head moves into the output register when that is empty or being read.
            do_read = (inner != 0) & (~self.r_rdy | self.r_en)
        if self.buffered:
            with m.If(do_read):
                m.d.sync += [self.r_data.eq(r_port.data), self.r_rdy.eq(1)]
            with m.Elif(self.r_en):
                m.d.sync += self.r_rdy.eq(0)
            m.d.comb += self.level.eq(inner + self.r_rdy)
        else:
            do_read = self.r_en & self.r_rdy
            m.d.comb += [self.r_data.eq(r_port.data), self.r_rdy.eq(inner != 0), self.level.eq(inner)]
        with m.If(do_read):
            m.d.sync += consume.eq(_step(consume, slots))
        with m.If(do_write & ~do_read):
            m.d.sync += inner.eq(inner + 1)
        with m.Elif(do_read & ~do_write):
            m.d.sync += inner.eq(inner - 1)
        m.d.comb += [self.w_level.eq(self.level), self.r_level.eq(self.level)]
        return m

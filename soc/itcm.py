"""A hart's private instruction memory: a fetch port, a data port and a loader write port."""

from collections.abc import Sequence

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from soc.rv32.bus import AmoOp, BusSignature

__all__ = ["Itcm", "LoadPortSignature"]


class LoadPortSignature(wiring.Signature):
    """Word writes from the program loader (``en`` for one cycle per word)."""

    def __init__(self, addr_bits: int) -> None:
        super().__init__({"en": Out(1), "addr": Out(addr_bits), "data": Out(32)})


class Itcm(wiring.Component):
    """``size`` bytes at address 0, one-cycle access on both ports, never stalling.

    The fetch port answers ``err`` outside the memory (fetch access fault). The data port reads
    and writes (bytes, halfwords, words), so a program can read its constants in ``.text`` and
    write code (a loader, a JIT): ``fence.i`` then makes it visible to fetch. AMOs answer ``err``
    (store access fault). The address decoder in front of the data port only sends ITCM-range
    addresses. The loader's writes (harts held) take the write port before the data port's.
    ``init`` is the first words' contents at power-up (a program preloaded on an FPGA).
    """

    def __init__(self, size: int, init: Sequence[int] = ()) -> None:
        if len(init) > size // 4:
            raise ValueError(f"init of {len(init)} words does not fit an ITCM of {size // 4} words")
        self.size, self.init = size, tuple(init)
        self.words = size // 4
        super().__init__(
            {
                "fetch": In(BusSignature()),
                "data": In(BusSignature()),
                "load": In(LoadPortSignature((self.words - 1).bit_length() or 1)),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.mem = mem = self.mem = Memory(shape=32, depth=self.words, init=self.init)
        index = slice(2, 2 + (self.words - 1).bit_length())
        for bus, is_data in ((self.fetch, False), (self.data, True)):
            rp = mem.read_port()
            err = Signal()
            accept = bus.req_valid  # always ready: one cycle per access
            m.d.comb += [rp.addr.eq(bus.addr[index]), rp.en.eq(accept), bus.req_ready.eq(1)]
            m.d.comb += [bus.rdata.eq(rp.data), bus.err.eq(err)]
            m.d.sync += bus.rsp_valid.eq(accept)
            bad = bus.addr >= self.size
            if is_data:
                bad = bad | (bus.amo != AmoOp.NONE)
                store = accept & bus.write & ~bad
            with m.If(accept):
                m.d.sync += err.eq(bad)
        wp = mem.write_port(granularity=8)
        with m.If(self.load.en):
            m.d.comb += [wp.en.eq(0b1111), wp.addr.eq(self.load.addr), wp.data.eq(self.load.data)]
        with m.Elif(store):
            m.d.comb += [wp.en.eq(self.data.mask), wp.addr.eq(self.data.addr[index]), wp.data.eq(self.data.wdata)]
        return m

"""Address decoding on the core bus: one master, several slaves by address range, faults elsewhere."""

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from soc.rv32.bus import BusSignature, forward_request

__all__ = ["BusDecoder", "in_range"]

Ranges = tuple[tuple[int, int], ...]  # (base, size) pairs


def in_range(addr: Value, ranges: Ranges) -> Value:
    hit = 0
    for base, size in ranges:
        if size & (size - 1) == 0 and base % size == 0:  # aligned power of two: compare the top bits
            hit = hit | ((addr >> size.bit_length() - 1) == base >> size.bit_length() - 1)
        else:
            hit = hit | ((addr >= base) & (addr < base + size))
    return hit


class BusDecoder(wiring.Component):
    """Routes each request of ``bus`` to the target whose ranges hold its address.

    The master keeps at most one request outstanding (a core's data port, an arbiter's output), so
    the decoder only remembers which target owes the response. An address no target holds is
    answered by the decoder itself with ``err`` one cycle later: the core takes an access fault.
    """

    def __init__(self, targets: tuple[Ranges, ...]) -> None:
        self.targets = targets
        super().__init__({"bus": In(BusSignature()), "out": Out(BusSignature()).array(len(targets))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bus = self.bus
        pending = Signal(range(len(self.targets) + 1))  # which target answers; len(targets) = the fault
        fault_rsp = Signal()
        hits = [in_range(bus.addr, ranges) for ranges in self.targets]
        miss = Signal()
        m.d.comb += miss.eq(~sum(hit << i for i, hit in enumerate(hits)).any())
        m.d.comb += bus.req_ready.eq(miss)
        for i, (out, hit) in enumerate(zip(self.out, hits, strict=True)):
            m.d.comb += [out.req_valid.eq(bus.req_valid & hit), *forward_request(out, bus)]
            with m.If(hit):
                m.d.comb += bus.req_ready.eq(out.req_ready)
            with m.If(pending == i):
                m.d.comb += [bus.rsp_valid.eq(out.rsp_valid), bus.rdata.eq(out.rdata), bus.err.eq(out.err)]
        with m.If(pending == len(self.targets)):
            m.d.comb += [bus.rsp_valid.eq(fault_rsp), bus.err.eq(1)]
        accepted = bus.req_valid & bus.req_ready
        m.d.sync += fault_rsp.eq(accepted & miss)
        with m.If(accepted):
            m.d.sync += pending.eq(len(self.targets))
            for i, hit in enumerate(hits):
                with m.If(hit):
                    m.d.sync += pending.eq(i)
        return m

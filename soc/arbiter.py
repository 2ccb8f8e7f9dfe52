"""Round-robin arbitration: a grant helper, and a bus arbiter that shares one slave among masters."""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from soc.rv32.bus import BusSignature, forward_request

__all__ = ["BusArbiter", "round_robin"]


def _lowest(x: Value, n: int) -> Value:
    """One-hot of the lowest set bit of ``x`` (zero if none)."""
    return (x & (~x + 1))[:n]


def round_robin(m: Module, requests: Value, advance: Value, name: str) -> Value:
    """One-hot grant among ``requests``, starting after the last master served; ``advance`` records
    that the grant of this cycle was taken (so that master goes to the back of the queue)."""
    n = len(requests)
    if n == 1:
        return requests
    last = Signal(n, name=f"{name}_last")
    above = requests & ~((last << 1) - 1)[:n]
    grant = Signal(n, name=f"{name}_grant")
    m.d.comb += grant.eq(Mux(above != 0, _lowest(above, n), _lowest(requests, n)))
    with m.If(advance & (grant != 0)):
        m.d.sync += last.eq(grant)
    return grant


class BusArbiter(wiring.Component):
    """``n`` core-bus masters share one slave, one transaction at a time, served round-robin.

    A new request is granted while the slave is idle or in the cycle its response returns, so
    back-to-back transactions of different masters leave no idle cycle.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        super().__init__({"masters": In(BusSignature()).array(n), "slave": Out(BusSignature())})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, slave = self.n, self.slave
        busy, owner = Signal(), Signal(range(max(2, n)))
        free = ~busy | slave.rsp_valid
        requests = Signal(n)
        m.d.comb += requests.eq(sum((bus.req_valid << i) for i, bus in enumerate(self.masters)))
        accepted = slave.req_valid & slave.req_ready
        grant = round_robin(m, Mux(free, requests, 0), accepted, "arb")
        for i, bus in enumerate(self.masters):
            with m.If(grant[i]):
                m.d.comb += [slave.req_valid.eq(1), bus.req_ready.eq(slave.req_ready), *forward_request(slave, bus)]
                with m.If(accepted):
                    m.d.sync += owner.eq(i)
            m.d.comb += [
                bus.rsp_valid.eq(slave.rsp_valid & busy & (owner == i)),
                bus.rdata.eq(slave.rdata),
                bus.err.eq(slave.err),
            ]
        with m.If(accepted):
            m.d.sync += busy.eq(1)
        with m.Elif(slave.rsp_valid):
            m.d.sync += busy.eq(0)
        return m

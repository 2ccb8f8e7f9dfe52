"""Two AXI4 masters share one AXI4 slave; the top ID bit tells whose response it is."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.axi import Axi4Signature

__all__ = ["Axi4Arbiter"]

_ADDR_FIELDS = ("addr", "len", "size", "burst", "lock", "cache", "prot", "qos")


class Axi4Arbiter(wiring.Component):
    """``m0`` (``id_bits``) and ``m1`` (``m1_id_bits``, default ``id_bits``) → ``out`` (one bit
    more than the wider), ID = master << top | id with ``top`` the wider ID width. Arbiters nest: an
    ``out`` is a master of the next level, which is how the SoC shares main memory among the harts
    and many tiles (docs/tiles.md).

    Read and write address channels alternate between the masters when both ask (round-robin).
    A granted write burst owns the W channel until its last beat; the next AW may be granted in
    that last beat's cycle, so back-to-back bursts lose no cycle. R and B go back by the ID's top
    bit. Slaves may answer reads in any order across IDs: routing only looks at the ID.
    """

    def __init__(self, data_bits: int, id_bits: int = 4, m1_id_bits: int | None = None) -> None:
        m1_id_bits = id_bits if m1_id_bits is None else m1_id_bits
        self.id_bits = max(id_bits, m1_id_bits)  # the master's number goes above the wider ID
        super().__init__(
            {
                "m0": In(Axi4Signature(data_bits, id_bits=id_bits)),
                "m1": In(Axi4Signature(data_bits, id_bits=m1_id_bits)),
                "out": Out(Axi4Signature(data_bits, id_bits=self.id_bits + 1)),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        masters, out, top = (self.m0, self.m1), self.out, self.id_bits
        self._pending = Signal()  # a granted write burst waits behind the one on W
        # Address channels: prefer the master that did not win last time.
        for ch in ("ar", "aw"):
            last = Signal(name=f"{ch}_last")
            valid = [getattr(mi, f"{ch}valid") for mi in masters]
            pick = Signal(name=f"{ch}_pick")
            m.d.comb += pick.eq(Mux(valid[0] & valid[1], ~last, valid[1]))
            self._address(m, ch, pick, masters, out, top)
            with m.If(getattr(out, f"{ch}valid") & getattr(out, f"{ch}ready")):
                m.d.sync += last.eq(pick)
        for i, mi in enumerate(masters):
            m.d.comb += [
                mi.rid.eq(out.rid[:top]),
                mi.rdata.eq(out.rdata),
                mi.rresp.eq(out.rresp),
                mi.rlast.eq(out.rlast),
                mi.rvalid.eq(out.rvalid & (out.rid[top] == i)),
                mi.bid.eq(out.bid[:top]),
                mi.bresp.eq(out.bresp),
                mi.bvalid.eq(out.bvalid & (out.bid[top] == i)),
            ]
        m.d.comb += out.rready.eq(Mux(out.rid[top], self.m1.rready, self.m0.rready))
        m.d.comb += out.bready.eq(Mux(out.bid[top], self.m1.bready, self.m0.bready))
        self._write_data(m, masters, out)
        return m

    def _address(self, m: Module, ch: str, pick: Signal, masters, out, top: int) -> None:
        gate = ~self._pending if ch == "aw" else 1  # one burst may wait behind the one on W
        for i, mi in enumerate(masters):
            with m.If(pick == i):
                for f in _ADDR_FIELDS:
                    m.d.comb += getattr(out, ch + f).eq(getattr(mi, ch + f))
                m.d.comb += getattr(out, f"{ch}id").eq(getattr(mi, f"{ch}id") | (i << top))
                m.d.comb += getattr(out, f"{ch}valid").eq(getattr(mi, f"{ch}valid") & gate)
                m.d.comb += getattr(mi, f"{ch}ready").eq(getattr(out, f"{ch}ready") & gate)

    def _write_data(self, m: Module, masters, out) -> None:
        # Whose W beats pass, per granted AW in order (at most one burst waiting behind the current).
        owner, active = Signal(), Signal()
        pending_owner, pending = Signal(), self._pending
        for i, mi in enumerate(masters):
            with m.If(active & (owner == i)):
                m.d.comb += [
                    out.wdata.eq(mi.wdata),
                    out.wstrb.eq(mi.wstrb),
                    out.wlast.eq(mi.wlast),
                    out.wvalid.eq(mi.wvalid),
                    mi.wready.eq(out.wready),
                ]
        last_beat = active & out.wvalid & out.wready & out.wlast
        aw_fire = out.awvalid & out.awready
        aw_owner = out.awid[self.id_bits]
        with m.If(last_beat):
            m.d.sync += [active.eq(pending | aw_fire), owner.eq(Mux(pending, pending_owner, aw_owner))]
            m.d.sync += pending.eq(pending & aw_fire)
            m.d.sync += pending_owner.eq(aw_owner)
        with m.Elif(aw_fire):
            with m.If(active):
                m.d.sync += [pending.eq(1), pending_owner.eq(aw_owner)]
            with m.Else():
                m.d.sync += [active.eq(1), owner.eq(aw_owner)]

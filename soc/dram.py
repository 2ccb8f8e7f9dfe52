"""The shared data RAM: word-interleaved banks, round-robin per bank, AMOs and LR/SC for every master."""

from collections.abc import Sequence

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from soc.amo import amo_result
from soc.arbiter import round_robin
from soc.rv32.bus import AmoOp, BusSignature

__all__ = ["BankedRam"]


class BankedRam(wiring.Component):
    """``size`` bytes in ``banks`` banks (word ``w`` lives in bank ``w % banks``), ``masters`` ports.

    A request is accepted in the cycle its bank grants it and answered one cycle later, so a hart
    alone on a bank sees single-cycle memory. Read-modify-write AMOs read in the grant cycle and
    write one cycle later, holding their bank for that cycle, so no other access falls in between.
    Each master has one LR reservation; any write to the reserved word by any master breaks it
    (all accesses to a word go through its bank, so reservation checks and writes are ordered).
    The address decoder in front only sends addresses inside the RAM. ``init`` is the first
    words' contents at power-up (word ``w`` goes to bank ``w % banks``).
    """

    def __init__(self, size: int, banks: int, masters: int, init: Sequence[int] = ()) -> None:
        if len(init) > size // 4:
            raise ValueError(f"init of {len(init)} words does not fit a data RAM of {size // 4} words")
        self.size, self.banks, self.n, self.init = size, banks, masters, tuple(init)
        self.bank_bits = (banks - 1).bit_length()
        self.row_bits = (size // 4 // banks - 1).bit_length() or 1
        super().__init__({"ports": In(BusSignature()).array(masters)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, nb = self.n, self.banks
        word_bits = self.bank_bits + self.row_bits
        resv_valid = Signal(n)
        resv_word = Signal(data.ArrayLayout(word_bits, n))
        bank_rdata = Signal(data.ArrayLayout(32, nb))
        writes = []  # (enable, word) of every bank write this cycle, to break reservations
        rsp_bank = [Signal(range(max(2, nb)), name=f"rsp_bank{i}") for i in range(n)]
        rsp_sc = [Signal(2, name=f"rsp_sc{i}") for i in range(n)]  # [0]: answer is an SC result, [1]: failed
        for b in range(nb):
            writes.append(self._bank(m, b, bank_rdata, resv_valid, resv_word, rsp_bank, rsp_sc))
        for i, port in enumerate(self.ports):
            m.d.comb += port.rdata.eq(Mux(rsp_sc[i][0], rsp_sc[i][1], bank_rdata[rsp_bank[i]]))
            m.d.comb += port.err.eq(0)
            m.d.sync += port.rsp_valid.eq(port.req_valid & port.req_ready)
            word = port.addr[2 : 2 + word_bits]
            accepted = port.req_valid & port.req_ready
            hit = 0
            for enable, w in writes:
                hit = hit | (enable & (w == resv_word[i]))
            with m.If(accepted & (port.amo == AmoOp.LR)):
                m.d.sync += [resv_valid[i].eq(1), resv_word[i].eq(word)]
            with m.Elif((accepted & (port.amo == AmoOp.SC)) | hit):
                m.d.sync += resv_valid[i].eq(0)
        return m

    def _bank(self, m: Module, b: int, bank_rdata, resv_valid, resv_word, rsp_bank, rsp_sc) -> tuple:
        mem = Memory(shape=32, depth=self.size // 4 // self.banks, init=self.init[b :: self.banks])
        self._mems = [*getattr(self, "_mems", []), mem]  # for tests that inspect the contents
        m.submodules[f"bank{b}"] = mem
        rp, wp = mem.read_port(), mem.write_port(granularity=8)
        m.d.comb += bank_rdata[b].eq(rp.data)
        rmw = Signal(name=f"rmw{b}")  # second cycle of an AMO: the bank writes op(old, src)
        rmw_op, rmw_src = Signal(AmoOp, name=f"rmw_op{b}"), Signal(32, name=f"rmw_src{b}")
        rmw_row = Signal(self.row_bits, name=f"rmw_row{b}")

        def bank_of(port):
            return port.addr[2 : 2 + self.bank_bits] if self.bank_bits else 0

        requests = Signal(self.n, name=f"bank{b}_requests")
        m.d.comb += requests.eq(
            Mux(rmw, 0, sum((p.req_valid & (bank_of(p) == b)) << i for i, p in enumerate(self.ports)))
        )
        grant = round_robin(m, requests, 1, f"bank{b}")
        row = Signal(self.row_bits, name=f"bank{b}_row")
        sel = Signal(range(max(2, self.n)), name=f"bank{b}_sel")
        port_write = Signal(name=f"bank{b}_write")
        for i, port in enumerate(self.ports):
            with m.If(grant[i]):
                r = port.addr[2 + self.bank_bits : 2 + self.bank_bits + self.row_bits]
                sc_ok = resv_valid[i] & (resv_word[i] == port.addr[2 : 2 + self.bank_bits + self.row_bits])
                plain = port.amo == AmoOp.NONE
                m.d.comb += [port.req_ready.eq(1), row.eq(r), sel.eq(i)]
                m.d.comb += port_write.eq(port.write & (plain | ((port.amo == AmoOp.SC) & sc_ok)))
                m.d.sync += [rsp_bank[i].eq(b), rsp_sc[i].eq(Mux(port.amo == AmoOp.SC, 0b01 | (~sc_ok << 1), 0))]
                is_rmw = ~plain & (port.amo != AmoOp.LR) & (port.amo != AmoOp.SC)
                m.d.sync += [rmw.eq(is_rmw), rmw_op.eq(port.amo), rmw_src.eq(port.wdata), rmw_row.eq(r)]
        with m.If(grant == 0):
            m.d.sync += rmw.eq(0)
        m.d.comb += [rp.addr.eq(row), rp.en.eq(1)]
        mask = Signal(4, name=f"bank{b}_mask")
        wdata = Signal(32, name=f"bank{b}_wdata")
        for i, port in enumerate(self.ports):
            with m.If(sel == i):
                m.d.comb += [mask.eq(port.mask), wdata.eq(port.wdata)]
        with m.If(rmw):
            m.d.comb += [wp.addr.eq(rmw_row), wp.data.eq(amo_result(rmw_op, rp.data, rmw_src)), wp.en.eq(0b1111)]
        with m.Else():
            m.d.comb += [wp.addr.eq(row), wp.data.eq(wdata), wp.en.eq(Mux(port_write & (grant != 0), mask, 0))]
        written_row = Mux(rmw, rmw_row, row)
        word = written_row << self.bank_bits | b if self.bank_bits else written_row
        return (wp.en.any(), word)

"""The scratchpad: banked block-RAM rows of ``dim`` input elements (docs/tile.md).

* ``read[p]`` (streams, ``p`` < ``read_ports``): ``{addr}``. Per bank, the lowest-numbered valid
  port wins; a port that loses sees ``ready = 0`` and keeps its request. The row comes back on the
  valid-only ``read_data[p]`` exactly ``SP_READ_LATENCY`` cycles after the request was accepted.
* ``write`` (stream, always ready): ``{addr, data, mask}``; element ``k`` is written when ``mask[k]``.
* ``write_low`` (stream): the same, of lower priority: ready unless ``write`` writes the same bank
  in that cycle (the vector engine's results beside the load DMA's rows).

A read accepted in the same cycle as a write to the same row returns the row as it was before the
write (read first): a write is seen by reads accepted in later cycles. Every hand-over between the
units leaves that cycle (a dependency token is counted in a register before the next unit sees it;
the vector engine takes its next command the cycle after its last write), and read-first is what
FPGA block RAM does across its two ports: transparency there is emulated with a register and a
multiplexer per bank bit (410 LUTs and 272 flip-flops of the 4x4-bf16 scratchpad, xc7).
Addresses at or above ``sp_geometry(cfg)[0]`` are refused by the controllers before they get here.

Requests and answers are registered (``SP_READ_LATENCY`` = 5: the bank's request, each column's
port, block RAM, each column's answer, the answer). A bank is one memory per column (element), and
each column's ports are driven by flip-flops of their own, loaded from the bank's request register,
so neither the arbitration nor a write's acceptance shares a clock period with the wires to the
block RAMs, which spread over the FPGA (a 256 KiB scratchpad is 128 of an ECP5-85F's 208 DP16KD),
and no register drives more block RAMs than one column's (8 DP16KD for int8 at 16 Ki rows a bank):
one register per bank drove 32 of them, and its 19 ns of routing across the device was the 4x4-int8
tile's ECP5 critical path. The answer multiplexer likewise gets a period after the block RAMs'
clock-to-out. Writes take the same two request stages as reads, so the order between them is kept.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from rtl.config import AccelConfig
from rtl.signals import delayed

__all__ = ["SP_READ_LATENCY", "Scratchpad", "checked_geometry", "sp_geometry", "split_address"]

SP_READ_LATENCY = 5  # request register, the column's port register, block RAM, the column's register, answer


def checked_geometry(rows: int, bank_rows: int) -> tuple[int, int]:
    assert bank_rows >= 1, "memory smaller than one row per bank"
    return rows, bank_rows


def sp_geometry(cfg: AccelConfig) -> tuple[int, int]:
    """(rows, rows per bank) of the scratchpad, as the config defines them."""
    return checked_geometry(cfg.sp_rows, cfg.sp_bank_rows)


def split_address(m: Module, addr, bank_rows: int, banks: int, name: str) -> tuple[Signal, Signal]:
    """(bank, index) of a row address: bank ``addr // bank_rows``, index ``addr % bank_rows``.

    Power-of-two banks are bit slices; otherwise one comparison per bank boundary (``banks`` ≤ 16)
    replaces a divider.
    """
    bank = Signal(range(banks), name=f"{name}_bank")
    index = Signal(range(bank_rows), name=f"{name}_index")
    if bank_rows & (bank_rows - 1) == 0:
        shift = ceil_log2(bank_rows)
        m.d.comb += [index.eq(addr[:shift]), bank.eq(addr[shift:])]
        return bank, index
    m.d.comb += [bank.eq(0), index.eq(addr)]
    for k in range(1, banks):  # ascending: the highest boundary passed is assigned last and wins
        with m.If(addr >= k * bank_rows):
            m.d.comb += [bank.eq(k), index.eq(addr - k * bank_rows)]
    return bank, index


def valid_only(layout: data.Layout) -> wiring.Signature:
    """A pipeline output with no backpressure."""
    return wiring.Signature({"valid": Out(1), "payload": Out(layout)})


def _registered(m: Module, port, valid, bank, index, name: str):
    """A write request of ``port`` (``valid`` as given, its split address, its data and mask) in
    registers."""
    fields = {"valid": 1, "bank": bank.shape(), "index": index.shape()}
    fields |= {"data": port.payload.data.shape(), "mask": port.payload.mask.shape()}
    reg = Signal(data.StructLayout(fields), name=f"{name}_req")
    m.d.sync += [
        reg.valid.eq(valid),
        reg.bank.eq(bank),
        reg.index.eq(index),
        reg.data.eq(port.payload.data),
        reg.mask.eq(port.payload.mask),
    ]
    return reg


class Scratchpad(wiring.Component):
    def __init__(self, cfg: AccelConfig, read_ports: int = 3) -> None:
        self.cfg = cfg
        self.dim = max(cfg.rows, cfg.cols)
        self.n_read = read_ports
        self.rows, self.bank_rows = sp_geometry(cfg)
        row = data.ArrayLayout(cfg.in_bits, self.dim)
        addr = range(self.rows)
        super().__init__(
            {
                "read": In(stream.Signature(data.StructLayout({"addr": addr}))).array(read_ports),
                "read_data": Out(valid_only(data.StructLayout({"data": row}))).array(read_ports),
                "write": In(stream.Signature(data.StructLayout({"addr": addr, "data": row, "mask": self.dim}))),
                "write_low": In(stream.Signature(data.StructLayout({"addr": addr, "data": row, "mask": self.dim}))),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        row = data.ArrayLayout(cfg.in_bits, self.dim)
        w_bank, w_index = split_address(m, self.write.payload.addr, self.bank_rows, cfg.sp_banks, "w")
        l_bank, l_index = split_address(m, self.write_low.payload.addr, self.bank_rows, cfg.sp_banks, "wl")
        m.d.comb += [
            self.write.ready.eq(1),
            self.write_low.ready.eq(~(self.write.valid & (w_bank == l_bank))),
        ]
        # The accepted writes, registered (the request stage, as the reads'): `write_low` only if
        # accepted, so the two never hit one bank in the same cycle here either.
        hi = _registered(m, self.write, self.write.valid, w_bank, w_index, "w")
        lo = _registered(m, self.write_low, self.write_low.valid & self.write_low.ready, l_bank, l_index, "wl")
        w_bank, w_index, l_bank, l_index = hi.bank, hi.index, lo.bank, lo.index

        banks = []  # per bank, its columns' (read port, write enable as requested)
        for b in range(cfg.sp_banks):
            hit, hit_low = hi.valid & (w_bank == b), lo.valid & (l_bank == b)
            # Address and data follow `write` unless only `write_low` writes the bank (without
            # an enable they are not used): a tile that never drives `write_low` (no vector
            # engine) then has no multiplexer in front of its banks.
            low_only = hit_low & ~hit
            columns = []
            for k in range(self.dim):
                mem = Memory(shape=cfg.in_bits, depth=self.bank_rows, init=[])
                m.submodules[f"bank{b}_col{k}"] = mem
                wp, rp = mem.write_port(), mem.read_port()
                # The column's answer registered beside its block RAM: the answer multiplexer
                # then starts from flip-flops, not from the block RAM's clock-to-out (5.8 ns on
                # an ECP5) followed by the wires across the device in the same period.
                out = Signal(cfg.in_bits, name=f"bank{b}_col{k}_out")
                m.d.sync += out.eq(rp.data)
                en = Signal(name=f"bank{b}_col{k}_wen")
                m.d.comb += en.eq(Mux(hit, hi.mask[k], hit_low & lo.mask[k]))
                m.d.sync += wp.en.eq(en)
                with m.If(en):  # only when the column is written: the columns' registers differ
                    m.d.sync += [
                        wp.addr.eq(Mux(low_only, l_index, w_index)),
                        wp.data.eq(Mux(low_only, lo.data[k], hi.data[k])),
                    ]
                columns.append((rp, en, out))
            banks.append(columns)

        requested = self._arbitrate(m, banks)
        for p in range(self.n_read):
            # The answer's bank and valid, SP_READ_LATENCY - 1 cycles on: the bank's request
            # register, the column's port, block RAM, the column's answer register.
            valid = delayed(m, self.read[p].valid & self.read[p].ready, SP_READ_LATENCY - 1, f"resp{p}_valid")
            bank = delayed(m, requested[p], SP_READ_LATENCY - 1, f"resp{p}_bank")
            m.d.sync += self.read_data[p].valid.eq(valid)
            answer = Signal(row, name=f"answer{p}")
            with m.Switch(bank):
                for b, columns in enumerate(banks):
                    with m.Case(b):
                        m.d.comb += answer.eq(Cat(out for _, _, out in columns))
            with m.If(valid):  # the register holds between answers (consumers read it only on valid)
                m.d.sync += self.read_data[p].payload.data.eq(answer)
        return m

    def _arbitrate(self, m: Module, banks: list) -> list[Signal]:
        """Fixed priority per bank: a port is ready unless a lower-numbered valid port wants its bank;
        returns each port's requested bank. Each column's read address is loaded when its bank is
        read, and also when the column is written (the port reads only on a request, so the address
        it holds otherwise is free): the columns' registers then differ, and synthesis keeps one
        per column."""
        split = [
            split_address(m, r.payload.addr, self.bank_rows, self.cfg.sp_banks, f"r{p}")
            for p, r in enumerate(self.read)
        ]
        for p in range(self.n_read):
            blocked = [self.read[q].valid & (split[q][0] == split[p][0]) for q in range(p)]
            m.d.comb += self.read[p].ready.eq(~Cat(*blocked).any() if blocked else 1)
        for b, columns in enumerate(banks):
            wants = [self.read[p].valid & (split[p][0] == b) for p in range(self.n_read)]
            read = Signal(name=f"bank{b}_read")
            index = Signal(range(self.bank_rows), name=f"bank{b}_read_index")
            # The last port's index unless another wants the bank (no zero when none does: the
            # address is loaded only with a request or a write, so its default is free).
            m.d.comb += [read.eq(Cat(*wants).any()), index.eq(split[-1][1])]
            for p in reversed(range(self.n_read - 1)):  # the lowest port is assigned last and wins
                with m.If(wants[p]):
                    m.d.comb += index.eq(split[p][1])
            # The bank's request registered where it is decided, then again in each column's
            # port: the wires from the arbitration to the block RAMs' columns (spread over the
            # device) get a period of their own.
            read_r, index_r = delayed(m, read, 1, f"bank{b}_read"), delayed(m, index, 1, f"bank{b}_read_index")
            for rp, written, _ in columns:
                m.d.sync += rp.en.eq(read_r)  # read only on a request, two cycles after it is accepted
                with m.If(read_r | written):
                    m.d.sync += rp.addr.eq(index_r)
        return [bank for bank, _ in split]

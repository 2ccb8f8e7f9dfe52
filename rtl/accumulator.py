"""The accumulator: banked SRAM of rows of ``cols`` accumulator elements, with add-on-write and read-out.

Ports (docs/tile.md, "Accumulator"):

* ``mesh_write`` (valid-only, never stalls): ``{addr, data, accumulate}``.
* ``dma_write`` (stream): ``{addr, data, mask, accumulate}``; ready unless ``mesh_write`` is valid
  for the same bank in that cycle, or, for an accumulate, valid at all or a read is accepted from
  the same bank in that cycle.
* ``read`` (stream): ``{addr, scale, act, out}``; ready unless the mesh's write of that cycle needs
  the bank's read port for an accumulate, and while fewer than ``ACC_READ_DEPTH`` reads are waiting
  to be taken from ``read_data``.
* ``read_data`` (stream): ``{data}``, the row after ``rtl.readout``; without backpressure it is
  valid exactly ``ACC_READ_LATENCY`` cycles after its request was accepted.

Each bank is one ``Memory`` with one read and one write port. Requests are accepted in a cycle of
their own (A: the arbitration above, from the ports' valid and payload) and registered, so that the
block RAMs' ports, spread over an FPGA, are driven from flip-flops and not from the producers'
logic. A write then goes down a four-stage lane, shared by all banks: S0 reads the old row for an
accumulate, S1 registers each bank's answer beside its block RAM (so that what follows starts from
flip-flops, not from the block RAM's clock-to-out and the wires across the device), S2 captures
the row, S3 adds and writes. A read takes the same S0, S1 and S2, then the read-out.
There are two lanes side by side, and only one of them adds: the mesh's writes take the adding
lane, and so does a DMA accumulate, in a cycle with no mesh write; other DMA writes take the plain
lane, which only writes. (A DMA accumulate is a LOAD's option that the GEMM and CONV2D loops never
use, so a lane of ``cols`` adders for it alone would be the accumulator's largest part left idle.)
Three hazards are closed without stalling, per bank, from its write port: the writes landing at
the end of a read's S0 (the port is not transparent), S1 and S2 are forwarded element-wise, the
newest first, into its S2 capture, from the port's data now and registered one and two cycles
ago. Their enables and addresses are compared with the read's in S0, from registers (each bank's
write enable, address and lane are chosen in S0 and carried through S1 and S2), and S1 registers
the choice, so S2 is one 4:1 multiplexer per element and bank, then the bank's.
Every request goes through the same A register, so a write accepted in cycle t is seen by every
write or read accepted in cycle t + 1 or later.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.fp import FpAdd
from rtl.mac import acc_mant_bits
from rtl.readout import READOUT_LATENCY, Readout, readout_controls
from rtl.scratchpad import checked_geometry, split_address, valid_only
from rtl.shared import add_shared
from rtl.signals import delayed

__all__ = ["ACC_READ_DEPTH", "ACC_READ_LATENCY", "Accumulator", "acc_geometry"]

# Accept (A) → bank read (S0) → bank's answer registered (S1) → row captured (S2) → read-out →
# FIFO write → FIFO output.
ACC_READ_LATENCY = 3 + READOUT_LATENCY + 1
# Reads in flight or waiting; one more than the latency so a consumer that is always ready sees
# one row per cycle.
ACC_READ_DEPTH = ACC_READ_LATENCY + 1


def acc_geometry(cfg: AccelConfig) -> tuple[int, int]:
    """(rows, rows per bank) of the accumulator."""
    return checked_geometry(cfg.acc_rows, cfg.acc_bank_rows)


class Accumulator(wiring.Component):
    def __init__(self, cfg: AccelConfig) -> None:
        self.cfg = cfg
        self.rows, self.bank_rows = acc_geometry(cfg)
        self.row = data.ArrayLayout(cfg.acc_bits, cfg.cols)
        addr = range(self.rows)
        # Created here (added to the module in elaborate) so that testbenches can inspect the contents.
        self.banks = [Memory(shape=self.row, depth=self.bank_rows, init=[]) for _ in range(cfg.acc_banks)]
        self._op = data.StructLayout(
            {
                "valid": 1,
                "bank": range(cfg.acc_banks),
                "index": range(self.bank_rows),
                "data": self.row,
                "mask": cfg.cols,
                "acc": 1,
            }
        )
        super().__init__(
            {
                "mesh_write": In(valid_only(data.StructLayout({"addr": addr, "data": self.row, "accumulate": 1}))),
                "dma_write": In(
                    stream.Signature(
                        data.StructLayout({"addr": addr, "data": self.row, "mask": cfg.cols, "accumulate": 1})
                    )
                ),
                "read": In(stream.Signature(data.StructLayout({"addr": addr, **readout_controls()}))),
                "read_data": Out(stream.Signature(data.StructLayout({"data": self.row}))),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        ports = []
        for b, mem in enumerate(self.banks):
            m.submodules[f"bank{b}"] = mem
            # Not transparent: ``_bank_rows`` forwards the write of the read's cycle with the later ones.
            ports.append((mem.read_port(), mem.write_port(granularity=1)))

        mesh_a, dma_a, add_a, add0, plain0 = self._accept_writes(m)
        read_a = self._accept_read(m, mesh_a)
        self._dma_ready(m, mesh_a, dma_a, read_a)
        read0 = delayed(m, read_a, 1, "read")
        self._drive_read_ports(m, ports, (add_a, read_a))

        # Each lane: its op in S1, S2 and S3 (where it writes). Only the adding lane reads the old row.
        add1, add2, add3 = (Signal(self._op, name=f"add{k}") for k in (1, 2, 3))
        plain1, plain2, plain3 = (Signal(self._op, name=f"plain{k}") for k in (1, 2, 3))
        old3 = Signal(self.row)
        m.d.sync += [add1.eq(add0), add2.eq(add1), add3.eq(add2)]
        m.d.sync += [plain1.eq(plain0), plain2.eq(plain1), plain3.eq(plain2)]
        ahead = self._drive_write_ports(m, ports, (add0, plain0), self._sum(m, add3, old3), plain3.data)
        rows = self._bank_rows(m, ports, ahead)
        m.d.sync += old3.eq(self._pick(m, rows, add2.bank))
        self._read_out(m, rows, read0)
        return m

    def _accept_writes(self, m: Module):
        """A of both lanes: the mesh always, on the adding lane; the DMA when ``_dma_ready`` lets
        it. Returns the mesh's and the DMA's ops as offered (the DMA's valid only if accepted), the
        adding lane's op as offered (for the read ports), and both lanes' ops in S0, from the
        accepted ops registered."""
        cfg = self.cfg
        mesh, dma = self.mesh_write, self.dma_write
        add_a = Signal(self._op, name="add_a")  # as offered: a DMA accumulate before its ready
        add0, plain0 = Signal(self._op, name="add0"), Signal(self._op, name="plain0")
        mesh_bank, mesh_index = split_address(m, mesh.payload.addr, self.bank_rows, cfg.acc_banks, "mesh")
        dma_bank, dma_index = split_address(m, dma.payload.addr, self.bank_rows, cfg.acc_banks, "dma")
        mesh_a, dma_a = Signal(self._op, name="mesh_a"), Signal(self._op, name="dma_a")
        m.d.comb += [
            mesh_a.valid.eq(mesh.valid),
            mesh_a.bank.eq(mesh_bank),
            mesh_a.index.eq(mesh_index),
            mesh_a.data.eq(mesh.payload.data),
            mesh_a.mask.eq(Const(-1, cfg.cols)),
            mesh_a.acc.eq(mesh.payload.accumulate),
            dma_a.valid.eq(dma.valid & dma.ready),
            dma_a.bank.eq(dma_bank),
            dma_a.index.eq(dma_index),
            dma_a.data.eq(dma.payload.data),
            dma_a.mask.eq(dma.payload.mask),
            dma_a.acc.eq(dma.payload.accumulate),
        ]
        mesh0, dma0 = Signal(self._op, name="mesh0"), Signal(self._op, name="dma0")
        m.d.sync += [mesh0.eq(mesh_a), dma0.eq(dma_a)]
        # The DMA op goes down the adding lane when it accumulates (ready only without a mesh
        # write), else down the plain lane.
        for add, mesh_op, dma_op, dma_valid in ((add_a, mesh_a, dma_a, dma.valid), (add0, mesh0, dma0, dma0.valid)):
            m.d.comb += [
                add.eq(Mux(mesh_op.valid, mesh_op, dma_op)),
                add.valid.eq(mesh_op.valid | (dma_valid & dma_op.acc)),
            ]
        m.d.comb += [plain0.eq(dma0), plain0.valid.eq(dma0.valid & ~dma0.acc)]
        return mesh_a, dma_a, add_a, add0, plain0

    def _dma_ready(self, m: Module, mesh_a, dma_a, read_a) -> None:
        """The DMA's write waits while the mesh writes to its bank, and an accumulate (which needs
        the adding lane and the bank's read port) while the mesh writes at all or a read accepted
        in this cycle takes its bank's read port. (The read before the DMA's accumulate: the read's
        ready then comes from registers, the mesh's write and the count of reads owed, and not
        through the load DMA's row queue; GEMM and CONV2D never accumulate by DMA.)"""
        dma = self.dma_write
        acc = dma.payload.accumulate
        m.d.comb += dma.ready.eq(
            ~(mesh_a.valid & (acc | (mesh_a.bank == dma_a.bank))) & ~(acc & read_a.valid & (read_a.bank == dma_a.bank))
        )

    def _accept_read(self, m: Module, mesh_a):
        """A of a read: it takes the bank's read port unless the mesh's accumulate of this cycle
        needs it (a DMA accumulate waits for the read: ``_dma_ready``), and only while the output
        FIFO has room for every read in flight (so nothing ever stalls)."""
        cfg = self.cfg
        bank, index = split_address(m, self.read.payload.addr, self.bank_rows, cfg.acc_banks, "rd")
        busy = Signal(name="rd_bank_busy")
        m.d.comb += busy.eq(mesh_a.valid & mesh_a.acc & (mesh_a.bank == bank))
        outstanding = Signal(range(ACC_READ_DEPTH + 1))
        m.d.comb += self.read.ready.eq(~busy & (outstanding < ACC_READ_DEPTH))
        fire = self.read.valid & self.read.ready
        popped = self.read_data.valid & self.read_data.ready
        m.d.sync += outstanding.eq(outstanding + fire - popped)
        read_a = Signal(
            data.StructLayout({"valid": 1, "bank": bank.shape(), "index": index.shape(), **readout_controls()}),
            name="read_a",
        )
        m.d.comb += [read_a.valid.eq(fire), read_a.bank.eq(bank), read_a.index.eq(index)]
        m.d.comb += [read_a.scale.eq(self.read.payload.scale), read_a.act.eq(self.read.payload.act)]
        m.d.comb += read_a.out.eq(self.read.payload.out)
        return read_a

    @staticmethod
    def _drive_read_ports(m: Module, ports, users) -> None:
        """Read port address per bank, registered from the ops of A, so that S0's read starts from
        flip-flops of the bank's own (their enables differ, so synthesis keeps one copy per bank)
        and not from the lanes' multiplexers; ``users`` in rising priority (the adding lane's op as
        offered, the read as accepted). A DMA accumulate offered is refused exactly when a read
        accepted takes its bank (``_dma_ready``; the mesh's accumulate refuses the read), so the
        read's address wins there, and the DMA's handshake is not on the way to the ports. The
        address holds between reads; only an op's own read is ever used."""
        for b, (rp, _wp) in enumerate(ports):
            m.d.sync += rp.en.eq(0)
            for i, user in enumerate(users):
                needs = user.valid & (user.bank == b) if i == 1 else user.valid & user.acc & (user.bank == b)
                with m.If(needs):
                    m.d.sync += [rp.addr.eq(user.index), rp.en.eq(1)]

    def _drive_write_ports(self, m: Module, ports, ops0, result, plain_data) -> list[tuple[Signal, Signal]]:
        """S3's write per bank, from registers: its enable, address and lane are chosen in S0 from
        the lanes' ops ``ops0`` (the adding lane's first) and carried through S1 and S2, so that the
        ports, the forwarding and the compares of ``_bank_rows`` start from registers, not from
        multiplexers of the ops. (xc7, 4x4-bf16, measured with the one-bit late compare of
        ``_bank_rows``: the accumulator synthesized alone 2,138 -> 2,033 LUTs, but the flat tile
        only 14,420 -> 14,407, where its forwarding was already mapped about as well.) Returns each
        bank's write address held in S1, and its enable and address held in S2, which ``_bank_rows``
        compares ahead."""
        add0, plain0 = ops0
        ahead = []
        for b, (_rp, wp) in enumerate(ports):
            add_here, plain_here = (op.valid & (op.bank == b) for op in ops0)  # never both (S0 refuses it)
            en_0, addr_0 = Signal.like(wp.en, name=f"bank{b}_wen_s0"), Signal.like(wp.addr, name=f"bank{b}_waddr_s0")
            for op, here in ((add0, add_here), (plain0, plain_here)):
                with m.If(here):
                    m.d.comb += [en_0.eq(op.mask), addr_0.eq(op.index)]
            en_n = delayed(m, en_0, 2, f"bank{b}_wen_next")
            addr_1 = delayed(m, addr_0, 1, f"bank{b}_waddr_s1")
            addr_n = delayed(m, addr_1, 1, f"bank{b}_waddr_next")
            from_add_n = delayed(m, add_here, 2, f"bank{b}_from_add_next")
            en = Signal.like(wp.en, name=f"bank{b}_wen")
            addr = Signal.like(wp.addr, name=f"bank{b}_waddr")
            from_add = Signal(name=f"bank{b}_from_add")
            m.d.sync += [en.eq(en_n), addr.eq(addr_n), from_add.eq(from_add_n)]
            # Kept: ``_bank_rows`` forwards it too, and without the attribute ABC builds it again
            # inside each forwarding multiplexer (49 LUTs more in the 4x4-bf16 accumulator, xc7).
            wd = Signal(self.row, name=f"bank{b}_wdata", attrs={"keep": 1})
            m.d.comb += [wd.eq(Mux(from_add, result, plain_data)), wp.en.eq(en), wp.addr.eq(addr), wp.data.eq(wd)]
            ahead.append((addr_1, en_n, addr_n))
        return ahead

    def _sum(self, m: Module, op2, old2):
        """S3: the row to write, ``old + data`` per element for an accumulate, else ``data``."""
        cfg = self.cfg
        result = Signal(self.row, name="add_result")
        for k in range(cfg.cols):
            if cfg.acc_dtype == "int32":
                # make_adder's int unit is int32 + int16 (a PE product); rows add int32 + int32.
                total = (old2[k] + op2.data[k])[:32]
            else:
                # One Verilog module for every column's adder: the netlist Amaranth checks and
                # emits for the accumulator is a few cells per column instead of a float adder each.
                add = add_shared(m, f"add{k}", f"pyard_acc_add_{cfg.acc_dtype}", lambda: _row_adder(cfg))
                x32 = Cat(Const(0, 16), op2.data[k]) if cfg.acc_bits == 16 else op2.data[k]
                m.d.comb += [add.acc.eq(old2[k]), add.x.eq(x32)]
                total = add.o
            m.d.comb += result[k].eq(Mux(op2.acc, total, op2.data[k]))
        return result

    def _bank_rows(self, m: Module, ports, ahead) -> list[Signal]:
        """Per bank, the row its port read two cycles ago (S2 of the op that read it), with the
        bank's writes since then: each element written at the end of the read's own cycle (S0),
        of the next (S1) or of this one (S2) is taken from that write, the newest first. The port's
        answer is registered beside its block RAM (``bank{b}_out``), so that the multiplexers and
        the wires across the device start from flip-flops and not from the block RAM's
        clock-to-out. The writes are the port's data now and one and two cycles ago (registers of
        it: the port is not transparent), so S2 is one 4:1 multiplexer per element (one LUT6 on
        xc7, as the 3:1 it replaces used a LUT5), and its 2-bit choice per element is registered
        in S1. All three writes are found in S0, by the enables and addresses the write port
        carries (``ahead``: held in S1 and in S2, and the port's own) compared with the read's, from
        registers. (Forwarding from the port's data, already the lanes' results on the bank, once
        per bank and not once per reader and lane, was 132 LUTs fewer in the 4x4-bf16
        accumulator, xc7, measured. With the S1 register, xc7, 4x4-bf16, the accumulator alone:
        1,985 LUTs before it, 1,995 so; 2,148 with the two older writes folded into one registered
        forward in S1 instead, a 2:1 multiplexer more per bit; 2,104 with the choice registered
        from per-element hits of S0.)"""
        cols = self.cfg.cols
        rows = []
        for b, ((rp, wp), (addr_s1, en_s2, addr_s2)) in enumerate(zip(ports, ahead, strict=True)):
            out = Signal(self.row, name=f"bank{b}_out")
            m.d.sync += out.eq(rp.data)
            # In S0 of the read: whether the writes landing at the end of S0, S1 and S2 (the ops now
            # in S3, S2 and S1) are to its row; in S1, with their enables (then the port's of a cycle
            # ago, the port's, S2's), the choice of S2 per element, registered.
            same = [Signal(name=f"bank{b}_{n}_addr") for n in ("early", "mid", "late")]
            for eq, addr in zip(same, (wp.addr, addr_s2, addr_s1), strict=True):
                m.d.sync += eq.eq(addr == rp.addr)
            early_en = Signal.like(wp.en, name=f"bank{b}_wen_d0")
            m.d.sync += early_en.eq(wp.en)
            early, mid, late = (en & eq.replicate(cols) for en, eq in zip((early_en, wp.en, en_s2), same, strict=True))
            choice = Signal(data.ArrayLayout(2, cols), name=f"bank{b}_fwd")  # 3 S2, 2 S1, 1 S0, 0 none
            for k in range(cols):
                m.d.sync += choice[k].eq(Mux(late[k], 3, Mux(mid[k], 2, Mux(early[k], 1, 0))))
            written = [wp.data, Signal(self.row, name=f"bank{b}_wdata_d0"), Signal(self.row, name=f"bank{b}_wdata_d1")]
            m.d.sync += [written[1].eq(written[0]), written[2].eq(written[1])]
            row = Signal(self.row, name=f"bank{b}_row")
            for k in range(cols):
                with m.Switch(choice[k]):
                    for c, src in ((3, written[0]), (2, written[1]), (1, written[2]), (0, out)):
                        with m.Case(c):
                            m.d.comb += row[k].eq(src[k])
            rows.append(row)
        return rows

    def _pick(self, m: Module, rows: list[Signal], bank) -> Signal:
        """The row of ``bank`` among the banks' ``rows``."""
        row = Signal(self.row)
        with m.Switch(bank):
            for b, bank_row in enumerate(rows):
                with m.Case(b):
                    m.d.comb += row.eq(bank_row)
        return row

    def _read_out(self, m: Module, rows: list[Signal], read0) -> None:
        """S2 of a read feeds the read-out pipeline, whose rows queue in a FIFO for ``read_data``."""
        read2 = delayed(m, read0, 2, "read_s")
        m.submodules.readout = readout = Readout(self.cfg)
        m.d.comb += [
            readout.inp.valid.eq(read2.valid),
            readout.inp.payload.data.eq(self._pick(m, rows, read2.bank)),
            readout.inp.payload.scale.eq(read2.scale),
            readout.inp.payload.act.eq(read2.act),
            readout.inp.payload.out.eq(read2.out),
        ]
        # Never full: reads are accepted only while fewer than ACC_READ_DEPTH rows are owed.
        m.submodules.fifo = fifo = SyncFIFO(width=self.row.size, depth=ACC_READ_DEPTH)
        m.d.comb += [
            fifo.w_en.eq(readout.result.valid),
            fifo.w_data.eq(readout.result.payload.data),
            self.read_data.valid.eq(fifo.r_rdy),
            self.read_data.payload.data.eq(fifo.r_data),
            fifo.r_en.eq(self.read_data.ready),
        ]


def _row_adder(cfg: AccelConfig) -> FpAdd:
    """A row element plus another, in the accumulator format: for bf16 both are bf16, so the
    datapath is bf16's (``Bf16Add``'s), not a bf16 plus an fp32 product's as in a PE. Its
    normalization is the serial one (``FpAdd``'s ``serial_normalize``): 6 LUTs fewer a column."""
    return FpAdd(acc_mant_bits(cfg), x_frac_bits=acc_mant_bits(cfg), serial_normalize=True)

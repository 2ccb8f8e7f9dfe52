"""cocotb testbench of the DMA (top ``dma_top``): every transfer compared exactly with a NumPy model.

Main memory is ``tb.axi_memory.AxiMemory`` on ``m_axi_`` (cocotbext-axi; read latency from the
arguments, 32 cycles by default). The scratchpad and accumulator stand-ins of ``tb/dma_top.py``
are loaded and inspected through their backdoor ports. The model keeps a copy of main memory and
of both local memories; after each transfer the whole main memory and the local rows in question
are compared with it.

Parameters come from the environment: PYARD_CONFIG (the config as JSON) and PYARD_TB_ARGS (JSON:
``seed``, ``transfers``, ``latency``, ``min_throughput`` = fraction of the bus width required).
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import First, ReadOnly, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from rtl.config import AccelConfig
from rtl.dma import DESCRIPTOR, DmaError, DmaKind, element_bytes
from tb.axi_memory import AxiMemory

CLK_NS = 10
MEM_SIZE = 1 << 20
DTYPES = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}


def tb_args(**defaults) -> dict:
    return defaults | json.loads(os.environ.get("PYARD_TB_ARGS", "{}"))


def config() -> AccelConfig:
    return AccelConfig.from_dict(json.loads(os.environ["PYARD_CONFIG"]))


@dataclass
class Desc:
    kind: int
    dram_addr: int
    dram_stride: int
    rows: int
    elems: int
    local_addr: int = 0
    transpose: int = 0
    accumulate: int = 0
    scale: int = 0
    act: int = 0
    out: int = 1
    zero: int = 0
    col: int = 0  # mem→sp: first column; > 0 writes only the row's elements

    def word(self) -> int:
        word = 0
        for name, field in DESCRIPTOR:
            width = field.width
            word |= (getattr(self, name) & ((1 << width) - 1)) << field.offset
        return word

    def row_addr(self, r: int) -> int:
        return (self.dram_addr + r * self.dram_stride) & 0xFFFFFFFF


class Bench:
    def __init__(self, dut, cfg: AccelConfig, latency: int) -> None:
        self.dut = dut
        self.cfg = cfg
        self.dim = cfg.dim
        self.sp_rows = cfg.sp_rows
        self.acc_rows = cfg.acc_rows
        self.in_dt = DTYPES[cfg.in_bits // 8]
        self.acc_dt = DTYPES[cfg.acc_bits // 8]
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())
        self.mem = AxiMemory(dut, "m_axi_", dut.clk, dut.rst, size=MEM_SIZE, read_latency=latency)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        for half in (self.axil.write_if, self.axil.read_if):
            half.log.setLevel(logging.WARNING)  # it logs every access at INFO
        self.expect_mem = bytearray(MEM_SIZE)
        self.sp = np.zeros((self.sp_rows, self.dim), dtype=self.in_dt)
        self.acc = np.zeros((self.acc_rows, cfg.cols), dtype=self.acc_dt)
        self.bytes_read = 0
        self.bytes_written = 0

    # -- reset and backdoors --------------------------------------------------------------------

    async def reset(self, rng: np.random.Generator) -> None:
        dut = self.dut
        for sig in (dut.cmd__valid, dut.sp_dbg_we, dut.acc_dbg_we):
            sig.value = 0
        dut.done__ready.value = 1
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        data = rng.integers(0, 256, MEM_SIZE, dtype=np.uint8).tobytes()
        self.mem.data[:] = data
        self.expect_mem[:] = data
        self.sp[:] = rng.integers(0, 1 << self.cfg.in_bits, self.sp.shape)
        self.acc[:] = rng.integers(0, 1 << self.cfg.acc_bits, self.acc.shape, dtype=np.uint64)
        await self._load_local()

    async def _load_local(self) -> None:
        dut = self.dut
        for prefix, model in (("sp", self.sp), ("acc", self.acc)):
            we, addr, wdata = (getattr(dut, f"{prefix}_dbg_{n}") for n in ("we", "addr", "wdata"))
            we.value = 1
            for r in range(model.shape[0]):
                addr.value = r
                wdata.value = int.from_bytes(model[r].tobytes(), "little")
                await RisingEdge(dut.clk)
            we.value = 0

    async def read_local(self, which: str, first: int, count: int) -> np.ndarray:
        """Rows ``first…first+count-1`` of the scratchpad (``sp``) or accumulator (``acc``) via the backdoor."""
        dut = self.dut
        model = self.sp if which == "sp" else self.acc
        addr, rdata = getattr(dut, f"{which}_dbg_addr"), getattr(dut, f"{which}_dbg_rdata")
        nbytes = model.shape[1] * model.dtype.itemsize
        rows = []
        for r in range(first, first + count):
            addr.value = r
            await RisingEdge(dut.clk)
            await ReadOnly()
            rows.append(np.frombuffer(rdata.value.to_unsigned().to_bytes(nbytes, "little"), dtype=model.dtype))
            await RisingEdge(dut.clk)
        return np.array(rows, dtype=model.dtype).reshape(count, model.shape[1])

    # -- running a descriptor -------------------------------------------------------------------

    async def submit(self, desc: Desc) -> None:
        """Hold ``desc`` on ``cmd`` until it is accepted (``cmd.valid`` stays high for a next one)."""
        dut = self.dut
        dut.cmd__payload.value = desc.word()
        dut.cmd__valid.value = 1
        while True:
            await ReadOnly()
            ready = bool(dut.cmd__ready.value)
            await RisingEdge(dut.clk)
            if ready:
                return

    async def run(self, desc: Desc, max_cycles: int = 200_000) -> tuple[int, int]:
        """Submit one descriptor; return (done code, cycles from acceptance to done)."""
        dut = self.dut
        await self.submit(desc)
        dut.cmd__valid.value = 0
        start = get_sim_time("ns")
        await ReadOnly()
        if not dut.done__valid.value:
            timeout = Timer(max_cycles * CLK_NS, unit="ns")
            if await First(RisingEdge(dut.done__valid), timeout) is timeout:
                raise AssertionError(f"no done within {max_cycles} cycles for {desc}")
            await ReadOnly()
        word = dut.done__payload.value.to_unsigned()
        cycles = round((get_sim_time("ns") - start) / CLK_NS)
        await RisingEdge(dut.clk)
        error, code = word & 1, word >> 1
        assert error == (code != 0), f"done error bit {error} with code {code}"
        return code, cycles

    # -- the model ------------------------------------------------------------------------------

    def elem_bytes(self, desc: Desc) -> int:
        return element_bytes(self.cfg, desc.kind, desc.out)

    def mem_rows(self, desc: Desc, mem: bytes | bytearray, dtype: np.dtype) -> np.ndarray:
        n = desc.elems * dtype.itemsize
        rows = [np.frombuffer(mem[desc.row_addr(r) : desc.row_addr(r) + n], dtype=dtype) for r in range(desc.rows)]
        return np.array(rows, dtype=dtype)

    def readout(self, rows: np.ndarray, out: int) -> np.ndarray:
        """The stand-in accumulator's read-out: identity for out = 1, low byte / bf16 truncation for out = 0."""
        if out != 0:
            return rows
        if self.cfg.acc_dtype == "int32":
            return (rows & 0xFF).astype(np.uint8)
        if self.cfg.acc_dtype == "fp32":
            return (rows >> 16).astype(np.uint16)
        return rows

    def apply(self, desc: Desc) -> None:
        """What a successful ``desc`` does, on the model."""
        n = desc.rows
        if desc.kind == DmaKind.MEM_SP:
            values = self.mem_rows(desc, self.expect_mem, self.in_dt) * (1 - desc.zero)
            if desc.transpose:
                block = np.zeros((desc.elems, self.dim), dtype=self.in_dt)
                block[:, :n] = values.T
                self.sp[desc.local_addr : desc.local_addr + desc.elems] = block
            elif desc.col:
                self.sp[desc.local_addr : desc.local_addr + n, desc.col : desc.col + desc.elems] = values
            else:
                block = np.zeros((n, self.dim), dtype=self.in_dt)
                block[:, : desc.elems] = values
                self.sp[desc.local_addr : desc.local_addr + n] = block
            self.bytes_read += n * desc.elems * self.in_dt.itemsize * (1 - desc.zero)
        elif desc.kind == DmaKind.MEM_ACC:
            values = self.mem_rows(desc, self.expect_mem, self.acc_dt) * (1 - desc.zero)
            target = self.acc[desc.local_addr : desc.local_addr + n, : desc.elems]
            target[:] = (target + values) if desc.accumulate else values  # wraps in the unsigned dtype
            self.bytes_read += values.nbytes * (1 - desc.zero)
        else:
            if desc.kind == DmaKind.SP_MEM:
                values = self.sp[desc.local_addr : desc.local_addr + n, : desc.elems]
            else:
                values = self.readout(self.acc[desc.local_addr : desc.local_addr + n, : desc.elems], desc.out)
            for r in range(n):
                raw = values[r].tobytes()
                self.expect_mem[desc.row_addr(r) : desc.row_addr(r) + len(raw)] = raw
            self.bytes_written += values.nbytes

    def local_span(self, desc: Desc) -> tuple[str, int, int]:
        """The local memory and rows a descriptor touches, one row of margin either side."""
        which = "acc" if desc.kind in (DmaKind.MEM_ACC, DmaKind.ACC_MEM) else "sp"
        count = desc.elems if desc.transpose and desc.kind == DmaKind.MEM_SP else desc.rows
        limit = self.acc_rows if which == "acc" else self.sp_rows
        first = max(0, desc.local_addr - 1)
        return which, first, min(limit, desc.local_addr + count + 1) - first

    async def check(self, desc: Desc, label: str) -> None:
        if self.mem.data != self.expect_mem:
            got = np.frombuffer(self.mem.data, np.uint8)
            exp = np.frombuffer(self.expect_mem, np.uint8)
            bad = np.flatnonzero(got != exp)
            raise AssertionError(
                f"{label} {desc}: main memory differs at {len(bad)} bytes, first {bad[0]:#x}: "
                f"got {got[bad[0] : bad[0] + 8]} expected {exp[bad[0] : bad[0] + 8]}"
            )
        which, first, count = self.local_span(desc)
        got = await self.read_local(which, first, count)
        exp = (self.sp if which == "sp" else self.acc)[first : first + count]
        if not np.array_equal(got, exp):
            r = int(np.flatnonzero((got != exp).any(axis=1))[0])
            raise AssertionError(
                f"{label} {desc}: {which} row {first + r} is {got[r].tolist()}, expected {exp[r].tolist()}"
            )

    async def transfer(self, desc: Desc, label: str = "transfer") -> int:
        code, cycles = await self.run(desc)
        assert code == DmaError.OK, f"{label} {desc}: done code {code}"
        self.apply(desc)
        await self.check(desc, label)
        return cycles

    async def check_counters(self) -> None:
        """The byte counters, read over AXI4-Lite, against the model's totals."""
        got_read = int.from_bytes((await self.axil.read(0x0, 4)).data, "little")
        got_written = int.from_bytes((await self.axil.read(0x4, 4)).data, "little")
        assert (got_read, got_written) == (self.bytes_read, self.bytes_written), (
            f"counters read {got_read} written {got_written}, expected {self.bytes_read} {self.bytes_written}"
        )


# -- random descriptors ---------------------------------------------------------------------------


def random_desc(bench: Bench, rng: np.random.Generator, kind: int) -> Desc:
    cfg = bench.cfg
    out = int(rng.integers(0, 2)) if kind == DmaKind.ACC_MEM else 1
    es = element_bytes(cfg, kind, out)
    to_sp = kind in (DmaKind.MEM_SP, DmaKind.SP_MEM)
    elem_max = bench.dim if to_sp else cfg.cols
    transpose = int(kind == DmaKind.MEM_SP and rng.random() < 0.3)
    elems = int(rng.integers(1, elem_max + 1))
    rows = int(rng.integers(1, (bench.dim if transpose else 24) + 1))
    row_bytes = elems * es
    shape = rng.random()
    if shape < 0.35:
        stride = row_bytes  # contiguous: one segment, long bursts
    elif shape < 0.85:
        stride = row_bytes + es * int(rng.integers(0, 24))
    else:
        stride = -(row_bytes + es * int(rng.integers(0, 8)))  # rows going down in memory
    span = (rows - 1) * abs(stride) + row_bytes
    if rng.random() < 0.4:  # just below a 4 KiB page end, so bursts must split
        start = 4096 * int(rng.integers(1, MEM_SIZE // 4096 - 4)) - es * int(rng.integers(1, 64))
    else:
        start = es * int(rng.integers(0, (MEM_SIZE - span - 4096) // es))
    addr = start + (rows - 1) * abs(stride) if stride < 0 else start
    local_rows = elems if transpose else rows
    placeable = kind == DmaKind.MEM_SP and not transpose and elems < bench.dim
    capacity = bench.sp_rows if to_sp else bench.acc_rows
    local = int(rng.integers(0, capacity - local_rows + 1))
    return Desc(
        kind=kind,
        dram_addr=addr,
        dram_stride=stride & 0xFFFFFFFF,
        rows=rows,
        elems=elems,
        local_addr=local,
        transpose=transpose,
        accumulate=int(rng.integers(0, 2)),
        scale=int(rng.integers(0, 1 << 32)),
        act=int(rng.integers(0, 4)),
        out=out,
        zero=int(kind in (DmaKind.MEM_SP, DmaKind.MEM_ACC) and rng.random() < 0.15),
        # A packed CONV2D segment: placed at a column, writing only its own elements.
        col=int(rng.integers(1, bench.dim - elems + 1)) if placeable and rng.random() < 0.3 else 0,
    )


async def setup(dut) -> tuple[Bench, dict, np.random.Generator]:
    args = tb_args(seed=1, transfers=40, latency=32, min_throughput=0.9)
    rng = np.random.default_rng(args["seed"])
    bench = Bench(dut, config(), args["latency"])
    await bench.reset(rng)
    return bench, args, rng


@cocotb.test()
async def dma_random(dut) -> None:
    """Random 2-D transfers in all four directions, strides, offsets, transposes; counters at the end."""
    bench, args, rng = await setup(dut)
    for n in range(args["transfers"]):
        desc = random_desc(bench, rng, n % 4 if n < 8 else int(rng.integers(0, 4)))
        await bench.transfer(desc, f"transfer {n}")
        if desc.kind == DmaKind.ACC_MEM:
            got = (int(dut.acc_last_scale.value), int(dut.acc_last_act.value))
            assert got == (desc.scale, desc.act), f"read-out got scale/act {got}, expected {desc.scale, desc.act}"
    # Everything else in the local memories is untouched too.
    assert np.array_equal(await bench.read_local("sp", 0, bench.sp_rows), bench.sp), "scratchpad differs"
    assert np.array_equal(await bench.read_local("acc", 0, bench.acc_rows), bench.acc), "accumulator differs"
    await bench.check_counters()


async def stream(bench: Bench, descs: list[Desc], expected: list[int], label: str) -> int:
    """Push ``descs`` back to back; check each reports in order with its code and that every good
    one's data lands; return the cycles from the first submission to the last report."""
    dut = bench.dut
    codes: list[int] = []

    async def collect() -> None:
        while len(codes) < len(descs):
            await ReadOnly()
            if dut.done__valid.value:
                codes.append(dut.done__payload.value.to_unsigned() >> 1)
            await RisingEdge(dut.clk)

    collector = cocotb.start_soon(collect())
    start = get_sim_time("ns")
    for desc in descs:
        await bench.submit(desc)
    dut.cmd__valid.value = 0
    await collector
    cycles = round((get_sim_time("ns") - start) / CLK_NS)
    assert codes == expected, f"{label}: done codes {codes}, expected {expected}"
    for desc, code in zip(descs, expected, strict=True):
        if code == DmaError.OK:
            bench.apply(desc)
    for desc in descs:
        await bench.check(desc, label)
    await bench.check_counters()
    return cycles


@cocotb.test()
async def dma_pipelined_loads(dut) -> None:
    """Short loads pushed back to back (zero fills and a refused one among them): each reports in
    order with its own code, all data lands, and the stream takes far less than one memory latency
    per load, because the next load's bursts go out while the previous one's data is in flight."""
    bench, args, rng = await setup(dut)
    descs = []
    for n in range(24):
        desc = random_desc(bench, rng, DmaKind.MEM_SP if n % 3 else DmaKind.MEM_ACC)
        desc.rows, desc.transpose = int(rng.integers(1, 5)), 0
        desc.dram_stride = desc.elems * bench.elem_bytes(desc)  # contiguous: one burst each
        descs.append(desc)
    bad = 9  # elements beyond the row width: refused, between good loads
    descs[bad] = Desc(DmaKind.MEM_SP, 0x1000, 64, 2, bench.dim + 1)
    expected = [DmaError.TOO_LARGE if i == bad else DmaError.OK for i in range(len(descs))]
    cycles = await stream(bench, descs, expected, "pipelined")
    dut._log.info("%d short loads in %d cycles (memory latency %d)", len(descs), cycles, args["latency"])
    assert cycles < len(descs) * args["latency"] / 2, f"{len(descs)} loads took {cycles} cycles: not pipelined"


@cocotb.test()
async def dma_transposed_blocks(dut) -> None:
    """Transposed loads back to back (the dh GEMM's weight tiles), blocks of every shape, a refused
    one and a plain row among them: in order, exact, and one block every max(rows, elems) cycles
    where memory keeps up (the block stage writes one block while the next one's rows come in)."""
    bench, _, rng = await setup(dut)
    bench.mem.read_if.latency = 4  # with the test top's 4 reads in flight, memory gives a burst a cycle
    n, beat = bench.dim, bench.cfg.dma_bits // 8
    descs, bound = [], 0
    for i in range(24):
        rows, elems = (n, n) if i % 3 else (int(rng.integers(1, n + 1)), int(rng.integers(1, n + 1)))
        row_bytes = elems * bench.in_dt.itemsize
        local = int(rng.integers(0, bench.sp_rows - n))
        descs.append(Desc(DmaKind.MEM_SP, 0x2000 + 64 * i * n, row_bytes, rows, elems, local, transpose=1))
        bound += max(rows * math.ceil(row_bytes / beat), elems)  # contiguous rows: one burst a block
    bad, plain = 7, 15
    descs[bad] = Desc(DmaKind.MEM_SP, 0x1000, 64, n + 1, 2, transpose=1)
    descs[plain] = Desc(DmaKind.MEM_SP, 0x1000, 64, 3, n, local_addr=5)
    expected = [DmaError.TOO_LARGE if i == bad else DmaError.OK for i in range(len(descs))]
    cycles = await stream(bench, descs, expected, "transposed stream")
    dut._log.info("%d transposed blocks in %d cycles (%d at one block per max(rows, elems))", len(descs), cycles, bound)
    assert cycles <= 1.1 * bound + 64, f"{len(descs)} blocks took {cycles} cycles, bound {bound}: not overlapped"


def _short(bench: Bench, rng: np.random.Generator, kind: int) -> Desc:
    """A random load of a few rows (a transposed one: a block), so that many are in flight."""
    desc = random_desc(bench, rng, kind)
    desc.rows = min(desc.rows, 6)  # fewer rows from the same dram_addr: within the span it placed
    return desc


def _reads_an_error(bench: Bench, desc: Desc) -> bool:
    """Some row of ``desc`` overlaps a range the memory answers with an error."""
    row_bytes = desc.elems * bench.elem_bytes(desc)
    return any(
        bench.mem.backing.response(a, a + row_bytes) != AxiResp.OKAY for a in map(desc.row_addr, range(desc.rows))
    )


def _inside(bench: Bench, rng: np.random.Generator, kind: int, span: tuple[int, int]) -> Desc:
    """A short load whose every byte lies in ``span``, more than a beat from its ends (so every
    beat of it answers that range's error)."""
    desc = _short(bench, rng, kind)
    es = bench.elem_bytes(desc)
    desc.zero, desc.dram_stride = 0, desc.elems * es * int(rng.integers(1, 3))
    room = span[1] - span[0] - 2 * 64 - (desc.rows - 1) * desc.dram_stride - desc.elems * es
    desc.dram_addr = span[0] + 64 + es * int(rng.integers(0, room // es))
    return desc


@cocotb.test()
async def dma_pipelined_errors(dut) -> None:
    """Loads back to back with AXI errors among them, SLVERR and DECERR, several erring loads in
    flight at once and more loads than tags: each reports its own code in order, an erring load
    changes nothing, and the good loads between them land exactly."""
    bench, _, rng = await setup(dut)
    spans = {DmaError.SLVERR: (0x40000, 0x44000), DmaError.DECERR: (0x44000, 0x48000)}
    bench.mem.inject(*spans[DmaError.SLVERR], AxiResp.SLVERR)
    bench.mem.inject(*spans[DmaError.DECERR], AxiResp.DECERR)
    descs, expected = [], []
    for i in range(96):
        kind = DmaKind.MEM_ACC if i % 4 == 3 else DmaKind.MEM_SP
        code = int(rng.choice([DmaError.OK, DmaError.SLVERR, DmaError.DECERR], p=[0.5, 0.3, 0.2]))
        if code == DmaError.OK:
            desc = _short(bench, rng, kind)
            while not desc.zero and _reads_an_error(bench, desc):
                desc = _short(bench, rng, kind)
        else:
            desc = _inside(bench, rng, kind, spans[code])
            bench.bytes_read += desc.rows * desc.elems * bench.elem_bytes(desc)  # its beats still count
        descs.append(desc)
        expected.append(code)
    await stream(bench, descs, expected, "pipelined errors")
    bench.mem.clear_errors()


async def refused(bench: Bench, desc: Desc, code: int) -> None:
    """``desc`` is refused with ``code`` and moves no data: no burst, no counted byte, no change."""
    bursts = (bench.mem.read_bursts, bench.mem.write_bursts)
    got, _ = await bench.run(desc)
    assert got == code, f"{desc}: code {got}, expected {code}"
    assert (bench.mem.read_bursts, bench.mem.write_bursts) == bursts, f"{desc} was refused but issued bursts"
    await bench.check(desc, "refused")
    await bench.check_counters()


@cocotb.test()
async def dma_errors(dut) -> None:
    """Every error code; an AXI error injected by the memory; a good transfer after each error."""
    bench, _, rng = await setup(dut)
    cfg, n = bench.cfg, bench.dim
    acc_es = cfg.acc_bits // 8
    row = n * bench.in_dt.itemsize  # bytes of a full scratchpad row
    good = Desc(DmaKind.MEM_SP, 0x1000, row, 2, n, local_addr=3)
    await refused(bench, Desc(DmaKind.MEM_SP, 0x1000, 64, 0, 4), DmaError.ZERO)
    await refused(bench, Desc(DmaKind.SP_MEM, 0x1000, 64, 3, 0), DmaError.ZERO)
    await refused(bench, Desc(DmaKind.MEM_ACC, 0x1001, 64, 0, 4), DmaError.ZERO)  # zero wins over misaligned
    await refused(bench, Desc(DmaKind.MEM_SP, 0x1000, 64, 2, n + 1), DmaError.TOO_LARGE)
    await refused(bench, Desc(DmaKind.MEM_SP, 0x1000, 64, 2, n - 1, col=2), DmaError.TOO_LARGE)
    await refused(bench, Desc(DmaKind.ACC_MEM, 0x1000, 256, 2, cfg.cols + 1), DmaError.TOO_LARGE)
    await refused(bench, Desc(DmaKind.MEM_SP, 0x1000, 64, n + 1, 2, transpose=1), DmaError.TOO_LARGE)
    await refused(bench, Desc(DmaKind.MEM_ACC, 0x1000 + 1, 64, 2, 2), DmaError.MISALIGNED)
    await refused(bench, Desc(DmaKind.ACC_MEM, 0x1000, 64 + acc_es // 2, 2, 2), DmaError.MISALIGNED)
    if cfg.in_bits == 16:
        await refused(bench, Desc(DmaKind.SP_MEM, 0x1003, 64, 2, 2), DmaError.MISALIGNED)
    await refused(bench, Desc(DmaKind.MEM_SP, 0x1000, 64, 2, 2, local_addr=bench.sp_rows - 1), DmaError.RANGE)
    await refused(bench, Desc(DmaKind.ACC_MEM, 0x1000, 64, 1, 2, local_addr=bench.acc_rows), DmaError.RANGE)
    await refused(
        bench, Desc(DmaKind.MEM_SP, 0x1000, 64, 1, 3, local_addr=bench.sp_rows - 2, transpose=1), DmaError.RANGE
    )
    await bench.transfer(good, "after refusals")

    # AXI errors: every beat of these transfers falls in an error range, so nothing may change.
    for resp, code in ((AxiResp.SLVERR, DmaError.SLVERR), (AxiResp.DECERR, DmaError.DECERR)):
        bench.mem.inject(0x40000, 0x48000, resp)
        for desc in (
            Desc(DmaKind.MEM_SP, 0x40000 + 8, 3 * row, 7, n, local_addr=10),
            Desc(DmaKind.MEM_ACC, 0x41000, acc_es * cfg.cols, 5, cfg.cols, local_addr=1, accumulate=1),
            Desc(DmaKind.SP_MEM, 0x42000 + 2 * cfg.in_bits // 8, 4 * row, 6, n, local_addr=20),
            Desc(DmaKind.ACC_MEM, 0x43000, 1024, min(16, bench.acc_rows), 1),
        ):
            got, _ = await bench.run(desc)
            assert got == code, f"{desc} in an error range: code {got}, expected {code}"
            useful = desc.rows * desc.elems * bench.elem_bytes(desc)
            if desc.kind in (DmaKind.MEM_SP, DmaKind.MEM_ACC):
                bench.bytes_read += useful
            else:
                bench.bytes_written += useful
            await bench.check(desc, "after an AXI error")
        bench.mem.clear_errors()
        await bench.transfer(Desc(DmaKind.MEM_SP, 0x40000, row, 5, n, local_addr=7), "after an AXI error")
        await bench.transfer(Desc(DmaKind.SP_MEM, 0x42000, row, 5, n, local_addr=7), "after an AXI error")
    await bench.check_counters()
    await bench.transfer(random_desc(bench, rng, DmaKind.MEM_ACC), "final")


@cocotb.test()
async def dma_latency(dut) -> None:
    """A one-beat read: AR-to-R latency of the memory model and the DMA's own overhead, in cycles."""
    bench, args, _ = await setup(dut)
    desc = Desc(DmaKind.MEM_SP, 0x2000, 64, 1, 1, local_addr=0)
    edges: dict[str, int] = {}

    async def watch() -> None:
        for cycle in range(4 * args["latency"] + 100):
            await ReadOnly()  # the settled values of this cycle; a handshake completes on the next edge
            for name in ("cmd", "m_axi__ar", "m_axi__r", "done"):
                sep = "" if name.startswith("m_axi") else "__"
                if name in edges:
                    continue
                if getattr(dut, f"{name}{sep}valid").value and getattr(dut, f"{name}{sep}ready").value:
                    edges[name] = cycle
            await RisingEdge(dut.clk)

    cocotb.start_soon(watch())
    await bench.transfer(desc, "latency")
    await RisingEdge(dut.clk)
    assert edges["m_axi__r"] - edges["m_axi__ar"] == args["latency"], f"memory latency wrong: {edges}"
    dut._log.info(
        "DMA latency: cmd accepted -> AR %d cycles, R -> done valid %d cycles (memory latency %d)",
        edges["m_axi__ar"] - edges["cmd"],
        edges["done"] - edges["m_axi__r"],
        args["latency"],
    )


@cocotb.test()
async def dma_throughput(dut) -> None:
    """A long contiguous mem→sp load: bytes per cycle, against the bus width."""
    bench, args, _ = await setup(dut)
    beat = bench.cfg.dma_bits // 8
    row_bytes = bench.dim * bench.in_dt.itemsize
    rows = min(bench.sp_rows, 16384 // row_bytes)
    desc = Desc(DmaKind.MEM_SP, 0x10000 + 4096 - 64, row_bytes, rows, bench.dim)
    cycles = await bench.transfer(desc, "throughput")
    rate = rows * row_bytes / cycles
    dut._log.info(
        "DMA throughput: %d bytes mem->sp in %d cycles = %.2f B/cycle = %.3f of the %d-byte bus (latency %d)",
        rows * row_bytes,
        cycles,
        rate,
        rate / beat,
        beat,
        args["latency"],
    )
    if row_bytes % beat == 0:  # rows narrower than a beat are limited by one local row write per cycle
        assert rate >= args["min_throughput"] * beat, f"{rate:.2f} B/cycle is below {args['min_throughput']} of {beat}"
    # A strided load (one segment per row) for the log: its rate depends on the bursts in flight.
    stride = row_bytes + 64
    strided = Desc(DmaKind.MEM_SP, 0x30000, stride, min(rows, 64), bench.dim)
    cycles = await bench.transfer(strided, "strided throughput")
    dut._log.info(
        "DMA strided: %d rows of %d bytes (stride %d) in %d cycles = %.2f B/cycle",
        strided.rows,
        row_bytes,
        stride,
        cycles,
        strided.rows * row_bytes / cycles,
    )


@cocotb.test()
async def axil_scratch(dut) -> None:
    """The AXI4-Lite slave bundle binds to cocotbext-axi: a register written and read back."""
    bench, _, rng = await setup(dut)
    value = int(rng.integers(0, 1 << 32))
    await bench.axil.write(0x8, value.to_bytes(4, "little"))
    assert int.from_bytes((await bench.axil.read(0x8, 4)).data, "little") == value
    await bench.check_counters()

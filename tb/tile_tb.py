"""cocotb testbench of the tile through its real ports: AXI4-Lite commands, AXI4 main memory.

A GEMM is tiled in Python into LOAD / EXEC / STORE commands with dependency tokens (the way
firmware drives the tile), run, and the result read back from memory and compared exactly with a
NumPy model that follows the same tiling and rounding order. Error commands must set the status
and interrupt, never hang, and the tile must run correctly after the error is cleared.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, First, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from rtl.cmd import ERR, REG
from rtl.config import AccelConfig
from rtl.gemm_loop_model import loop_result
from tb import operands, stimulus
from tb.axi_memory import AxiMemory
from tb.tile_cases import (
    LoopCase,
    check_exact,
    conv_case,
    conv_words,
    gemm_case,
    gemm_words,
    resident_b_row,
    unit_scale,
)

LOAD, STORE, EXEC, FENCE = 0x01, 0x02, 0x03, 0x04
WAIT_PREV, SIGNAL_NEXT = 1 << 8, 1 << 11
ACC_TARGET, OUT_FULL = 1 << 12, 1 << 15
MEM_SIZE = 1 << 20  # bytes of main memory unless PYARD_TB_ARGS names "mem_mib"
CLOCK_NS = 10


@dataclass
class Tile:
    dut: object
    cfg: AccelConfig
    axil: AxiLiteMaster
    mem: AxiMemory

    async def write(self, reg: str | int, value: int) -> None:
        offset = REG[reg] if isinstance(reg, str) else reg
        await self.axil.write_dword(offset, value & 0xFFFFFFFF)

    async def read(self, reg: str) -> int:
        return await self.axil.read_dword(REG[reg])

    async def push(self, words: list[int]) -> None:
        for k, w in enumerate(words):
            await self.write(REG["CMD0"] + 4 * k, w)
        await self.write("CMD_PUSH", 1)

    async def wait_idle(self, max_cycles: int) -> int:
        """Poll STATUS until not busy; returns STATUS. Fails with the counters after ``max_cycles``."""
        for _ in range(max_cycles // 64):
            status = await self.read("STATUS")
            if not status & 1:
                return status
            await ClockCycles(self.dut.clk, 64)
        names = ("STATUS", "CYCLES_BUSY", "MACS_LO", "DMA_RD_BYTES", "DMA_WR_BYTES", "VEC_ELEMS")
        counters = {name: await self.read(name) for name in names}
        raise AssertionError(f"tile still busy after {max_cycles} cycles: {counters}")


async def start(dut) -> Tile:
    cfg = AccelConfig.from_dict(json.loads(os.environ["PYARD_CONFIG"]))
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
    args = tb_args(latency=32, mem_mib=MEM_SIZE >> 20)
    mem = AxiMemory(dut, "m_axi_", dut.clk, dut.rst, size=args["mem_mib"] << 20, read_latency=args["latency"])
    await RisingEdge(dut.clk)
    return Tile(dut, cfg, axil, mem)


def esize(cfg: AccelConfig) -> int:
    return cfg.in_bits // 8


def gemm_commands(cfg: AccelConfig, m: int, k: int, n: int, addr: dict[str, int]) -> list[list[int]]:
    """C (int32/fp32, full) = A (m×k) · B (k×n), tiled as firmware would. Each (n, k) tile gets its
    own scratchpad rows and each n tile its own accumulator rows, so only LOAD→EXEC and EXEC→STORE
    tokens are needed; LOADs complete in order, so one token covers the B and A loads of a step."""
    e, acc_bytes = esize(cfg), cfg.acc_bits // 8
    cmds, sp_next, acc_next = [], 0, 0
    for n0 in range(0, n, cfg.cols):
        nw = min(cfg.cols, n - n0)
        c_base = acc_next
        acc_next += m
        k_tiles = list(range(0, k, cfg.rows))
        for kt, k0 in enumerate(k_tiles):
            kw = min(cfg.rows, k - k0)
            b_base, a_base = sp_next, sp_next + cfg.rows
            sp_next += cfg.rows + m
            b_addr = addr["B"] + (k0 * n + n0) * e
            cmds.append([LOAD, b_addr, n * e, kw | nw << 16, b_base])
            cmds.append([LOAD | SIGNAL_NEXT, addr["A"] + k0 * e, k * e, m | kw << 16, a_base])
            last = kt == len(k_tiles) - 1
            flags = WAIT_PREV | (SIGNAL_NEXT if last else 0) | (1 << 12 if kt else 0)
            cmds.append([EXEC | flags, b_base, a_base, m, c_base])
        c_addr = addr["C"] + n0 * acc_bytes
        cmds.append([STORE | WAIT_PREV | OUT_FULL, c_addr, n * acc_bytes, m | nw << 16, c_base, unit_scale(cfg)])
    return cmds  # run_commands ends them with a FENCE


def gemm_reference(cfg: AccelConfig, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The raw-command GEMM's result: the loop's order, no bias, identity read-out at full width."""
    return gemm_loop_reference(cfg, a, b, None, {"scale": unit_scale(cfg), "act": 0, "out": 1})


def put(t: Tile, addr: int, array: np.ndarray) -> None:
    raw = array.tobytes()
    t.mem.data[addr : addr + len(raw)] = raw


def get(t: Tile, addr: int, shape: tuple[int, int], dtype, stride: int | None = None) -> np.ndarray:
    """A ``shape`` array of ``dtype`` from memory, rows ``stride`` elements apart."""
    rows, cols = shape
    stride = cols if stride is None else stride
    size = np.dtype(dtype).itemsize
    raw = bytes(t.mem.data[addr : addr + ((rows - 1) * stride + cols) * size])
    flat = np.frombuffer(raw + bytes(size * (rows * stride - len(raw) // size)), dtype=dtype)
    return flat.reshape(rows, stride)[:, :cols]


def layout(t: Tile, sizes: dict[str, int]) -> dict[str, int]:
    """Addresses of the operands (tb/operands.py); a testbench error, never a hardware mismatch,
    if they do not fit the memory."""
    addr, used = operands.place(sizes)
    if used > len(t.mem.data):
        raise RuntimeError(f"testbench: operands of {used} bytes do not fit its {len(t.mem.data)}-byte memory")
    return addr


def tb_args(**defaults) -> dict:
    return defaults | json.loads(os.environ.get("PYARD_TB_ARGS", "{}"))


async def run_commands(t: Tile, commands: list[list[int]], budget: int = 100_000) -> None:
    """Push ``commands`` and a FENCE as queue slots free up; wait for idle without an error."""
    for words in [*commands, [FENCE]]:
        while (await t.read("STATUS")) >> 16 & 0xFF == 0:  # wait for a free queue slot
            await ClockCycles(t.dut.clk, 16)
        await t.push(words)
    status = await t.wait_idle(budget)
    assert not status & 4, f"error status {status:#x}"


async def run_gemm(t: Tile, m: int, k: int, n: int, seed: int) -> None:
    cfg = t.cfg
    rng = np.random.default_rng(seed)
    a = stimulus.inputs(cfg, rng, (m, k), special=0.0)
    b = stimulus.inputs(cfg, rng, (k, n), special=0.0)
    addr = {"A": 0x1000, "B": 0x40000, "C": 0x80000}
    put(t, addr["A"], a)
    put(t, addr["B"], b)
    await run_commands(t, gemm_commands(cfg, m, k, n, addr), budget=200_000)
    acc_bytes = cfg.acc_bits // 8
    got = get(t, addr["C"], (m, n), np.uint32 if acc_bytes == 4 else np.uint16)
    want = gemm_reference(cfg, a, b)
    bad = np.argwhere(got != want)
    assert bad.size == 0, (
        f"{len(bad)} wrong elements, first at {bad[0]}: {got[tuple(bad[0])]:#x} != {want[tuple(bad[0])]:#x}"
    )
    macs = (await t.read("MACS_HI")) << 32 | await t.read("MACS_LO")
    assert macs % (cfg.rows * cfg.cols) == 0 and macs >= m * cfg.rows * cfg.cols


@cocotb.test()
async def tile_gemm(dut) -> None:
    t = await start(dut)
    args = tb_args(shapes=[[1, 1, 1], [3, 5, 7], [9, 11, 6]], seed=3)
    assert await t.read("ID") == 0x50594144
    for i, (m, k, n) in enumerate(args["shapes"]):
        await run_gemm(t, m, k, n, args["seed"] + i)


@cocotb.test()
async def tile_errors(dut) -> None:
    """Each bad command: error status, code and interrupt; then a clear and a correct GEMM."""
    t = await start(dut)
    cfg = t.cfg
    await t.write("IRQ_ENABLE", 0b10)
    bad = [
        ([[0x7E]], ERR["BAD_OPCODE"]),
        ([[LOAD, 0, 1, 0, 0]], ERR["ZERO_DIM"]),
        ([[LOAD | 1 << 13, 0, 1, 1 | (cfg.dim + 1) << 16, 0]], ERR["TOO_LARGE"]),  # transposed, too wide
        ([[LOAD, 0, 1, 2 | (cfg.dim + 1) << 16, cfg.sp_rows - 3]], ERR["SP_RANGE"]),  # a split LOAD's 2nd block
        ([[LOAD, 0, 1, 2 | 1 << 16, cfg.sp_rows - 1]], ERR["SP_RANGE"]),
        ([[EXEC, 0, 0, 1, cfg.acc_rows]], ERR["ACC_RANGE"]),
        ([[LOAD | ACC_TARGET, 2, 4, 1 | 1 << 16, 0]], ERR["MISALIGNED"]),
        # An EXEC waiting for a LOAD token no LOAD will give, a FENCE behind it (docs/isa.md).
        ([[EXEC | WAIT_PREV, 0, 0, 1, 0], [FENCE]], ERR["DEADLOCK"]),
    ]
    for commands, code in bad:
        for words in commands:
            await t.push(words)
        await ClockCycles(dut.clk, 16)  # a split LOAD is checked twice, two cycles each (rtl/decode.py)
        status = await t.read("STATUS")
        assert status & 4 and (status >> 8) & 0xFF == code, f"{commands}: status {status:#x}, want code {code}"
        assert dut.irq.value == 1
        await t.write("CONTROL", 0b10)
        await ClockCycles(dut.clk, 4)
        assert not (await t.read("STATUS")) & 4 and dut.irq.value == 0
    await run_gemm(t, 5, 6, 7, seed=11)


# -- split transfers: LOAD / STORE rows wider than a local row -----------------------------------


async def split_round_trip(t: Tile, rows: int, elems: int, acc: bool, pad: int, seed: int) -> None:
    """A ``rows × elems`` matrix LOADed with one split command (docs/isa.md, "Split transfers"); the
    local rows read back must hold each memory row cut into local-row-wide pieces, and a split
    STORE of the same rows must give the matrix back, leaving the bytes between its rows alone."""
    cfg, rng = t.cfg, np.random.default_rng(seed)
    width = cfg.cols if acc else cfg.dim
    if acc:
        x = stimulus.accumulators(cfg, rng, (rows, elems))
        flags_load, flags_store, scale = ACC_TARGET, OUT_FULL, unit_scale(cfg)
    else:
        x = stimulus.inputs(cfg, rng, (rows, elems), special=0.0)
        flags_load, flags_store, scale = 0, 1 << 12, 0
    es = x.itemsize  # memory rows are `pad` elements apart (0: one contiguous stretch)
    stride, local = (elems + pad) * es, 5
    src, image, dst = 0x1000, 0x40000, 0x80000
    put(t, src, np.pad(x, ((0, 0), (0, pad))))
    guard = rng.integers(0, 256, rows * stride, dtype=np.uint8)
    t.mem.data[dst : dst + len(guard)] = guard.tobytes()
    n = -(-elems // width)  # local rows per memory row
    span = rows * n
    shape = rows | elems << 16
    await run_commands(
        t,
        [
            [LOAD | flags_load, src, stride, shape, local],
            [FENCE],
            [STORE | flags_store, image, width * es, span | width << 16, local, scale],  # the local image
            [STORE | flags_store, dst, stride, shape, local, scale],
        ],
    )
    # Memory row r, elements [j·w, (j+1)·w) at local row r·n + j; the scratchpad's rows are zero
    # past the row's elements, the accumulator keeps what it held there.
    want, written = np.zeros((span, width), x.dtype), np.zeros((span, width), bool)
    for r in range(rows):
        for j in range(n):
            part = x[r, j * width : (j + 1) * width]
            want[r * n + j, : len(part)] = part
            written[r * n + j, : len(part)] = True
    got = get(t, image, (span, width), x.dtype)
    bad = np.argwhere((got != want) & (written | (not acc)))
    assert bad.size == 0, f"local rows of a {rows}x{elems} split LOAD: first wrong at {bad[:4]}"
    back = np.frombuffer(bytes(t.mem.data[dst : dst + rows * stride]), np.uint8).reshape(rows, stride)
    expect = guard.reshape(rows, stride).copy()
    expect[:, : elems * es] = x.view(np.uint8).reshape(rows, elems * es)
    assert np.array_equal(back, expect), f"split STORE of {rows}x{elems}: not the matrix, or bytes between rows changed"


@cocotb.test()
async def tile_split_transfers(dut) -> None:
    t = await start(dut)
    w = t.cfg.dim
    cases = [[3, 2 * w + 1, False, 3], [1, 5 * w, False, 3], [4, w, False, 3], [2, 3 * w - 1, True, 0]]
    cases += [[4, 4 * w, False, 0], [4, 4 * w, False, 1], [3, 2 * w, True, 0]]
    cases = tb_args(split_cases=cases)
    for i, (rows, elems, acc, pad) in enumerate(cases["split_cases"]):
        await split_round_trip(t, rows, elems, acc, pad, seed=i)


# -- the GEMM loop command ------------------------------------------------------------------------


def gemm_loop_reference(cfg: AccelConfig, a, b, init, case: dict, k_tiles=None) -> np.ndarray:
    return loop_result(cfg, a, b, init, case["scale"], case["act"], case["out"], k_tiles)


async def run_loop_command(t: Tile, label: str, commands: list[list[int]], case: dict, result) -> tuple:
    """Run the commands a loop command needs first (a resident B's LOADs) to idle, then push the
    loop command (counters zeroed) and wait for the done interrupt. ``result()`` reads the output at
    once then: `done` must mean every byte is in memory. Returns (output, cycles from the loop
    command's first write, counters)."""
    if commands[:-1]:
        await run_commands(t, commands[:-1])
    await t.write("IRQ_ENABLE", 0b11)
    await t.write("CONTROL", 0b101)  # clear done, zero the counters
    start = get_sim_time("ns")
    await t.push(commands[-1])
    await First(RisingEdge(t.dut.irq), ClockCycles(t.dut.clk, case.get("max_cycles", 2_000_000)))
    cycles = round((get_sim_time("ns") - start) / CLOCK_NS)
    got = result()
    status = await t.read("STATUS")
    assert status & 2 and not status & 4, f"{label}: status {status:#x} after {cycles} cycles"
    counters = {name.lower(): await t.read(name) for name in COUNTERS}
    return got, cycles, counters


async def run_case(t: Tile, c: LoopCase, case: dict) -> dict:
    """Run one loop command case (tb/tile_cases.py) and check its output exactly; returns cycles
    from the first command write to the done interrupt, the MACs and the counters."""
    if c.mem_bytes > len(t.mem.data):
        raise RuntimeError(f"testbench: operands of {c.mem_bytes} bytes do not fit its {len(t.mem.data)}-byte memory")
    for addr, raw in c.writes:
        t.mem.data[addr : addr + len(raw)] = raw
    got, cycles, counters = await run_loop_command(
        t, c.label, c.commands, case, lambda: c.result(bytes(t.mem.data[c.out_addr : c.out_addr + c.out_bytes]))
    )
    check_exact(c.label, got, c.want, f"{cycles} cycles, counters {counters}")
    return {"cycles": int(cycles), "macs": c.macs, **counters}


async def run_gemm_loop(t: Tile, case: dict, seed: int) -> dict:
    """One GEMM command; returns cycles from the first command write to the done interrupt."""
    return await run_case(t, gemm_case(t.cfg, case, seed), case)


COUNTERS = (
    "CYCLES_BUSY", "MACS_LO", "DMA_RD_BYTES", "DMA_WR_BYTES", "STALL_EXEC_ON_LOAD", "STALL_EXEC_ON_STORE",
    "STALL_DMA_READ", "STALL_DMA_WRITE", "STALL_QUEUE",
)  # fmt: skip


@cocotb.test()
async def tile_gemm_loop(dut) -> None:
    t = await start(dut)
    for i, case in enumerate(tb_args(cases=[{"m": 3, "k": 5, "n": 7}])["cases"]):
        await run_gemm_loop(t, case, seed=100 + i)


# -- the CONV2D loop command ----------------------------------------------------------------------


async def run_conv(t: Tile, case: dict, seed: int) -> dict:
    """One CONV2D command against im2col + the GEMM reference; returns cycles and counters."""
    result = await run_case(t, conv_case(t.cfg, case, seed), case)
    return result | {"utilization": result["macs"] / (t.cfg.rows * t.cfg.cols * result["cycles"])}


@cocotb.test()
async def tile_conv(dut) -> None:
    t = await start(dut)
    default = {"batch": 1, "h": 5, "w": 5, "cin": 3, "cout": 4, "kh": 3, "kw": 3, "pad": 1}
    for i, case in enumerate(tb_args(conv_cases=[default])["conv_cases"]):
        await run_conv(t, case, seed=300 + i)


async def _refused_before_memory(t, words: list[int], error: str, seed: int) -> None:
    """Push ``words``: the tile reports ``error`` without reading memory; once the error is cleared a
    correct GEMM runs."""
    await t.push(words)
    await First(RisingEdge(t.dut.irq), ClockCycles(t.dut.clk, 2000))
    status = await t.read("STATUS")
    assert status & 4 and status >> 8 & 0xFF == ERR[error], f"status {status:#x}"
    assert await t.read("DMA_RD_BYTES") == 0
    await t.write("CONTROL", 0b111)
    await run_gemm_loop(t, {"m": 7, "k": 9, "n": 5}, seed=seed)


@cocotb.test()
async def tile_loop_errors(dut) -> None:
    """Loop commands that fail: a CONV2D of more than 2**32 - 1 output pixels and a GEMM or CONV2D
    whose resident B passes the A region are refused before any memory traffic; an AXI error on one of
    a GEMM's loads stops the loop (the tile comes back once the error is cleared, no later
    operation runs); each time a correct GEMM follows."""
    t = await start(dut)
    await t.write("IRQ_ENABLE", 0b10)
    await t.write("CONTROL", 0b101)
    huge = {"batch": 2, "h": 65535, "w": 65535, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "stride": 1, "pad": 0}
    words = conv_words(huge | {"bias": 0, "act": 0, "out": 0, "scale": 0}, dict.fromkeys(("in", "w", "out", "bias"), 0))
    await _refused_before_memory(t, words, "TOO_LARGE", seed=2)

    # A resident B one row past the A region: refused (SP_RANGE) before any memory traffic.
    past = {"m": 5, "k": 6, "n": 5, "sp_b": 1, "sp_b_at": "past", "sp_b_stride": 6}
    flags = {"trans_a": 0, "trans_b": 0, "bias": 0, "acc_c": 0, "act": 0, "out": 1, "scale": 0}
    await t.write("CONTROL", 0b101)  # clear done, zero the counters
    words = gemm_words(flags | past, {"A": 0x1000, "B": resident_b_row(t.cfg, past), "C": 0x2000, "D": 0},
                       {"A": 64, "B": 6, "C": 64, "D": 0})  # fmt: skip
    await _refused_before_memory(t, words, "SP_RANGE", seed=4)
    # The same for a CONV2D's resident weights, K = kh·kw·C_in rows per N tile.
    past = {"batch": 1, "h": 4, "w": 4, "cin": 5, "cout": 6, "kh": 3, "kw": 3, "stride": 1, "pad": 1}
    past |= {"sp_b": 1, "sp_b_at": "past", "sp_b_stride": 45, "bias": 0, "act": 0, "out": 1, "scale": 0}
    await t.write("CONTROL", 0b101)
    words = conv_words(past, {"in": 0x1000, "w": resident_b_row(t.cfg, past), "out": 0x2000, "bias": 0})
    await _refused_before_memory(t, words, "SP_RANGE", seed=6)

    # B is read at its first N tile's K slices; an error range in the middle of B hits a later load.
    from cocotbext.axi import AxiResp

    case = {"m": 12, "k": 40, "n": 10}
    t.mem.inject(0x1000, len(t.mem.data), AxiResp.SLVERR)  # every operand: the first load fails
    await t.write("CONTROL", 0b101)
    await t.push(gemm_words({"trans_a": 0, "trans_b": 0, "bias": 0, "acc_c": 0, "act": 0, "out": 1, "scale": 0} | case,
                            dict.fromkeys("ABCD", 0x1000), dict.fromkeys("ABCD", 64)))  # fmt: skip
    await First(RisingEdge(dut.irq), ClockCycles(dut.clk, 20_000))
    status = await t.read("STATUS")
    assert status & 4 and status >> 8 & 0xFF == ERR["AXI_SLVERR"], f"status {status:#x}"
    t.mem.clear_errors()
    await ClockCycles(dut.clk, 2000)  # whatever the loop had issued has settled
    macs = await t.read("MACS_LO")
    assert macs < case["m"] * case["k"] * case["n"], "the loop went on past the error"
    await t.write("CONTROL", 0b110)
    await ClockCycles(dut.clk, 64)
    status = await t.read("STATUS")
    assert not status & 5, f"tile still busy or in error after the clear: {status:#x}"
    await run_gemm_loop(t, case, seed=3)


@cocotb.test()
async def tile_random_commands(dut) -> None:
    """Random command streams (from hypothesis, in PYARD_TB_ARGS): the tile always comes back to
    idle or to an error within a budget, never hangs, and runs a correct GEMM afterwards."""
    t = await start(dut)
    budget = 20_000
    codes = []

    async def settle() -> None:
        for _ in range(budget // 32):
            status = await t.read("STATUS")
            if status & 4:
                codes.append(status >> 8 & 0xFF)
                await t.write("CONTROL", 0b10)
                continue
            if not status & 1:
                return
            await ClockCycles(dut.clk, 32)
        raise AssertionError(f"tile still busy {budget} cycles after the stream: STATUS {status:#x}")

    for words in tb_args(commands=[])["commands"] + [[FENCE]]:
        if (await t.read("STATUS")) >> 16 & 0xFF == 0:
            await settle()
        await t.push(words)
    await settle()
    dut._log.info("error codes seen: %s", codes)
    await run_gemm_loop(t, {"m": 6, "k": 9, "n": 5}, seed=1)

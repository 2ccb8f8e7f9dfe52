"""The GEMM / CONV2D loop generator alone (rtl/gemm_loop.py) in Amaranth's simulator, its operations
executed by a model of the tile's units, against the loop's NumPy model, exactly.

The unit model keeps the ISA's rules (each unit in order, dependency tokens taken at start and
given at completion) with random delays, and is pessimistic about timing: a LOAD writes its rows
when it starts and an EXEC or STORE reads when it completes. A buffer reused too early therefore
shows as a wrong result, whatever the real engines' timing. No Verilator build is needed, so many
configs and shapes run quickly; tests/test_tile.py runs the whole tile.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtl.accumulator_model import add_rows
from rtl.config import AccelConfig
from rtl.conv_model import im2col, out_size
from rtl.gemm_loop import GemmLoop
from rtl.gemm_loop_model import (
    block_min_rows,
    conv_a_rows,
    conv_k_tiles,
    loop_result,
    resident_b_fits,
    resident_b_rows,
)
from rtl.mesh_model import mesh_tile
from rtl.readout_model import readout
from tb import stimulus

UNITS = ("load", "exec", "store")
TOKEN_LINKS = {"load": (None, "le"), "exec": ("le", "es"), "store": ("es", None)}  # (prev, next)
GIVE_PREV = {"exec": "el", "store": "se"}
TAKE_NEXT = {"load": "el", "exec": "se"}


@dataclass
class Unit:
    queue: deque = field(default_factory=deque)
    busy_until: int = 0  # completion time of the last started operation (completions are in order)
    running: deque = field(default_factory=deque)  # (completion time, op)


class TileModel:
    """The three units behind the loop: queues, tokens, memories, and what each operation does."""

    def __init__(self, cfg: AccelConfig, mem: bytearray, rng: random.Random) -> None:
        self.cfg, self.mem, self.rng = cfg, mem, rng
        self.in_t = np.uint8 if cfg.dtype == "int8" else np.uint16
        self.acc_t = np.uint32 if cfg.acc_bits == 32 else np.uint16
        self.sp = np.zeros((cfg.sp_rows, cfg.dim), self.in_t)
        self.acc = np.zeros((cfg.acc_rows, cfg.cols), np.uint32)
        self.units = {u: Unit() for u in UNITS}
        self.tokens = dict.fromkeys(("le", "el", "es", "se"), 0)
        self.k_rows: list[int] = []  # each EXEC's weight rows, in order
        self.execs: list[dict] = []  # each EXEC, in order
        self.sp_end = 0  # the scratchpad rows the loads wrote end below this row

    def step(self, now: int) -> dict[str, int]:
        """One cycle: operations complete, then may start. Returns the finished pulses."""
        finished = {}
        for name, unit in self.units.items():
            if unit.running and unit.running[0][0] <= now:
                _, op = unit.running.popleft()
                self._complete(name, op)
                finished[name] = 1
            if unit.queue and self.rng.random() < 0.7 and self._tokens_ok(name, unit.queue[0]["deps"]):
                op = unit.queue.popleft()
                self._start(name, op)
                unit.busy_until = max(unit.busy_until + 1, now + 1 + self.rng.randrange(12))
                unit.running.append((unit.busy_until, op))
        return finished

    def _tokens_ok(self, unit: str, deps: dict) -> bool:
        prev, nxt = TOKEN_LINKS[unit][0], TAKE_NEXT.get(unit)
        return (not deps["wait_prev"] or self.tokens[prev] > 0) and (not deps["wait_next"] or self.tokens[nxt] > 0)

    def _start(self, unit: str, op: dict) -> None:
        deps = op["deps"]
        if deps["wait_prev"]:
            self.tokens[TOKEN_LINKS[unit][0]] -= 1
        if deps["wait_next"]:
            self.tokens[TAKE_NEXT[unit]] -= 1
        if unit == "load":  # pessimistic: rows are overwritten as soon as the load starts
            self._load(op)

    def _complete(self, unit: str, op: dict) -> None:
        if unit == "exec":
            self._exec(op)
        elif unit == "store":
            self._store(op)
        deps = op["deps"]
        if deps["signal_next"]:
            self.tokens[TOKEN_LINKS[unit][1]] += 1
        if deps["signal_prev"]:
            self.tokens[GIVE_PREV[unit]] += 1

    def _rows(self, addr: int, stride: int, rows: int, elems: int, dtype) -> np.ndarray:
        size = np.dtype(dtype).itemsize
        out = np.zeros((rows, elems), dtype)
        for r in range(rows):
            start = (addr + r * stride) % 2**32
            out[r] = np.frombuffer(bytes(self.mem[start : start + elems * size]), dtype)
        return out

    def _load(self, d: dict) -> None:
        rows, elems, local = d["rows"], d["elems"], d["local_addr"]
        if d["kind"] == 1:  # bias / C into the accumulator
            data = self._rows(d["dram_addr"], d["dram_stride"], rows, elems, self.acc_t).astype(np.uint32)
            self.acc[local : local + rows, :elems] = data
            return
        col = d["col"]  # > 0: only the row's own elements are written (a packed CONV2D segment)
        self.sp_end = max(self.sp_end, local + (elems if d["transpose"] else rows))
        data = np.zeros((rows, elems), self.in_t)
        if not d["zero"]:
            data = self._rows(d["dram_addr"], d["dram_stride"], rows, elems, self.in_t)
        if d["transpose"]:
            self.sp[local : local + elems] = 0
            self.sp[local : local + elems, :rows] = data.T
        else:
            assert col + elems <= self.cfg.dim
            if col == 0:
                self.sp[local : local + rows] = 0
            self.sp[local : local + rows, col : col + elems] = data

    def _exec(self, e: dict) -> None:
        cfg = self.cfg
        self.k_rows.append(e["k_rows"])
        self.execs.append(e)
        # Only the tile's K rows are read (the rest enter as zeros): a resident B's last tile may
        # end at the scratchpad's last row.
        k_rows = e["k_rows"] or cfg.rows
        w = np.zeros((cfg.rows, cfg.cols), self.in_t)
        w[:k_rows] = self.sp[e["b_addr"] : e["b_addr"] + k_rows, : cfg.cols]
        a = self.sp[e["a_addr"] : e["a_addr"] + e["m"], : cfg.rows]
        part = mesh_tile(cfg, a, w, np.zeros((e["m"], cfg.cols), np.uint32))
        rows = slice(e["c_addr"], e["c_addr"] + e["m"])
        self.acc[rows] = add_rows(cfg, self.acc[rows], part) if e["accumulate"] else part

    def _store(self, d: dict) -> None:
        cfg = self.cfg
        rows, elems, local = d["rows"], d["elems"], d["local_addr"]
        values = readout(cfg, self.acc[local : local + rows, :elems], d["scale"], d["act"], d["out"])
        out_t = self.acc_t if d["out"] else self.in_t
        for r in range(rows):
            raw = values[r].astype(out_t).tobytes()
            start = (d["dram_addr"] + r * d["dram_stride"]) % 2**32
            self.mem[start : start + len(raw)] = raw


DESC = (
    "kind",
    "dram_addr",
    "dram_stride",
    "rows",
    "elems",
    "local_addr",
    "transpose",
    "zero",
    "scale",
    "act",
    "out",
    "col",
)
EXEC = ("b_addr", "k_rows", "a_addr", "m", "c_addr", "accumulate")
DEPS = ("wait_prev", "wait_next", "signal_prev", "signal_next")


def run_loop(
    cfg: AccelConfig,
    fields: dict,
    mem: bytearray,
    seed: int,
    max_cycles: int = 200_000,
    k_rows: list | None = None,
    resident: np.ndarray | None = None,
    sp_end: list | None = None,
    execs: list | None = None,
) -> int:
    """Push one loop command with ``fields`` (GemmCmd names) and run it to the end on the model;
    ``k_rows`` receives each EXEC's weight rows, ``execs`` each EXEC; ``resident``: scratchpad rows from row ``b`` (a
    resident B), which must be unchanged afterwards; ``sp_end`` receives the row below which every
    scratchpad row the loop wrote lies. Returns the cycles, or -1 if refused."""
    dut = GemmLoop(cfg, (cfg.sp_rows - 1).bit_length(), (cfg.acc_rows - 1).bit_length())
    rng = random.Random(seed)
    tile = TileModel(cfg, mem, rng)
    if resident is not None:  # (what fits: a B refused for ending past the scratchpad)
        resident = resident[: max(0, cfg.sp_rows - fields["b"])]
        tile.sp[fields["b"] : fields["b"] + len(resident)] = resident
    result = {}

    async def bench(ctx) -> None:
        for name, value in fields.items():
            ctx.set(getattr(dut.cmd.p, name), value)
        ctx.set(dut.cmd.valid, 1)
        await ctx.tick()
        ctx.set(dut.cmd.valid, 0)
        for cycle in range(max_cycles):
            if ctx.get(dut.too_large) or ctx.get(dut.sp_range):
                result["refused"] = True
            for name in UNITS:
                port = getattr(dut, name)
                ready = rng.random() < 0.8
                ctx.set(port.ready, ready)
                if ready and ctx.get(port.valid):
                    keys = EXEC if name == "exec" else DESC
                    op = {k: ctx.get(getattr(port.p.op, k)) for k in keys}
                    op["deps"] = {k: ctx.get(getattr(port.p.deps, k)) for k in DEPS}
                    tile.units[name].queue.append(op)
            done = tile.step(cycle)
            ctx.set(dut.exec_finished, done.get("exec", 0))
            ctx.set(dut.store_finished, done.get("store", 0))
            await ctx.tick()
            idle = all(not u.queue and not u.running for u in tile.units.values())
            if idle and not ctx.get(dut.busy):
                result["cycles"] = cycle
                return
        raise AssertionError(f"loop still running after {max_cycles} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert all(v == 0 for v in tile.tokens.values()), f"tokens left over: {tile.tokens}"
    if k_rows is not None:
        k_rows.extend(tile.k_rows)
    if execs is not None:
        execs.extend(tile.execs)
    if sp_end is not None:
        sp_end.append(tile.sp_end)
    if resident is not None:
        assert np.array_equal(tile.sp[fields["b"] : fields["b"] + len(resident)], resident), "resident B overwritten"
    return result.get("cycles", -1) if not result.get("refused") else -1


def _layout(sizes: dict[str, int]) -> tuple[dict[str, int], bytearray]:
    addr, out = 0x100, {}
    for name, size in sizes.items():
        out[name] = addr
        addr += (size + 0x7F) & ~0x3F
    return out, bytearray(addr + 0x100)


def check_gemm(
    cfg: AccelConfig,
    m: int,
    k: int,
    n: int,
    seed: int,
    sp_b: tuple[int, int] | None = None,
    execs: list | None = None,
    **flags,
) -> int:
    """One GEMM on the loop against the model, exactly; ``sp_b`` = (first row, N tile stride): B
    resident in the scratchpad (flag [21]). Returns run_loop's cycles (-1: refused, C untouched)."""
    case = {"trans_a": 0, "trans_b": 0, "bias": 0, "acc_c": 0, "act": 0, "out": 1} | flags
    rng = np.random.default_rng(seed)
    a = stimulus.inputs(cfg, rng, (m, k), special=0.0)
    b = stimulus.inputs(cfg, rng, (k, n), special=0.0)
    in_t = a.dtype
    acc_t = np.uint32 if cfg.acc_bits == 32 else np.uint16
    out_t = acc_t if case["out"] else in_t
    stored = {"A": a.T if case["trans_a"] else a, "B": b.T if case["trans_b"] else b}
    init = None
    if case["acc_c"]:
        init = stimulus.accumulators(cfg, rng, (m, n))
    elif case["bias"]:
        init = stimulus.accumulators(cfg, rng, (m if case["bias"] == 1 else 1, n))
    sizes = {key: v.nbytes for key, v in stored.items()} | {"C": m * n * 4, "D": m * n * 4}
    addr, mem = _layout(sizes)
    for key, v in stored.items():
        mem[addr[key] : addr[key] + v.nbytes] = np.ascontiguousarray(v).tobytes()
    if init is not None:
        raw = init.astype(acc_t).tobytes()
        where = addr["C"] if case["acc_c"] else addr["D"]
        mem[where : where + len(raw)] = raw
    e_in, e_out, e_acc = np.dtype(in_t).itemsize, np.dtype(out_t).itemsize, np.dtype(acc_t).itemsize
    scale = 0 if cfg.acc_dtype == "int32" else 0x3F800000
    fields = case | {
        "m": m, "k": k, "n": n, "scale": scale,
        "a": addr["A"], "lda": stored["A"].shape[1] * e_in, "b": addr["B"], "ldb": stored["B"].shape[1] * e_in,
        "c": addr["C"], "ldc": n * (e_acc if case["acc_c"] else e_out),
        "d": addr["D"], "ldd": 0 if case["bias"] == 2 else n * e_acc,
    }  # fmt: skip
    resident = None
    if sp_b is not None:
        resident = resident_b_rows(cfg, b, sp_b[1])
        fields |= {"b_sp": 1, "b": sp_b[0], "ldb": sp_b[1]}
        mem[addr["B"] : addr["B"] + b.nbytes] = bytes(b.nbytes)  # the loop must not read B from memory
    cycles = run_loop(cfg, fields, mem, seed, resident=resident, execs=execs)
    got = np.frombuffer(bytes(mem[addr["C"] : addr["C"] + m * n * e_out]), out_t).reshape(m, n)
    if cycles < 0:
        assert not got.any(), "a refused GEMM wrote C"
        return cycles
    want = loop_result(cfg, a, b, init, scale, case["act"], case["out"]).astype(out_t)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {got.size} wrong, rows {sorted({int(r) for r in bad[:, 0]})[:20]}"
    return cycles


def check_conv(
    cfg: AccelConfig, shape: dict, seed: int, sp_b: tuple[int, int] | None = None, sp_end: list | None = None
) -> int:
    """One CONV2D on the loop against the model, exactly; ``sp_b`` = (first row, N tile stride): the
    weights resident in the scratchpad (flag [21]). Returns run_loop's cycles (-1: refused)."""
    batch, h, w, cin, cout = (shape[k] for k in ("batch", "h", "w", "cin", "cout"))
    kh, kw, stride, pad = shape["kh"], shape["kw"], shape["stride"], shape["pad"]
    rng = np.random.default_rng(seed)
    x = stimulus.inputs(cfg, rng, (batch, h, w, cin), special=0.0)
    wt = stimulus.inputs(cfg, rng, (kh, kw, cin, cout), special=0.0)
    oh, ow = out_size(h, kh, stride, pad), out_size(w, kw, stride, pad)
    acc_t = np.uint32 if cfg.acc_bits == 32 else np.uint16
    addr, mem = _layout({"x": x.nbytes, "w": wt.nbytes, "out": batch * oh * ow * cout * 4})
    mem[addr["x"] : addr["x"] + x.nbytes] = x.tobytes()
    mem[addr["w"] : addr["w"] + wt.nbytes] = wt.tobytes()
    e_in, e_acc = x.dtype.itemsize, np.dtype(acc_t).itemsize
    scale = 0 if cfg.acc_dtype == "int32" else 0x3F800000
    fields = {
        "conv": 1, "batch": batch, "cin": cin, "h": h, "w": w, "kh": kh, "kw": kw, "stride": stride, "pad": pad,
        "n": cout, "a": addr["x"], "b": addr["w"], "ldb": cout * e_in, "c": addr["out"], "ldc": cout * e_acc,
        "scale": scale, "out": 1,
    }  # fmt: skip
    resident = None
    if sp_b is not None:
        resident = resident_b_rows(cfg, wt.reshape(-1, cout), sp_b[1])
        fields |= {"b_sp": 1, "b": sp_b[0], "ldb": sp_b[1]}
        mem[addr["w"] : addr["w"] + wt.nbytes] = bytes(wt.nbytes)  # the loop must not read them from memory
    k_rows: list[int] = []
    cycles = run_loop(cfg, fields, mem, seed, k_rows=k_rows, resident=resident, sp_end=sp_end)
    got = np.frombuffer(bytes(mem[addr["out"] : addr["out"] + batch * oh * ow * cout * e_acc]), acc_t)
    if cycles < 0:
        assert not got.any() and not k_rows, "a refused CONV2D ran"
        return cycles
    # The EXECs run the model's K tiles (packed when C_in < rows) for each (M block, N tile) pair.
    widths = [width for _, width in conv_k_tiles(cfg, kh, kw, cin)]
    assert len(k_rows) % len(widths) == 0 and k_rows == widths * (len(k_rows) // len(widths))
    want = loop_result(cfg, im2col(x, kh, kw, stride, pad), wt.reshape(-1, cout), None, scale, 0, 1,
                       conv_k_tiles(cfg, kh, kw, cin)).astype(acc_t)  # fmt: skip
    assert np.array_equal(got.reshape(want.shape), want)
    return cycles


CONFIGS = [
    AccelConfig(rows=4, cols=4, dtype="int8", sp_kib=1, acc_kib=1),
    AccelConfig(rows=3, cols=5, dtype="bf16", sp_kib=1, acc_kib=1),
    AccelConfig(rows=8, cols=4, dtype="int8", sp_kib=2, acc_kib=1, sp_banks=2),
    AccelConfig(rows=4, cols=4, dtype="bf16", sp_kib=1, acc_kib=1, sp_banks=1, acc_banks=1),
    AccelConfig(rows=4, cols=4, dtype="int8"),
    AccelConfig(rows=3, cols=4, dtype="bf16", acc_banks=1),  # four C slots in one bank
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 70),
    k=st.one_of(st.integers(1, 40), st.integers(150, 700)),
    n=st.integers(1, 14),
    flags=st.fixed_dictionaries(
        {
            "trans_a": st.integers(0, 1),
            "trans_b": st.integers(0, 1),
            "bias": st.integers(0, 2),
            "act": st.integers(0, 1),
        }
    ),
    seed=st.integers(0, 2**16),
)
def test_gemm_loop(cfg: AccelConfig, m: int, k: int, n: int, flags: dict, seed: int) -> None:
    """Random shapes and options, resident (one or several blocks, prefetched) and streaming A."""
    check_gemm(cfg, m, k, n, seed, **flags)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.name}-acc{c.acc_kib}x{c.acc_banks}")
def test_gemm_loop_accumulate_into_c(cfg: AccelConfig) -> None:
    check_gemm(cfg, 23, 9, 7, seed=5, acc_c=1)


@pytest.mark.parametrize("banks", [2, 1])
def test_first_block_runs_its_first_n_tiles_k_outer(banks: int) -> None:
    """Where the accumulator has room, the first block's first three N tiles take each K tile in
    turn, each in a C slot of its own, so each A slice serves three weight tiles as it arrives.
    The fourth N tile and the later blocks' tiles then run N tile after N tile in the two usual
    slots, from the second, in the bank other than the first two group slots'."""
    cfg = AccelConfig(rows=4, cols=4, dtype="int8", acc_banks=banks)
    mb, k_rows = block_min_rows(cfg), [4, 4, 2]
    execs: list[dict] = []
    check_gemm(cfg, 4 * mb, sum(k_rows), 14, seed=3, execs=execs, bias=1)  # four blocks
    bank = cfg.acc_bank_rows if banks > 1 else mb
    group = [mb, 2 * mb, bank + mb] if banks > 1 else [2 * mb, 3 * mb, 4 * mb]
    pairs = [bank, 0] * 6 + [bank]  # the fourth N tile, then the other blocks' four each
    # The last pair runs in two parts of 4 rows (test_last_pair_runs_in_two_parts), the second
    # in the slot before, at its fifth row.
    pairs.append(mb // 2)
    want = [(group[f], kr) for kr in k_rows for f in range(3)] + [(c, kr) for c in pairs for kr in k_rows]
    assert [(e["c_addr"], e["k_rows"]) for e in execs] == want


def test_short_gemm_stays_one_block_for_the_group() -> None:
    """M under four least blocks stays one block where the group's slots fit (its A is hidden by
    the group, and B crosses the bus once); it is cut where they do not."""
    roomy = AccelConfig(rows=4, cols=4, dtype="int8")
    tight = AccelConfig(rows=4, cols=4, dtype="int8", acc_kib=1)  # two banks of 32 rows
    m = 3 * block_min_rows(roomy)
    for cfg, blocks in ((roomy, 1), (tight, 3)):
        execs: list[dict] = []
        check_gemm(cfg, m, 8, 4, seed=7, execs=execs)
        assert [e["m"] for e in execs] == [m // blocks] * (2 * blocks), cfg.acc_kib


@pytest.mark.parametrize(
    ("k", "flags", "eighths"),
    [
        # 4x4-int8 on a 64-bit bus: an int32 C row is 2 beats, an int8 one 1; a K tile is a cycle
        # per row. The second part takes q eighths, the least q with (8 - q) · beats <= q · K tiles,
        # if a row's K tiles outlast its beats and the part has at least 4 rows (one per mesh row).
        (24, {"acc_c": 1}, 2),  # 6 K tiles: 14 > 6, 12 <= 12
        (12, {"bias": 1}, 4),  # 3 K tiles: 14 > 3, 12 > 6, 10 > 9; halves at most
        (8, {"bias": 2, "out": 0}, 3),  # int8 C, 2 K tiles: 7 > 2, 6 > 4, 5 <= 6
        (8, {}, 0),  # 2 K tiles, no more than a row's 2 beats: not cut
        (40, {"out": 0}, 0),  # int8 C, 10 K tiles: q = 1, but 3 rows are under the mesh's 4
    ],
)
@pytest.mark.parametrize("banks", [2, 1])
def test_last_pair_runs_in_two_parts(k: int, flags: dict, eighths: int, banks: int) -> None:
    """The command's last pair runs its rows in two parts, each through every K tile and in a C
    slot of its own (the usual two, in turn), so the first part's STORE drains while the second
    part's EXECs run; its rows' bias, A rows and C rows are the part's own."""
    cfg = AccelConfig(rows=4, cols=4, dtype="int8", acc_banks=banks)
    m, k_tiles = 24, -(-k // 4)  # one block (short: the group takes it), four N tiles
    execs: list[dict] = []
    check_gemm(cfg, m, k, 16, seed=11, execs=execs, **flags)
    other = cfg.acc_bank_rows if banks > 1 else m  # after the group, pairs start in the second slot
    rows = [(e["m"], e["c_addr"], e["a_addr"] - execs[0]["a_addr"]) for e in execs[3 * k_tiles :]]
    if not eighths:
        assert rows == [(m, other, m * t) for t in range(k_tiles)]
        return
    second = m * eighths // 8
    assert rows == [(m - second, other, m * t) for t in range(k_tiles)] + [
        (second, m - second, m * t + m - second) for t in range(k_tiles)
    ]


def test_conv_last_pair_runs_in_two_parts() -> None:
    """CONV2D's last pair is cut the same way (blocks of 32 output pixels here), exactly."""
    cfg = AccelConfig(rows=4, cols=4, dtype="int8")
    shape = {"batch": 1, "h": 16, "w": 16, "cin": 5, "cout": 8, "kh": 3, "kw": 3, "stride": 1, "pad": 1}
    check_conv(cfg, shape, seed=23)


@pytest.mark.parametrize("cfg", CONFIGS[:4], ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
@pytest.mark.parametrize(
    "shape",
    [
        {"batch": 2, "h": 6, "w": 5, "cin": 3, "cout": 6, "kh": 3, "kw": 3, "stride": 1, "pad": 1},
        {"batch": 1, "h": 7, "w": 9, "cin": 5, "cout": 4, "kh": 2, "kw": 3, "stride": 2, "pad": 2},
        {"batch": 1, "h": 4, "w": 4, "cin": 40, "cout": 3, "kh": 3, "kw": 3, "stride": 1, "pad": 1},
        # Packed K tiles (C_in < rows): one channel per position, padding wider than the kernel.
        {"batch": 1, "h": 5, "w": 7, "cin": 1, "cout": 5, "kh": 3, "kw": 2, "stride": 1, "pad": 2},
        {"batch": 3, "h": 4, "w": 3, "cin": 2, "cout": 4, "kh": 1, "kw": 3, "stride": 3, "pad": 1},
    ],
)
def test_conv_loop(cfg: AccelConfig, shape: dict) -> None:
    check_conv(cfg, shape, seed=17)


# Resident weights: unpacked (C_in ≥ rows of every config below) and packed, padding, stride,
# several N tiles (C_out > cols) with a stride between them larger than K.
RESIDENT_CONVS = [
    {"batch": 1, "h": 5, "w": 4, "cin": 8, "cout": 6, "kh": 2, "kw": 2, "stride": 1, "pad": 1},
    {"batch": 2, "h": 6, "w": 5, "cin": 3, "cout": 7, "kh": 3, "kw": 3, "stride": 2, "pad": 2},
    {"batch": 1, "h": 5, "w": 7, "cin": 1, "cout": 5, "kh": 3, "kw": 2, "stride": 1, "pad": 2},
]


def _conv_k(shape: dict) -> int:
    return shape["kh"] * shape["kw"] * shape["cin"]


@pytest.mark.parametrize("cfg", CONFIGS[:4], ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
@pytest.mark.parametrize("shape", RESIDENT_CONVS)
def test_conv_loop_resident_b(cfg: AccelConfig, shape: dict) -> None:
    """CONV2D with its weights resident (flag [21]) as the (kh·kw·C_in) × C_out GEMM B, at the top
    of the A region (its im2col A below it), N tiles K + 3 rows apart: bit-exact, B unchanged."""
    k, stride = _conv_k(shape), _conv_k(shape) + 3
    top = _resident_top(cfg, k, shape["cout"], stride)
    assert resident_b_fits(cfg, top, k, shape["cout"], stride)
    assert check_conv(cfg, shape, seed=23, sp_b=(top, stride)) >= 0


@pytest.mark.parametrize("cfg", [CONFIGS[3], CONFIGS[2]], ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
def test_conv_loop_resident_b_limits(cfg: AccelConfig) -> None:
    """SP_RANGE with K = kh·kw·C_in: B's last row the A region's last, or its first row one weight
    slot's worth of A rows above the region's start, runs; one row further either way is refused."""
    shape = RESIDENT_CONVS[0]
    k = stride = _conv_k(shape)
    top = _resident_top(cfg, k, shape["cout"], stride)
    lowest = cfg.sp_layout.a_base + cfg.sp_layout.slots
    for base, ok in ((top, True), (lowest, True), (top + 1, False), (lowest - 1, False)):
        assert resident_b_fits(cfg, base, k, shape["cout"], stride) == ok
        assert (check_conv(cfg, shape, seed=base, sp_b=(base, stride)) >= 0) == ok, base


@pytest.mark.parametrize("cfg", CONFIGS[:4], ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
def test_conv_loop_resident_b_uses_the_same_a_rows_wherever_b_is(cfg: AccelConfig) -> None:
    """With resident weights the odd M blocks' A follows the even blocks' rows (not the A region's
    upper half): a CONV2D of several blocks writes the same rows with B at the region's top or
    right above those rows, so weights resident above them (another layer's) survive it."""
    shape = {"batch": 2, "h": 9, "w": 8, "cin": 3, "cout": 5, "kh": 3, "kw": 3, "stride": 1, "pad": 1}
    k, stride = _conv_k(shape), _conv_k(shape)
    ends: list[int] = []
    assert check_conv(cfg, shape, seed=5, sp_b=(_resident_top(cfg, k, shape["cout"], stride), stride), sp_end=ends) > 0
    low = max(ends[0], cfg.sp_layout.a_base + cfg.sp_layout.slots)
    assert low < _resident_top(cfg, k, shape["cout"], stride), ends  # blocks, not a ring over the region
    assert check_conv(cfg, shape, seed=5, sp_b=(low, stride), sp_end=ends) > 0
    assert ends[1] == ends[0]


@pytest.mark.parametrize("cfg", [CONFIGS[0], CONFIGS[4]], ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
def test_conv_a_rows_model_is_what_the_loop_uses(cfg: AccelConfig) -> None:
    """gemm_loop_model.conv_a_rows (the segment placement's reserve): resident weights right above
    that many A rows run exact, and the loop writes exactly those rows below them."""
    shape = {"batch": 1, "h": 6, "w": 5, "cin": 3, "cout": 5, "kh": 3, "kw": 3, "stride": 1, "pad": 1}
    k, m = _conv_k(shape), 6 * 5
    rows = conv_a_rows(cfg, m, len(conv_k_tiles(cfg, 3, 3, 3)))
    assert m * len(conv_k_tiles(cfg, 3, 3, 3)) > rows  # two blocks, not all of M
    ends: list[int] = []
    assert check_conv(cfg, shape, seed=9, sp_b=(cfg.sp_layout.a_base + rows, k), sp_end=ends) > 0
    assert ends == [cfg.sp_layout.a_base + rows]


def test_conv_too_large_issues_nothing() -> None:
    cfg = CONFIGS[0]
    fields = {"conv": 1, "batch": 2, "cin": 1, "h": 65535, "w": 65535, "kh": 1, "kw": 1, "stride": 1, "n": 1}
    mem = bytearray(64)
    assert run_loop(cfg, fields, mem, seed=1, max_cycles=2000) == -1
    assert mem == bytearray(64)


def test_conv_too_large_from_batch_times_oh() -> None:
    """OH above 65,535 (H = 65,535, pad = 2, kh = 1: 65,539) makes batch · OH a 33-bit product:
    65,535 · 65,539 is above 2^32 − 1, so M is too (OW = 5), though the product's low 32 bits
    times OW are not."""
    cfg = CONFIGS[0]
    fields = {"conv": 1, "batch": 65535, "cin": 1, "h": 65535, "w": 1, "kh": 1, "kw": 1, "stride": 1, "pad": 2, "n": 1}
    mem = bytearray(64)
    assert run_loop(cfg, fields, mem, seed=1, max_cycles=2000) == -1
    assert mem == bytearray(64)


def _resident_top(cfg: AccelConfig, k: int, n: int, stride: int) -> int:
    """The highest first row of a resident B: its last row the A region's last."""
    layout = cfg.sp_layout
    return layout.a_base + layout.a_rows - ((-(-n // cfg.cols) - 1) * stride + k)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 40),
    k=st.integers(1, 30),
    n=st.integers(1, 14),
    pad=st.integers(0, 3),
    where=st.floats(0, 1),
    flags=st.fixed_dictionaries({"trans_a": st.integers(0, 1), "bias": st.integers(0, 2), "act": st.integers(0, 1)}),
    seed=st.integers(0, 2**16),
)
def test_gemm_loop_resident_b(
    cfg: AccelConfig, m: int, k: int, n: int, pad: int, where: float, flags: dict, seed: int
) -> None:
    """B resident in the scratchpad (flag [21]): any K (not a multiple of rows), N (not of cols),
    tile stride and place in the A region; the A rows below B streamed or kept, never over B."""
    stride = k + pad
    lowest = cfg.sp_layout.a_base + cfg.sp_layout.slots
    top = _resident_top(cfg, k, n, stride)
    assume_fits = top >= lowest
    base = lowest + round(where * (top - lowest)) if assume_fits else top
    assert resident_b_fits(cfg, base, k, n, stride) == assume_fits
    cycles = check_gemm(cfg, m, k, n, seed, sp_b=(base, stride), **flags)
    assert (cycles >= 0) == assume_fits


@pytest.mark.parametrize("cfg", [CONFIGS[3], CONFIGS[2]], ids=lambda c: f"{c.name}-sp{c.sp_kib}x{c.sp_banks}")
def test_gemm_loop_resident_b_limits(cfg: AccelConfig) -> None:
    """At the limits: B's last row the scratchpad's last (one bank) or the A region's; B's first
    row one weight slot's worth of A rows above the region's start. One row further either way
    is refused (SP_RANGE in the tile) and writes nothing."""
    m, k, n, stride = 9, 2 * cfg.rows + 1, 2 * cfg.cols + 1, 2 * cfg.rows + 1
    top = _resident_top(cfg, k, n, stride)
    lowest = cfg.sp_layout.a_base + cfg.sp_layout.slots
    if cfg.sp_banks == 1:
        assert top + (2 * stride + k) == cfg.sp_rows  # B ends at the scratchpad's last row
    for base, ok in ((top, True), (lowest, True), (top + 1, False), (lowest - 1, False)):
        assert resident_b_fits(cfg, base, k, n, stride) == ok
        assert (check_gemm(cfg, m, k, n, seed=base, sp_b=(base, stride), bias=1) >= 0) == ok, base

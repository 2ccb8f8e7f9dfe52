"""The accumulator against its model, cycle by cycle: random mesh writes (overwrite and accumulate,
the same row again after every spacing up to past the pipeline depth), DMA writes that stall on bank
conflicts, and reads with and without backpressure. Every ready, every read result and its latency,
and the final memory contents are checked exactly."""

import itertools
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from rtl.accumulator import ACC_READ_DEPTH, ACC_READ_LATENCY, Accumulator
from rtl.accumulator_model import AccumulatorModel
from rtl.config import AccelConfig
from sim.verilator import lint
from tb.stimulus import accumulators

CONFIGS = [
    AccelConfig(rows=4, cols=4, dtype="int8", acc_kib=1, acc_banks=2),  # 64 rows, 32 per bank
    AccelConfig(rows=2, cols=3, dtype="bf16", acc_dtype="fp32", acc_kib=1, acc_banks=2),  # 42 per bank
    AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16", acc_kib=1, acc_banks=4),
]
CYCLES = 1200
F32_SPECIALS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x7F7FFFFF, 0xFF7FFFFF]
SCALES_FP = [0x3F800000, 0x3F000000, 0xBF800000, 0x00000000, 0x7F800000, 0x7FC00000, 0x7F000000, 0x00800000]


def _row(cfg: AccelConfig, rng: np.random.Generator) -> list[int]:
    row = accumulators(cfg, rng, (cfg.cols,)).astype(np.uint64)
    if cfg.acc_dtype != "int32":
        specials = np.array(F32_SPECIALS, dtype=np.uint64) >> np.uint64(32 - cfg.acc_bits)
        row = np.where(rng.random(cfg.cols) < 0.05, rng.choice(specials, cfg.cols), row)
    return [int(x) for x in row]


def _controls(cfg: AccelConfig, rng: np.random.Generator) -> dict[str, int]:
    if cfg.acc_dtype == "int32":
        scale = int(rng.integers(0, 32)) if rng.random() < 0.9 else int(rng.integers(0, 2**32))
    elif rng.random() < 0.5:
        scale = int(rng.choice(SCALES_FP))
    else:
        scale = int(np.float32(rng.standard_normal() * 4).view(np.uint32))
    return {"scale": scale, "act": int(rng.integers(0, 4)), "out": int(rng.integers(0, 4))}


@dataclass
class Traffic:
    """Random requests that obey the stream rules (a refused request is held until accepted)."""

    cfg: AccelConfig
    model: AccumulatorModel
    rng: np.random.Generator
    recent: deque = field(default_factory=lambda: deque(maxlen=6))  # addresses of the last writes
    dma: dict | None = None
    read: dict | None = None

    def address(self) -> int:
        """Half the time a row written 1…6 writes ago, else one of a few hot rows or any row."""
        if self.recent and self.rng.random() < 0.5:
            return int(self.rng.choice(list(self.recent)))
        if self.rng.random() < 0.5:
            return int(self.rng.integers(0, 3)) * self.model.bank_rows % self.model.rows
        return int(self.rng.integers(0, self.model.rows))

    def next_cycle(self) -> dict | None:
        rng = self.rng
        mesh = None
        if rng.random() < 0.6:
            mesh = {"addr": self.address(), "data": _row(self.cfg, rng), "accumulate": int(rng.random() < 0.7)}
        if self.dma is None and rng.random() < 0.4:
            mask = int(rng.integers(0, 1 << self.cfg.cols))
            acc = int(rng.random() < 0.5)
            self.dma = {"addr": self.address(), "data": _row(self.cfg, rng), "mask": mask, "accumulate": acc}
        if self.read is None and rng.random() < 0.6:
            self.read = {"addr": self.address(), **_controls(self.cfg, rng)}
        return mesh


def _drive(ctx, port, request: dict | None) -> None:
    ctx.set(port.valid, request is not None)
    if request is not None:
        ctx.set(port.payload, request)


@dataclass
class Checker:
    """Predicts every ready and read result from the model and checks the hardware's, cycle by cycle."""

    dut: Accumulator
    traffic: Traffic
    owed: deque = field(default_factory=deque)  # (expected row, accept cycle) of accepted reads
    outstanding: int = 0  # accepted reads not yet taken from read_data (the hardware's credit count)
    last_write: dict = field(default_factory=dict)
    last_lane: dict = field(default_factory=dict)
    # (lane of the earlier write, lane of the accumulate, cycles between them), "mesh" or "dma"
    lane_spacing: dict = field(default_factory=dict)
    spacing: np.ndarray = field(default_factory=lambda: np.zeros(8, dtype=int))
    read_spacing: np.ndarray = field(default_factory=lambda: np.zeros(8, dtype=int))
    stats: dict = field(
        default_factory=lambda: dict.fromkeys(
            ("reads", "dma_stalls", "dma_accumulates", "dma_behind_read", "read_stalls", "backpressure"), 0
        )
    )

    def readies(self, ctx, mesh: dict | None) -> tuple[bool, bool]:
        """A read stalls only on the mesh's accumulate to its bank or when ACC_READ_DEPTH rows are
        owed; the DMA only on a mesh write to its bank, or, for an accumulate, on any mesh write
        (they share the adding lane) or a read accepted from its bank (the read port)."""
        model, dma, read = self.traffic.model, self.traffic.dma, self.traffic.read
        read_ok = False
        if read is not None:
            bank = model.bank(read["addr"])
            busy = mesh and mesh["accumulate"] and model.bank(mesh["addr"]) == bank
            read_ok = not busy and self.outstanding < ACC_READ_DEPTH
            assert ctx.get(self.dut.read.ready) == read_ok
            self.stats["read_stalls"] += not read_ok
        same_bank = dma is not None and read is not None and model.bank(read["addr"]) == model.bank(dma["addr"])
        behind_read = bool(same_bank and dma["accumulate"] and read_ok)
        dma_ok = dma is not None and not (
            (mesh and (dma["accumulate"] or model.bank(mesh["addr"]) == model.bank(dma["addr"]))) or behind_read
        )
        self.stats["dma_behind_read"] += behind_read and not mesh
        if dma is not None:
            assert ctx.get(self.dut.dma_write.ready) == dma_ok
            self.stats["dma_stalls"] += not dma_ok
            self.stats["dma_accumulates"] += dma_ok and bool(dma["accumulate"])
        return dma_ok, read_ok

    def output(self, ctx, cycle: int, ready: bool, exact_latency: bool) -> None:
        """A row leaves in request order, with the model's value, ACC_READ_LATENCY cycles after its
        request (exactly, while the consumer has always been ready)."""
        port = self.dut.read_data
        if not ctx.get(port.valid):
            assert not (ready and self.owed and self.owed[0][1] + ACC_READ_LATENCY <= cycle), "late row"
            return
        assert self.owed, "a row nobody asked for"
        if not ready:
            self.stats["backpressure"] += 1
            return
        want, accepted = self.owed.popleft()
        got = ctx.get(port.payload.data)
        assert [got[k] for k in range(self.traffic.cfg.cols)] == want.tolist(), f"read accepted in cycle {accepted}"
        due = accepted + ACC_READ_LATENCY
        assert cycle == due if exact_latency else cycle >= due
        self.outstanding -= 1

    def apply(self, cycle: int, mesh: dict | None, dma_ok: bool, read_ok: bool) -> None:
        """The model steps: this cycle's read sees only the writes of earlier cycles."""
        traffic, model = self.traffic, self.traffic.model
        if read_ok:
            r = traffic.read
            self.owed.append((model.read(r["addr"], r["scale"], r["act"], r["out"]), cycle))
            self.outstanding += 1
            self.stats["reads"] += 1
            if r["addr"] in self.last_write:
                self.read_spacing[min(cycle - self.last_write[r["addr"]], 7)] += 1
            traffic.read = None
        writes = [(mesh, None, "mesh")] if mesh else []
        if dma_ok:
            writes.append((traffic.dma, traffic.dma["mask"], "dma"))
            traffic.dma = None
        for w, mask, lane in writes:
            if w["accumulate"] and w["addr"] in self.last_write:
                gap = min(cycle - self.last_write[w["addr"]], 7)
                self.spacing[gap] += 1
                key = (self.last_lane[w["addr"]], lane, gap)
                self.lane_spacing[key] = self.lane_spacing.get(key, 0) + 1
            self.last_write[w["addr"]] = cycle
            self.last_lane[w["addr"]] = lane
            traffic.recent.append(w["addr"])
            model.write(w["addr"], w["data"], bool(w["accumulate"]), mask)


async def _step(ctx, checker: Checker, cycle: int, mesh: dict | None, ready: bool, exact: bool) -> None:
    """One cycle: offer the traffic's requests and the consumer's ``ready``, check the outputs
    (every latency exactly if ``exact``), apply what was accepted to the model, tick."""
    dut, traffic = checker.dut, checker.traffic
    _drive(ctx, dut.mesh_write, mesh)
    _drive(ctx, dut.dma_write, traffic.dma)
    _drive(ctx, dut.read, traffic.read)
    ctx.set(dut.read_data.ready, ready)
    dma_ok, read_ok = checker.readies(ctx, mesh)
    checker.output(ctx, cycle, ready, exact)
    checker.apply(cycle, mesh, dma_ok, read_ok)
    await ctx.tick()


def _check_memory(ctx, dut: Accumulator, model: AccumulatorModel) -> None:
    """Every bank row as the model has it."""
    for b, mem in enumerate(dut.banks):
        for i in range(model.bank_rows):
            row = ctx.get(mem.data[i])
            got = [row[k] for k in range(dut.cfg.cols)]
            assert got == model.mem[b * model.bank_rows + i].tolist(), f"bank {b} row {i}"


def _simulate(dut: Accumulator, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def run_random(cfg: AccelConfig, seed: int) -> dict[str, int]:
    dut = Accumulator(cfg)
    model = AccumulatorModel(cfg)
    traffic = Traffic(cfg, model, np.random.default_rng(seed))
    checker = Checker(dut, traffic)

    async def bench(ctx) -> None:
        for cycle in range(CYCLES + 3 * ACC_READ_LATENCY):
            draining = cycle >= CYCLES  # no new requests: every owed row must come out
            mesh = None if draining else traffic.next_cycle()
            if draining:
                traffic.dma = traffic.read = None
            # First half: the consumer is always ready, so every latency must be exact.
            always_ready = cycle < CYCLES // 2
            ready = always_ready or draining or traffic.rng.random() < 0.6
            await _step(ctx, checker, cycle, mesh, ready, always_ready)

        assert not checker.owed
        _check_memory(ctx, dut, model)

    _simulate(dut, bench)
    spacing = {f"spacing{k}": int(checker.spacing[k]) for k in range(1, 5)}
    return checker.stats | spacing | {f"read_spacing{k}": int(checker.read_spacing[k]) for k in range(1, 5)}


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_accumulator_random_traffic(cfg: AccelConfig) -> None:
    stats = run_random(cfg, seed=cfg.cols + cfg.acc_bits)
    # The traffic covered what it is meant to: accumulates onto a row written 1, 2, 3 and 4 cycles
    # earlier (in flight in every pipeline stage, or just written), DMA stalls, DMA accumulates (on the mesh's
    # adding lane), DMA accumulates waiting for a read of their bank, refused reads, a stalled consumer.
    assert all(stats[f"spacing{k}"] >= 20 for k in range(1, 5)), stats
    # Reads of a row written 1, 2, 3 and 4 cycles earlier: its write is then in S0, S1 or S2 (it
    # lands at the end of the read's S2, S1 or S0 and is forwarded into its S2) or done.
    assert all(stats[f"read_spacing{k}"] >= 20 for k in range(1, 5)), stats
    assert stats["reads"] > 300 and stats["dma_stalls"] > 20 and stats["read_stalls"] > 50, stats
    assert stats["dma_accumulates"] > 50 and stats["dma_behind_read"] > 10, stats
    assert stats["backpressure"] > 50, stats


@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=lambda c: c.name)
def test_accumulator_lints_clean(cfg: AccelConfig, tmp_path) -> None:
    path = tmp_path / "accumulator.v"
    path.write_text(verilog.convert(Accumulator(cfg), name="accumulator", emit_src=False))
    assert lint(path, "accumulator") == []


@dataclass
class ScriptedTraffic(Traffic):
    """Requests from a script: per cycle an optional mesh write, DMA write and read, each offered
    from that cycle until accepted (a later one of its port waits behind it)."""

    script: list = field(default_factory=list)
    cycle: int = 0
    dma_queue: deque = field(default_factory=deque)
    read_queue: deque = field(default_factory=deque)

    def next_cycle(self) -> dict | None:
        step = self.script[self.cycle] if self.cycle < len(self.script) else {}
        self.cycle += 1
        for port, queue in (("dma", self.dma_queue), ("read", self.read_queue)):
            if port in step:
                queue.append(step[port])
        if self.dma is None and self.dma_queue:
            self.dma = self.dma_queue.popleft()
        if self.read is None and self.read_queue:
            self.read = self.read_queue.popleft()
        return step.get("mesh")


def _hazard_script(cfg: AccelConfig, model: AccumulatorModel, rng: np.random.Generator) -> list[dict]:
    """Three accumulates to one row, by every choice of lanes (mesh or DMA, with random element
    masks) and every spacing of 1, 2 or 3 cycles (each in flight in S0, S1 or S2 of the next, or
    landing at the end of its S0), a read of the row between the second and the third and three
    after them, one a cycle; another row of the same bank and one of the other bank are written
    beside them. Idle cycles between the patterns let each drain."""
    row, other, far = 5, 6, model.bank_rows + 5
    script: list[dict] = []
    for lanes in itertools.product(("mesh", "dma"), repeat=3):
        for gaps in itertools.product((1, 2, 3), repeat=2):
            steps: list[dict] = [{} for _ in range(sum(gaps) + 10)]
            at = np.cumsum((0, *gaps))
            for lane, c in zip(lanes, at, strict=True):
                data = _row(cfg, rng)
                if lane == "mesh":
                    steps[c]["mesh"] = {"addr": row, "data": data, "accumulate": 1}
                else:
                    mask = int(rng.integers(1, 1 << cfg.cols))
                    steps[c]["dma"] = {"addr": row, "data": data, "mask": mask, "accumulate": 1}
            for c in (at[1] + 1, at[2] + 1, at[2] + 2, at[2] + 3):
                steps[c]["read"] = {"addr": row, **_controls(cfg, rng)}
            for c in range(at[2] + 1):
                if "mesh" not in steps[c] and "dma" not in steps[c] and rng.random() < 0.5:
                    steps[c]["mesh"] = {"addr": int(rng.choice([other, far])), "data": _row(cfg, rng), "accumulate": 1}
            script += steps
    return script


def run_script(cfg: AccelConfig, seed: int) -> Checker:
    dut = Accumulator(cfg)
    model = AccumulatorModel(cfg)
    rng = np.random.default_rng(seed)
    traffic = ScriptedTraffic(cfg, model, rng, script=_hazard_script(cfg, model, rng))
    checker = Checker(dut, traffic)

    async def bench(ctx) -> None:
        for cycle in range(len(traffic.script) + 3 * ACC_READ_LATENCY):
            await _step(ctx, checker, cycle, traffic.next_cycle(), True, True)
        assert not checker.owed and traffic.dma is None and traffic.read is None
        _check_memory(ctx, dut, model)

    _simulate(dut, bench)
    return checker


@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=lambda c: c.name)
def test_accumulator_back_to_back(cfg: AccelConfig) -> None:
    """Accumulates to one row 1, 2 and 3 cycles apart, on either lane, with reads among them:
    every read and the final rows exact, every latency exact."""
    checker = run_script(cfg, seed=7)
    for first, second, gap in itertools.product(("mesh", "dma"), ("mesh", "dma"), (1, 2, 3)):
        assert checker.lane_spacing.get((first, second, gap), 0) >= 1, (first, second, gap, checker.lane_spacing)
    assert all(checker.read_spacing[k] >= 5 for k in (1, 2, 3)), checker.read_spacing

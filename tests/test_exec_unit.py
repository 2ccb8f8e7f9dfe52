"""EXEC unit (rtl/exec_unit.py) with the real mesh in the Amaranth simulator: random operations
against a Python scratchpad (reads answered SP_READ_LATENCY cycles on, random stalls) and
accumulator; every accumulator row compared with the bit-exact mesh and accumulate models."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.accumulator_model import add_rows
from rtl.config import PE_STAGES, AccelConfig
from rtl.exec_unit import ExecUnit
from rtl.mesh_model import mesh_tile
from rtl.scratchpad import SP_READ_LATENCY
from tb.stimulus import inputs

SP_BITS, ACC_BITS = 8, 6


def pack(values, width: int) -> int:
    return sum((int(v) & ((1 << width) - 1)) << (k * width) for k, v in enumerate(values))


def make_ops(cfg: AccelConfig, rng: np.random.Generator, count: int) -> list[dict]:
    ops = []
    for n in range(count):
        m = int(rng.integers(1, 2 * cfg.rows + 3))
        ops.append(
            {
                "b_addr": int(rng.integers(0, 200)),
                "k_rows": int(rng.integers(0, cfg.rows + 1)),
                "a_addr": int(rng.integers(0, 200)),
                "m": m,
                "c_addr": int(rng.integers(0, 64 - m)),
                "accumulate": int(rng.integers(0, 2)),
                "keep_weights": int(n > 0 and rng.random() < 0.25),
                "seq": n,
            }
        )
    return ops


def reference(cfg: AccelConfig, sp: np.ndarray, ops: list[dict]) -> dict[int, np.ndarray]:
    acc: dict[int, np.ndarray] = {}
    w = None
    for op in ops:
        if not op["keep_weights"]:
            w = sp[op["b_addr"] : op["b_addr"] + cfg.rows, : cfg.cols].copy()
            if op["k_rows"]:
                w[op["k_rows"] :] = 0  # rows past the tile's K extent are zeros, whatever sp holds
        a = sp[op["a_addr"] : op["a_addr"] + op["m"], : cfg.rows]
        c = mesh_tile(cfg, a, w, np.zeros((op["m"], cfg.cols), dtype=np.uint32))
        for r in range(op["m"]):
            addr = op["c_addr"] + r
            acc[addr] = add_rows(cfg, acc[addr], c[r]) if op["accumulate"] and addr in acc else c[r]
    return acc


def run_exec(cfg: AccelConfig, seed: int, count: int) -> None:
    rng = np.random.default_rng(seed)
    dim = max(cfg.rows, cfg.cols)
    sp = inputs(cfg, rng, (256 + 2 * dim, dim), special=0.1)  # NaNs and Infs that unused rows must hide
    ops = make_ops(cfg, rng, count)
    dut = ExecUnit(cfg, SP_BITS + 1, ACC_BITS)
    acc: dict[int, np.ndarray] = {}
    done: list[int] = []

    async def bench(ctx) -> None:
        pending = list(ops)
        answers: dict[str, list[int | None]] = {"a": [None] * SP_READ_LATENCY, "b": [None] * SP_READ_LATENCY}
        ctx.set(dut.done.ready, 1)
        for _ in range(4000):
            if pending:
                for k, v in pending[0].items():
                    ctx.set(getattr(dut.op.payload, k), v)
            ctx.set(dut.op.valid, bool(pending))
            for port in ("a", "b"):
                rsp = getattr(dut, f"sp_{port}_data")
                due = answers[port][0]
                ctx.set(rsp.valid, due is not None)
                if due is not None:
                    ctx.set(rsp.payload.data.as_value(), pack(sp[due], cfg.in_bits))
                ctx.set(getattr(dut, f"sp_{port}").ready, rng.random() < 0.8)
            if ctx.get(dut.op.valid) and ctx.get(dut.op.ready):
                pending.pop(0)
            for port in ("a", "b"):
                req = getattr(dut, f"sp_{port}")
                taken = ctx.get(req.payload.addr) if ctx.get(req.valid) and ctx.get(req.ready) else None
                answers[port] = [*answers[port][1:], taken]
            if ctx.get(dut.acc_write.valid):
                p = dut.acc_write.payload
                addr, word = ctx.get(p.addr), ctx.get(p.data.as_value())
                row = np.array([(word >> (j * cfg.acc_bits)) & ((1 << cfg.acc_bits) - 1) for j in range(cfg.cols)])
                old = acc.get(addr)
                acc[addr] = add_rows(cfg, old, row) if ctx.get(p.accumulate) and old is not None else row
            if ctx.get(dut.done.valid):
                done.append(ctx.get(dut.done.payload.seq))
            await ctx.tick()
            if len(done) == len(ops) and not ctx.get(dut.busy):
                return
        raise AssertionError(f"cycle budget exhausted: {len(done)} of {len(ops)} operations done")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert done == [op["seq"] for op in ops]
    want = reference(cfg, sp, ops)
    assert sorted(acc) == sorted(want)
    for addr, row in want.items():
        assert acc[addr].astype(np.uint64).tolist() == row.astype(np.uint64).tolist(), f"accumulator row {addr}"


@pytest.mark.parametrize(
    "cfg",
    [
        AccelConfig(rows=4, cols=4, dtype="int8"),
        AccelConfig(rows=2, cols=5, dtype="int8", pe_stages=2),
        AccelConfig(rows=3, cols=2, dtype="bf16"),
        AccelConfig(rows=2, cols=2, dtype="bf16", acc_dtype="bf16"),
        AccelConfig(rows=3, cols=2, dtype="bf16", pe_stages=max(PE_STAGES)),
    ],
    ids=lambda c: f"{c.name}-s{c.pe_stages}",
)
@pytest.mark.parametrize("seed", [5, 6])
def test_exec_unit_matches_model(cfg: AccelConfig, seed: int) -> None:
    run_exec(cfg, seed=seed, count=20)

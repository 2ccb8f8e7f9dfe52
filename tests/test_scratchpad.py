"""The scratchpad against its model: random reads on every port with bank conflicts, masked writes,
each response checked for its data and for arriving exactly SP_READ_LATENCY cycles after acceptance."""

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from rtl.config import AccelConfig
from rtl.scratchpad import SP_READ_LATENCY, Scratchpad
from rtl.scratchpad_model import ScratchpadModel
from sim.verilator import lint

CONFIGS = [
    AccelConfig(rows=4, cols=4, dtype="int8", sp_kib=1, sp_banks=4),  # power-of-two banks: bit slices
    AccelConfig(rows=3, cols=5, dtype="bf16", sp_kib=1, sp_banks=4),  # 25 rows per bank: comparisons
    AccelConfig(rows=2, cols=2, dtype="int8", sp_kib=1, sp_banks=1),
]
CYCLES = 1500


def _address(rng: np.random.Generator, model: ScratchpadModel, hot: int) -> int:
    """Mostly a few hot rows (so reads meet writes to the same row), else anywhere."""
    if rng.random() < 0.5:
        return int(rng.integers(0, model.rows))
    return int((hot + rng.integers(0, 3) * model.bank_rows) % model.rows)


def run_random(cfg: AccelConfig, read_ports: int, seed: int) -> dict[str, int]:
    dut = Scratchpad(cfg, read_ports)
    model = ScratchpadModel(cfg)
    rng = np.random.default_rng(seed)
    elem_max = 1 << cfg.in_bits
    stats = {"accepted": 0, "refused": 0, "writes": 0, "low_writes": 0, "low_refused": 0, "read_during_write": 0}

    async def bench(ctx) -> None:
        pending: list[int | None] = [None] * read_ports  # a refused request is held (stream rule)
        # The rows each port must answer with, SP_READ_LATENCY - 1 ticks from now (oldest first).
        owed: list[list] = [[None] * read_ports for _ in range(SP_READ_LATENCY)]
        for _ in range(CYCLES):
            hot = int(rng.integers(0, 3))
            for p in range(read_ports):
                if pending[p] is None and rng.random() < 0.7:
                    pending[p] = _address(rng, model, hot)
                ctx.set(dut.read[p].valid, pending[p] is not None)
                ctx.set(dut.read[p].payload.addr, pending[p] or 0)
            w_valid = rng.random() < 0.6
            w_addr, w_data = _address(rng, model, hot), rng.integers(0, elem_max, model.dim)
            w_mask = int(rng.integers(0, 1 << model.dim))
            ctx.set(dut.write.valid, w_valid)
            ctx.set(dut.write.payload, {"addr": w_addr, "data": [int(x) for x in w_data], "mask": w_mask})
            # The low-priority write port: refused only when `write` takes the same bank.
            l_valid = rng.random() < 0.5
            l_addr, l_data = _address(rng, model, hot), rng.integers(0, elem_max, model.dim)
            l_mask = int(rng.integers(0, 1 << model.dim))
            ctx.set(dut.write_low.valid, l_valid)
            ctx.set(dut.write_low.payload, {"addr": l_addr, "data": [int(x) for x in l_data], "mask": l_mask})

            assert ctx.get(dut.write.ready) == 1
            same_bank = w_valid and model.bank(w_addr) == model.bank(l_addr)
            assert ctx.get(dut.write_low.ready) == (not same_bank)
            grants = model.grants(pending)
            assert [ctx.get(dut.read[p].ready) == 1 for p in range(read_ports) if pending[p] is not None] == [
                g for p, g in enumerate(grants) if pending[p] is not None
            ]
            # A read accepted in the cycle of a write to its row returns the row as it was before.
            expected = [model.read(a) if g and a is not None else None for a, g in zip(pending, grants, strict=True)]
            if w_valid:
                model.write(w_addr, w_data, w_mask)
                stats["writes"] += 1
            if l_valid and not same_bank:  # another bank: both writes land in the same cycle
                model.write(l_addr, l_data, l_mask)
                stats["low_writes"] += 1
            stats["low_refused"] += l_valid and same_bank
            stats["read_during_write"] += sum(
                g and a is not None and ((w_valid and a == w_addr) or (l_valid and not same_bank and a == l_addr))
                for a, g in zip(pending, grants, strict=True)
            )
            stats["accepted"] += sum(grants)
            stats["refused"] += sum(a is not None for a in pending) - sum(grants)
            pending = [None if g else a for a, g in zip(pending, grants, strict=True)]

            await ctx.tick()
            owed = [*owed[1:], expected]
            for p in range(read_ports):
                port, want = dut.read_data[p], owed[0][p]
                assert ctx.get(port.valid) == (want is not None), f"port {p} valid"
                if want is not None:
                    got = [ctx.get(port.payload.data[k]) for k in range(model.dim)]
                    assert got == want.tolist(), f"port {p} data"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return stats


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.name}-b{c.sp_banks}")
def test_scratchpad_random_traffic(cfg: AccelConfig) -> None:
    stats = run_random(cfg, read_ports=3, seed=cfg.rows)
    # The traffic really exercised arbitration and writes.
    assert stats["refused"] > 100 and stats["accepted"] > 1000 and stats["writes"] > 500
    assert stats["low_writes"] > 200 and stats["low_refused"] > 50
    # Reads met writes to their own row in the same cycle (they must return the old row).
    assert stats["read_during_write"] > 50


def test_scratchpad_single_port() -> None:
    stats = run_random(CONFIGS[0], read_ports=1, seed=9)
    assert stats["refused"] == 0


@pytest.mark.parametrize("cfg", CONFIGS[:2], ids=lambda c: c.name)
def test_scratchpad_lints_clean(cfg: AccelConfig, tmp_path) -> None:
    path = tmp_path / "scratchpad.v"
    path.write_text(verilog.convert(Scratchpad(cfg), name="scratchpad", emit_src=False))
    assert lint(path, "scratchpad") == []

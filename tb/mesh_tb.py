"""cocotb testbench of the mesh: weight tiles streamed back to back, every output checked exactly.

Parameters come from the environment: PYARD_CONFIG (the config as JSON) and PYARD_TB_ARGS (JSON:
``seed``, ``tiles``, ``gap`` = probability that a source idles in a cycle, ``max_cycles``).
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from rtl.config import AccelConfig
from rtl.mesh import mesh_latency
from rtl.mesh_model import mesh_tile
from tb import stimulus

TAG_BITS = 8


def pack(values, width: int) -> int:
    out = 0
    for k, v in enumerate(values):
        out |= (int(v) & ((1 << width) - 1)) << (k * width)
    return out


def unpack(word: int, width: int, count: int) -> list[int]:
    return [(word >> (k * width)) & ((1 << width) - 1) for k in range(count)]


@dataclass
class Stimulus:
    weight_rows: deque = field(default_factory=deque)  # packed weight rows
    input_rows: deque = field(default_factory=deque)  # (packed input payload, flip)
    expected: list = field(default_factory=list)  # (tag, [c_j]) in output order
    tile_rows: list = field(default_factory=list)  # activation rows per tile


def tile_lengths(cfg: AccelConfig, rng: np.random.Generator, tiles: int) -> list[int]:
    """Rows per tile: around the mesh height (shorter tiles are legal but cost bubbles), the last a single row."""
    return [int(rng.integers(max(1, cfg.rows - 2), 2 * cfg.rows + 3)) for _ in range(tiles - 1)] + [1]


def make_stimulus(cfg: AccelConfig, rng: np.random.Generator, tiles: int, rows: list[int] | None = None) -> Stimulus:
    st = Stimulus()
    tag = 0
    for n, m in enumerate(rows or tile_lengths(cfg, rng, tiles)):
        w = stimulus.inputs(cfg, rng, (cfg.rows, cfg.cols))
        a = stimulus.inputs(cfg, rng, (m, cfg.rows))
        d = stimulus.accumulators(cfg, rng, (m, cfg.cols))
        if n % 3 == 1:
            d[:] = 0  # plain products, no incoming partial sum
        c = mesh_tile(cfg, a, w, d)
        st.tile_rows.append(m)
        st.weight_rows.extend(pack(w[i], cfg.in_bits) for i in range(cfg.rows))
        for r in range(m):
            flip = int(r == 0)
            payload = pack(a[r], cfg.in_bits)
            payload |= pack(d[r], cfg.acc_bits) << (cfg.rows * cfg.in_bits)
            base = cfg.rows * cfg.in_bits + cfg.cols * cfg.acc_bits
            payload |= flip << base | tag << (base + 1)
            st.input_rows.append((payload, flip))
            st.expected.append((tag, [int(x) for x in c[r]]))
            tag = (tag + 1) % (1 << TAG_BITS)
    return st


async def reset(dut) -> None:
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.inp__valid.value = 0
    dut.weights__valid.value = 0
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0


@dataclass
class Trace:
    """What happened on the ports: the cycle of every accepted input row, every output row."""

    in_cycles: list = field(default_factory=list)
    out_cycles: list = field(default_factory=list)
    rows: list = field(default_factory=list)  # (tag, [c_j])
    latencies: set = field(default_factory=set)


async def drive(dut, cfg: AccelConfig, st: Stimulus, rng, gap: float, max_cycles: int) -> Trace:
    """Feed the stimulus, idling each source with probability ``gap`` per cycle; collect outputs."""
    total = len(st.expected)
    tr = Trace()
    accepted_at: dict[int, int] = {}
    w_valid = i_valid = False
    for cycle in range(max_cycles):
        await RisingEdge(dut.clk)
        # Sources may idle at random, but once valid they hold until accepted (stream rules).
        w_valid = w_valid or (bool(st.weight_rows) and rng.random() >= gap)
        i_valid = i_valid or (bool(st.input_rows) and rng.random() >= gap)
        dut.weights__valid.value = int(w_valid)
        dut.weights__payload.value = st.weight_rows[0] if w_valid else 0
        dut.inp__valid.value = int(i_valid)
        dut.inp__payload.value = st.input_rows[0][0] if i_valid else 0
        await ReadOnly()
        if w_valid and dut.weights__ready.value:
            st.weight_rows.popleft()
            w_valid = False
        if i_valid and dut.inp__ready.value:
            st.input_rows.popleft()
            accepted_at[len(tr.in_cycles) % (1 << TAG_BITS)] = cycle
            tr.in_cycles.append(cycle)
            i_valid = False
        if dut.out__valid.value:
            word = dut.out__payload.value.to_unsigned()
            tag = word >> (cfg.cols * cfg.acc_bits)
            tr.rows.append((tag, unpack(word, cfg.acc_bits, cfg.cols)))
            tr.out_cycles.append(cycle)
            tr.latencies.add(cycle - accepted_at[tag])
        if len(tr.rows) == total:
            return tr
    raise AssertionError(f"cycle budget {max_cycles} exhausted: {len(tr.rows)} of {total} rows out")


def check(cfg: AccelConfig, st: Stimulus, tr: Trace) -> None:
    assert [t for t, _ in tr.rows] == [t for t, _ in st.expected], "rows left the mesh out of order"
    for k, ((tag, row), (_, exp)) in enumerate(zip(tr.rows, st.expected, strict=True)):
        assert row == exp, f"row {k} (tag {tag}): got {[hex(x) for x in row]} expected {[hex(x) for x in exp]}"
    assert tr.latencies == {mesh_latency(cfg)}, f"latencies {tr.latencies}, documented {mesh_latency(cfg)}"


def tb_args(**defaults) -> dict:
    return defaults | json.loads(os.environ.get("PYARD_TB_ARGS", "{}"))


@cocotb.test()
async def mesh_tiles(dut) -> None:
    cfg = AccelConfig.from_dict(json.loads(os.environ["PYARD_CONFIG"]))
    args = tb_args(seed=1, tiles=6, gap=0.0, max_cycles=20000)
    rng = np.random.default_rng(args["seed"])
    st = make_stimulus(cfg, rng, args["tiles"])
    await reset(dut)
    tr = await drive(dut, cfg, st, rng, args["gap"], args["max_cycles"])
    check(cfg, st, tr)
    if args["gap"] == 0.0:
        # Double buffering: loading the next tile takes `rows` cycles and overlaps the current one,
        # so the input stream stalls only after a tile shorter than the mesh, by the difference.
        stalls = tr.in_cycles[-1] - tr.in_cycles[0] + 1 - len(tr.in_cycles)
        expected_stalls = sum(max(0, cfg.rows - m) for m in st.tile_rows[:-1])
        assert stalls == expected_stalls, f"{stalls} stall cycles, expected {expected_stalls}"


@cocotb.test()
async def mesh_one_tile(dut) -> None:
    """One weight tile and `rows` input rows back to back; writes the timing to PYARD_RESULT."""
    cfg = AccelConfig.from_dict(json.loads(os.environ["PYARD_CONFIG"]))
    args = tb_args(seed=2, rows=cfg.rows)
    rng = np.random.default_rng(args["seed"])
    st = make_stimulus(cfg, rng, 1, rows=[args["rows"]])
    await reset(dut)
    tr = await drive(dut, cfg, st, rng, 0.0, 10_000)
    check(cfg, st, tr)
    assert tr.in_cycles == list(range(tr.in_cycles[0], tr.in_cycles[0] + args["rows"])), "input stalled"
    result = {
        "input_rows": args["rows"],
        "latency_cycles": mesh_latency(cfg),
        "first_input_to_last_output_cycles": tr.out_cycles[-1] - tr.in_cycles[0] + 1,
        "weight_load_cycles": cfg.rows,
        "macs": args["rows"] * cfg.rows * cfg.cols,
    }
    if "PYARD_RESULT" in os.environ:
        Path(os.environ["PYARD_RESULT"]).write_text(json.dumps(result))

"""cocotb testbench of the mesh: weight tiles streamed back to back, every output checked exactly.

Parameters come from the environment: PYARD_CONFIG (the config as JSON) and PYARD_TB_ARGS (JSON:
``seed``, ``tiles``, ``gap`` = probability that a source idles in a cycle, ``max_cycles``).
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field

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


def make_stimulus(cfg: AccelConfig, rng: np.random.Generator, tiles: int) -> Stimulus:
    st = Stimulus()
    tag = 0
    for n in range(tiles):
        # Tiles shorter than the mesh are legal (they cost bubbles); the last one tests a single row.
        m = 1 if n == tiles - 1 else int(rng.integers(max(1, cfg.rows - 2), 2 * cfg.rows + 3))
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


@cocotb.test()
async def mesh_tiles(dut) -> None:
    cfg = AccelConfig.from_dict(json.loads(os.environ["PYARD_CONFIG"]))
    args = {"seed": 1, "tiles": 6, "gap": 0.0, "max_cycles": 20000} | json.loads(os.environ.get("PYARD_TB_ARGS", "{}"))
    rng = np.random.default_rng(args["seed"])
    st = make_stimulus(cfg, rng, args["tiles"])
    total = len(st.expected)
    await reset(dut)

    got: list[tuple[int, list[int]]] = []
    accepted_at: dict[int, int] = {}
    latencies: set[int] = set()
    in_cycles: list[int] = []
    w_valid = i_valid = False
    for cycle in range(args["max_cycles"]):
        await RisingEdge(dut.clk)
        # Sources may idle at random, but once valid they hold until accepted (stream rules).
        w_valid = w_valid or (bool(st.weight_rows) and rng.random() >= args["gap"])
        i_valid = i_valid or (bool(st.input_rows) and rng.random() >= args["gap"])
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
            accepted_at[len(in_cycles) % (1 << TAG_BITS)] = cycle
            in_cycles.append(cycle)
            i_valid = False
        if dut.out__valid.value:
            word = dut.out__payload.value.to_unsigned()
            tag = word >> (cfg.cols * cfg.acc_bits)
            got.append((tag, unpack(word, cfg.acc_bits, cfg.cols)))
            latencies.add(cycle - accepted_at[tag])
        if len(got) == total:
            break
    else:
        raise AssertionError(f"cycle budget {args['max_cycles']} exhausted: {len(got)} of {total} rows out")

    assert [t for t, _ in got] == [t for t, _ in st.expected], "rows left the mesh out of order"
    for k, ((tag, row), (_, exp)) in enumerate(zip(got, st.expected, strict=True)):
        assert row == exp, f"row {k} (tag {tag}): got {[hex(x) for x in row]} expected {[hex(x) for x in exp]}"
    assert latencies == {mesh_latency(cfg)}, f"latencies {latencies}, documented {mesh_latency(cfg)}"
    if args["gap"] == 0.0:
        # Double buffering: loading the next tile takes `rows` cycles and overlaps the current one,
        # so the input stream stalls only after a tile shorter than the mesh, by the difference.
        stalls = in_cycles[-1] - in_cycles[0] + 1 - len(in_cycles)
        expected_stalls = sum(max(0, cfg.rows - m) for m in st.tile_rows[:-1])
        assert stalls == expected_stalls, f"{stalls} stall cycles, expected {expected_stalls}"

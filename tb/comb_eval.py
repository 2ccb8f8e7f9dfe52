"""Evaluate a combinational or pipelined Amaranth component over arrays of inputs in one simulator run."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from amaranth.lib import wiring
from amaranth.sim import Simulator


def evaluate(
    dut: wiring.Component, inputs: Mapping[str, npt.ArrayLike], outputs: tuple[str, ...], latency: int = 0
) -> dict[str, npt.NDArray[np.uint64]]:
    """Drive each input port with the given values, one vector per step; return the output values.

    A pipelined unit (``latency`` > 0) takes one vector per clock cycle; its outputs are read
    ``latency`` cycles after their inputs."""
    arrays = {name: np.asarray(v).astype(np.uint64).ravel() for name, v in inputs.items()}
    count = len(next(iter(arrays.values())))
    results = {name: np.zeros(count, dtype=np.uint64) for name in outputs}
    columns = {name: [int(x) for x in arr] for name, arr in arrays.items()}

    async def bench(ctx) -> None:
        in_ports = {name: getattr(dut, name) for name in columns}
        out_ports = {name: getattr(dut, name) for name in outputs}
        for i in range(count + latency):
            for name, port in in_ports.items():
                ctx.set(port, columns[name][min(i, count - 1)])
            if i >= latency:
                for name, port in out_ports.items():
                    value = ctx.get(port)  # a struct port reads as a data.Const: its bits
                    results[name][i - latency] = value.as_value().value if hasattr(value, "as_value") else value
            if latency:
                await ctx.tick()

    sim = Simulator(dut)
    if latency:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return results

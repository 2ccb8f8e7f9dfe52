"""cocotb testbench of FPTT training on the tile: Python plays the host, issues one LSTM time step
(forward, backward) and one FPTT update as the firmware's command streams (tb/fptt_tile_cases.py)
through the tile's AXI4-Lite port, and compares every tensor each phase wrote to main memory with
the reference under the hardware contract, bit for bit."""

from __future__ import annotations

import cocotb

from tb.fptt_tile_cases import StepCase, step_case
from tb.tile_cases import check_exact
from tb.tile_tb import Tile, get, start, tb_args
from tb.vector_tb import run_commands

VEC = 0x05


async def run_step(t: Tile, case: StepCase) -> None:
    """The host's writes, then each phase: its commands, a wait for the tile (the firmware's
    phase()), and every tensor it wrote against the reference. Logs each phase's busy cycles
    (commands pushed one at a time over AXI4-Lite, so the tile waits for its host at times)."""
    if case.mem_bytes > len(t.mem.data):
        raise RuntimeError(f"testbench: {case.mem_bytes} bytes of tensors do not fit its {len(t.mem.data)}-byte memory")
    for addr, raw in case.writes:
        t.mem.data[addr : addr + len(raw)] = raw
    for phase in case.phases:
        await t.write("CONTROL", 0b100)  # zero the counters
        await run_commands(t, phase.commands)
        busy, macs, elems = [await t.read(name) for name in ("CYCLES_BUSY", "MACS_LO", "VEC_ELEMS")]
        # every VEC command ran once: the elements of its rows × elements (word 2), no more
        vec = [w for w in phase.commands if w[0] & 0xFF == VEC]
        assert elems == sum((w[2] & 0xFFFF) * (w[2] >> 16) for w in vec), f"{phase.name}: VEC_ELEMS {elems}"
        t.dut._log.info(
            "%s, %s: %d busy cycles, %d MACs, %d vector elements", case.label, phase.name, busy, macs, elems
        )
        for name, where in phase.outputs.items():
            got = get(t, where.addr, where.shape, phase.want[name].dtype, where.stride)
            check_exact(f"{case.label}, {phase.name}: {name}", got, phase.want[name], "bf16 bit patterns")


@cocotb.test()
async def fptt_tile_step(dut) -> None:
    """A step forward, its backward and the update, for each seed (a random LSTM each)."""
    t = await start(dut)
    args = tb_args(seeds=[1], chunk=16, hidden=8, batch=2)
    for seed in args["seeds"]:
        await run_step(t, step_case(t.cfg, seed, args["chunk"], args["hidden"], args["batch"]))

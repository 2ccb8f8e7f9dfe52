"""Run loop-command cases (tb/tile_cases.py) on the C++ tile simulator and check them exactly."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rtl.cmd import ERR
from rtl.config import AccelConfig
from sim import children
from tb.tile_cases import LoopCase, check_exact
from tilesim.build import build_tile_sim, harness_command

__all__ = ["MIN_MEM_BYTES", "TileRun", "memory_bytes", "run_case"]

# Runs share one build per config and latency unless their operands need more memory than this.
MIN_MEM_BYTES = 16 << 20


@dataclass
class TileRun:
    cycles: int  # from the first command write to the interrupt
    seconds: float  # wall-clock time of those cycles
    counters: dict[str, int]
    output: bytes

    @property
    def cycles_per_second(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0


def memory_bytes(case: LoopCase) -> int:
    """The power-of-two main memory for a case: at least MIN_MEM_BYTES, at least its operands."""
    need, size = case.touched_bytes, MIN_MEM_BYTES
    while size < need:
        size *= 2
    return size


def run_case(
    cfg: AccelConfig, case: LoopCase, *, latency: int = 32, max_cycles: int = 100_000_000, gate_idle: bool = True
) -> TileRun:
    """Run ``case`` on the tile simulator (``gate_idle``: ``TileSim``'s); raises if the tile
    reports an error, never interrupts within ``max_cycles``, or computes anything but the model's
    result."""
    sim = build_tile_sim(cfg, memory_bytes(case), latency, gate_idle=gate_idle)
    with tempfile.TemporaryDirectory(prefix="pyard-tilesim-") as tmp:
        work = Path(tmp)
        out = work / "out.bin"
        cmd = harness_command(sim.executable, case, work, max_cycles)
        cmd += ["--dump", f"{case.out_addr:#x}:{case.out_bytes}:{out}"]
        done = children.run(cmd, text=True)
        if done.returncode:
            raise RuntimeError(f"the tile simulator failed (status {done.returncode}): {done.stderr.strip()}")
        result = json.loads((work / "result.json").read_text())
        output = out.read_bytes()
    status = result.pop("status")
    if not result.pop("interrupt"):
        raise RuntimeError(f"{case.label}: no interrupt within {max_cycles} cycles (STATUS {status:#x})")
    if status & 4:
        names = {v: k for k, v in ERR.items()}
        code = status >> 8 & 0xFF
        raise RuntimeError(f"{case.label}: the tile reported {names.get(code, code)} (STATUS {status:#x})")
    cycles, seconds = result.pop("cycles"), result.pop("seconds")
    result.pop("error_seq")
    counters = {k: v for k, v in result.items() if not k.startswith("macs_")}
    counters["macs_issued"] = result["macs_lo"] | result["macs_hi"] << 32  # rows x cols per mesh row
    check_exact(case.label, case.result(output), case.want, f"{cycles} cycles, counters {counters}")
    return TileRun(cycles, seconds, counters, output)

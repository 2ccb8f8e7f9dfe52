"""``pyard bench sim-speed``: simulated SoC cycles per wall-clock second, and the SoC's build time.

The program is a long-running integer loop on hart 0 (a hash over a table in the data RAM with
a multiply and a data-dependent branch, like firmware's inner loops); the other harts park in
``wfi``. Speed is the run's cycles over the simulator's own wall-clock time of the run (loading
and read-back excluded); the build time is the Verilator + C++ compile of the SoC simulator,
measured when the build was made (a cached build is never redone; ``cached`` says so).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from sim.arg_types import integer

__all__ = ["register_sim_speed", "sim_speed"]

LOOP = r"""
#include "pyard.h"
static uint32_t table[256];
int hart_main(unsigned hart, unsigned nharts) {
  (void)nharts;
  if (hart != 0) return 0;
  uint32_t h = 2166136261u;
  for (int i = 0; i < 256; i++) table[i] = i * 2654435761u;
  for (uint32_t n = 0; n < ITERS; n++) {
    h = (h ^ table[(h >> 7) & 255]) * 16777619u;
    if (h & 1) table[n & 255] += h;
  }
  printf("sim-speed loop done: %08x\n", (unsigned)h);
  return 0;
}
"""


def sim_speed(cfg, iterations: int) -> dict:
    from sim import progress
    from sim.firmware import build_firmware
    from sim.run import run_elf
    from sim.soc_build import build_soc
    from sim.toolchain import find_toolchain

    build = build_soc(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "sim_speed.c"
        source.write_text(LOOP)
        elf = build_firmware(cfg, [source], defines={"ITERS": iterations})
    with progress.phase(f"Simulating the sim-speed loop ({iterations} iterations)"):
        result = run_elf(cfg, elf, max_cycles=100 * iterations + 1_000_000)
    if result.exit_code != 0:
        raise RuntimeError(f"the sim-speed loop failed (exit {result.exit_code}): {result.console}")
    return {
        "config": cfg.name,
        "cores": cfg.cores,
        "cycles": result.cycles,
        "instructions": result.instret[0],
        "run_seconds": round(result.sim_seconds, 3),
        "cycles_per_second": round(result.cycles / result.sim_seconds),
        "firmware_compiler": find_toolchain().name,
        "build_cached": build.cached,
        "generate_seconds": round(build.generate_seconds, 1),
        "build_seconds": round(build.verilate_seconds, 1),
    }


def register_sim_speed(kinds: argparse._SubParsersAction) -> None:
    from sim.soc_args import add_soc_args

    p = kinds.add_parser("sim-speed", help="SoC simulation speed (cycles per second) and build time")
    add_soc_args(p)
    p.add_argument(
        "--iterations", type=integer(1, 10**9), default=2_000_000, help="loop iterations (about 7 cycles each)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from sim.soc_args import soc_config_from_args

    report = sim_speed(soc_config_from_args(args), args.iterations)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(", ".join(f"{k} {v}" for k, v in report.items()))
    return 0

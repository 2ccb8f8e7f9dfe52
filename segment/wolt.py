"""WOLT's multi-application throughput on pyard (firmware/segment/wolt.c; the WOLT paper's Fig. 8).

Applications (one per hart) loop over CPU work and a GEMM on a tile; throughput is GEMM jobs per
million cycles for applications × tiles, with the resource manager's round robin or a static
binding of application h to tile h mod T. Every application's result is checked against NumPy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rtl.config import ConfigError, check_int
from sim.firmware import build_firmware
from sim.run import run_elf
from sim.toolchain import load_elf
from soc.config import SocConfig

__all__ = ["WoltJob", "run_wolt"]

SOURCE = Path(__file__).resolve().parent.parent / "firmware/segment/wolt.c"
_LINE = re.compile(r"wolt apps (\d+) tiles (\d+) static (\d+) jobs (\d+) cycles (\d+) cpu (\d+) gemm (\d+) wait (\d+)")
_FINISH = re.compile(r"finish((?: \d+)+)")


@dataclass(frozen=True)
class WoltJob:
    """Each application's loop: ``iters`` × (``cpu_iters`` rounds of CPU work, one m×k×n GEMM)."""

    iters: int = 6
    cpu_iters: int = 300
    m: int = 16
    k: int = 64
    n: int = 16

    def __post_init__(self) -> None:
        check_int("iters", self.iters, 1, 1000)
        check_int("cpu_iters", self.cpu_iters, 0, 10**6)
        for name in ("m", "k", "n"):  # the firmware fills the operands a word (4 int8) at a time
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value % 4 or not 4 <= value <= 256:
                raise ConfigError(name, value, "a multiple of 4 from 4 to 256")


def run_wolt(cfg: SocConfig, apps: int, tiles: int, static: bool, job: WoltJob) -> dict[str, Any]:
    check_int("apps", apps, 1, cfg.cores)
    check_int("tiles", tiles, 1, cfg.tiles)
    defines = {
        "PYARD_NHARTS_ACTIVE": apps,
        "TILES": tiles,
        "STATIC": int(static),
        "ITERS": job.iters,
        "CPU_ITERS": job.cpu_iters,
        "GEMM_M": job.m,
        "GEMM_K": job.k,
        "GEMM_N": job.n,
    }
    elf = build_firmware(cfg, [SOURCE], defines=defines)
    sym = load_elf(elf).symbols
    a_bytes, b_bytes, c_bytes = apps * job.m * job.k, apps * job.k * job.n, apps * job.m * job.n * 4
    dumps = {"a": (sym["app_a"], a_bytes), "b": (sym["app_b"], b_bytes), "c": (sym["app_c"], c_bytes)}
    result = run_elf(cfg, elf, 200_000_000, dumps=dumps)
    match, finish = _LINE.search(result.console), _FINISH.search(result.console)
    if result.exit_code != 0 or match is None or finish is None:
        raise RuntimeError(f"wolt firmware failed (exit {result.exit_code}): {result.console[-1000:]}")
    a = np.frombuffer(result.dumps["a"], np.int8).reshape(apps, job.m, job.k).astype(np.int64)
    b = np.frombuffer(result.dumps["b"], np.int8).reshape(apps, job.k, job.n).astype(np.int64)
    c = np.frombuffer(result.dumps["c"], np.int32).reshape(apps, job.m, job.n)
    if not np.array_equal(c, a @ b) or not np.any(c):
        raise RuntimeError("a WOLT application's GEMM result differs from NumPy's")
    jobs, cycles, cpu, gemm, wait = (int(match[i]) for i in range(4, 9))
    return {
        "apps": apps,
        "tiles": tiles,
        "policy": "static" if static else "round-robin",
        "jobs": jobs,
        "cycles": cycles,
        "jobs_per_mcycle": jobs * 1e6 / cycles,
        "hart0_cpu_cycles": cpu,
        "hart0_gemm_cycles": gemm,
        "hart0_wait_cycles": wait,
        "finish_cycles": [int(v) for v in finish[1].split()],  # each application's last job's end
    }

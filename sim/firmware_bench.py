"""``pyard bench multicore``: parallel speedup of the element-wise kernel (firmware/examples/vecadd.c).

One SoC with the largest core count runs the kernel on 1, 2, 4 … active harts (the others park), so
every point runs on the same hardware. Speedup is the kernel's cycles on one hart divided by its
cycles on N harts, between the two barriers around the kernel.
"""

from __future__ import annotations

import argparse
import json
import re

from sim.arg_types import integer
from sim.config_args import add_config_args, config_from_args

__all__ = ["multicore_speedup", "register_multicore"]

KERNEL_RE = re.compile(r"vecadd: (\d+) harts, (\d+) elements, ok, kernel (\d+) cycles")


def multicore_speedup(accel, harts: list[int], length: int, max_cycles: int = 20_000_000) -> dict:
    """Kernel cycles and speedups for each entry of ``harts`` on a SoC of ``max(harts)`` cores."""
    from sim.firmware import REPO, build_firmware
    from sim.run import run_elf
    from soc.config import SocConfig

    # Four int32 vectors, the stacks and the rest of the program in the data RAM.
    need_kib = (16 * length + max(harts) * 2048 + 8192) // 1024
    cfg = SocConfig(accel=accel, cores=max(harts), dram_kib=max(64, 1 << (need_kib - 1).bit_length()))
    cycles: dict[int, int] = {}
    for n in harts:
        elf = build_firmware(
            cfg, [REPO / "firmware/examples/vecadd.c"], defines={"PYARD_NHARTS_ACTIVE": n, "LEN": length}
        )
        result = run_elf(cfg, elf, max_cycles=max_cycles)
        match = KERNEL_RE.search(result.console)
        if result.exit_code != 0 or not match:
            raise RuntimeError(f"vecadd on {n} harts failed (exit {result.exit_code}):\n{result.console}")
        cycles[n] = int(match.group(3))
    base = cycles[min(harts)] * min(harts)
    return {
        "soc": cfg.name,
        "length": length,
        "cycles": cycles,
        "speedup": {n: round(base / c, 3) for n, c in cycles.items()},
        "efficiency": {n: round(base / c / n, 3) for n, c in cycles.items()},
    }


def register_multicore(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("multicore", help="parallel speedup of the element-wise kernel (vecadd.c) on 1..N harts")
    add_config_args(p)
    p.add_argument(
        "--cores", type=integer(1, 16), nargs="+", default=[1, 2, 4, 8], help="active hart counts (default 1 2 4 8)"
    )
    p.add_argument("--length", type=integer(1, 1 << 20), default=4096, help="elements per vector (default 4096)")
    p.add_argument("--json", action="store_true", help="print only the JSON result")
    p.set_defaults(func=bench_multicore)


def bench_multicore(args: argparse.Namespace) -> int:
    from rtl.config import ConfigError

    if any(not 1 <= n <= 16 for n in args.cores):
        raise ConfigError("cores", args.cores, "integers from 1 to 16")
    if not 16 <= args.length <= 65536:
        raise ConfigError("length", args.length, "an integer from 16 to 65536")
    result = multicore_speedup(config_from_args(args), sorted(set(args.cores)), args.length)
    if not args.json:
        for n in result["cycles"]:
            print(f"{n:2d} harts: {result['cycles'][n]:8d} cycles, speedup {result['speedup'][n]:.2f}")
    print(json.dumps(result))
    return 0

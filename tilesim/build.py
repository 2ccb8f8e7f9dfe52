"""Cached Verilator builds of the tile simulator: the generated ``tile_sim`` top and the C++ harness.

One build per (accelerator config, memory size, read latency, generator and harness sources), made
with :func:`sim.build.cached_build` like the SoC simulator's, compiled for speed the same way.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from rtl.config import AccelConfig
from sim import progress, verilator
from sim.build import BUILD_ROOT, cached_build
from sim.generate import source_hash
from sim.soc_build import CXX_FLAGS, HARNESS_DIR, MAKE_FLAGS, SIM_RAM, VERILATOR_ARGS

__all__ = ["HARNESS", "TileSimBuild", "build_tile_sim"]

HARNESS = Path(__file__).resolve().parent / "tile_main.cpp"
# The memory words and dump ranges it shares with the SoC harness.
SHARED = HARNESS_DIR / "sim_ram.h"
TOP = "tile_sim"


@dataclass(frozen=True)
class TileSimBuild:
    cfg: AccelConfig
    mem_bytes: int
    latency: int
    directory: Path
    cached: bool
    generate_seconds: float
    verilate_seconds: float

    @property
    def executable(self) -> Path:
        return self.directory / TOP


def build_tile_sim(cfg: AccelConfig, mem_bytes: int, latency: int, root: Path | None = None) -> TileSimBuild:
    """The tile simulator for ``cfg`` with ``mem_bytes`` of main memory answering reads after
    ``latency`` cycles, built unless an identical build exists."""
    from rtl import shared
    from tilesim.top import TileSim

    harness = hashlib.sha256(HARNESS.read_bytes() + SHARED.read_bytes()).hexdigest()[:16]
    flags = (*VERILATOR_ARGS, MAKE_FLAGS, CXX_FLAGS, *verilator.hierarchical_args(cfg.rows * cfg.cols))
    params = f"{cfg.to_json()} mem {mem_bytes} latency {latency}"

    def generate() -> tuple[str, str]:
        with progress.phase(f"Generating Verilog: tile simulator {cfg.name}"):
            text = shared.convert(TileSim(cfg, mem_bytes, latency), TOP)
        key = hashlib.sha256("\0".join((text, params, harness, *flags, str(verilator.verilator_root()))).encode())
        return f"{TOP}-{cfg.name}-{key.hexdigest()[:16]}", text

    directory, cached = cached_build(
        (root or BUILD_ROOT) / "sim",
        (TOP, params, source_hash(), harness, *flags),
        generate,
        lambda directory, text, seconds: _compile(cfg, mem_bytes, directory, text, seconds),
    )
    times = json.loads((directory / "built.ok").read_text())
    return TileSimBuild(
        cfg, mem_bytes, latency, directory, cached, times["generate_seconds"], times["verilate_seconds"]
    )


def _compile(cfg: AccelConfig, mem_bytes: int, directory: Path, text: str, generate_seconds: float) -> None:
    start = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{TOP}.v").write_text(text)
    (directory / "config.json").write_text(cfg.to_json())
    args = [
        *("--top-module", TOP, *VERILATOR_ARGS, *verilator.hierarchical_args(cfg.rows * cfg.cols)),
        *("-o", str(directory / TOP)),
        *("-CFLAGS", f"{CXX_FLAGS} -DPYARD_MEM_BYTES={mem_bytes}ULL -I{HARNESS_DIR}"),
        *map(str, (SIM_RAM, directory / f"{TOP}.v", HARNESS)),
    ]
    what = f"tile simulator {cfg.name}"
    log = directory / "build.log"
    verilator.build_model(args, directory / "obj", log, prefix=f"V{TOP}", make_args=MAKE_FLAGS.split(), what=what)
    times = {"generate_seconds": generate_seconds, "verilate_seconds": time.monotonic() - start}
    (directory / "built.ok").write_text(json.dumps(times))

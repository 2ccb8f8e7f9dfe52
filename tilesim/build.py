"""Cached Verilator builds of the tile simulator: the generated ``tile_sim`` top and the C++ harness.

One build per (accelerator config, memory size, read latency, generator and harness sources), made
with :func:`sim.build.cached_build` like the SoC simulator's, compiled for speed the same way.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rtl.config import AccelConfig
from sim import children, progress, verilator
from sim.build import BUILD_ROOT, cached_build
from sim.generate import source_hash
from sim.paths import env_flag
from sim.soc_build import CXX_FLAGS, HARNESS_DIR, MAKE_FLAGS, SIM_RAM, VERILATOR_ARGS

if TYPE_CHECKING:
    from tb.tile_cases import LoopCase

__all__ = ["HARNESS", "TileSimBuild", "build_tile_sim", "harness_command", "pgo_requested"]

HARNESS = Path(__file__).resolve().parent / "tile_main.cpp"
TOP = "tile_sim"
# Flat meshes (not --hierarchical) are compiled for speed beyond the SoC simulator's flags, with
# gcc profile-guided optimisation: compiled instrumented, run once on a small GEMM (PGO_TRAIN,
# deterministic, about a second), then compiled again with that profile; and as position-dependent
# code (-fno-pie, linked -no-pie). The profile only steers the compiler (inlining, block layout):
# the model computes the same cycles and results. 7-30 % more simulated cycles a second on the
# flat tiles (docs/tile.md, "The tile simulator"); PGO without -fno-pie lost 6 % on 4x4-bf16.
SPEED_CFLAGS = "-fno-pie"
SPEED_LDFLAGS = "-no-pie"
PGO_TRAIN = {"m": 64, "k": 64, "n": 64, "dense": 1}
PGO_MAX_CYCLES = 1_000_000
PGO_GENERATE = ("OPT=-fprofile-generate", "USER_LDFLAGS=-fprofile-generate")
PGO_USE = ("OPT=-fprofile-use -fprofile-partial-training -Wno-missing-profile",)


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


def build_tile_sim(
    cfg: AccelConfig, mem_bytes: int, latency: int, root: Path | None = None, *, gate_idle: bool = True
) -> TileSimBuild:
    """The tile simulator for ``cfg`` with ``mem_bytes`` of main memory answering reads after
    ``latency`` cycles, built unless an identical build exists. ``gate_idle=False``: every unit
    clocked on every cycle (``TileSim``)."""
    from rtl import shared
    from tilesim.top import TileSim

    # The harness and every header it may include from the SoC harness' folder (-I HARNESS_DIR).
    sources = (HARNESS, *sorted(HARNESS_DIR.glob("*.h")))
    harness = hashlib.sha256(b"".join(path.name.encode() + path.read_bytes() for path in sources)).hexdigest()[:16]
    flags = (*VERILATOR_ARGS, MAKE_FLAGS, CXX_FLAGS, *verilator.hierarchical_args(cfg.rows * cfg.cols))
    if _pgo(cfg):
        flags += (SPEED_CFLAGS, SPEED_LDFLAGS, *PGO_GENERATE, *PGO_USE, json.dumps(PGO_TRAIN), str(PGO_MAX_CYCLES))
    params = f"{cfg.to_json()} mem {mem_bytes} latency {latency} gate_idle {gate_idle}"

    def generate() -> tuple[str, str]:
        with progress.phase(f"Generating Verilog: tile simulator {cfg.name}"):
            text = shared.convert(TileSim(cfg, mem_bytes, latency, gate_idle=gate_idle), TOP)
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
    pgo = _pgo(cfg)
    cflags = f"{CXX_FLAGS} {SPEED_CFLAGS}" if pgo else CXX_FLAGS
    args = [
        *("--top-module", TOP, *VERILATOR_ARGS, *verilator.hierarchical_args(cfg.rows * cfg.cols)),
        *("-o", str(directory / TOP)),
        *("-CFLAGS", f"{cflags} -DPYARD_MEM_BYTES={mem_bytes}ULL -I{HARNESS_DIR}"),
        *(("-LDFLAGS", SPEED_LDFLAGS) if pgo else ()),
        *map(str, (SIM_RAM, directory / f"{TOP}.v", HARNESS)),
    ]
    what = f"tile simulator {cfg.name}"
    log, obj, make = directory / "build.log", directory / "obj", MAKE_FLAGS.split()
    if not pgo:
        verilator.build_model(args, obj, log, prefix=f"V{TOP}", make_args=make, what=what)
    else:
        verilator.build_model(args, obj, log, prefix=f"V{TOP}", make_args=[*make, *PGO_GENERATE], what=what)
        _train(cfg, mem_bytes, directory)
        # Everything compiled is compiled again (the precompiled headers too); the profile stays.
        for path in [*obj.rglob("*.o"), *obj.rglob("*.gch"), *obj.rglob("*.a"), directory / TOP]:
            path.unlink(missing_ok=True)
        verilator.compile_model(obj, log, prefix=f"V{TOP}", make_args=[*make, *PGO_USE], what=f"{what} (PGO)")
    times = {"generate_seconds": generate_seconds, "verilate_seconds": time.monotonic() - start}
    (directory / "built.ok").write_text(json.dumps(times))


def harness_command(executable: Path, case: LoopCase, work: Path, max_cycles: int) -> list[str]:
    """The command line running ``case`` on a tile simulator: its memory image and command words
    written into ``work`` as the harness reads them, the result to ``work/result.json``."""
    (work / "image.bin").write_bytes(case.image())
    flat = [word for words in case.commands for word in (len(words), *words)]
    (work / "commands.bin").write_bytes(struct.pack(f"<{len(flat)}I", *flat))
    cmd = [str(executable), "--image", str(work / "image.bin"), "--commands", str(work / "commands.bin")]
    return [*cmd, "--result", str(work / "result.json"), "--max-cycles", str(max_cycles)]


def pgo_requested() -> bool:
    """Profile-guided builds unless PYARD_SIM_PGO is set to a false value (0, no, false): the test
    suite sets it, as its runs are too short to win back the second compile."""
    return env_flag("PYARD_SIM_PGO", default=True)


def _pgo(cfg: AccelConfig) -> bool:
    """Profile-guided, position-dependent compiles for flat meshes (unless not requested); a
    hierarchical build's many makefiles are compiled as before (not measured with them)."""
    return pgo_requested() and not verilator.hierarchical_args(cfg.rows * cfg.cols)


def _train(cfg: AccelConfig, mem_bytes: int, directory: Path) -> None:
    """The profile of the instrumented simulator in ``directory``: one PGO_TRAIN GEMM (its result is
    not checked here: only the profile is kept). A memory too small for it gets no profile (the
    model is then compiled as without PGO)."""
    from tb.tile_cases import gemm_case

    case = gemm_case(cfg, PGO_TRAIN, seed=7)
    if case.touched_bytes > mem_bytes:
        return
    work = directory / "pgo-train"
    work.mkdir(exist_ok=True)
    cmd = harness_command(directory / TOP, case, work, PGO_MAX_CYCLES)
    with progress.phase(f"Training the tile simulator {cfg.name} (PGO)"):
        done = children.run(cmd, text=True)
    if done.returncode:
        raise verilator.ToolError(f"the instrumented tile simulator failed (status {done.returncode}): {done.stderr}")
    shutil.rmtree(work)

"""Cached Verilator builds of the SoC simulator: the generated ``soc_sim`` top plus the C++ harness.

One build per (SoC config, generator sources, harness sources, tracing, tile clock gating), made with
:func:`sim.build.cached_build`, so an unchanged config is never rebuilt; a traced build is a
separate cached build. The result is a stand-alone executable (``soc_sim``) that runs a program.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from sim import progress, verilator
from sim.build import BUILD_ROOT, cached_build
from sim.generate import REPO, source_hash
from soc.config import SocConfig
from soc.memmap import write_firmware_files

__all__ = ["HARNESS_DIR", "SIM_RAM", "SocBuild", "build_soc", "soc_verilog"]

HARNESS_DIR = REPO / "sim" / "harness"
SIM_RAM = REPO / "soc" / "sim_ram.v"
TOP = "soc_sim"
# Verilator options: speed over everything (no assertions, X as whatever is fastest, zero-initialised
# state), and the C++ compiled with -O3 on both make jobs (this machine has two cores).
VERILATOR_ARGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert", "-Wno-fatal", "-Wno-lint")
VERILATOR_ARGS += ("-Wno-style", "--output-split", "20000")
MAKE_FLAGS = "OPT_FAST=-O3 OPT_SLOW=-O1 OPT_GLOBAL=-O2 CFG_CXXFLAGS_PCH_I=-include"
# The model is built and run on the same machine, so it may use every instruction the CPU has
# (-O3 -march=native: about 10 % faster than -O2 on the 4x4-bf16 SoC). No -O level here: these
# flags follow make's OPT_* on the compiler's command line and would override them, compiling the
# run-once code (constructors, the trace's declarations) at -O3 too; at OPT_SLOW's -O1 a 4x4-int8
# tile simulator builds in three quarters of the time and runs as fast.
CXX_FLAGS = "-march=native"
COMPILE_FLAGS = (*VERILATOR_ARGS, MAKE_FLAGS, CXX_FLAGS)  # part of the build key


@dataclass(frozen=True)
class SocBuild:
    cfg: SocConfig
    directory: Path
    trace: bool
    gate_tile: bool
    cached: bool
    generate_seconds: float
    verilate_seconds: float  # Verilator and C++ compile

    @property
    def executable(self) -> Path:
        return self.directory / TOP


def soc_verilog(cfg: SocConfig, *, gate_tile: bool = True) -> str:
    from rtl import shared
    from soc.soc import SocSim

    with progress.phase(f"Generating Verilog: SoC {cfg.name}"):
        return shared.convert(SocSim(cfg, gate_tile=gate_tile), TOP)


def _harness_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(HARNESS_DIR.glob("*")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def build_soc(cfg: SocConfig, *, trace: bool = False, gate_tile: bool = True, root: Path | None = None) -> SocBuild:
    """The SoC simulator for ``cfg``, built unless an identical build exists. ``gate_tile=False``
    keeps the tile's clock running while it is idle (slower; the same cycles and results)."""
    harness = _harness_hash()

    def generate() -> tuple[str, str]:
        text = soc_verilog(cfg, gate_tile=gate_tile)
        flags = (*COMPILE_FLAGS, *_hierarchical(cfg))
        key = hashlib.sha256(
            "\0".join((text, cfg.to_json(), harness, *flags, str(verilator.verilator_root()), str(trace))).encode()
        )
        return f"{TOP}-{cfg.name}-{key.hexdigest()[:16]}", text

    directory, cached = cached_build(
        (root or BUILD_ROOT) / "sim",
        (TOP, cfg.to_json(), source_hash(), harness, *COMPILE_FLAGS, *_hierarchical(cfg), str(trace), str(gate_tile)),
        generate,
        lambda directory, text, seconds: _compile(cfg, directory, text, trace, seconds),
    )
    times = json.loads((directory / "built.ok").read_text())
    return SocBuild(cfg, directory, trace, gate_tile, cached, times["generate_seconds"], times["verilate_seconds"])


def _hierarchical(cfg: SocConfig) -> list[str]:
    return verilator.hierarchical_args(cfg.accel.rows * cfg.accel.cols)


def _compile(cfg: SocConfig, directory: Path, text: str, trace: bool, generate_seconds: float) -> None:
    if trace and not Path("/usr/include/lz4.h").exists():
        raise verilator.ToolError("FST waveforms need the lz4 headers (Debian liblz4-dev): run ./install.sh")
    start = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{TOP}.v").write_text(text)
    (directory / "config.json").write_text(cfg.to_json())
    write_firmware_files(cfg, directory)
    args = [
        *("--top-module", TOP, *VERILATOR_ARGS, *_hierarchical(cfg)),
        *("-o", str(directory / TOP)),
        *("-CFLAGS", f"{CXX_FLAGS} -I{directory} -I{HARNESS_DIR}" + (" -DPYARD_TRACE" if trace else "")),
        *(["--trace-fst"] if trace else []),
        *map(str, (SIM_RAM, directory / f"{TOP}.v", HARNESS_DIR / "soc_main.cpp")),
    ]
    log = directory / "build.log"
    what = f"SoC {cfg.name}"
    verilator.build_model(args, directory / "obj", log, prefix=f"V{TOP}", make_args=MAKE_FLAGS.split(), what=what)
    times = {"generate_seconds": generate_seconds, "verilate_seconds": time.monotonic() - start}
    (directory / "built.ok").write_text(json.dumps(times))

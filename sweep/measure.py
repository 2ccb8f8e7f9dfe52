"""Measure one sweep point, with the code of the commands that measure it alone: ``pyard bench
gemm/conv`` (the tile simulator), ``pyard bench fptt-pass``, ``pyard run`` and ``pyard synth``.

These functions run in Dask workers as well as in pyard itself, so they take and return plain
data (a :class:`~sweep.spec.Point`, dicts) and never raise for a point that fails: the error
comes back as a value, so one bad point never stops the others.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from functools import cache
from pathlib import Path
from typing import Any

from sweep.spec import SOC_KINDS, Point

__all__ = ["point_key", "prepare", "prepare_key", "run_point", "source_hashes"]

REPO = Path(__file__).resolve().parent.parent
# What each kind of point reads besides the generator sources (sim.generate.source_hash: rtl, soc,
# tb): a change to any of these files must recompute the points of that kind.
_SOC_RUN = ("sim/harness", "sim/soc_build.py", "sim/run.py", "sim/firmware.py", "sim/toolchain.py")
KIND_SOURCES: dict[str, tuple[str, ...]] = {
    "gemm": ("tilesim", "sim/harness", "sim/soc_build.py", "sim/bench_cmd.py"),
    "conv": ("tilesim", "sim/harness", "sim/soc_build.py", "sim/bench_cmd.py"),
    "fptt": (*_SOC_RUN, "firmware", "fptt_soc"),
    "program": (*_SOC_RUN, "firmware/runtime", "firmware/driver"),
    "area": ("synth",),
}
ERROR_CHARS = 400  # an error is shown in one table cell: its first line, cut to this length


def _hash_paths(paths: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for rel in paths:
        root = REPO / rel
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@cache
def source_hashes() -> dict[str, str]:
    """Per kind of point, a hash of everything its figures depend on: the generator sources, the
    harnesses, firmware and measuring code it runs, this module, and the tools' versions."""
    from sim import verilator
    from sim.generate import source_hash
    from synth.flow import tool_versions

    common = source_hash() + _hash_paths(("sweep/measure.py",))
    tools = {"area": tool_versions()}
    simulator = str(verilator.verilator_root())
    return {
        kind: hashlib.sha256(f"{common}\0{_hash_paths(paths)}\0{tools.get(kind, simulator)}".encode()).hexdigest()
        for kind, paths in KIND_SOURCES.items()
    }


def point_key(point: Point, sources: dict[str, str], latency: int, max_cycles: int) -> str:
    """The cache key of a point: its design, workload, the simulator options and what it reads."""
    read = {"point": point.to_dict(), "sources": sources[point.kind]}
    if point.kind != "area":
        read |= {"latency": latency, "max_cycles": max_cycles}
    if point.kind == "program":
        read["program"] = _program_hash(Path(point.params["path"]))
    return hashlib.sha256(json.dumps(read, sort_keys=True).encode()).hexdigest()[:24]


def _program_hash(path: Path) -> str:
    """The program and the headers beside it (a C program includes its own with ``#include "x.h"``;
    the runtime's and driver's are in KIND_SOURCES)."""
    h = hashlib.sha256(path.read_bytes())
    for header in sorted(path.parent.glob("*.h")) if path.suffix == ".c" else []:
        h.update(header.name.encode() + b"\0" + header.read_bytes())
    return h.hexdigest()


def prepare_key(point: Point) -> str | None:
    """The simulator build a point needs, shared by every point with the same key (None: none)."""
    if point.kind in ("gemm", "conv"):
        return f"tile {point.config.name} {json.dumps(point.accel, sort_keys=True)}"
    if point.kind in SOC_KINDS:
        return f"soc {point.design} {json.dumps(point.accel, sort_keys=True)}"
    return None


def prepare(point: Point, latency: int) -> str | None:
    """Build (or find) the simulator of ``point``'s design; its error as text, None when built.
    Builds are locked per directory (sim.build.cached_build), so this is safe across processes."""
    try:
        with _quiet():
            if point.kind in ("gemm", "conv"):
                from tilesim.build import build_tile_sim
                from tilesim.run import MIN_MEM_BYTES

                build_tile_sim(point.config, MIN_MEM_BYTES, latency)
            else:
                from sim.soc_build import build_soc

                build_soc(_soc(point, latency))
    except Exception as err:
        return "simulator build failed: " + _one_line(err)
    return None


def run_point(point: Point, latency: int, max_cycles: int, build_error: str | None = None) -> dict[str, Any]:
    """Measure ``point``: ``{"status": "ok", "metrics": {...}, "seconds": s}`` or ``{"status":
    "failed", "error": "...", "seconds": s}``. ``build_error`` is :func:`prepare`'s result."""
    start = time.monotonic()
    if build_error is not None:
        return {"status": "failed", "error": build_error, "seconds": 0.0}
    try:
        with _quiet():
            metrics = MEASURES[point.kind](point, latency, max_cycles)
    except Exception as err:
        return {"status": "failed", "error": _one_line(err), "seconds": round(time.monotonic() - start, 2)}
    return {"status": "ok", "metrics": metrics, "seconds": round(time.monotonic() - start, 2)}


def _one_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    if not text:  # an exception without a message: where it came from is the only clue
        return f"{type(err).__name__} at {traceback.extract_tb(err.__traceback__)[-1].line}"
    return f"{type(err).__name__}: {text[0]}"[:ERROR_CHARS]


def _quiet():
    from sim import progress

    return progress.silenced()


def _soc(point: Point, latency: int) -> Any:
    """The SoC of a point, its main memory answering after ``latency`` cycles like the tile's."""
    from soc.config import SocConfig

    return SocConfig(accel=point.config, cores=point.cores or 1, mem_latency=latency)


def _loop(point: Point, latency: int, max_cycles: int) -> dict[str, Any]:
    from sim.bench_cmd import conv_bench, gemm_bench

    bench = gemm_bench if point.kind == "gemm" else conv_bench
    r = bench(point.config, dict(point.params), latency)
    keep = ("cycles", "utilization", "macs", "macs_issued", "dma_rd_bytes", "dma_wr_bytes", "sim_seconds")
    return {k: r[k] for k in keep}


def _fptt(point: Point, latency: int, max_cycles: int) -> dict[str, Any]:
    from fptt_soc.bench import FpttPass, fptt_pass

    p = point.params
    spec = FpttPass(T=p["T"], hidden=p["hidden"], batch=p["batch"], parts=p["parts"], seed=p["seed"])
    r = fptt_pass(_soc(point, latency), spec, p["K"], max_cycles)
    return {
        "cycles": r["cycles_per_pass"],
        "utilization": r["mac_utilization"],
        "phases": r["phases_per_pass"],
        "parts_simulated": r["parts_simulated"],
        "thesis_cycles": r["thesis_cycles_per_pass"],
        "sim_seconds": r["sim_seconds"],
    }


def _program(point: Point, latency: int, max_cycles: int) -> dict[str, Any]:
    from sim.firmware import build_firmware
    from sim.run import run_elf

    cfg = _soc(point, latency)
    path = Path(point.params["path"])
    elf = path if path.read_bytes()[:4] == b"\x7fELF" else build_firmware(cfg, [path])
    r = run_elf(cfg, elf, max_cycles)
    if r.exit_code != 0:
        why = "no EXIT within max_cycles" if r.exit_code is None else f"exit code {r.exit_code}"
        raise RuntimeError(f"{path.name}: {why}")
    macs = r.counters["macs"]
    return {
        "cycles": r.cycles,
        "utilization": round(macs / (cfg.accel.rows * cfg.accel.cols * r.cycles), 4),
        "macs": macs,
        "instructions": sum(r.instret),
        "sim_seconds": round(r.sim_seconds, 2),
    }


def _area(point: Point, latency: int, max_cycles: int) -> dict[str, Any]:
    from rtl import shared
    from sim.build import BUILD_ROOT
    from synth.flow import Options, synthesize

    p, cfg = point.params, point.config
    if p["top"] == "soc":
        from soc.soc import Soc

        soc = _soc(point, 32)  # area does not depend on the memory model's latency
        name, verilog = soc.name, shared.convert(Soc(soc), "soc")
    else:
        from sim.generate import top_component

        name, verilog = cfg.name, shared.convert(top_component("tile", cfg), "tile")
    opts = Options(family=p["family"], pnr=p["fmax"], freq_mhz=p["freq"])
    total = synthesize(verilog, p["top"], name, opts, BUILD_ROOT)
    res, bram = total["blocks"]["total"], next(k for k in ("bram36", "bram18") if k in total["blocks"]["total"])
    out = {"lut": res["lut"], "lutram": res["lutram"], "ff": res["ff"], "bram": res[bram], "bram_kind": bram}
    return out | {"dsp": res["dsp"], "fmax_mhz": total.get("fmax_mhz")}


MEASURES = {"gemm": _loop, "conv": _loop, "fptt": _fptt, "program": _program, "area": _area}

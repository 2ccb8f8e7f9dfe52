"""Run a program on the SoC in Verilator: ``run_elf`` and the ``pyard run`` command.

The SoC simulator is built once per config (sim/soc_build.py); a run converts the ELF into a load
image, starts the simulator (the clock runs in C++), streams the console and returns a
:class:`RunResult` read from the simulator's result file.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rtl.cmd import ERR
from sim import children
from sim.arg_types import integer, output_file
from sim.elf_check import ElfError, check_elf
from sim.soc_build import build_soc
from soc.config import SocConfig
from soc.memmap import MEM_BASE

__all__ = ["BUDGET_EXIT_STATUS", "LoadError", "RunResult", "load_image", "run_elf"]

BUDGET_EXIT_STATUS = 124  # `pyard run` status when the cycle budget ran out (as timeout(1) does)
DEFAULT_MAX_CYCLES = 100_000_000


class LoadError(ValueError):
    """The ELF does not fit the SoC's memories."""


@dataclass
class RunResult:
    exit_code: int | None  # the value written to EXIT, None if the cycle budget ran out first
    console: str
    cycles: int
    instret: list[int]  # per hart
    counters: dict[str, int]  # accelerator counters (docs/isa.md) at the end of the run
    dumps: dict[str, bytes] = field(default_factory=dict)
    sim_seconds: float = 0.0  # wall-clock time of the simulated run (loading and read-back excluded)
    tile_cycles: int = 0  # cycles the accelerator tile was clocked (it is gated while idle)
    tile_status: int = 0  # the tile's STATUS register at the end of the run
    tile_error_seq: int = 0  # its ERROR_SEQ register

    @property
    def tile_error(self) -> str | None:
        """The tile's error still pending at the end of the run, in words; None if there is none."""
        if not self.tile_status >> 2 & 1:
            return None
        code, unit = self.tile_status >> 8 & 0xFF, self.tile_status >> 4 & 7
        name = {v: k for k, v in ERR.items()}.get(code, f"code {code:#04x}")
        return f"{name} (error code {code:#04x}, unit {unit}, command #{self.tile_error_seq})"

    @property
    def cpi(self) -> list[float | None]:
        return [self.cycles / n if n else None for n in self.instret]

    @property
    def exit_status(self) -> int:
        """The process exit status for this run: the exit code's low byte, kept non-zero when it is."""
        if self.exit_code is None:
            return BUDGET_EXIT_STATUS
        return self.exit_code & 0xFF or (1 if self.exit_code else 0)

    def summary(self) -> str:
        lines = [f"cycles {self.cycles}"]
        for h, (n, cpi) in enumerate(zip(self.instret, self.cpi, strict=True)):
            lines.append(f"hart {h}: instructions {n}, CPI {cpi:.3f}" if cpi else f"hart {h}: instructions 0")
        lines.append("accelerator: " + ", ".join(f"{k} {v}" for k, v in self.counters.items()))
        lines.append(f"accelerator clocked {self.tile_cycles} cycles ({self.tile_cycles / max(self.cycles, 1):.1%})")
        return "\n".join(lines)


def load_image(cfg: SocConfig, elf: Path) -> bytes:
    """(address, word) pairs of the ELF's non-zero words, after checking every segment fits a memory."""
    from sim.toolchain import load_elf

    try:
        check_elf(cfg, elf)
    except ElfError as err:
        raise LoadError(str(err)) from None
    out = bytearray()
    for addr, data in load_elf(elf).segments:
        data = data.rstrip(b"\0")  # memories start zeroed: trailing zeros (.bss, NOLOAD) need no load
        if not data:
            continue
        start = addr & ~3
        data = bytes(addr - start) + data
        data += bytes(-len(data) % 4)
        for offset in range(0, len(data), 4):
            (word,) = struct.unpack_from("<I", data, offset)
            if word:
                out += struct.pack("<II", start + offset, word)
    return bytes(out)


def _data_image(cfg: SocConfig, loads: Mapping[int, bytes]) -> bytes:
    """(address, word) pairs of ``loads``' non-zero words; each range must lie in main memory."""
    out = bytearray()
    base, size = MEM_BASE, cfg.mem_bytes
    for addr, data in loads.items():
        if addr % 4 or not base <= addr <= addr + len(data) <= base + size:
            raise LoadError(f"cannot load {len(data)} bytes at {addr:#x}: not word-aligned main memory")
        data = bytes(data) + bytes(-len(data) % 4)
        words = np.frombuffer(data, dtype="<u4")
        nz = np.flatnonzero(words)
        pairs = np.empty((len(nz), 2), dtype="<u4")
        pairs[:, 0] = addr + 4 * nz
        pairs[:, 1] = words[nz]
        out += pairs.tobytes()
    return bytes(out)


def run_elf(
    cfg: SocConfig,
    elf: Path,
    max_cycles: int = DEFAULT_MAX_CYCLES,
    dumps: dict[str, tuple[int, int]] | None = None,
    trace: Path | None = None,
    on_console: Callable[[str], None] | None = None,
    gate_tile: bool = True,
    loads: Mapping[int, bytes] | None = None,
) -> RunResult:
    """Run ``elf`` until a hart writes EXIT or ``max_cycles`` pass; ``dumps`` name (address, length)
    ranges read back at the end. ``on_console`` receives console text as the program writes it.
    ``gate_tile=False`` runs a build whose tile is clocked on every cycle (see sim/soc_build.py).
    ``loads`` writes data into main memory before the run (address → bytes, e.g. a program's input
    buffers found by their symbols), over whatever the ELF put there."""
    image = load_image(cfg, Path(elf))  # refuses an ELF the SoC cannot run before building the SoC
    image += _data_image(cfg, loads or {})
    sim = build_soc(cfg, trace=trace is not None, gate_tile=gate_tile)
    with tempfile.TemporaryDirectory(prefix="pyard-run-") as tmp:
        work = Path(tmp)
        (work / "image.bin").write_bytes(image)
        cmd = [str(sim.executable), "--image", str(work / "image.bin"), "--result", str(work / "result.json")]
        cmd += ["--max-cycles", str(max_cycles)]
        for n, (name, (addr, length)) in enumerate((dumps or {}).items()):
            cmd += ["--dump", f"{addr:#x}:{length}:{work / f'dump{n}.bin'}"]
            del name
        if trace is not None:
            cmd += ["--trace", str(Path(trace).resolve())]
        console = _stream(cmd, on_console)
        result = json.loads((work / "result.json").read_text())
        if result["dump_errors"]:
            bad = ", ".join(f"{a:#x}" for a in result["dump_errors"])
            raise LoadError(f"cannot read back the dump ranges at {bad} (unmapped or ITCM)")
        read = {name: (work / f"dump{n}.bin").read_bytes() for n, name in enumerate(dumps or {})}
    return RunResult(
        exit_code=result["exit_code"] if result["exited"] else None,
        console=console,
        cycles=result["cycles"],
        instret=result["instret"],
        counters=_counters(result["counters"]),
        tile_status=result["counters"]["status"],
        tile_error_seq=result["counters"]["error_seq"],
        dumps=read,
        sim_seconds=result["seconds"],
        tile_cycles=result["tile_cycles"],
    )


def _counters(raw: dict[str, int]) -> dict[str, int]:
    out = {k: v for k, v in raw.items() if not k.startswith("macs_") and k not in ("status", "error_seq")}
    out["macs"] = raw["macs_lo"] | raw["macs_hi"] << 32
    return out


def _stream(cmd: Sequence[str], on_console: Callable[[str], None] | None) -> str:
    """Run the simulator, passing its stdout (the console) on as it comes; return all of it."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    # Ctrl-C, SIGTERM (sim/cli.py): the simulator must not outlive us (sim/children.py).
    with children.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 65536):
            text = decoder.decode(chunk)
            parts.append(text)
            if on_console and text:
                on_console(text)
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"the SoC simulator failed (status {proc.returncode}): {stderr.strip()}")
    return "".join(parts)


# ---- pyard run -----------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:
    from sim.soc_args import add_soc_args

    p = sub.add_parser("run", help="run a C program or an ELF on the SoC in Verilator")
    add_soc_args(p)
    p.add_argument("program", nargs="+", type=Path, help="C/assembly sources (built with the runtime) or one ELF")
    p.add_argument(
        "--max-cycles", type=integer(1, 2**63 - 1), default=DEFAULT_MAX_CYCLES, help="cycle budget (default 1e8)"
    )
    p.add_argument("--trace", type=output_file, default=None, help="write an FST waveform (a separate, traced build)")
    p.add_argument(
        "--no-clock-gate",
        action="store_true",
        help="clock the accelerator on every cycle, as on an FPGA (slower; same cycles and results)",
    )
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sim.cli import UsageError
    from sim.soc_args import soc_config_from_args

    cfg = soc_config_from_args(args)
    if args.max_cycles < 1:
        raise UsageError(f"--max-cycles = {args.max_cycles} is invalid: allowed a positive integer")
    elf = _program(cfg, args.program)
    try:
        gate = not args.no_clock_gate
        result = run_elf(cfg, elf, args.max_cycles, trace=args.trace, on_console=_echo, gate_tile=gate)
    except LoadError as err:
        raise UsageError(str(err)) from None
    if result.exit_code is None:
        print(f"\npyard: stopped: no EXIT within {args.max_cycles} cycles (--max-cycles)", file=sys.stderr)
    if result.tile_error:
        print(f"pyard: the tile still reports an error at exit: {result.tile_error}", file=sys.stderr)
    if args.json:
        stats = {"config": cfg.name, "exit_code": result.exit_code, "cycles": result.cycles}
        stats["tile_error"] = result.tile_error
        stats |= {"instret": result.instret, "cpi": result.cpi, "counters": result.counters}
        stats["tile_cycles"] = result.tile_cycles
        print(json.dumps(stats, indent=2), file=sys.stderr)
    else:
        print(result.summary(), file=sys.stderr)
    return result.exit_status


def _echo(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _program(cfg: SocConfig, paths: list[Path]) -> Path:
    from sim.cli import UsageError

    for path in paths:
        if not path.is_file():
            raise UsageError(f"program = {str(path)!r} is invalid: allowed an existing C, assembly or ELF file")
    if len(paths) == 1 and paths[0].read_bytes()[:4] == b"\x7fELF":
        return paths[0]
    if any(p.suffix not in (".c", ".S", ".s") for p in paths):
        raise UsageError("program: allowed one ELF file, or C (.c) and assembly (.S) sources")
    try:
        from sim.firmware import build_firmware
    except ImportError:
        raise UsageError("program: building C sources needs sim/firmware.py (not there yet); give an ELF") from None
    return build_firmware(cfg, paths)

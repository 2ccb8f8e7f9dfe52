"""What a sweep measures: the sweep file (TOML) or the command line's lists, validated into a
:class:`SweepSpec` whose points are the design configurations crossed with the workloads.

Every value is checked before anything runs, as every pyard config is: an unknown key or a bad
value raises :class:`rtl.config.ConfigError`, one line naming the field and what is allowed
(``design.cores = 0 is invalid: allowed an integer from 1 to 16``).
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtl.config import ACC_DTYPES, DTYPES, AccelConfig, ConfigError, check_choice
from soc.config import MAX_CORES, SocConfig

__all__ = ["CONV_FIELDS", "Point", "SweepSpec", "load_spec", "parse_spec"]

# Keys of each section of the sweep file, with what they hold (for the "allowed" part of errors).
DESIGN_KEYS = ("arrays", "dtype", "acc_dtype", "cores", "sp_kib", "acc_kib", "dma_bits", "pe_stages")
WORKLOAD_KEYS = ("gemm", "conv", "fptt", "program", "latency", "max_cycles")
FPTT_KEYS = ("K", "T", "hidden", "batch", "parts", "seed")
AREA_KEYS = ("family", "top", "fmax", "freq")
SECTIONS = {"design": DESIGN_KEYS, "workloads": WORKLOAD_KEYS, "area": AREA_KEYS}
# Conv2D layer fields, in the order of the layer string BxHxWxCIN-COUT-KHxKW-sS-pP.
CONV_FIELDS = ("batch", "h", "w", "cin", "cout", "kh", "kw", "stride", "pad")
CONV_OPTIONAL = {"stride": 1, "pad": 0}  # fields a layer may leave out, and their values
# FPTT pass defaults: the thesis' problem (T = 784, H = 128, B = 4), two parts simulated per K.
FPTT_DEFAULTS = {"T": 784, "hidden": 128, "batch": 4, "parts": 2, "seed": 0}
AREA_TOPS = ("tile", "soc")
SOC_KINDS = ("fptt", "program")  # workloads that run on the SoC, so once per core count

_ARRAY_RE = re.compile(r"^(\d+)x(\d+)$")
_GEMM_RE = re.compile(r"^(\d+)x(\d+)x(\d+)$")
_CONV_RE = re.compile(r"^(\d+)x(\d+)x(\d+)x(\d+)-(\d+)-(\d+)x(\d+)(?:-s(\d+))?(?:-p(\d+))?$")


@dataclass(frozen=True)
class Point:
    """One measurement: a workload (or the area) on one design. ``cores`` is None for the tile's
    workloads (GEMM, Conv2D) and the tile's area, which do not depend on the SoC around it."""

    kind: str  # gemm, conv, fptt, program, area
    accel: dict[str, Any]  # AccelConfig.to_dict()
    cores: int | None
    params: dict[str, Any]  # the workload's fields (program: its path)

    @property
    def config(self) -> AccelConfig:
        return AccelConfig.from_dict(self.accel)

    @property
    def design(self) -> str:
        name = self.config.name
        return name if self.cores is None else f"{name}-{self.cores}c"

    @property
    def workload(self) -> str:
        p = self.params
        if self.kind == "gemm":
            return f"gemm {p['m']}x{p['k']}x{p['n']}"
        if self.kind == "conv":
            return "conv " + conv_label(p)
        if self.kind == "fptt":
            return f"fptt K={p['K']}"
        if self.kind == "program":
            return f"program {Path(p['path']).name}"
        return f"area {p['top']} {p['family']}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "accel": self.accel, "cores": self.cores, "params": self.params}


def conv_label(p: Mapping[str, int]) -> str:
    return f"{p['batch']}x{p['h']}x{p['w']}x{p['cin']}-{p['cout']}-{p['kh']}x{p['kw']}-s{p['stride']}-p{p['pad']}"


@dataclass(frozen=True)
class SweepSpec:
    configs: list[AccelConfig]
    cores: list[int]
    workloads: list[tuple[str, dict[str, Any]]]  # (kind, params) without the design
    area: dict[str, Any] | None = None
    latency: int = 32
    max_cycles: int = 2_000_000_000
    source: str = field(default="command line", compare=False)

    def points(self) -> list[Point]:
        """Every (design, workload) point: tile workloads once per accelerator config, SoC
        workloads once per core count, the area once per config (per core count for the SoC)."""
        out = []
        for cfg in self.configs:
            accel = cfg.to_dict()
            for kind, params in self.workloads:
                for cores in self.cores if kind in SOC_KINDS else [None]:
                    out.append(Point(kind, accel, cores, params))
            if self.area is not None:
                for cores in self.cores if self.area["top"] == "soc" else [None]:
                    out.append(Point("area", accel, cores, self.area))
        return out


def load_spec(path: Path, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> SweepSpec:
    """The sweep of a TOML file, with ``overrides`` (section → key → value, from the command line)
    replacing the file's values."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError("sweep file", str(path), f"a UTF-8 TOML file ({err})") from None
    for section, values in (overrides or {}).items():
        data.setdefault(section, {})
        if isinstance(data[section], dict):
            data[section] |= values
    return parse_spec(data, base=Path(path).resolve().parent, source=str(path))


def parse_spec(data: Mapping[str, Any], base: Path | None = None, source: str = "command line") -> SweepSpec:
    """Validate a sweep (the TOML document's tables); relative program paths are under ``base``."""
    _known("sweep file", data, SECTIONS)
    for name, keys in SECTIONS.items():
        if name in data:
            _known(name, _table(name, data[name]), keys)
    design, work = data.get("design", {}), data.get("workloads", {})
    configs = _configs(design)
    cores = [_int("design.cores", c, 1, MAX_CORES) for c in _list("design.cores", design.get("cores", 1))]
    for cfg, n in itertools.product(configs, cores):
        SocConfig(accel=cfg, cores=n)  # refuses what no SoC can be built with, naming the field
    workloads = _workloads(work, base or Path.cwd())
    area = _area(data["area"]) if "area" in data else None
    if not workloads and area is None:
        raise ConfigError("workloads", {}, "at least one of gemm, conv, fptt, program, or an [area] table")
    latency = _int("workloads.latency", work.get("latency", 32), 4, 100_000)
    max_cycles = _int("workloads.max_cycles", work.get("max_cycles", 2_000_000_000), 1, 2**62)
    return SweepSpec(configs, cores, workloads, area, latency, max_cycles, source)


def _known(where: str, table: Mapping[str, Any], keys: tuple[str, ...] | Mapping[str, Any]) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        prefix = "" if where == "sweep file" else f"{where}."
        raise ConfigError(f"{prefix}{unknown[0]}", table[unknown[0]], "keys " + ", ".join(keys))


def _table(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(name, value, "a table ([" + name + "])")
    return value


def _list(name: str, value: Any) -> list[Any]:
    """A value or a non-empty list of values."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ConfigError(name, value, "one value or a list of at least one")
    return items


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(name, value, f"an integer from {lo} to {hi}")
    return value


def _configs(design: Mapping[str, Any]) -> list[AccelConfig]:
    """Every combination of the design axes as an AccelConfig (a field left out keeps its default)."""
    arrays = [_array(a) for a in _list("design.arrays", design.get("arrays", "4x4"))]
    axes: dict[str, list[Any]] = {"dtype": _list("design.dtype", design.get("dtype", "int8"))}
    for key in ("acc_dtype", "sp_kib", "acc_kib", "dma_bits", "pe_stages"):
        if key in design:
            axes[key] = _list(f"design.{key}", design[key])
    _check_acc_dtypes(axes["dtype"], axes.get("acc_dtype", []))
    out = []
    for (rows, cols), values in itertools.product(arrays, itertools.product(*axes.values())):
        fields = dict(zip(axes, values, strict=True))
        if any(isinstance(v, bool) for v in fields.values()):  # AccelConfig takes True for 1
            key = next(k for k, v in fields.items() if isinstance(v, bool))
            raise ConfigError(f"design.{key}", fields[key], "a number or a name, not true/false")
        if "acc_dtype" in fields and fields["acc_dtype"] not in ACC_DTYPES.get(fields["dtype"], ()):
            continue  # an accumulator of the other input type (int32 with bf16): not a design
        out.append(AccelConfig(rows=rows, cols=cols, **fields))
    return list(dict.fromkeys(out))  # a repeated value of an axis is one design


def _check_acc_dtypes(dtypes: list[Any], acc_dtypes: list[Any]) -> None:
    """Each accumulator type must be one of some input type's: with dtype = [int8, bf16] and
    acc_dtype = [int32, fp32], int8 tiles take int32 and bf16 tiles fp32."""
    for dtype in dtypes:
        check_choice("design.dtype", dtype, DTYPES)
    allowed = tuple(dict.fromkeys(a for d in dtypes for a in ACC_DTYPES[d]))
    for acc in acc_dtypes:
        check_choice("design.acc_dtype", acc, allowed)


def _array(value: Any) -> tuple[int, int]:
    m = _ARRAY_RE.match(value) if isinstance(value, str) else None
    if not m:
        raise ConfigError("design.arrays", value, 'shapes ROWSxCOLS, e.g. "8x8"')
    return int(m[1]), int(m[2])


def _workloads(work: Mapping[str, Any], base: Path) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    parsers: dict[str, Callable[[str, Any], dict[str, Any]]] = {"gemm": _gemm, "conv": _conv}
    for kind, parse in parsers.items():
        for n, item in enumerate(_list(f"workloads.{kind}", work.get(kind, []) or [None])):
            if item is not None:
                out.append((kind, parse(f"workloads.{kind}[{n}]", item)))
    if "fptt" in work:
        out += [("fptt", p) for p in _fptt(work["fptt"])]
    for n, item in enumerate(_list("workloads.program", work.get("program", []) or [None])):
        if item is not None:
            out.append(("program", {"path": _program(f"workloads.program[{n}]", item, base)}))
    return list({repr(w): w for w in out}.values())


def _gemm(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        _known(name, value, ("m", "k", "n"))
        dims = [value.get(d) for d in ("m", "k", "n")]
    else:
        m = _GEMM_RE.match(value) if isinstance(value, str) else None
        if not m:
            raise ConfigError(name, value, 'a shape MxKxN (e.g. "64x64x64") or a table {m, k, n}')
        dims = [int(g) for g in m.groups()]
    return {d: _int(f"{name}.{d}", v, 1, 65535) for d, v in zip("mkn", dims, strict=True)}


def _conv(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        _known(name, value, CONV_FIELDS)
        layer = CONV_OPTIONAL | value
        missing = [f for f in CONV_FIELDS if f not in layer]
        if missing:
            raise ConfigError(f"{name}.{missing[0]}", None, "an integer (fields " + ", ".join(CONV_FIELDS) + ")")
    else:
        m = _CONV_RE.match(value) if isinstance(value, str) else None
        if not m:
            allowed = 'a layer BxHxWxCIN-COUT-KHxKW[-sSTRIDE][-pPAD] (e.g. "1x28x28x32-32-3x3-s1-p1") or a table'
            raise ConfigError(name, value, allowed)
        layer = CONV_OPTIONAL | {f: int(g) for f, g in zip(CONV_FIELDS, m.groups(), strict=True) if g is not None}
    return {f: _int(f"{name}.{f}", layer[f], 0 if f == "pad" else 1, 65535) for f in CONV_FIELDS}


def _fptt(value: Any) -> list[dict[str, Any]]:
    table = _table("workloads.fptt", value)
    _known("workloads.fptt", table, FPTT_KEYS)
    if "K" not in table:
        raise ConfigError("workloads.fptt.K", None, "a list of partition factors K (e.g. [1, 28])")
    fields = {k: _int(f"workloads.fptt.{k}", table.get(k, v), 0 if k in ("parts", "seed") else 1, 2**31 - 1)
              for k, v in FPTT_DEFAULTS.items()}  # fmt: skip
    ks = [_int("workloads.fptt.K", k, 1, fields["T"]) for k in _list("workloads.fptt.K", table["K"])]
    return [fields | {"K": k} for k in dict.fromkeys(ks)]


def _program(name: str, value: Any, base: Path) -> str:
    path = base / value if isinstance(value, str) else None
    if path is None or not path.is_file() or not (path.suffix == ".c" or path.read_bytes()[:4] == b"\x7fELF"):
        raise ConfigError(name, value, "the path of an existing C source (.c) or ELF file")
    return str(path.resolve())


def _area(value: Any) -> dict[str, Any]:
    from synth.flow import FAMILIES

    table = _table("area", value)
    family, top = table.get("family", "xc7"), table.get("top", "tile")
    if family not in FAMILIES:
        raise ConfigError("area.family", family, "one of " + ", ".join(FAMILIES))
    if top not in AREA_TOPS:
        raise ConfigError("area.top", top, "one of " + ", ".join(AREA_TOPS))
    fmax = table.get("fmax", False)
    if not isinstance(fmax, bool) or (fmax and family != "ecp5"):
        raise ConfigError("area.fmax", fmax, 'true (with family = "ecp5": nextpnr-ecp5 gives the fmax) or false')
    freq = table.get("freq", 100)
    if isinstance(freq, bool) or not isinstance(freq, int | float) or not 1 <= freq <= 1000:
        raise ConfigError("area.freq", freq, "a clock from 1 to 1000 MHz")
    return {"family": family, "top": top, "fmax": fmax, "freq": float(freq)}

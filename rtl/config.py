"""The accelerator configuration: one frozen, validated object that every generator takes.

A config is built from a name (``8x8-bf16``), from a JSON file written by an earlier run, or from
keyword fields; each way goes through the same validation, so an invalid value is refused with one
line naming the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "MAX_LOCAL_ROWS",
    "MAX_WEIGHT_SLOTS",
    "NAMED",
    "PE_STAGES",
    "AccelConfig",
    "ConfigError",
    "SpLayout",
    "check_bool",
    "check_choice",
    "check_int",
    "check_pow2",
    "load_config",
    "read_config_json",
]

DTYPES = ("int8", "bf16")
ACC_DTYPES = {"int8": ("int32",), "bf16": ("fp32", "bf16")}
DMA_BITS = (32, 64, 128, 256, 512)
# Cycles per PE on the vertical path: 1 multiplies and adds in one cycle, 2 registers the product,
# 3 to 5 also split the adder into 2 to 4 pipeline stages (rtl/pe.py, rtl/fp.py).
PE_STAGES = (1, 2, 3, 4, 5)
MAX_DIM = 64
# Bits the FPTT update reads from memory per parameter: θ, θ̄, λ and the gradient, bf16 each.
UPDATE_READ_BITS = 64
MEM_KIB = (1, 4096)  # range of sp_kib and acc_kib (powers of two)
DEFAULT_SP_KIB = 256
# The ISA addresses scratchpad and accumulator rows with 16-bit fields (docs/isa.md), so a memory
# holds at most this many rows.
MAX_LOCAL_ROWS = 1 << 16
# Weight slots of the loop commands at most: enough weight loads in flight to cover the memory
# latency when each step is only a few rows (the LSTM gate GEMM: M = 4), at one `rows`-row slot each.
MAX_WEIGHT_SLOTS = 32

_NAME_RE = re.compile(r"^(\d+)x(\d+)-(int8|bf16)$")

# The seed thesis' design points (Gemmini BF16, 4x4 and 8x8 meshes), reachable by name.
NAMED: dict[str, dict[str, Any]] = {
    "thesis-4x4": {"rows": 4, "cols": 4, "dtype": "bf16", "acc_dtype": "fp32"},
    "thesis-8x8": {"rows": 8, "cols": 8, "dtype": "bf16", "acc_dtype": "fp32"},
    "thesis-4x4-compressed": {"rows": 4, "cols": 4, "dtype": "bf16", "acc_dtype": "bf16"},
}


class SpLayout(NamedTuple):
    """Scratchpad rows of the loop commands' buffers (docs/tile.md, "The GEMM loop")."""

    b_base: int  # first weight slot
    slots: int  # weight slots, a power of two
    a_base: int  # first row of the A region
    a_rows: int  # rows of the A region


class ConfigError(ValueError):
    """An invalid configuration value; ``str()`` is the one line shown to the user."""

    def __init__(self, field_name: str, value: object, allowed: str) -> None:
        super().__init__(f"{field_name} = {value!r} is invalid: allowed {allowed}")
        self.field = field_name


# Field checks, shared by every config class (rtl/config.py, soc/config.py): each refuses a bad
# value with a ConfigError naming the field and what is allowed.
def check_int(name: str, value: object, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(name, value, f"an integer from {lo} to {hi}")


def check_choice(name: str, value: object, choices: tuple[Any, ...]) -> None:
    if value not in choices or isinstance(value, bool):
        raise ConfigError(name, value, "one of " + ", ".join(str(c) for c in choices))


def check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(name, value, "true or false")


def check_pow2(name: str, value: object, lo: int, hi: int) -> None:
    powers = tuple(1 << n for n in range(lo.bit_length() - 1, hi.bit_length()))
    check_choice(name, value, powers)


@dataclass(frozen=True)
class AccelConfig:
    """Parameters of the systolic accelerator.

    ``rows`` is the reduction (K) dimension of the weight-stationary mesh, ``cols`` the output (N)
    dimension. ``acc_dtype`` defaults to int32 for int8 inputs and fp32 for bf16 inputs; bf16
    accumulation reproduces the thesis' "compressed" design. ``pe_stages`` is the latency of one PE
    on the partial-sum path (``PE_STAGES``): 2 puts a register between multiplier and adder, 3 to 5
    also pipeline the adder, for FPGA timing; throughput stays one row per cycle. ``vector`` false
    leaves the vector engine out (a GEMM and Conv2D tile, as Gemmini's; every VEC command is refused).
    """

    rows: int = 4
    cols: int = 4
    dtype: str = "int8"
    acc_dtype: str = ""
    pe_stages: int = 1
    sp_kib: int = 0  # 0: 256, or the largest size whose rows the ISA can address
    sp_banks: int = 4
    acc_kib: int = 64
    acc_banks: int = 2
    dma_bits: int = 0
    lanes: int = 0  # vector-engine elements per cycle; 0: cols
    update_lanes: int = -1  # FPTT update unit's parameters per cycle (VEC UPDATE); 0: none; -1: derived
    vector: bool = True  # the vector engine (element-wise ops, activations, requantization, UPDATE)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.extra:
            name = sorted(self.extra)[0]
            raise ConfigError(name, self.extra[name], "fields " + ", ".join(_FIELDS))
        check_int("rows", self.rows, 1, MAX_DIM)
        check_int("cols", self.cols, 1, MAX_DIM)
        check_choice("dtype", self.dtype, DTYPES)
        if not self.acc_dtype:
            object.__setattr__(self, "acc_dtype", ACC_DTYPES[self.dtype][0])
        check_choice("acc_dtype", self.acc_dtype, ACC_DTYPES[self.dtype])
        check_choice("pe_stages", self.pe_stages, PE_STAGES)
        check_pow2("sp_banks", self.sp_banks, 1, 16)
        check_pow2("acc_banks", self.acc_banks, 1, 16)
        if not self.sp_kib:
            fits = [kib for kib in _powers(*MEM_KIB) if kib <= DEFAULT_SP_KIB and self._sp_ok(kib)]
            object.__setattr__(self, "sp_kib", fits[-1] if fits else DEFAULT_SP_KIB)
        self._check_memory("sp_kib", self.sp_banks, self._sp_ok, "for the scratchpad's rows and the loops' buffers")
        self._check_memory("acc_kib", self.acc_banks, self._acc_ok, "for two accumulator slots of at most 65536 rows")
        if not self.dma_bits:
            object.__setattr__(self, "dma_bits", 128 if max(self.rows, self.cols) >= 16 else 64)
        check_choice("dma_bits", self.dma_bits, DMA_BITS)
        if not self.lanes:
            object.__setattr__(self, "lanes", self.cols)
        check_int("lanes", self.lanes, 1, self.dim)
        check_bool("vector", self.vector)
        self._check_update_lanes()

    def _check_update_lanes(self) -> None:
        """The update unit reads θ, θ̄, λ and g (16 bits each) per parameter, so ``dma_bits / 64``
        parameters per cycle keep the DMA's read channel busy; bf16 tiles only."""
        if self.update_lanes == -1:
            derived = min(self.dim, max(1, self.dma_bits // UPDATE_READ_BITS))
            object.__setattr__(self, "update_lanes", derived if self.dtype == "bf16" and self.vector else 0)
        if self.dtype == "int8" or not self.vector:  # UPDATE is a vector engine operation
            check_int("update_lanes", self.update_lanes, 0, 0)
        check_int("update_lanes", self.update_lanes, 0, self.dim)

    def _check_memory(self, name: str, banks: int, fits: Callable[[int], bool], why: str) -> None:
        """Refuse a memory size that is not a power of two in range, or whose rows do not fit."""
        check_pow2(name, getattr(self, name), *MEM_KIB)
        if not fits(getattr(self, name)):
            good = [kib for kib in _powers(*MEM_KIB) if fits(kib)]
            allowed = f"a power of two from {good[0]} to {good[-1]}" if good else "no size"
            raise ConfigError(name, getattr(self, name), f"{allowed} for {self.name} with {banks} banks ({why})")

    def _sp_ok(self, kib: int) -> bool:
        """The ISA reaches every row; two weight tiles and at least one A row per slot fit."""
        rows = _whole_banks(kib * 8192 // (self.dim * self.in_bits), self.sp_banks)
        if not 0 < rows <= MAX_LOCAL_ROWS:
            return False
        layout = _sp_layout(rows, self.sp_banks, self.rows)
        return layout.slots >= 2 and layout.a_rows >= layout.slots

    def _acc_ok(self, kib: int) -> bool:
        rows = _whole_banks(kib * 8192 // (self.cols * self.acc_bits), self.acc_banks)
        return 2 <= rows <= MAX_LOCAL_ROWS and rows >= self.acc_banks

    @property
    def sp_layout(self) -> SpLayout:
        """The loops' scratchpad buffers: weight slots and the A region (docs/tile.md)."""
        return _sp_layout(self.sp_rows, self.sp_banks, self.rows)

    # -- derived widths -------------------------------------------------------------------------

    @property
    def in_bits(self) -> int:
        return 8 if self.dtype == "int8" else 16

    @property
    def acc_bits(self) -> int:
        return 16 if self.acc_dtype == "bf16" else 32

    @property
    def dim(self) -> int:
        """Width of a scratchpad row in elements: holds a K slice of A or an N slice of B."""
        return max(self.rows, self.cols)

    @property
    def sp_rows(self) -> int:
        """Scratchpad rows, a whole number per bank (docs/tile.md)."""
        return _whole_banks(self.sp_kib * 8192 // (self.dim * self.in_bits), self.sp_banks)

    @property
    def acc_rows(self) -> int:
        """Accumulator rows of ``cols`` elements, a whole number per bank."""
        return _whole_banks(self.acc_kib * 8192 // (self.cols * self.acc_bits), self.acc_banks)

    @property
    def sp_bank_rows(self) -> int:
        return self.sp_rows // self.sp_banks

    @property
    def acc_bank_rows(self) -> int:
        return self.acc_rows // self.acc_banks

    @property
    def name(self) -> str:
        base = f"{self.rows}x{self.cols}-{self.dtype}"
        base = base if self.acc_dtype == ACC_DTYPES[self.dtype][0] else f"{base}-acc{self.acc_dtype}"
        return base if self.vector else f"{base}-novector"

    # -- (de)serialization ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in _FIELDS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AccelConfig:
        known = {k: v for k, v in values.items() if k in _FIELDS}
        unknown = {k: v for k, v in values.items() if k not in _FIELDS}
        return cls(**known, extra=unknown)

    @classmethod
    def from_name(cls, name: str) -> AccelConfig:
        if name in NAMED:
            return cls(**NAMED[name])
        m = _NAME_RE.match(name)
        if not m:
            raise ConfigError(
                "config", name, "{rows}x{cols}-{int8|bf16} (e.g. 8x8-bf16), " + ", ".join(NAMED) + ", or a .json file"
            )
        return cls(rows=int(m[1]), cols=int(m[2]), dtype=m[3])

    def replace(self, **changes: Any) -> AccelConfig:
        """A copy with ``changes``; a field that holds the default derived from others (acc_dtype,
        sp_kib, dma_bits, lanes, update_lanes) is derived again for the new config unless it is changed too; a new
        dtype always brings its own default acc_dtype."""
        if "dtype" in changes and "acc_dtype" not in changes:
            changes["acc_dtype"] = ""
        for name in _DERIVED:
            if name not in changes and getattr(self, name) == getattr(
                dataclasses.replace(self, **{name: _UNSET[name]}), name
            ):
                changes[name] = _UNSET[name]
        return dataclasses.replace(self, **changes)


# Fields whose empty value means "derive from the others", and that value.
_UNSET: dict[str, Any] = {"acc_dtype": "", "sp_kib": 0, "dma_bits": 0, "lanes": 0, "update_lanes": -1}
_DERIVED = tuple(_UNSET)

_FIELDS = tuple(f.name for f in dataclasses.fields(AccelConfig) if f.name != "extra")


def _powers(lo: int, hi: int) -> list[int]:
    return [1 << n for n in range(lo.bit_length() - 1, hi.bit_length())]


def _whole_banks(rows: int, banks: int) -> int:
    return rows - rows % banks


def _sp_layout(sp_rows: int, banks: int, rows: int) -> SpLayout:
    """Weight slots and the A region of a scratchpad of ``sp_rows`` rows in ``banks`` banks.

    The EXEC unit reads activations and the next weight tile in the same cycles, on two read ports;
    in one bank they would take turns and starve the weights. So with two or more banks the weight
    slots fill the last bank (up to ``MAX_WEIGHT_SLOTS``, a power of two) and the A region the
    others; a single bank keeps two slots in front of the A region.
    """
    if banks == 1:
        return SpLayout(0, 2, 2 * rows, sp_rows - 2 * rows)
    bank_rows = sp_rows // banks
    fit = min(MAX_WEIGHT_SLOTS, bank_rows // rows)
    slots = 1 << (fit.bit_length() - 1) if fit else 0
    region = (banks - 1) * bank_rows
    return SpLayout(region, slots, 0, region)


def read_config_json(spec: str) -> dict[str, Any]:
    """The fields of a ``config.json`` as pyard writes it: an accelerator's, or a SoC's (its
    accelerator under ``accel``), with the ``top`` it was generated for."""
    try:
        values = json.loads(Path(spec).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError("config", spec, f"a readable UTF-8 JSON config file ({err})") from None
    if not isinstance(values, dict):
        raise ConfigError("config", spec, "a JSON object of config fields")
    return values


def load_config(spec: str) -> AccelConfig:
    """A config from a name (``4x16-int8``, ``thesis-8x8``) or the path of a ``config.json`` (a
    SoC's config.json gives its accelerator)."""
    if spec.endswith(".json"):
        values = {k: v for k, v in read_config_json(spec).items() if k != "top"}
        if isinstance(values.get("accel"), dict):
            values = values["accel"]
        return AccelConfig.from_dict(values)
    return AccelConfig.from_name(spec)

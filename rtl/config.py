"""The accelerator configuration: one frozen, validated object that every generator takes.

A config is built from a name (``8x8-bf16``), from a JSON file written by an earlier run, or from
keyword fields; each way goes through the same validation, so an invalid value is refused with one
line naming the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NAMED", "PE_STAGES", "AccelConfig", "ConfigError", "check_choice", "check_int", "check_pow2", "load_config"]

DTYPES = ("int8", "bf16")
ACC_DTYPES = {"int8": ("int32",), "bf16": ("fp32", "bf16")}
DMA_BITS = (32, 64, 128, 256, 512)
# Cycles per PE on the vertical path: 1 multiplies and adds in one cycle, 2 registers the product,
# 3 to 5 also split the adder into 2 to 4 pipeline stages (rtl/pe.py, rtl/fp.py).
PE_STAGES = (1, 2, 3, 4, 5)
MAX_DIM = 64

_NAME_RE = re.compile(r"^(\d+)x(\d+)-(int8|bf16)$")

# The seed thesis' design points (Gemmini BF16, 4x4 and 8x8 meshes), reachable by name.
NAMED: dict[str, dict[str, Any]] = {
    "thesis-4x4": {"rows": 4, "cols": 4, "dtype": "bf16", "acc_dtype": "fp32"},
    "thesis-8x8": {"rows": 8, "cols": 8, "dtype": "bf16", "acc_dtype": "fp32"},
    "thesis-4x4-compressed": {"rows": 4, "cols": 4, "dtype": "bf16", "acc_dtype": "bf16"},
}


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
    also pipeline the adder, for FPGA timing; throughput stays one row per cycle.
    """

    rows: int = 4
    cols: int = 4
    dtype: str = "int8"
    acc_dtype: str = ""
    pe_stages: int = 1
    sp_kib: int = 256
    sp_banks: int = 4
    acc_kib: int = 64
    acc_banks: int = 2
    dma_bits: int = 0
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
        check_pow2("sp_kib", self.sp_kib, 1, 4096)
        check_pow2("sp_banks", self.sp_banks, 1, 16)
        check_pow2("acc_kib", self.acc_kib, 1, 4096)
        check_pow2("acc_banks", self.acc_banks, 1, 16)
        if not self.dma_bits:
            object.__setattr__(self, "dma_bits", 128 if max(self.rows, self.cols) >= 16 else 64)
        check_choice("dma_bits", self.dma_bits, DMA_BITS)

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
        rows = self.sp_kib * 8192 // (self.dim * self.in_bits)
        return rows - rows % self.sp_banks

    @property
    def acc_rows(self) -> int:
        """Accumulator rows of ``cols`` elements, a whole number per bank."""
        rows = self.acc_kib * 8192 // (self.cols * self.acc_bits)
        return rows - rows % self.acc_banks

    @property
    def sp_bank_rows(self) -> int:
        return self.sp_rows // self.sp_banks

    @property
    def acc_bank_rows(self) -> int:
        return self.acc_rows // self.acc_banks

    @property
    def name(self) -> str:
        base = f"{self.rows}x{self.cols}-{self.dtype}"
        return base if self.acc_dtype == ACC_DTYPES[self.dtype][0] else f"{base}-acc{self.acc_dtype}"

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
        if "dtype" in changes and "acc_dtype" not in changes:
            changes["acc_dtype"] = ""
        return dataclasses.replace(self, **changes)


_FIELDS = tuple(f.name for f in dataclasses.fields(AccelConfig) if f.name != "extra")


def load_config(spec: str) -> AccelConfig:
    """A config from a name (``4x16-int8``, ``thesis-8x8``) or the path of a ``config.json``."""
    if spec.endswith(".json"):
        path = Path(spec)
        try:
            values = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ConfigError("config", spec, f"a readable JSON config file ({err})") from None
        if not isinstance(values, dict):
            raise ConfigError("config", spec, "a JSON object of config fields")
        return AccelConfig.from_dict(values)
    return AccelConfig.from_name(spec)

"""The SoC configuration: accelerator config, core count and memory sizes in one validated object.

``SocConfig`` is frozen and checked on construction like :class:`rtl.config.AccelConfig`: a bad
value raises :class:`rtl.config.ConfigError` naming the field and the allowed values. The memory
map built from it (``soc/memmap.py``) is what the hardware decodes and what firmware links against.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from rtl.config import AccelConfig, ConfigError, check_int, check_pow2, load_config
from soc.rv32 import CoreConfig

__all__ = ["MAX_CORES", "MAX_TILES", "SocConfig", "default_banks"]

MAX_CORES = 16
MAX_TILES = 8


def default_banks(cores: int) -> int:
    """Data RAM banks when not given: the core count rounded up to a power of two, at least 2."""
    return max(2, 1 << (cores - 1).bit_length())


@dataclass(frozen=True)
class SocConfig:
    """Parameters of the SoC (docs/soc.md).

    ``core`` is the template for every hart; the SoC gives each its ``hart_id`` and the reset pc
    (0, the start of the ITCM), so both must be left at 0. ``dram_banks = 0`` picks
    :func:`default_banks`. ``mem_latency`` is the main memory's read latency in cycles (AR
    handshake to first R beat); its data width is the accelerator's ``dma_bits``. ``tiles`` is
    the number of accelerator tiles (each with its own register window, interrupt and DMA master;
    docs/tiles.md).
    """

    accel: AccelConfig = field(default_factory=AccelConfig)
    cores: int = 1
    core: CoreConfig = field(default_factory=CoreConfig)
    itcm_kib: int = 32
    dram_kib: int = 64
    dram_banks: int = 0
    mem_mib: int = 16
    mem_latency: int = 32
    stack_kib: int = 2
    tiles: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.accel, AccelConfig):
            raise ConfigError("accel", self.accel, "an AccelConfig")
        check_int("cores", self.cores, 1, MAX_CORES)
        check_int("tiles", self.tiles, 1, MAX_TILES)
        if not isinstance(self.core, CoreConfig):
            raise ConfigError("core", self.core, "a CoreConfig")
        if self.core.hart_id != 0 or self.core.reset_pc != 0:
            raise ConfigError("core", self.core, "hart_id = 0 and reset_pc = 0 (the SoC numbers the harts)")
        check_pow2("itcm_kib", self.itcm_kib, 1, 1024)
        check_pow2("dram_kib", self.dram_kib, 4, 4096)
        if self.dram_banks == 0:
            object.__setattr__(self, "dram_banks", default_banks(self.cores))
        check_pow2("dram_banks", self.dram_banks, 1, 32)
        check_pow2("mem_mib", self.mem_mib, 1, 256)
        check_int("mem_latency", self.mem_latency, 4, 1024)
        # The stacks must leave at least half of the data RAM for .rodata/.data/.bss.
        check_int("stack_kib", self.stack_kib, 1, max(1, self.dram_kib // (2 * self.cores)))

    # -- derived --------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``<accel name>[-<tiles>t]-<cores>c``, e.g. ``4x4-bf16-2c``, ``4x4-int8-2t-2c``."""
        tiles = f"-{self.tiles}t" if self.tiles > 1 else ""
        return f"{self.accel.name}{tiles}-{self.cores}c"

    @property
    def itcm_bytes(self) -> int:
        return self.itcm_kib * 1024

    @property
    def dram_bytes(self) -> int:
        return self.dram_kib * 1024

    @property
    def mem_bytes(self) -> int:
        return self.mem_mib * 1024 * 1024

    @property
    def stack_bytes(self) -> int:
        return self.stack_kib * 1024

    @property
    def mem_bits(self) -> int:
        """Main memory data width: the accelerator DMA's AXI width."""
        return self.accel.dma_bits

    # -- construction and (de)serialization -----------------------------------------------------

    @classmethod
    def from_name(cls, accel: str, cores: int = 1, **fields: Any) -> SocConfig:
        """A SoC around the accelerator config named ``accel`` (``4x4-bf16``, ``thesis-8x8``, a .json)."""
        return cls(accel=load_config(accel), cores=cores, **fields)

    def replace(self, **changes: Any) -> SocConfig:
        if "cores" in changes and "dram_banks" not in changes and self.dram_banks == default_banks(self.cores):
            changes["dram_banks"] = 0  # the bank count follows the core count unless it was chosen
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["accel"] = self.accel.to_dict()
        out["core"] = dataclasses.asdict(self.core)
        if self.tiles == 1:  # absent means 1: the config.json files and build keys of 1-tile SoCs stay valid
            del out["tiles"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SocConfig:
        values = {k: v for k, v in values.items() if k != "top"}  # the top it was generated for
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(unknown[0], values[unknown[0]], "fields " + ", ".join(sorted(known)))
        values = dict(values)
        if isinstance(values.get("accel"), dict):
            values["accel"] = AccelConfig.from_dict(values["accel"])
        if isinstance(values.get("core"), dict):
            try:
                values["core"] = CoreConfig(**values["core"])
            except (TypeError, ValueError) as err:
                raise ConfigError("core", values["core"], f"CoreConfig fields ({err})") from None
        return cls(**values)

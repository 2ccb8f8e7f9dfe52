"""Turn a config into the artifacts a user takes away: Verilog, ``config.json`` and a C header."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from amaranth.lib import wiring

from rtl import shared
from rtl.c_header import params_header
from rtl.config import AccelConfig, ConfigError
from rtl.mesh import Mesh
from sim import progress
from tb.dma_top import DmaTop

REPO = Path(__file__).resolve().parent.parent
# Everything a generated design depends on: a change here must invalidate cached builds.
# tb: test tops (e.g. tb/dma_top.py) are generated too; tilesim: the tile simulator's top.
SOURCE_DIRS = ("rtl", "soc", "tb", "tilesim")


@dataclass(frozen=True)
class Top:
    build: Callable[[AccelConfig], wiring.Component]
    description: str


TOPS: dict[str, Top] = {
    "mesh": Top(lambda cfg: Mesh(cfg), "the systolic mesh alone (skew, PEs, deskew, weight double buffer)"),
    "dma_top": Top(lambda cfg: DmaTop(cfg), "DMA test top: the DMA with stand-in scratchpad/accumulator and backdoors"),
    "tile": Top(lambda cfg: _tile(cfg), "the accelerator tile: AXI4-Lite commands, AXI4 DMA, interrupt"),
}


def _tile(cfg: AccelConfig) -> wiring.Component:
    from rtl.tile import Tile  # the tile pulls in every block; the mesh alone should not need them

    return Tile(cfg)


# Tops generated from a SoC config (the accelerator config plus --cores): see soc/soc.py.
SOC_TOPS = {
    "soc": "the SoC: harts, ITCMs, data RAM, MMIO, the tile; main memory on an AXI4 master (m_axi)",
    "soc_sim": "the SoC with the simulated main memory (needs soc/sim_ram.v and the DPI harness)",
}


def top_component(name: str, cfg: AccelConfig) -> wiring.Component:
    if name in SOC_TOPS:
        from soc.config import SocConfig
        from soc.soc import Soc, SocSim

        return (Soc if name == "soc" else SocSim)(SocConfig(accel=cfg))
    if name not in TOPS:
        raise ConfigError("top", name, "one of " + ", ".join([*TOPS, *SOC_TOPS]))
    return TOPS[name].build(cfg)


def source_hash() -> str:
    """A hash of every generator source file, so cached builds follow the code."""
    h = hashlib.sha256()
    for d in SOURCE_DIRS:
        for path in sorted((REPO / d).rglob("*")):
            if path.suffix in (".py", ".vlt", ".v", ".sv") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(REPO)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def to_verilog(top: str, cfg: AccelConfig) -> str:
    with progress.phase(f"Generating Verilog: {top} {cfg.name}"):
        return shared.convert(top_component(top, cfg), top)


def _with_top(fields: dict, top: str) -> str:
    """A config.json that also records the top it was generated for (``--config`` gives it back)."""
    return json.dumps({"top": top, **fields}, indent=2, sort_keys=True) + "\n"


def write_outputs(top: str, cfg: AccelConfig, out_dir: Path) -> dict[str, Path]:
    """Write ``<top>.v``, ``config.json`` and ``pyard_params.h`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "verilog": out_dir / f"{top}.v",
        "config": out_dir / "config.json",
        "header": out_dir / "pyard_params.h",
    }
    paths["verilog"].write_text(to_verilog(top, cfg))
    paths["config"].write_text(_with_top(cfg.to_dict(), top))
    paths["header"].write_text(params_header(top, cfg))
    return paths


def write_soc_outputs(top: str, cfg, out_dir: Path) -> dict[str, Path]:
    """``<top>.v``, ``config.json`` (the SoC config), ``pyard_soc.h`` and ``link.ld`` for a SoC top."""
    from soc.memmap import write_firmware_files
    from soc.soc import Soc, SocSim

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"verilog": out_dir / f"{top}.v", "config": out_dir / "config.json"}
    with progress.phase(f"Generating Verilog: {top} {cfg.name}"):
        paths["verilog"].write_text(shared.convert(Soc(cfg) if top == "soc" else SocSim(cfg), top))
    paths["config"].write_text(_with_top(cfg.to_dict(), top))
    paths |= write_firmware_files(cfg, out_dir)
    if top == "soc_sim":
        paths["sim_ram"] = REPO / "soc" / "sim_ram.v"
    return paths

"""Mesh regressions in Verilator: random weight tiles back to back, every output compared exactly
with the NumPy model, with and without idle cycles on the input streams."""

import json

import pytest

from rtl.config import PE_STAGES, AccelConfig
from sim.build import build, run_cocotb

CONFIGS = [
    AccelConfig(rows=4, cols=4, dtype="int8"),
    AccelConfig(rows=8, cols=8, dtype="int8"),
    AccelConfig(rows=4, cols=16, dtype="int8"),
    AccelConfig(rows=3, cols=5, dtype="int8", pe_stages=2),
    AccelConfig(rows=1, cols=1, dtype="int8"),
    AccelConfig(rows=4, cols=4, dtype="bf16"),
    AccelConfig(rows=8, cols=8, dtype="bf16"),
    AccelConfig(rows=4, cols=16, dtype="bf16"),
    AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16", pe_stages=2),
    # The deeper pipelines (the adder split): same results, latency pe_stages * rows + cols.
    AccelConfig(rows=3, cols=5, dtype="int8", pe_stages=3),
    AccelConfig(rows=4, cols=4, dtype="int8", pe_stages=max(PE_STAGES)),
    AccelConfig(rows=4, cols=4, dtype="bf16", pe_stages=3),
    AccelConfig(rows=5, cols=3, dtype="bf16", pe_stages=max(PE_STAGES)),
    AccelConfig(rows=3, cols=4, dtype="bf16", acc_dtype="bf16", pe_stages=max(PE_STAGES)),
]
SLOW_CONFIGS = [
    AccelConfig(rows=16, cols=16, dtype="int8"),
    AccelConfig(rows=16, cols=16, dtype="bf16"),
]


def _id(cfg: AccelConfig) -> str:
    return f"{cfg.name}-s{cfg.pe_stages}"


def run_mesh(cfg: AccelConfig, tiles: int) -> None:
    b = build("mesh", cfg)
    for seed, gap in ((11, 0.0), (12, 0.3)):
        args = {"seed": seed, "tiles": tiles, "gap": gap}
        run_cocotb(b, "tb.mesh_tb", env={"PYARD_TB_ARGS": json.dumps(args)}, name=f"seed{seed}")


@pytest.mark.parametrize("cfg", CONFIGS, ids=_id)
def test_mesh_matches_model(cfg: AccelConfig) -> None:
    run_mesh(cfg, tiles=8)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", SLOW_CONFIGS, ids=_id)
def test_mesh_large(cfg: AccelConfig, scale: str) -> None:
    run_mesh(cfg, tiles=4 if scale == "small" else 24)

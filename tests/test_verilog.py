"""``pyard verilog``: the files it writes, their reproducibility, and Verilator -Wall lint."""

import re
import subprocess
import sys

import pytest

from rtl.config import AccelConfig, load_config
from sim.generate import write_outputs
from sim.verilator import lint


def pyard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, check=False)


def test_verilog_by_name_writes_reproducible_outputs(tmp_path) -> None:
    out = tmp_path / "a"
    proc = pyard("verilog", "--config", "8x8-bf16", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    verilog = (out / "mesh.v").read_text()
    assert re.search(r"^module mesh\(", verilog, re.M)
    assert load_config(str(out / "config.json")) == AccelConfig.from_name("8x8-bf16")
    header = (out / "pyard_params.h").read_text()
    assert "#define PYARD_ROWS 8" in header and "#define PYARD_DTYPE_BF16 1" in header
    assert "#define PYARD_MESH_LATENCY 16" in header  # 1 stage x 8 rows + 8 cols

    again = tmp_path / "b"
    proc = pyard("verilog", "--config", str(out / "config.json"), "-o", str(again))
    assert proc.returncode == 0, proc.stderr
    assert (again / "mesh.v").read_text() == verilog


def test_verilog_by_fields(tmp_path) -> None:
    proc = pyard("verilog", "--rows", "4", "--cols", "16", "--dtype", "int8", "--top", "mesh", "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    cfg = load_config(str(tmp_path / "config.json"))
    assert (cfg.rows, cfg.cols, cfg.dtype) == (4, 16, "int8")
    # inp payload: 4 int8 activations + 16 int32 sums + flip + 8-bit tag
    width = 4 * 8 + 16 * 32 + 1 + 8
    assert re.search(rf"input \[{width - 1}:0\] inp__payload;", (tmp_path / "mesh.v").read_text())


@pytest.mark.parametrize(
    "cfg",
    [
        AccelConfig(rows=1, cols=1, dtype="int8"),
        AccelConfig(rows=4, cols=16, dtype="int8"),
        AccelConfig(rows=3, cols=5, dtype="bf16", acc_dtype="bf16", pe_stages=2),
        AccelConfig(rows=8, cols=8, dtype="bf16"),
    ],
    ids=lambda c: f"{c.name}-s{c.pe_stages}",
)
def test_lint_clean(cfg: AccelConfig, tmp_path) -> None:
    paths = write_outputs("mesh", cfg, tmp_path)
    assert lint(paths["verilog"], "mesh") == []

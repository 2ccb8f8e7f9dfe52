"""``pyard bench fptt-pass``: a pass's cycles from a few simulated parts scaled by K, against whole
passes; its refusals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    # --cores 4: the SoC build the other FPTT SoC tests use.
    cmd = [sys.executable, "-m", "sim.cli", "bench", "fptt-pass", "--config", "4x4-bf16", "--cores", "4", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_parts_scaled_to_a_pass_match_whole_passes() -> None:
    """K = 4 of T = 8 from one simulated part, against the whole pass: every part does the same
    work, so the two agree within the start-up that only the whole pass has once per run."""
    common = ["--T", "8", "--hidden", "8", "--batch", "2", "--K", "4,8", "--json"]
    sampled = json.loads(bench(*common, "--parts", "1").stdout)["results"]
    whole = json.loads(bench(*common, "--parts", "0").stdout)["results"]
    for s, w in zip(sampled, whole, strict=True):
        assert (s["parts_simulated"], w["parts_simulated"], w["steps_simulated"]) == (1, s["K"], 8)
        assert s["cycles_per_pass"] == pytest.approx(w["cycles_per_pass"], rel=0.03)
        assert sum(w["phases_per_pass"].values()) == w["cycles_per_pass"]
        assert w["cycles_per_part"] * w["K"] == pytest.approx(w["cycles_per_pass"], abs=w["K"])
        assert w["thesis_cycles_per_pass"] is None  # not the thesis' workload


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--T", "8", "--K", "3", "--parts", "1"], "--K = 3 does not divide --T 8"),
        (["--T", "8", "--K", "9"], "--K = 9 is invalid for --T 8: allowed 1 to 8"),
        (["--K", "2,x"], "--K"),
        (["--parts", "-1"], "--parts"),
        (["--elementwise", "gpu"], "elementwise = 'gpu' is invalid: allowed engine or cores"),
    ],
)
def test_refusals(args: list[str], message: str) -> None:
    proc = bench(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr

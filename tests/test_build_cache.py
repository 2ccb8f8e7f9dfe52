"""Verilator builds are made once per design: a second request is answered from the cache."""

from rtl.config import AccelConfig
from sim.build import build, run_cocotb


def test_second_build_is_cached_and_runs(tmp_path) -> None:
    cfg = AccelConfig(rows=2, cols=3, dtype="int8")
    first = build("mesh", cfg, root=tmp_path)
    assert not first.cached and first.verilate_seconds > 0
    stamp = (first.directory / "built.ok").stat().st_mtime_ns
    second = build("mesh", cfg, root=tmp_path)
    assert second.cached and second.directory == first.directory
    assert (second.directory / "built.ok").stat().st_mtime_ns == stamp
    # A different config is a different model.
    assert build("mesh", cfg.replace(cols=2), root=tmp_path).directory != first.directory
    run_cocotb(second, "tb.mesh_tb", testcase="mesh_one_tile")


def test_waveforms_on_request(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PYARD_WAVES", "1")
    b = build("mesh", AccelConfig(rows=2, cols=2, dtype="int8"), root=tmp_path)
    assert b.waves
    run_dir = run_cocotb(b, "tb.mesh_tb", testcase="mesh_one_tile", name="waves")
    fst = run_dir / "waves.fst"
    assert fst.exists() and fst.read_bytes()[:1] == b"\x00"  # FST files open with a header block of type 0

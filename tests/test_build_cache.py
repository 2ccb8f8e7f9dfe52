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


def test_runs_at_the_same_time_keep_their_own_results(tmp_path) -> None:
    """Two runs of one build under one name (two benches on one config) get their own folders, so
    neither reads the other's results file or log."""
    from concurrent.futures import ThreadPoolExecutor

    b = build("mesh", AccelConfig(rows=2, cols=3, dtype="int8"), root=tmp_path)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: run_cocotb(b, "tb.mesh_tb", testcase="mesh_one_tile", name="bench"), range(2)))
    assert runs[0] != runs[1]
    for run in runs:
        assert (run / "results.xml").is_file() and "mesh_one_tile" in (run / "results.xml").read_text()

"""``pyard sweep``: the sweep file's validation, the per-point cache, failures that stop nothing,
Dask against serial, the derived figures and the report (sweep/, docs/sweep.md).

The measured points are small GEMMs and one Conv2D on a 4x4-int8 tile (one tile-simulator build,
cached), each checked bit-exact by the tile simulator's runner."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rtl.config import ConfigError
from sim import cli
from sweep.execute import Outcome, run_sweep
from sweep.measure import point_key, source_hashes
from sweep.plots import pareto, write_plots, write_report
from sweep.results import rows, write_results
from sweep.spec import Point, load_spec, parse_spec
from sweep.thesis import beside_thesis

TILE = {"design": {"arrays": "4x4", "dtype": "int8"}}  # the tile simulator test_tilesim.py builds too
TOO_BIG = "65535x65535x2"  # 4 GiB of operands: more than the simulated memory holds


def _spec(gemm: list[str], conv: list[str] | None = None):
    return parse_spec(TILE | {"workloads": {"gemm": gemm, "conv": conv or []}})


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[design]\nshape = '4x4'\n", "design.shape = '4x4' is invalid: allowed keys arrays, dtype, acc_dtype"),
        ("[desing]\n", "desing = {} is invalid: allowed keys design, workloads, area"),
        ("[design]\narrays = ['4x4', '4y4']\n", "design.arrays = '4y4' is invalid: allowed shapes ROWSxCOLS"),
        ("[design]\ncores = [1, 17]\n", "design.cores = 17 is invalid: allowed an integer from 1 to 16"),
        ("[design]\ndtype = 'fp8'\n", "design.dtype = 'fp8' is invalid: allowed one of int8, bf16"),
        ("[design]\nacc_dtype = 'fp32'\n", "design.acc_dtype = 'fp32' is invalid: allowed one of int32"),
        ("[design]\ndma_bits = [64, 96]\n", "dma_bits = 96 is invalid: allowed one of 32, 64, 128, 256, 512"),
        ("[workloads]\ngemm = ['4x4']\n", "workloads.gemm[0] = '4x4' is invalid: allowed a shape MxKxN"),
        ("[workloads]\ngemm = [{m = 4, k = 0, n = 4}]\n", "workloads.gemm[0].k = 0 is invalid: allowed an integer"),
        ("[workloads]\nconv = ['1x8x8x2-2-3x3-s0']\n", "workloads.conv[0].stride = 0 is invalid: allowed an int"),
        ("[workloads]\nfptt = {T = 8}\n", "workloads.fptt.K = None is invalid: allowed a list of partition factors"),
        ("[workloads]\nfptt = {K = [9], T = 8}\n", "workloads.fptt.K = 9 is invalid: allowed an integer from 1 to 8"),
        ("[workloads]\nprogram = ['nope.c']\n", "workloads.program[0] = 'nope.c' is invalid: allowed the path"),
        ("[workloads]\nlatency = 2\ngemm = ['4x4x4']\n", "workloads.latency = 2 is invalid: allowed an integer from 4"),
        ("[area]\nfamily = 'ice40'\n", "area.family = 'ice40' is invalid: allowed one of xc7, xcup, ecp5"),
        ("[area]\nfmax = true\n", 'area.fmax = True is invalid: allowed true (with family = "ecp5"'),
        ("[design]\narrays = '4x4'\n", "workloads = {} is invalid: allowed at least one of gemm, conv, fptt, program"),
        ("[design\n", "sweep file = "),
    ],
)
def test_sweep_file_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_spec(_file(tmp_path, text))
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_cli_error_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sweep", "--arrays", "2x2", "--cores", "1,0", "--gemm", "4x4x4"]) == 2
    err = capsys.readouterr().err
    assert err == "pyard: error: design.cores = 0 is invalid: allowed an integer from 1 to 16\n"


def test_file_and_command_line_make_the_same_points(tmp_path: Path) -> None:
    """The options replace the file's values; the points cross designs with workloads, the tile's
    workloads once per config and the SoC's once per core count."""
    path = _file(tmp_path, """
        [design]
        arrays = ["2x2", "4x4"]
        dtype = "bf16"
        cores = [1, 2]
        [workloads]
        gemm = ["8x8x8"]
        fptt = {K = [1, 2], T = 4, hidden = 4, batch = 2}
        [area]
        top = "tile"
    """)  # fmt: skip
    mixed = load_spec(path, {"design": {"dtype": ["int8", "bf16"], "acc_dtype": ["int32", "bf16"]}})
    assert [c.name for c in mixed.configs] == ["2x2-int8", "2x2-bf16-accbf16", "4x4-int8", "4x4-bf16-accbf16"]
    spec = load_spec(path, {"design": {"arrays": ["2x2"]}})
    got = [(p.kind, p.design, p.workload) for p in spec.points()]
    assert got == [
        ("gemm", "2x2-bf16", "gemm 8x8x8"),
        ("fptt", "2x2-bf16-1c", "fptt K=1"),
        ("fptt", "2x2-bf16-2c", "fptt K=1"),
        ("fptt", "2x2-bf16-1c", "fptt K=2"),
        ("fptt", "2x2-bf16-2c", "fptt K=2"),
        ("area", "2x2-bf16", "area tile xc7"),
    ]
    assert spec.points()[1].params == {"K": 1, "T": 4, "hidden": 4, "batch": 2, "parts": 2, "seed": 0}


def test_command_line_lists() -> None:
    from sweep.cli import overrides

    argv = ["sweep", "--arrays", "2x2,4x4", "--dtype", "bf16", "--cores", "1,2", "--gemm", "64x64x64"]
    args = cli.build_parser().parse_args([*argv, "--fptt-k", "1,28", "--area", "ecp5", "--fmax"])
    spec = parse_spec(overrides(args))
    assert [c.name for c in spec.configs] == ["2x2-bf16", "4x4-bf16"]
    assert spec.cores == [1, 2]
    assert spec.workloads[0] == ("gemm", {"m": 64, "k": 64, "n": 64})
    assert [w["K"] for kind, w in spec.workloads if kind == "fptt"] == [1, 28]
    assert spec.area == {"family": "ecp5", "top": "tile", "fmax": True, "freq": 100.0}
    assert len(spec.points()) == 2 * (1 + 2 * 2 + 1)  # per config: the GEMM, FPTT x K x cores, the area


def _measured(outcome: Outcome) -> dict:
    """The figures of a point that do not depend on the machine (not the simulation's wall time)."""
    return {k: v for k, v in outcome.metrics.items() if k != "sim_seconds"}


def _check_gemm(outcome: Outcome, m: int, k: int, n: int) -> None:
    metrics = outcome.metrics
    assert outcome.status == "ok", outcome.error
    assert metrics["macs"] == m * k * n
    assert metrics["utilization"] == round(m * k * n / (4 * 4 * metrics["cycles"]), 4)
    assert metrics["cycles"] >= m * k * n / 16  # no faster than every PE busy on every cycle


def test_cache_recomputes_only_changed_points_and_failures_stop_nothing(tmp_path: Path) -> None:
    first = run_sweep(_spec(["4x4x4", TOO_BIG, "8x8x8"]), serial=True, directory=tmp_path)
    assert [o.status for o in first] == ["ok", "failed", "ok"]
    assert "operands take 4097 MiB" in first[1].error
    _check_gemm(first[0], 4, 4, 4)
    _check_gemm(first[2], 8, 8, 8)
    assert not any(o.cached for o in first)

    second = run_sweep(_spec(["4x4x4", TOO_BIG, "8x4x4"]), serial=True, directory=tmp_path)
    assert [(o.status, o.cached) for o in second] == [("ok", True), ("failed", False), ("ok", False)]
    assert second[0].metrics == first[0].metrics
    _check_gemm(second[2], 8, 4, 4)


def test_interrupted_sweep_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each result is stored as it arrives: after a Ctrl-C at the second point, a re-run takes the
    first from the cache and measures the rest."""
    from sweep import execute

    measured: list[str] = []

    def interrupted(point, *args):
        if measured:
            raise KeyboardInterrupt
        measured.append(point.workload)
        return real(point, *args)

    real = execute.run_point
    monkeypatch.setattr(execute, "run_point", interrupted)
    spec = _spec(["4x4x4", "8x8x8"])
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, serial=True, directory=tmp_path)
    monkeypatch.setattr(execute, "run_point", real)
    again = run_sweep(spec, serial=True, directory=tmp_path)
    assert measured == ["gemm 4x4x4"]
    assert [(o.status, o.cached) for o in again] == [("ok", True), ("ok", False)]
    _check_gemm(again[1], 8, 8, 8)


def test_key_follows_what_a_point_reads(tmp_path: Path) -> None:
    """The memory latency and the cycle budget key simulated points, not the area; a program's
    contents key its points."""
    program = tmp_path / "p.c"
    program.write_text("int main(void) { return 0; }\n")
    spec = parse_spec(TILE | {"workloads": {"gemm": ["4x4x4"], "program": [str(program)]}, "area": {}})
    gemm, prog, area = spec.points()
    sources = source_hashes()
    keys = {p.kind: point_key(p, sources, 32, 1000) for p in (gemm, prog, area)}
    assert point_key(gemm, sources, 40, 1000) != keys["gemm"]
    assert point_key(gemm, sources, 32, 2000) != keys["gemm"]
    assert point_key(area, sources, 40, 2000) == keys["area"]
    (tmp_path / "p.h").write_text("#define N 1\n")  # a header beside the program is read too
    assert point_key(prog, sources, 32, 1000) != keys["program"]
    keys["program"] = point_key(prog, sources, 32, 1000)
    program.write_text("int main(void) { return 1; }\n")
    assert point_key(prog, sources, 32, 1000) != keys["program"]
    assert len(set(keys.values())) == 3


def test_dask_local_cluster_matches_serial(tmp_path: Path) -> None:
    """The CI test of the issue: the same points on a LocalCluster of two worker processes and
    serially give the same figures (and the failing point fails on both)."""
    spec = _spec(["4x4x4", "6x5x3", TOO_BIG], conv=["1x4x4x2-2-3x3-s1-p1"])
    serial = run_sweep(spec, serial=True, directory=tmp_path / "serial")
    dask = run_sweep(spec, workers=2, directory=tmp_path / "dask")
    assert [o.status for o in serial] == ["ok", "ok", "failed", "ok"]
    assert [o.status for o in dask] == [o.status for o in serial]
    assert [_measured(o) for o in dask] == [_measured(o) for o in serial]
    assert not any(o.cached for o in dask)
    _check_gemm(serial[1], 6, 5, 3)
    conv = serial[3].metrics
    assert conv["macs"] == 1 * 4 * 4 * 3 * 3 * 2 * 2  # batch * OH * OW * kh * kw * cin * cout


def test_cli_on_an_existing_dask_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--scheduler`` sends the points to a running cluster; ``--json`` prints every row and
    ``--report`` writes the results and the report; a failed point makes the exit status 1."""
    import json

    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        argv = ["sweep", "--arrays", "4x4", "--gemm", f"4x4x4,{TOO_BIG}", "--scheduler", cluster.scheduler_address]
        status = cli.main([*argv, "--cache-dir", str(tmp_path / "cache"), "--report", str(tmp_path), "--json"])
    table = json.loads(capsys.readouterr().out)
    assert status == 1
    assert [(r["workload"], r["status"], r["cached"]) for r in table] == [
        ("gemm 4x4x4", "ok", False),
        (f"gemm {TOO_BIG}", "failed", False),
    ]
    assert table[0]["macs"] == 64 and table[0]["utilization"] == round(64 / (16 * table[0]["cycles"]), 4)
    (again,) = run_sweep(_spec(["4x4x4"]), serial=True, directory=tmp_path / "cache")
    assert again.cached and again.metrics["cycles"] == table[0]["cycles"]  # the CLI stored it in --cache-dir
    written = {p.name for p in tmp_path.iterdir()}
    assert {"report.md", "results.csv", "results.json", "utilization_vs_array.png"} <= written


def _point(kind: str, array: int, cores: int | None, params: dict) -> Point:
    from rtl.config import AccelConfig

    return Point(kind, AccelConfig(rows=array, cols=array, dtype="bf16").to_dict(), cores, params)


def _outcomes() -> list[Outcome]:
    """A sweep's outcomes as they come back: FPTT on two arrays and two core counts, the tiles'
    area, one failure."""
    out = []
    for array, lut, fmax in ((4, 10_000, 50.0), (8, 30_000, 40.0)):
        area = {"lut": lut, "lutram": 0, "ff": lut // 2, "bram": 4, "bram_kind": "bram36", "dsp": 0, "fmax_mhz": fmax}
        out.append(Outcome(_point("area", array, None, {"top": "tile", "family": "ecp5"}), f"a{array}", "ok", area))
        for cores in (1, 2):
            cycles = 1_000_000 * 4 // array // cores
            phases = {"fwd_gemm": cycles // 2, "update": cycles // 4, "other": cycles - cycles // 2 - cycles // 4}
            metrics = {"cycles": cycles, "utilization": 0.5, "phases": phases}
            out.append(Outcome(_point("fptt", array, cores, {"K": 2}), f"f{array}{cores}", "ok", metrics))
    out.append(Outcome(_point("fptt", 8, 4, {"K": 2}), "bad", "failed", error="RuntimeError: no EXIT"))
    return out


def test_rows_join_area_and_derive_figures() -> None:
    table = rows(_outcomes())
    fptt = {r["design"]: r for r in table if r["kind"] == "fptt"}
    assert fptt["8x8-bf16-2c"]["lut"] == 30_000
    assert fptt["8x8-bf16-2c"]["cycles_x_lut"] == 250_000 * 30_000
    assert fptt["4x4-bf16-1c"]["time_ms"] == round(1_000_000 / 50e3, 4)  # 1e6 cycles at 50 MHz: 20 ms
    assert fptt["4x4-bf16-1c"]["phase_update"] == 250_000
    assert fptt["8x8-bf16-4c"]["status"] == "failed" and fptt["8x8-bf16-4c"]["cycles_x_lut"] is None


def test_pareto_front() -> None:
    points = [(10, 100), (20, 50), (15, 120), (30, 50), (40, 10), (20, 60)]
    assert pareto(points) == [(10, 100), (20, 50), (40, 10)]


def test_report_writes_plots_table_and_results(tmp_path: Path) -> None:
    table = rows(_outcomes())
    pictures = write_plots(table, tmp_path)
    names = {p.name for p in pictures}
    for plot in ("cycles_vs_area", "fptt_phases", "speedup_vs_cores", "utilization_vs_array"):
        assert {f"{plot}.png", f"{plot}.svg"} <= names
    report = write_report(table, tmp_path, "test", pictures)
    written = write_results(table, tmp_path)
    for path in [*pictures, report, *written]:
        assert path.stat().st_size > 0, path
    text = report.read_text()
    assert "fptt K=2: fewest cycles 8x8-bf16-2c (250,000); fewest cycles x LUT 4x4-bf16-2c" in text
    assert "| 8x8-bf16-4c | fptt K=2 |" in text and "no EXIT" in text
    assert "![speedup_vs_cores](speedup_vs_cores.png)" in text


def test_rows_take_the_soc_area_of_their_core_count() -> None:
    """With ``top = "soc"`` each core count has its own area, and time at fmax follows it."""
    out = []
    for cores, lut, fmax in ((1, 20_000, 50.0), (2, 23_000, 40.0)):
        area = {"lut": lut, "lutram": 0, "ff": 9, "bram": 4, "bram_kind": "bram18", "dsp": 1, "fmax_mhz": fmax}
        out.append(Outcome(_point("area", 4, cores, {"top": "soc", "family": "ecp5"}), f"a{cores}", "ok", area))
        metrics = {"cycles": 2_000_000 // cores, "utilization": 0.5, "phases": {}, "thesis_cycles": 1_652_452_686.0}
        out.append(Outcome(_point("fptt", 4, cores, {"K": 28}), f"f{cores}", "ok", metrics))
    table = {r["design"]: r for r in rows(out) if r["kind"] == "fptt"}
    # beside the thesis' Appendix C (K = 28) and its Table 5.10 SoC LUTs (4x4-1: 86,235, 4x4-2: 115,257)
    assert beside_thesis(rows(out))[2:] == [
        "| 4x4-bf16-1c | fptt K=28 | 2,000,000 | 1,652,452,686 | 826.2x | 20,000 | 86,235 |",
        "| 4x4-bf16-2c | fptt K=28 | 1,000,000 | 1,652,452,686 | 1652.5x | 23,000 | 115,257 |",
    ]
    assert table["4x4-bf16-1c"]["lut"] == 20_000 and table["4x4-bf16-2c"]["lut"] == 23_000
    assert table["4x4-bf16-2c"]["cycles_x_lut"] == 1_000_000 * 23_000
    assert table["4x4-bf16-2c"]["time_ms"] == 25.0  # 1e6 cycles at 40 MHz


def test_soc_area_point_asks_for_place_and_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """``area = {top = "soc", fmax = true}`` synthesizes the SoC of the point's core count and places
    and routes it at the sweep's clock; the resources and fmax come back as the point's figures."""
    from rtl import shared
    from sweep.measure import MEASURES
    from synth import flow

    seen = {}

    def convert(component, name: str) -> str:  # the SoC's Verilog itself is another test's subject
        seen.update(cores=component.cfg.cores, tiles=component.cfg.tiles)
        return f"module {name}();"

    def synthesize(verilog: str, top: str, name: str, opts: flow.Options, root: Path) -> dict:
        seen.update(top=top, name=name, opts=opts, verilog=verilog)
        return {"blocks": {"total": {"lut": 7, "lutram": 1, "ff": 5, "bram18": 2, "dsp": 3}}, "fmax_mhz": 61.5}

    monkeypatch.setattr(flow, "synthesize", synthesize)
    monkeypatch.setattr(shared, "convert", convert)
    area = {"family": "ecp5", "top": "soc", "fmax": True, "freq": 50}
    spec = parse_spec({"design": {"arrays": "1x1", "cores": 2}, "area": area})
    (point,) = spec.points()
    metrics = MEASURES["area"](point, 32, 1000)
    assert seen["top"] == "soc" and seen["name"] == "1x1-int8-2c" and seen["verilog"] == "module soc();"
    assert seen["cores"] == 2 and seen["tiles"] == 1
    assert seen["opts"] == flow.Options(family="ecp5", pnr=True, freq_mhz=50.0)
    assert metrics == {"lut": 7, "lutram": 1, "ff": 5, "bram": 2, "bram_kind": "bram18", "dsp": 3, "fmax_mhz": 61.5}

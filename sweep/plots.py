"""The sweep's pictures (matplotlib, Agg: no display needed), each as PNG and SVG, and the Markdown
report that shows them with the results table.

- ``cycles_vs_area``: cycles against LUTs per workload, the Pareto front (no other point has
  fewer cycles and fewer LUTs) marked;
- ``fptt_phases``: the FPTT pass's cycles per function, stacked, per design point and K (the
  thesis' Appendix C as a picture);
- ``speedup_vs_cores``: cycles at the fewest cores over cycles, per accelerator and workload;
- ``utilization_vs_array``: MAC utilization against the array's PEs, per workload and dtype.

A picture whose data the sweep does not have (no area, one core count, no FPTT) is not drawn.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweep.results import TABLE, Row, cell
from sweep.thesis import beside_thesis

__all__ = ["pareto", "write_plots", "write_report"]

FORMATS = ("png", "svg")


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats in both coordinates (smaller is better), by the first."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(set(points)):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _ok(table: list[Row]) -> list[Row]:
    return [r for r in table if r["status"] == "ok" and r["kind"] != "area"]


def _by(table: list[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    groups: dict[Any, list[Row]] = defaultdict(list)
    for r in table:
        groups[key(r)].append(r)
    return dict(groups)


def _figure(ncols: int = 1, width: float = 5.5):
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, also in Dask workers and CI
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 4.2), squeeze=False)
    return plt, fig, list(axes[0])


def _save(plt: Any, fig: Any, out_dir: Path, name: str) -> list[Path]:
    fig.tight_layout()
    paths = [out_dir / f"{name}.{ext}" for ext in FORMATS]
    for path in paths:
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return paths


def cycles_vs_area(table: list[Row], out_dir: Path) -> list[Path]:
    rows = [r for r in _ok(table) if r.get("lut") and r.get("cycles")]
    groups = _by(rows, lambda r: r["workload"])
    if not groups:
        return []
    plt, fig, axes = _figure(min(len(groups), 4))
    for n, (workload, group) in enumerate(sorted(groups.items())):
        ax = axes[n % len(axes)]
        ax.scatter([r["lut"] for r in group], [r["cycles"] for r in group], label=workload, alpha=0.8)
        front = pareto([(r["lut"], r["cycles"]) for r in group])
        # Only the front's designs are named: the others often share its cycles (more cores, say)
        # and their names, side by side, would cover each other.
        for r in group:
            if (r["lut"], r["cycles"]) in front:
                ax.annotate(r["design"], (r["lut"], r["cycles"]), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.plot(*zip(*front, strict=True), "--", color="tab:red", marker="o", mfc="none", ms=10, label="Pareto front")
        ax.set(xlabel="LUT", ylabel="cycles", title=workload)
        ax.legend(fontsize=7)
    return _save(plt, fig, out_dir, "cycles_vs_area")


def fptt_phases(table: list[Row], out_dir: Path) -> list[Path]:
    rows = [r for r in _ok(table) if r["kind"] == "fptt"]
    if not rows:
        return []
    phases = [k.removeprefix("phase_") for k in dict.fromkeys(k for r in rows for k in r if k.startswith("phase_"))]
    plt, fig, (ax,) = _figure(width=max(5.5, 2.5 + 0.3 * len(rows)))  # a bar's label needs about 0.3 in
    labels = [f"{r['design']} K={r['workload'].split('=')[-1]}" for r in rows]
    bottom = [0.0] * len(rows)
    for phase in phases:
        values = [float(r.get(f"phase_{phase}") or 0) for r in rows]
        ax.bar(labels, values, bottom=bottom, label=phase)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set(ylabel="cycles per pass", title="FPTT pass: cycles per function")
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, never over them
    return _save(plt, fig, out_dir, "fptt_phases")


def speedup_vs_cores(table: list[Row], out_dir: Path) -> list[Path]:
    rows = [r for r in _ok(table) if r.get("cores") and r.get("cycles")]
    groups = {k: g for k, g in _by(rows, lambda r: (r["config"], r["workload"])).items() if len(g) > 1}
    if not groups:
        return []
    plt, fig, (ax,) = _figure()
    for (config, workload), group in sorted(groups.items()):
        group = sorted(group, key=lambda r: r["cores"])
        base = group[0]["cycles"]
        ax.plot(
            [r["cores"] for r in group], [base / r["cycles"] for r in group], marker="o", label=f"{config} {workload}"
        )
    ax.set_xticks(sorted({r["cores"] for r in rows}))  # core counts are whole numbers
    ax.set(xlabel="cores", ylabel="speedup over the fewest cores", title="Speedup against cores")
    ax.legend(fontsize=7)
    return _save(plt, fig, out_dir, "speedup_vs_cores")


def utilization_vs_array(table: list[Row], out_dir: Path) -> list[Path]:
    rows = [r for r in _ok(table) if r.get("utilization") is not None]
    groups = {k: g for k, g in _by(rows, lambda r: (r["workload"], r["dtype"], r["cores"])).items()}
    if not rows:
        return []
    plt, fig, (ax,) = _figure()
    for (workload, dtype, cores), group in sorted(groups.items(), key=str):
        group = sorted(group, key=lambda r: r["rows"] * r["cols"])
        where = f" {cores}c" if cores else ""
        ax.plot([r["rows"] * r["cols"] for r in group], [r["utilization"] for r in group], marker="o",
                label=f"{workload} {dtype}{where}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set(xlabel="PEs (rows x cols)", ylabel="MAC utilization", title="Utilization against array size", ylim=(0, 1))
    ax.legend(fontsize=7)
    return _save(plt, fig, out_dir, "utilization_vs_array")


PLOTS = (cycles_vs_area, fptt_phases, speedup_vs_cores, utilization_vs_array)


def write_plots(table: list[Row], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return [path for plot in PLOTS for path in plot(table, out_dir)]


def best(table: list[Row]) -> list[str]:
    """The best design per workload by cycles and, where the area is known, by cycles x LUT."""
    lines = []
    for workload, group in sorted(_by(_ok(table), lambda r: r["workload"]).items()):
        fastest = min(group, key=lambda r: r["cycles"])
        line = f"- {workload}: fewest cycles {fastest['design']} ({fastest['cycles']:,})"
        sized = [r for r in group if r.get("cycles_x_lut")]
        if sized:
            lean = min(sized, key=lambda r: r["cycles_x_lut"])
            line += f"; fewest cycles x LUT {lean['design']} ({lean['cycles_x_lut']:,})"
        lines.append(line)
    return lines


def write_report(table: list[Row], out_dir: Path, title: str, pictures: list[Path]) -> Path:
    """``report.md``: the best points, the results table and the pictures (their PNGs)."""
    head = "| " + " | ".join(h for _, h in TABLE) + " |\n| " + " | ".join("---" for _ in TABLE) + " |\n"
    body = "".join("| " + " | ".join(cell(r.get(k)) for k, _ in TABLE) + " |\n" for r in table)
    errors = "".join(f"- {r['design']} {r['workload']}: {r['error']}\n" for r in table if r["status"] != "ok")
    text = f"# Sweep: {title}\n\n## Best points\n\n" + ("\n".join(best(table)) or "(no point succeeded)") + "\n\n"
    text += "## Results\n\n" + head + body + (f"\nFailed points:\n\n{errors}" if errors else "")
    text += "\nAll fields of every point: results.csv, results.json.\n"
    thesis = beside_thesis(table)
    if thesis:
        text += "\n## Beside the FPTT thesis (its Appendix C and Table 5.10)\n\n" + "\n".join(thesis) + "\n"
    for path in pictures:
        if path.suffix == ".png":
            text += f"\n## {path.stem.replace('_', ' ')}\n\n![{path.stem}]({path.name})\n"
    report = out_dir / "report.md"
    report.write_text(text)
    return report

"""The results of a sweep as rows: one per point, with the area of its design and the figures
derived from both (cycles x LUT, time at fmax); printed as a table, written as CSV and JSON (and
Parquet when pyarrow is installed)."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

from sweep.execute import Outcome

__all__ = ["Row", "format_table", "rows", "write_results"]

Row = dict[str, Any]
AREA_FIELDS = ("lut", "lutram", "ff", "bram", "bram_kind", "dsp", "fmax_mhz")
# Columns of the terminal table: (row field, heading).
TABLE = (
    ("design", "design"),
    ("workload", "workload"),
    ("cycles", "cycles"),
    ("utilization", "util"),
    ("lut", "LUT"),
    ("ff", "FF"),
    ("bram", "BRAM"),
    ("dsp", "DSP"),
    ("fmax_mhz", "fmax MHz"),
    ("cycles_x_lut", "cycles x LUT"),
    ("time_ms", "ms at fmax"),
    ("status", "status"),
)


def rows(outcomes: list[Outcome]) -> list[Row]:
    """One row per point; workload rows carry their design's area (the area point of the same
    accelerator, and of the same core count when the SoC was synthesized) and the derived figures."""
    areas = {(o.point.config.name, o.point.cores): o.metrics for o in outcomes if o.point.kind == "area"}
    out = []
    for o in outcomes:
        p = o.point
        row: Row = {"design": p.design, "workload": p.workload, "kind": p.kind, "config": p.config.name}
        row |= {"rows": p.config.rows, "cols": p.config.cols, "dtype": p.config.dtype, "cores": p.cores}
        row |= {"status": o.status, "error": o.error, "cached": o.cached, "seconds": o.seconds, "key": o.key}
        metrics = dict(o.metrics)
        phases = metrics.pop("phases", {})
        row |= metrics | {f"phase_{k}": v for k, v in phases.items()}
        area = areas.get((p.config.name, p.cores)) or areas.get((p.config.name, None))
        if p.kind != "area" and area:
            row |= {k: area.get(k) for k in AREA_FIELDS}
        _derive(row)
        out.append(row)
    return out


def _derive(row: Row) -> None:
    cycles, lut, fmax = row.get("cycles"), row.get("lut"), row.get("fmax_mhz")
    row["cycles_x_lut"] = cycles * lut if cycles and lut else None
    row["time_ms"] = round(cycles / (fmax * 1e3), 4) if cycles and fmax else None


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 1 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_table(table: list[Row]) -> str:
    """The rows as aligned text columns; a failed point shows its error under its row."""
    cells = [[h for _, h in TABLE]] + [[cell(r.get(k)) for k, _ in TABLE] for r in table]
    widths = [max(len(line[i]) for line in cells) for i in range(len(TABLE))]
    lines = []
    for n, line in enumerate(cells):
        lines.append(
            "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        )
        if n and table[n - 1]["status"] != "ok":
            lines.append(f"    error: {table[n - 1]['error']}")
    return "\n".join(lines)


def columns(table: list[Row]) -> list[str]:
    """Every field of any row, in the order they first appear."""
    return list(dict.fromkeys(k for r in table for k in r))


def write_results(table: list[Row], out_dir: Path) -> list[Path]:
    """``results.csv`` and ``results.json`` (and ``results.parquet`` with pyarrow) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = columns(table)
    with (out_dir / "results.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, names)
        writer.writeheader()
        writer.writerows(table)
    (out_dir / "results.json").write_text(json.dumps(table, indent=1) + "\n")
    written = [out_dir / "results.csv", out_dir / "results.json"]
    if importlib.util.find_spec("pyarrow") is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in names} for r in table]), out_dir / "results.parquet")
        written.append(out_dir / "results.parquet")
    return written

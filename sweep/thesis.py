"""The FPTT thesis beside a sweep: its Appendix C cycles per pass (which the FPTT points carry as
``thesis_cycles``) and its Table 5.10, the whole SoC's resources on a VCU118 (Vivado), for the
design points it measured: {4x4, 8x8} × {1, 2, 4, 6, 8, 10} cores."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from sweep.results import Row, cell

__all__ = ["beside_thesis", "thesis_soc_lut"]

SOC_CSV = Path(__file__).resolve().parent / "data" / "thesis_table_5_10_soc_resources.csv"  # ../shared/data


@cache
def _soc_luts() -> dict[str, int]:
    with SOC_CSV.open() as fh:
        return {r["point"]: int(r["LUT"]) for r in csv.DictReader(fh)}


def thesis_soc_lut(rows: int, cols: int, cores: int | None) -> int | None:
    """The thesis' SoC LUTs at the design point, where it measured one."""
    return _soc_luts().get(f"{rows}x{cols}-{cores}")


def beside_thesis(table: list[Row]) -> list[str]:
    """Markdown rows of every FPTT point the thesis also measured: cycles and SoC LUTs, both sides."""
    head = [
        "| design | workload | pyard cycles | thesis cycles | fewer cycles | pyard LUT | thesis LUT |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines = []
    for r in table:
        theirs = r.get("thesis_cycles")
        if r["kind"] != "fptt" or r["status"] != "ok" or not theirs:
            continue
        ours = [cell(r["cycles"]), cell(round(theirs)), f"{theirs / r['cycles']:.1f}x", cell(r.get("lut"))]
        cells = [r["design"], r["workload"], *ours, cell(thesis_soc_lut(r["rows"], r["cols"], r["cores"]))]
        lines.append("| " + " | ".join(cells) + " |")
    return head + lines if lines else []

"""Resource counts per block from Yosys' ``stat -json`` of a hierarchical netlist.

Yosys counts each module's own cells; a submodule instance appears as a cell whose type is the
submodule's name. A block's resources are its own cells plus those of every instance below it,
so the totals of the top's children add up (with the top's own glue) to the design's total.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Primitive cell → (resource, units) per FPGA family. LUT RAM cells count as the LUTs they occupy;
# an ECP5 carry cell (CCU2C) occupies two LUT4s. Cells not listed (buffers, carry chains of
# Xilinx parts, wide-function multiplexers) are routing or free inside a slice and not counted.
RESOURCES: dict[str, list[tuple[str, str, int]]] = {
    "xc7": [
        (r"LUT[1-6]", "lut", 1),
        (r"RAM(32|64|128|256)X1[SD]", "lutram", 1),
        (r"RAM32M|RAM64M", "lutram", 4),
        (r"FD[CPRS]E?", "ff", 1),
        (r"RAMB36E1", "bram36", 1),
        (r"RAMB18E1", "bram36", 0.5),
        (r"DSP48E1", "dsp", 1),
    ],
    "xcup": [
        (r"LUT[1-6]", "lut", 1),
        (r"RAM(32|64|128|256)X1[SD]", "lutram", 1),
        (r"RAM32M16|RAM64M8", "lutram", 8),
        (r"RAM32M|RAM64M", "lutram", 4),
        (r"FD[CPRS]E?", "ff", 1),
        (r"RAMB36E2", "bram36", 1),
        (r"RAMB18E2", "bram36", 0.5),
        (r"URAM288", "uram", 1),
        (r"DSP48E2", "dsp", 1),
    ],
    "ecp5": [
        (r"LUT4", "lut", 1),
        (r"CCU2C", "lut", 2),
        (r"TRELLIS_DPR16X4", "lutram", 2),
        (r"TRELLIS_FF", "ff", 1),
        (r"DP16KD|PDPW16KD", "bram18", 1),
        (r"MULT18X18D", "dsp", 1),
    ],
}
FAMILIES = tuple(RESOURCES)


def primitive_resources(family: str, cells: Mapping[str, int]) -> dict[str, float]:
    """Resources of a module's own primitive cells (cell type → count)."""
    out = {name: 0.0 for _, name, _ in RESOURCES[family]}
    for cell, count in cells.items():
        for pattern, name, units in RESOURCES[family]:
            if re.fullmatch(pattern, cell):
                out[name] += units * count
                break
    return out


def block_resources(family: str, modules: Mapping[str, Mapping[str, int]], top: str) -> dict[str, dict[str, float]]:
    """Resources of the top and of each of its direct sub-blocks (own cells plus everything below).

    ``modules`` maps each module name to its cells by type, as ``stat -json`` reports them.
    """
    totals: dict[str, dict[str, float]] = {}

    def total(name: str) -> dict[str, float]:
        if name not in totals:
            cells = modules[name]
            out = primitive_resources(family, cells)
            for cell, count in cells.items():
                if cell in modules:
                    for key, value in total(cell).items():
                        out[key] += count * value
            totals[name] = out
        return totals[name]

    blocks = {"total": total(top)}
    children = {cell: count for cell, count in modules[top].items() if cell in modules}
    for cell, count in sorted(children.items()):
        label = cell.removeprefix(f"{top}.") + (f" x{count}" if count > 1 else "")
        blocks[label] = {key: value * count for key, value in total(cell).items()}
    return {name: {k: int(v) if float(v).is_integer() else v for k, v in res.items()} for name, res in blocks.items()}


def stat_modules(stat: Mapping) -> dict[str, dict[str, int]]:
    """Cells by type of every module in a ``stat -json`` report (names without Yosys' escapes)."""
    return {
        name.lstrip("\\"): {cell.lstrip("\\"): int(n) for cell, n in info.get("num_cells_by_type", {}).items()}
        for name, info in stat["modules"].items()
    }

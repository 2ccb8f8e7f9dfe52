"""Imports flow one way: rtl <- soc <- sim / synth / tb / runtime. A hardware layer never reaches up into
the run manager, the tools, the testbenches or the host runtime, and the runtime uses no testbench
code (checked on every import statement, also inside functions)."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ABOVE = {
    "rtl": {"soc", "sim", "synth", "tb", "boards", "tests", "runtime", "byoc", "deploy", "segment"},
    "soc": {"sim", "synth", "tb", "boards", "tests", "runtime", "byoc", "deploy", "segment"},
    "runtime": {"synth", "tb", "boards", "tests", "byoc"},  # a deployment target: no testbench code in it
    "byoc": {"synth", "tb", "boards", "tests"},  # on top of the runtime; only the CLI's bench imports it
    "deploy": {"synth", "tb", "boards", "tests", "runtime", "byoc", "segment"},  # `pyard deploy`, a tool on sim/soc
    "segment": {"synth", "tb", "boards", "tests", "runtime", "byoc", "deploy"},  # `pyard segment`, on sim/soc
}


def imported_packages(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_layer_imports_nothing_above_it(layer: str) -> None:
    files = sorted((REPO / layer).rglob("*.py"))
    assert files
    wrong = {str(f.relative_to(REPO)): sorted(imported_packages(f) & ABOVE[layer]) for f in files}
    assert {f: pkgs for f, pkgs in wrong.items() if pkgs} == {}

"""The C driver's opcodes and error codes (firmware/driver) are the ISA's (rtl/decode.py, rtl/cmd.py)."""

import re

from rtl.cmd import ERR
from rtl.decode import OP
from rtl.vector.ops import VecOp
from sim.firmware import DRIVER_DIR


def _enum(text: str, prefix: str) -> dict[str, int]:
    """Names and values of the C enum whose members start with ``prefix`` (implicit values follow on)."""
    body = re.search(r"enum\s*\{([^}]*" + prefix + r"[^}]*)\}", text)
    assert body, f"no enum of {prefix}* in the driver header"
    values, nxt = {}, 0
    for item in body.group(1).split(","):
        name, _, value = item.strip().partition("=")
        nxt = int(value, 0) if value.strip() else nxt
        values[name.strip().removeprefix(prefix)] = nxt
        nxt += 1
    return values


def test_opcodes_and_errors_match_the_isa() -> None:
    header = (DRIVER_DIR / "pyard.h").read_text()
    assert _enum(header, "PYARD_OP_") == OP
    assert _enum(header, "PYARD_ERR_") == ERR
    assert _enum(header, "PYARD_VEC_") == {op.name: op.value for op in VecOp}


def test_error_names_match_the_isa() -> None:
    source = (DRIVER_DIR / "pyard.c").read_text()
    names = re.search(r"pyard_error_name[^{]*\{[^{]*\{([^}]*)\}", source).group(1)
    table = re.findall(r'"(\w+)"', names)
    assert table[0] == "OK" and {name: code for code, name in enumerate(table) if code} == ERR

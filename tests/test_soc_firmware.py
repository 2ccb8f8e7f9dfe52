"""Full-system regressions: C programs built with the firmware runtime and driver, run on the SoC in
Verilator (sim.run.run_elf), results read back from memory and checked in Python.

* GEMM through pyard_matmul (int8 and bf16): random inputs generated here and linked into the ELF,
  results compared bit for bit with the tile's NumPy model (tb.tile_tb.gemm_loop_reference).
* Multi-core element-wise kernels with the barrier on 1, 2 and 4 harts; atomics under contention.
* Division by zero (no trap) and every fault reported by the default trap handler, with mepc
  checked against the ELF symbol of the faulting instruction.
* Driver errors: the tile's error codes and the driver's own checks, then a correct run.

Default-suite cost: two SoC builds shared by every test: 4x4-int8 with 2 cores (the build
tests/test_soc_system.py uses) and 4x4-bf16 with 4 cores, which also runs the multi-core, trap and
driver tests; fewer harts run on it with -DPYARD_NHARTS_ACTIVE.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from sim.firmware import build_firmware, c_bytes
from sim.run import run_elf
from sim.toolchain import TOOLCHAINS, load_elf
from soc.config import SocConfig
from tb import stimulus
from tb.tile_cases import padded
from tb.tile_tb import gemm_loop_reference

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "firmware" / "examples"
SOC_TESTS = REPO / "firmware" / "tests" / "soc"
SOC = {"int8": SocConfig.from_name("4x4-int8", cores=2), "bf16": SocConfig.from_name("4x4-bf16", cores=4)}
MULTI = SOC["bf16"]  # the 4-core build
MAX_CYCLES = 3_000_000


def run(cfg: SocConfig, elf: Path, dumps: dict[str, tuple[int, int]] | None = None, max_cycles: int = MAX_CYCLES):
    result = run_elf(cfg, elf, max_cycles=max_cycles, dumps=dumps)
    assert result.exit_code is not None, f"no exit within {max_cycles} cycles; console:\n{result.console}"
    return result


# -- GEMM through pyard_matmul --------------------------------------------------------------------

GEMM_CASES = [
    {"m": 5, "k": 9, "n": 7},
    {"m": 13, "k": 6, "n": 10, "trans_a": 1, "bias": 1, "act": 1},
    {"m": 8, "k": 11, "n": 5, "trans_b": 1, "bias": 2, "out": 0, "act": 1, "scale": "narrow"},
    {"m": 6, "k": 4, "n": 9, "acc_c": 1},
    {"m": 17, "k": 20, "n": 12, "trans_a": 1, "trans_b": 1, "out": 0, "scale": "narrow"},
    {"m": 1, "k": 1, "n": 1, "bias": 2},
]
# A scale that exercises the read-out: a rounding shift of 6, or ×0.3 in fp32.
NARROW_SCALE = {"int32": 6, "fp32": 0x3E99999A}


def _gemm_case(cfg, case: dict, rng: np.random.Generator) -> dict:
    """Operands as they sit in memory (padded rows), the expected C, and the C arguments."""
    acc = cfg.acc_dtype
    case = {"trans_a": 0, "trans_b": 0, "bias": 0, "acc_c": 0, "act": 0, "out": 1} | case
    case["scale"] = NARROW_SCALE[acc] if case.get("scale") == "narrow" else (0 if acc == "int32" else 0x3F800000)
    m, k, n = case["m"], case["k"], case["n"]
    in_t = np.uint8 if cfg.dtype == "int8" else np.uint16
    acc_t = np.uint32 if cfg.acc_bits == 32 else np.uint16
    out_t = acc_t if case["out"] == 1 else in_t
    a = stimulus.inputs(cfg, rng, (m, k), special=0.0)
    b = stimulus.inputs(cfg, rng, (k, n), special=0.0)
    ld = {"a": (m if case["trans_a"] else k) + 3, "b": (k if case["trans_b"] else n) + 5, "c": n + 2, "d": n + 1}
    mem = {
        "a": padded(a.T if case["trans_a"] else a, ld["a"]).astype(in_t).tobytes(),
        "b": padded(b.T if case["trans_b"] else b, ld["b"]).astype(in_t).tobytes(),
    }
    init = None
    if case["acc_c"]:
        init = stimulus.accumulators(cfg, rng, (m, n))
        mem["c"] = padded(init, ld["c"]).astype(acc_t).tobytes()
    elif case["bias"]:
        init = stimulus.accumulators(cfg, rng, (m if case["bias"] == 1 else 1, n))
        mem["d"] = padded(init, ld["d"]).astype(acc_t).tobytes()
    want = gemm_loop_reference(cfg, a, b, init, case).astype(out_t)
    c_len = m * ld["c"] * np.dtype(out_t).itemsize
    return {"case": case, "ld": ld, "mem": mem, "want": want, "out_t": out_t, "c_len": c_len}


def _gemm_header(cases: list[dict]) -> str:
    """gemm_cases.h: initial contents in .rodata, buffers in main memory, and the case table."""
    lines = []
    for i, g in enumerate(cases):
        sizes = {"c": g["c_len"]} | {key: len(data) for key, data in g["mem"].items()}
        for key, size in sizes.items():
            lines.append(f"PYARD_MEM uint8_t case{i}_{key}[{size + (-size % 4)}];")
            if key in g["mem"]:
                lines.append(c_bytes(f"case{i}_{key}_init", g["mem"][key]))

    def buf(i: int, g: dict, key: str) -> str:
        if key == "c" or key in g["mem"]:
            src = f"case{i}_{key}_init" if key in g["mem"] else "NULL"
            return f"{{{src}, case{i}_{key}, sizeof case{i}_{key}}}"
        return "{NULL, NULL, 0}"

    rows = []
    for i, g in enumerate(cases):
        c, ld = g["case"], g["ld"]
        rows.append(
            f"  {{{c['m']}, {c['k']}, {c['n']}, {buf(i, g, 'a')}, {buf(i, g, 'b')}, {buf(i, g, 'c')}, "
            f"{buf(i, g, 'd')}, {ld['a']}, {ld['b']}, {ld['c']}, {ld['d']}, {c['scale']}u, {c['act']}, {c['bias']}, "
            f"{c['acc_c']}, {c['trans_a']}, {c['trans_b']}, {c['out']}}},"
        )
    return "\n".join([*lines, f"#define NCASES {len(cases)}", "static const gemm_case_t cases[] = {", *rows, "};", ""])


def check_gemm(cfg: SocConfig, cases: list[dict], tmp_path: Path, seed: int, toolchain: str | None = None) -> None:
    rng = np.random.default_rng(seed)
    gen = [_gemm_case(cfg.accel, case, rng) for case in cases]
    (tmp_path / "gemm_cases.h").write_text(_gemm_header(gen))
    source, defines = SOC_TESTS / "gemm_cases.c", {"PYARD_NHARTS_ACTIVE": 1}
    elf = build_firmware(cfg, [source], include_dirs=[tmp_path], defines=defines, toolchain=toolchain)
    symbols = load_elf(elf).symbols
    dumps = {f"c{i}": (symbols[f"case{i}_c"], g["c_len"]) for i, g in enumerate(gen)}
    result = run(cfg, elf, dumps)
    assert result.exit_code == 0, result.console
    for i, g in enumerate(gen):
        m, n = g["case"]["m"], g["case"]["n"]
        got = np.frombuffer(result.dumps[f"c{i}"], dtype=g["out_t"]).reshape(m, g["ld"]["c"])[:, :n]
        bad = np.argwhere(got != g["want"])
        assert not bad.size, (
            f"case {i} {g['case']}: {len(bad)} wrong, first at {tuple(bad[0])}: "
            f"{got[tuple(bad[0])]:#x} != {g['want'][tuple(bad[0])]:#x}"
        )


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_gemm_matmul(dtype: str, toolchain: str, tmp_path: Path) -> None:
    """With both compilers (riscv64-unknown-elf-gcc and zig's clang)."""
    check_gemm(SOC[dtype], GEMM_CASES, tmp_path, seed=40 + len(dtype), toolchain=toolchain)


# At PYARD_SCALE=small (the CI) int8 only: the SoC around the tile does not depend on the dtype, the
# 8x8-bf16 tile has its own slow test (test_tile.py, LARGE_HERE), and its SoC build is the slow
# tier's longest step (over 5 minutes cold).
DTYPES_8X8 = ["int8"] if os.environ.get("PYARD_SCALE") == "small" else ["int8", "bf16"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES_8X8)
def test_gemm_matmul_8x8(dtype: str, tmp_path: Path, scale: str) -> None:
    cfg = SocConfig.from_name(f"8x8-{dtype}", cores=1, dram_kib=256)
    big = {"m": 40, "k": 50, "n": 36} if scale == "small" else {"m": 72, "k": 90, "n": 60}
    cases = [*GEMM_CASES, big, big | {"trans_b": 1, "bias": 1, "act": 1, "out": 0, "scale": "narrow"}]
    check_gemm(cfg, cases, tmp_path, seed=80)


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_gemm_example(dtype: str) -> None:
    """The README example checks itself against its own C reference and exits non-zero on a mismatch."""
    result = run(SOC[dtype], build_firmware(SOC[dtype], [EXAMPLES / "gemm.c"]))
    assert result.exit_code == 0, result.console
    assert re.search(r"gemm 20x36x28 \w+ on 4x4-\w+: ok, \d+ cycles", result.console), result.console


# -- multi-core ----------------------------------------------------------------------------------

VEC_LEN = 2048


def vecadd_cycles(cfg: SocConfig, harts: int) -> int:
    """Runs the vecadd example on `harts` harts, checks every element, returns the kernel's cycles."""
    elf = build_firmware(cfg, [EXAMPLES / "vecadd.c"], defines={"PYARD_NHARTS_ACTIVE": harts, "LEN": VEC_LEN})
    sym = load_elf(elf).symbols
    result = run(cfg, elf, {name: (sym[name], 4 * VEC_LEN) for name in ("va", "vb", "vc", "vd")})
    assert result.exit_code == 0, result.console
    i = np.arange(VEC_LEN, dtype=np.int64)
    a, b, d0 = 7 * i - 3000, 11 - 5 * i, i ^ 0x155
    got = {name: np.frombuffer(data, dtype=np.int32).astype(np.int64) for name, data in result.dumps.items()}
    np.testing.assert_array_equal(got["va"], a)
    np.testing.assert_array_equal(got["vb"], b)
    np.testing.assert_array_equal(got["vc"], a + b)
    np.testing.assert_array_equal(got["vd"], (d0 + a * b).astype(np.int32))
    match = re.search(rf"vecadd: {harts} harts, {VEC_LEN} elements, ok, kernel (\d+) cycles", result.console)
    assert match, result.console
    return int(match.group(1))


def test_vecadd_multicore() -> None:
    """1, 2 and 4 harts give the same exact result; more harts are faster (speedup printed)."""
    cycles = {n: vecadd_cycles(MULTI, n) for n in (1, 2, 4)}
    speedup = {n: cycles[1] / cycles[n] for n in cycles}
    print(f"vecadd kernel cycles {cycles}, speedup {speedup}")
    assert speedup[2] > 1.5 and speedup[4] > 3.0, f"cycles {cycles}"


@pytest.mark.parametrize("harts", [2, 4])
def test_atomics_contention(harts: int) -> None:
    iters = 300
    elf = build_firmware(MULTI, [EXAMPLES / "atomics.c"], defines={"PYARD_NHARTS_ACTIVE": harts, "ITERS": iters})
    sym = load_elf(elf).symbols
    names = ("amo_counter", "lrsc_counter", "locked_counter")
    result = run(MULTI, elf, {name: (sym[name], 4) for name in names})
    assert result.exit_code == 0, result.console
    for name in names:
        assert int.from_bytes(result.dumps[name], "little") == harts * iters, (name, result.console)
    assert re.search(rf"atomics: {harts} of {MULTI.cores} harts x {iters}: .*: ok", result.console), result.console


# -- traps ---------------------------------------------------------------------------------------

UNMAPPED = 0x3000_0000
TRAP_RE = re.compile(
    r"\*\*\* trap on hart 0: mcause=0x([0-9a-f]{8}) \(([^)]*)\) mepc=0x([0-9a-f]{8}) mtval=0x([0-9a-f]{8})"
)
# case number (firmware/tests/soc/traps.c) -> mcause, symbol or address of mepc, mtval
TRAPS = {
    "load": (1, 5, "fault_load", UNMAPPED),
    "store": (2, 7, "fault_store", "dram_end"),
    "fetch": (3, 1, UNMAPPED, UNMAPPED),
    "illegal": (4, 2, "fault_illegal", 0xDEAD007F),
    "itcm_amo": (5, 7, "fault_itcm", 0x40),
    "ecall": (6, 11, "fault_ecall", 0),
    "bad_sp": (7, 7, "fault_bad_sp", UNMAPPED - 4),
}
NESTED_RE = re.compile(
    r"\*\*\* nested trap on hart 0 \(a trap inside the trap handler\): mcause=0x([0-9a-f]{8}) \(([^)]*)\) "
    r"mepc=0x([0-9a-f]{8}) mtval=0x([0-9a-f]{8})"
)


def test_division_by_zero() -> None:
    cfg = MULTI
    elf = build_firmware(cfg, [SOC_TESTS / "traps.c"], defines={"TRAP_CASE": 0, "PYARD_NHARTS_ACTIVE": 1})
    result = run(cfg, elf)
    assert result.exit_code == 0, result.console
    # RISC-V: x/0 = -1 (all ones unsigned), x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0.
    assert "div -1 -1 rem 7 -7 divu 4294967295 remu 7 ovf -2147483648 0" in result.console, result.console


@pytest.mark.parametrize("name", list(TRAPS))
def test_trap_reported(name: str) -> None:
    cfg = MULTI
    case, cause, epc, tval = TRAPS[name]
    elf = build_firmware(cfg, [SOC_TESTS / "traps.c"], defines={"TRAP_CASE": case, "PYARD_NHARTS_ACTIVE": 1})
    symbols = load_elf(elf).symbols
    epc = symbols[epc] if isinstance(epc, str) else epc
    tval = 0x1000_0000 + cfg.dram_bytes if tval == "dram_end" else tval
    result = run(cfg, elf)
    match = TRAP_RE.search(result.console)
    assert match, result.console
    assert [int(match.group(g), 16) for g in (1, 3, 4)] == [cause, epc, tval], result.console
    assert result.exit_code == 128 + cause


def test_self_modifying_code() -> None:
    """Stores to the ITCM through the data port (words and bytes), then fence.i: fetch runs the new
    instructions, also the one it had already read ahead of the fence.i."""
    cfg = MULTI
    elf = build_firmware(cfg, [SOC_TESTS / "smc.c"], defines={"PYARD_NHARTS_ACTIVE": 1})
    result = run(cfg, elf)
    assert result.exit_code == 0, result.console
    assert "smc 1 42 5 11 12 00500513" in result.console, result.console


def test_nested_trap_reported() -> None:
    """A trap handler that faults: the second trap is reported as nested (where the handler
    faulted) and the run ends at once with exit code 255, instead of the handler trapping on
    itself until the cycle budget runs out."""
    cfg = MULTI
    elf = build_firmware(cfg, [SOC_TESTS / "traps.c"], defines={"TRAP_CASE": 8, "PYARD_NHARTS_ACTIVE": 1})
    result = run(cfg, elf, max_cycles=200_000)
    match = NESTED_RE.search(result.console)
    assert match, result.console
    fault = load_elf(elf).symbols["fault_in_handler"]
    assert [int(match.group(g), 16) for g in (1, 3, 4)] == [5, fault, UNMAPPED], result.console
    assert result.exit_code == 255


# -- driver errors -------------------------------------------------------------------------------


def test_driver_errors() -> None:
    cfg = MULTI
    result = run(cfg, build_firmware(cfg, [SOC_TESTS / "driver_errors.c"], defines={"PYARD_NHARTS_ACTIVE": 1}))
    out = result.console
    assert re.search(r"opcode 0x7e: decode unit reported BAD_OPCODE \(0x01\) on command #0\n", out), out
    assert "opcode 0x7e returned -1\n" in out
    assert re.search(r"zero M: \w+ unit reported ZERO_DIM \(0x02\) on command #\d+\n", out), out
    assert re.search(r"accumulate into narrow C: \w+ unit reported BAD_SHAPE \(0x0b\)", out), out
    assert re.search(r"A in data RAM: A at 0x1[0-9a-f]{7} is not in main memory", out), out
    assert "A in data RAM returned -101\n" in out
    assert "M too large: M = 70000 is invalid: allowed 1 to 65535\n" in out
    assert re.search(r"resident B at row 0: \w+ unit reported SP_RANGE \(0x04\) on command #\d+\n", out), out
    assert "resident B transposed: transpose_b = 1 is invalid: allowed false with b_in_sp\n" in out
    assert "identity GEMM: ok\nidentity GEMM returned 0\nidentity GEMM result ok\n" in out
    assert result.exit_code == 0, out

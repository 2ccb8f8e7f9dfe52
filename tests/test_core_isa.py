"""Self-checking assembly tests (firmware/tests/isa) run on the core, with a one-cycle memory and
with random back-pressure and response latency on both bus ports."""

from pathlib import Path

import pytest

from sim.toolchain import TOOLCHAINS, build, find_toolchain, load_elf
from soc.rv32 import CoreConfig
from tb.core_harness import CycleBudgetExceeded, HarnessConfig, describe_exit, run_program

ISA_DIR = Path(__file__).resolve().parent.parent / "firmware" / "tests" / "isa"
ISA_TESTS = sorted(p.stem for p in ISA_DIR.glob("*.S"))
BUDGET = 20_000


def _image(name: str, flags: tuple[str, ...] = ("-O2",), toolchain: str | None = None) -> list[int]:
    fw = build([ISA_DIR / f"{name}.S"], flags=flags, toolchain=find_toolchain(toolchain))
    return load_elf(fw.elf).words(0, 64 * 1024)


def test_all_isa_tests_found() -> None:
    assert set(ISA_TESTS) >= {"alu", "branch", "mem", "muldiv", "atomic", "csr", "traps", "irq"}


@pytest.mark.parametrize("toolchain", TOOLCHAINS)  # both assemblers take every test
@pytest.mark.parametrize("stall", [False, True], ids=["fast", "stall"])
@pytest.mark.parametrize("name", ISA_TESTS)
def test_isa(name: str, stall: bool, toolchain: str) -> None:
    result = run_program(_image(name, toolchain=toolchain), HarnessConfig(stall=stall), budget=BUDGET)
    assert result.exit_code == 1, f"{name}: {describe_exit(result.exit_code)}"


def test_mhartid_comes_from_config() -> None:
    cfg = HarnessConfig(core=CoreConfig(hart_id=5))
    result = run_program(_image("csr", ("-O2", "-DHART_ID=5")), cfg, budget=BUDGET)
    assert result.exit_code == 1, describe_exit(result.exit_code)


def test_wrong_hart_id_is_detected() -> None:
    # The csr test must notice a mhartid that differs from what it was built to expect.
    result = run_program(_image("csr", ("-O2", "-DHART_ID=5")), HarnessConfig(), budget=BUDGET)
    assert result.exit_code == (2 << 1) | 1, describe_exit(result.exit_code)


def test_cycle_budget_stops_a_hung_program() -> None:
    loop = [0x0000006F]  # jal x0, 0: spins forever without writing EXIT
    with pytest.raises(CycleBudgetExceeded, match=r"no EXIT write within 300 cycles .*pc 0x00000000"):
        run_program(loop, budget=300)


@pytest.mark.parametrize("depth", [1, 4])
@pytest.mark.parametrize("name", ["branch", "traps"])
def test_other_fetch_depths(name: str, depth: int) -> None:
    cfg = HarnessConfig(stall=True, core=CoreConfig(fetch_depth=depth))
    result = run_program(_image(name), cfg, budget=BUDGET)
    assert result.exit_code == 1, f"{name}: {describe_exit(result.exit_code)}"


@pytest.mark.parametrize(("field", "value"), [("hart_id", -1), ("reset_pc", 2), ("fetch_depth", 0)])
def test_core_config_is_validated(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=rf"^{field} = {value} is invalid: allowed "):
        CoreConfig(**{field: value})

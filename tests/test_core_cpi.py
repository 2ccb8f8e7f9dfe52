"""CPI of the core on a compute-bound C integer matmul with a one-cycle memory (target <= 1.5)."""

from pathlib import Path

import numpy as np
import pytest

from sim.toolchain import build, load_elf
from tb.core_harness import run_program

C_DIR = Path(__file__).resolve().parent.parent / "firmware" / "tests" / "c"
N = 8


@pytest.mark.parametrize("opt", ["-O2 -fno-unroll-loops", "-O2"])
def test_matmul_cpi(opt: str) -> None:
    # Without unrolling the inner loop keeps a taken branch per MAC; -O2 alone unrolls it.
    elf = load_elf(build([C_DIR / "crt0.S", C_DIR / "matmul.c"], flags=tuple(opt.split())).elf)
    sym = elf.symbols
    c_words = tuple(sym["C"] + 4 * n for n in range(N * N))
    result = run_program(
        elf.words(0, 64 * 1024), budget=40_000, read_words=(sym["kernel_cycles"], sym["kernel_instret"], *c_words)
    )
    assert result.exit_code == 1
    i, j = np.indices((N, N))
    a = ((i * 7 + j * 3) & 31) - 16
    b = ((i * 5 + j * 11) & 15) - 9
    got = np.array([result.memory[w] for w in c_words], dtype=np.uint32).view(np.int32).reshape(N, N)
    np.testing.assert_array_equal(got, a @ b)
    cycles, instret = result.memory[sym["kernel_cycles"]], result.memory[sym["kernel_instret"]]
    assert instret > 2 * N**3  # the kernel really ran (at least a mul and an add per MAC)
    cpi = cycles / instret
    print(f"matmul {N}x{N} {opt}: {cycles} cycles, {instret} instructions, CPI {cpi:.3f}")
    assert cpi <= 1.5

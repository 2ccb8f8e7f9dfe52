"""The SoC in Verilator through the run manager: atomics across harts, traps on unmapped addresses,
the timer and software interrupts, MMIO, main memory, exit codes, the cycle budget and the console.

Every test shares one build (4x4-int8, 2 harts), made once and cached under build/sim/, but the
traced one, which is a build of its own anyway and so uses the smallest SoC.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from sim.cli import main as pyard
from sim.firmware import build_firmware
from sim.run import BUDGET_EXIT_STATUS, RunResult, run_elf
from sim.toolchain import load_elf
from soc.config import SocConfig
from soc.memmap import ACCEL_BASE, DRAM_BASE, MEM_BASE, MMIO_BASE, mmio_addr
from tests.test_boards import SMALL_SOC

CFG = SocConfig.from_name("4x4-int8", cores=2)
# A 1x1 tile with small memories and one hart: tracing does not depend on the SoC's size, and this
# one compiles in a fraction of the time.
TRACED = SMALL_SOC
ITERS_AMO, ITERS_LRSC = 1000, 400


def _build(tmp_path: Path, name: str, source: str, cfg: SocConfig = CFG, **defines: object) -> Path:
    path = tmp_path / f"{name}.c"
    path.write_text(source)
    return build_firmware(cfg, [path], defines=defines or None)


def _words(result: RunResult, name: str) -> list[int]:
    data = result.dumps[name]
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def _run(elf: Path, symbols: dict[str, int], max_cycles: int = 2_000_000, cfg: SocConfig = CFG, **kw) -> RunResult:
    table = load_elf(elf).symbols
    dumps = {name: (table[name], size) for name, size in symbols.items()}
    return run_elf(cfg, elf, max_cycles, dumps=dumps, **kw)


ATOMICS = r"""
#include "pyard.h"
volatile uint32_t amo_counter, lrsc_counter, conflicts[256];
uint32_t amo_old[16], amo_final;

static uint32_t lrsc_increment(volatile uint32_t *p) {
  uint32_t value, fail;
  __asm__ volatile("1: lr.w %0, (%2)\n addi %0, %0, 1\n sc.w %1, %0, (%2)\n bnez %1, 1b"
                   : "=&r"(value), "=&r"(fail) : "r"(p) : "memory");
  return value;
}
#define AMO(op, p, v) \
  ({ uint32_t r_; __asm__ volatile(op " %0, %2, (%1)" : "=r"(r_) : "r"(p), "r"(v) : "memory"); r_; })

int hart_main(unsigned hart, unsigned nharts) {
  pyard_barrier();
  for (int i = 0; i < ITERS_AMO; i++) __atomic_fetch_add(&amo_counter, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < ITERS_LRSC; i++) lrsc_increment(&lrsc_counter);
  /* Both harts store to the same banks in the same cycles: word i*banks is always bank 0. */
  for (int i = hart; i < 128; i += nharts) conflicts[i * 2] = 0x1000 * hart + i;
  pyard_barrier();
  if (hart != 0) return 0;
  volatile uint32_t *w = &amo_final;
  *w = 0x80000010u;
  int n = 0;
  amo_old[n++] = AMO("amoadd.w", w, 0x7ffffff5u);
  amo_old[n++] = AMO("amoxor.w", w, 0x0f0f0f0fu);
  amo_old[n++] = AMO("amoand.w", w, 0xfff0ff0fu);
  amo_old[n++] = AMO("amoor.w", w, 0x00a00000u);
  amo_old[n++] = AMO("amomin.w", w, 0x80000001u);
  amo_old[n++] = AMO("amomax.w", w, 0x00000005u);
  amo_old[n++] = AMO("amominu.w", w, 0x00000003u);
  amo_old[n++] = AMO("amomaxu.w", w, 0xfffffff0u);
  amo_old[n++] = AMO("amoswap.w", w, 0x12345678u);
  /* A store by the same hart between LR and SC breaks the reservation: the SC must fail. */
  uint32_t v, fail;
  __asm__ volatile("lr.w %0, (%2)\n sw %0, 0(%2)\n sc.w %1, %0, (%2)" : "=&r"(v), "=&r"(fail) : "r"(w) : "memory");
  amo_old[n++] = fail;
  __asm__ volatile("lr.w %0, (%2)\n sc.w %1, %0, (%2)" : "=&r"(v), "=&r"(fail) : "r"(w) : "memory");
  amo_old[n++] = fail;
  return 0;
}
"""


def _amo_reference() -> tuple[list[int], int]:
    def signed(x: int) -> int:
        return x - (1 << 32) if x & 0x8000_0000 else x

    ops = [
        ("add", 0x7FFFFFF5, lambda a, b: (a + b) & 0xFFFF_FFFF),
        ("xor", 0x0F0F0F0F, lambda a, b: a ^ b),
        ("and", 0xFFF0FF0F, lambda a, b: a & b),
        ("or", 0x00A00000, lambda a, b: a | b),
        ("min", 0x80000001, lambda a, b: a if signed(a) < signed(b) else b),
        ("max", 0x00000005, lambda a, b: a if signed(a) > signed(b) else b),
        ("minu", 0x00000003, min),
        ("maxu", 0xFFFFFFF0, max),
        ("swap", 0x12345678, lambda a, b: b),
    ]
    value, olds = 0x80000010, []
    for _, operand, op in ops:
        olds.append(value)
        value = op(value, operand)
    return olds, value


def test_atomics_are_atomic_across_harts_and_bank_conflicts_lose_nothing(tmp_path) -> None:
    elf = _build(tmp_path, "atomics", ATOMICS, ITERS_AMO=ITERS_AMO, ITERS_LRSC=ITERS_LRSC)
    symbols = {"amo_counter": 4, "lrsc_counter": 4, "conflicts": 1024, "amo_old": 64, "amo_final": 4}
    result = _run(elf, symbols)
    assert result.exit_code == 0, result.console
    assert _words(result, "amo_counter") == [CFG.cores * ITERS_AMO]
    assert _words(result, "lrsc_counter") == [CFG.cores * ITERS_LRSC]
    expected = [0] * 256
    for i in range(128):
        expected[2 * i] = 0x1000 * (i % CFG.cores) + i
    assert _words(result, "conflicts") == expected
    olds, final = _amo_reference()
    assert _words(result, "amo_old")[:11] == [*olds, 1, 0]  # then: SC after a store fails, a clean SC succeeds
    assert _words(result, "amo_final") == [final]


TRAPS = r"""
#include "pyard.h"
/* Each case records (mcause, mtval, mepc) of the trap it raises; the handler resumes after the
 * faulting instruction, or at the caller for a fetch fault (a call through a bad pointer). */
volatile uint32_t rec[4];
uint32_t results[16][3];
volatile uint32_t irq_seen;
void trap_entry(void);
__asm__(".align 2\n.globl trap_entry\ntrap_entry:\n"
        " addi sp, sp, -16\n sw t0, 0(sp)\n sw t1, 4(sp)\n la t1, rec\n"
        " csrr t0, mcause\n sw t0, 0(t1)\n csrr t0, mtval\n sw t0, 4(t1)\n csrr t0, mepc\n sw t0, 8(t1)\n"
        " lw t0, 12(t1)\n addi t0, t0, 1\n sw t0, 12(t1)\n"
        " csrr t0, mcause\n bltz t0, 3f\n addi t0, t0, -1\n bnez t0, 1f\n csrw mepc, ra\n j 2f\n"
        "1: csrr t0, mepc\n addi t0, t0, 4\n csrw mepc, t0\n j 2f\n"
        "3: csrw mie, zero\n"
        "2: lw t0, 0(sp)\n lw t1, 4(sp)\n addi sp, sp, 16\n mret\n");

static void save(int i) { results[i][0] = rec[0]; results[i][1] = rec[1]; results[i][2] = rec[3]; }
#define LOAD(a) (*(volatile uint32_t *)(a))

int main(void) {
  __asm__ volatile("csrw mtvec, %0" :: "r"(trap_entry));
  uint32_t sink = 0;
  sink += LOAD(0x30000000u); save(0);                          /* unmapped */
  __atomic_fetch_add((volatile uint32_t *)(PYARD_ITCM_BASE + 0x100), 1, __ATOMIC_RELAXED); save(1);  /* AMO: ITCM */
  sink += LOAD(PYARD_DRAM_BASE + PYARD_DRAM_SIZE); save(2);    /* past the data RAM */
  sink += LOAD(PYARD_ITCM_BASE + PYARD_ITCM_SIZE); save(3);    /* past the ITCM */
  sink += LOAD(PYARD_MEM_BASE + PYARD_MEM_SIZE); save(4);      /* past main memory */
  sink += LOAD(PYARD_MMIO_BASE + 0xC); save(5);                /* reserved MMIO register */
  __atomic_fetch_add((volatile uint32_t *)PYARD_MEM_BASE, 1, __ATOMIC_RELAXED); save(6);  /* AMO: no atomics there */
  __atomic_fetch_add((volatile uint32_t *)PYARD_MTIME_ADDR, 1, __ATOMIC_RELAXED); save(7);
  ((void (*)(void))PYARD_DRAM_BASE)(); save(8);                /* fetch outside the ITCM */
  results[9][0] = LOAD(PYARD_ACCEL_BASE);                      /* the tile's ID register */
  results[9][1] = LOAD(PYARD_NHARTS_ADDR);
  /* Timer interrupt: MTIMECMP = now + 400; the handler disables interrupts when it fires. */
  uint32_t count = rec[3];
  uint64_t due = pyard_mtime() + 400;
  LOAD(PYARD_MTIMECMPH_HART_ADDR(0)) = 0xffffffffu;
  LOAD(PYARD_MTIMECMP_HART_ADDR(0)) = (uint32_t)due;
  LOAD(PYARD_MTIMECMPH_HART_ADDR(0)) = (uint32_t)(due >> 32);
  __asm__ volatile("csrw mie, %0\n csrsi mstatus, 8" :: "r"(1u << 7));
  while (rec[3] == count) {}
  uint64_t after = pyard_mtime();
  save(10);
  results[10][2] = after >= due;
  /* Software interrupt through MSIP. */
  count = rec[3];
  __asm__ volatile("csrw mie, %0" :: "r"(1u << 3));
  LOAD(PYARD_MSIP_HART_ADDR(0)) = 1;
  while (rec[3] == count) {}
  LOAD(PYARD_MSIP_HART_ADDR(0)) = 0;
  save(11);
  return (int)(sink & 0) + 5;
}
"""


def test_unmapped_accesses_fault_and_interrupts_arrive(tmp_path) -> None:
    elf = _build(tmp_path, "traps", TRAPS)
    result = _run(elf, {"results": 16 * 12})
    assert result.exit_code == 5, result.console
    rows = [tuple(_words(result, "results")[3 * i : 3 * i + 3]) for i in range(12)]
    load_fault, store_fault, fetch_fault = 5, 7, 1
    expected = [
        (load_fault, 0x3000_0000),
        (store_fault, 0x100),
        (load_fault, DRAM_BASE + CFG.dram_bytes),
        (load_fault, CFG.itcm_bytes),
        (load_fault, MEM_BASE + CFG.mem_bytes),
        (load_fault, MMIO_BASE + 0xC),
        (store_fault, MEM_BASE),
        (store_fault, mmio_addr("MTIME")),
        (fetch_fault, DRAM_BASE),
    ]
    for n, (cause, tval) in enumerate(expected):
        assert rows[n][:2] == (cause, tval), f"case {n}"
        assert rows[n][2] == n + 1, f"case {n}: one trap each"
    assert rows[9][:2] == (0x5059_4144, CFG.cores)  # "PYAD" and NHARTS
    assert rows[10] == (0x8000_0007, 0, 1)  # machine timer interrupt, not before MTIMECMP
    assert rows[11][0] == 0x8000_0003  # machine software interrupt


MEMORY = r"""
#include "pyard.h"
__attribute__((section(".mem"))) uint32_t big[1024];
uint32_t small[64];
int main(void) {
  for (int i = 0; i < 1024; i++) big[i] = i * 2654435761u;
  for (int i = 0; i < 64; i++) small[i] = big[i * 16] ^ 0x5a5a5a5au;
  printf("memory ok\n");
  return 0;
}
"""


def test_main_memory_and_data_ram_dumps(tmp_path) -> None:
    elf = _build(tmp_path, "memory", MEMORY)
    result = _run(elf, {"big": 4096, "small": 256})
    assert result.exit_code == 0 and result.console == "memory ok\n"
    big = [(i * 2654435761) & 0xFFFF_FFFF for i in range(1024)]
    assert _words(result, "big") == big
    assert _words(result, "small") == [big[i * 16] ^ 0x5A5A5A5A for i in range(64)]
    assert result.counters["macs"] == 0 and result.counters["dma_rd_bytes"] == 0
    assert all(n > 0 for n in result.instret) and result.cycles > 0


SPIN = r"""
#include "pyard.h"
int main(void) {
  printf("first\n");
  for (volatile uint32_t i = 0; i < SPIN_ITERS; i++) {}
  printf("second\n");
  return EXIT_CODE;
}
"""


def test_console_streams_while_the_program_runs(tmp_path) -> None:
    elf = _build(tmp_path, "spin", SPIN, SPIN_ITERS=400_000, EXIT_CODE=3)
    seen: list[tuple[float, str]] = []  # (arrival time, console so far)

    def receive(text: str) -> None:
        seen.append((time.monotonic(), (seen[-1][1] if seen else "") + text))

    result = _run(elf, {}, max_cycles=20_000_000, on_console=receive)
    assert result.exit_code == 3 and result.exit_status == 3
    assert result.console == "first\nsecond\n"
    first = next(t for t, text in seen if "first\n" in text)
    second = next(t for t, text in seen if "second\n" in text)
    assert second - first > 0.2  # "first" arrived while the simulator was still running


def test_cycle_budget_stops_a_runaway_program(tmp_path, capsys) -> None:
    elf = _build(tmp_path, "forever", SPIN, SPIN_ITERS=0xFFFFFFFF, EXIT_CODE=0)
    result = _run(elf, {}, max_cycles=30_000)
    assert result.exit_code is None and result.cycles == 30_000 and result.console == "first\n"
    assert result.exit_status == BUDGET_EXIT_STATUS
    status = pyard(["run", "--config", "4x4-int8", "--cores", "2", "--max-cycles", "30000", str(elf)])
    captured = capsys.readouterr()
    assert status == BUDGET_EXIT_STATUS
    assert "no EXIT within 30000 cycles (--max-cycles)" in captured.err
    assert captured.out == "first\n"


def test_pyard_run_exit_status_is_the_programs_exit_code(tmp_path, capsys) -> None:
    elf = _build(tmp_path, "exit", SPIN, SPIN_ITERS=10, EXIT_CODE=42)
    assert pyard(["run", "--config", "4x4-int8", "--cores", "2", str(elf)]) == 42
    captured = capsys.readouterr()
    assert captured.out == "first\nsecond\n"
    assert "hart 0: instructions" in captured.err and "CPI" in captured.err


def test_trace_records_the_run(tmp_path) -> None:
    """``--trace`` writes an FST of the run (a separate traced build); read back with pywellen, its
    console and exit ports tell the same story as the run's result."""
    import pywellen

    elf = _build(tmp_path, "traced", SPIN, TRACED, SPIN_ITERS=10, EXIT_CODE=42)
    fst = tmp_path / "run.fst"
    result = _run(elf, {}, cfg=TRACED, trace=fst)
    assert result.exit_code == 42 and result.console == "first\nsecond\n"
    wave = pywellen.Waveform(str(fst))
    ports = {v.full_name: v.signal for v in wave.all_vars() if v.full_name.count(".") == 1}
    clk, console_valid, console_data = ports["TOP.clk"], ports["TOP.console_valid"], ports["TOP.console_data"]
    exit_valid, exit_code = ports["TOP.exit_valid"], ports["TOP.exit_code"]
    # The harness dumps each cycle at t = 10n (clock low) and 10n + 5 (after the rising edge).
    console, t = bytearray(), 5
    while not exit_valid.value_at(t):
        assert clk.value_at(t) == 1 and clk.value_at(t - 5) == 0, t
        if console_valid.value_at(t):
            console.append(console_data.value_at(t))
        t += 10
    assert console.decode() == result.console
    assert exit_code.value_at(t) == 42


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cores", "17"], "cores = 17 is invalid"),
        (["--mem-latency", "1"], "mem_latency = 1 is invalid"),
        (["--cores", "2", "missing.c"], "program = 'missing.c' is invalid"),
    ],
)
def test_pyard_run_refuses_bad_input_in_one_line(args, message, capsys) -> None:
    argv = ["run", "--config", "4x4-int8", *args]
    if not any(a.endswith(".c") for a in args):
        argv.append(__file__)
    assert pyard(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_accelerator_registers_are_reachable(tmp_path) -> None:
    elf = _build(tmp_path, "exit0", SPIN, SPIN_ITERS=1, EXIT_CODE=0)
    result = run_elf(CFG, elf, 100_000, dumps={"id": (ACCEL_BASE, 8)})
    word0, hwcfg = struct.unpack("<II", result.dumps["id"])
    assert word0 == 0x5059_4144
    assert (hwcfg & 0xFF, hwcfg >> 8 & 0xFF) == (CFG.accel.rows, CFG.accel.cols)


TILE_ERROR = r"""
#include <stdint.h>
#include "pyard_soc.h"
int main(void) {
    volatile uint32_t *tile = (volatile uint32_t *)PYARD_ACCEL_BASE;
    tile[0x40 / 4] = BAD_OPCODE_WORD; /* CMD0 */
    tile[0x80 / 4] = 1;               /* CMD_PUSH */
    while (!(tile[0x08 / 4] & 4)) {   /* until STATUS.error */
    }
    return 0; /* exits without reading or clearing the error */
}
"""


def test_pyard_run_reports_a_tile_error_left_pending(tmp_path, capsys) -> None:
    from rtl.cmd import ERR

    opcode = 0xFE  # no command has it (docs/isa.md)
    elf = _build(tmp_path, "tile_error", TILE_ERROR, BAD_OPCODE_WORD=opcode)
    assert pyard(["run", "--config", "4x4-int8", "--cores", "2", str(elf)]) == 0
    err = capsys.readouterr().err
    assert f"still reports an error at exit: BAD_OPCODE (error code {ERR['BAD_OPCODE']:#04x}" in err, err
    assert "command #0" in err
    clean = _build(tmp_path, "exit", SPIN, SPIN_ITERS=10, EXIT_CODE=0)
    assert pyard(["run", "--config", "4x4-int8", "--cores", "2", str(clean)]) == 0
    assert "still reports an error" not in capsys.readouterr().err


@pytest.mark.parametrize("where", ["missing/dir/run.fst", "."])
def test_pyard_run_refuses_a_trace_it_cannot_write_before_simulating(where, tmp_path, capsys) -> None:
    elf = _build(tmp_path, "exit", SPIN, SPIN_ITERS=10, EXIT_CODE=0)
    assert pyard(["run", "--config", "4x4-int8", "--cores", "2", "--trace", str(tmp_path / where), str(elf)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    assert "argument --trace:" in captured.err and captured.err.count("\n") == 1, captured.err

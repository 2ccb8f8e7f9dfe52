"""The firmware runtime without a Verilator build: programs built by sim.firmware for a SoC config,
run on the Python ISS (tb/rv32_iss.py) extended with the SoC's memory map and console. Checks
printf against Python's own printf-style formatting, the string functions at every alignment, the
allocator (with both compilers: riscv64-unknown-elf-gcc and zig's clang), and the firmware build
cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.firmware import build_firmware
from sim.toolchain import TOOLCHAINS, ToolchainError, load_elf
from soc.config import SocConfig
from soc.memmap import DRAM_BASE, ITCM_BASE, MEM_BASE, MMIO_BASE, mmio_addr
from tb.rv32_iss import MASK, Iss

REPO = Path(__file__).resolve().parent.parent
CFG = SocConfig.from_name("4x4-int8", cores=1, mem_mib=1)
CSR_READ = {0xF14: lambda iss: 0, 0xB00: lambda iss: iss.retired, 0xB02: lambda iss: iss.retired}


class SocIss(Iss):
    """One hart of the SoC on the ISS: ITCM, data RAM, main memory, CONSOLE and EXIT."""

    def __init__(self, cfg: SocConfig, elf: Path) -> None:
        super().__init__(bytearray(0))
        self.regions = {ITCM_BASE: bytearray(cfg.itcm_bytes), DRAM_BASE: bytearray(cfg.dram_bytes)}
        self.regions[MEM_BASE] = bytearray(cfg.mem_bytes)
        image = load_elf(elf)
        for addr, data in image.segments:
            mem, off = self._find(addr, len(data))
            mem[off : off + len(data)] = data
        self.pc, self.console = image.entry, bytearray()

    def _find(self, addr: int, size: int) -> tuple[bytearray, int]:
        for base, mem in self.regions.items():
            if base <= addr and addr + size <= base + len(mem):
                return mem, addr - base
        raise AssertionError(f"access to unmapped {addr:#x}")

    def load(self, addr: int, size: int) -> int:
        if MMIO_BASE <= addr < MMIO_BASE + 0x2_0000:
            return 0
        mem, off = self._find(addr, size)
        return int.from_bytes(mem[off : off + size], "little")

    def store(self, addr: int, size: int, value: int) -> None:
        if addr == mmio_addr("CONSOLE"):
            self.console.append(value & 0xFF)
        elif addr == mmio_addr("EXIT"):
            self.exit_code = value & MASK
        else:
            mem, off = self._find(addr, size)
            mem[off : off + size] = (value & ((1 << 8 * size) - 1)).to_bytes(size, "little")

    def step(self) -> None:
        i = self.load(self.pc, 4)
        if i & 0x7F == 0x0F or i == 0x1050_0073:  # fence, wfi: no-ops on one hart
            self.pc, self.retired = self.pc + 4, self.retired + 1
        elif i & 0x7F == 0x73 and (i >> 12) & 7 in (2, 3) and (i >> 15) & 31 == 0:  # csrr (csrrs/c rs1=0)
            if (i >> 7) & 31:
                self.regs[(i >> 7) & 31] = CSR_READ[i >> 20](self) & MASK
            self.pc, self.retired = self.pc + 4, self.retired + 1
        else:
            super().step()


def printf_like(fmt: str, *args: object) -> str:
    """Python's printf-style formatting: the independent reference for the firmware's printf."""
    return fmt % args


def run_iss(elf: Path, max_steps: int = 400_000) -> tuple[int | None, str]:
    iss = SocIss(CFG, elf)
    iss.run(max_steps)
    return iss.exit_code, iss.console.decode()


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_printf_and_string_functions(toolchain: str) -> None:
    """With either compiler: 64-bit printf needs the compiler's division helpers (libgcc, compiler-rt)."""
    elf = build_firmware(CFG, [REPO / "firmware/tests/soc/libc.c"], flags=("-Werror",), toolchain=toolchain)
    code, out = run_iss(elf)
    free = load_elf(elf).symbols["__mem_free_start"]
    a = -(-free // 64) * 64
    b = -(-(a + 10) // 4) * 4
    c = -(-(b + 3) // 256) * 256
    want = [
        printf_like("[%d|%i|%u|%x|%X]", -5, 123456789, 4000000000, 0xBEEF, 0xABCDEF),
        printf_like("[%5d|%-5d|%05d|%-05d|%5u]", -42, -42, -42, 42, 7),
        printf_like("[%8x|%08X|%-8x|%2x]", 0x1F, 0x1F, 0x1F, 0x12345),
        printf_like("[%s|%7s|%-7s|%.2s|%*s|%-*d]", "abc", "abc", "abc", "abc", 4, "x", 3, 9),
        printf_like("[%c|%3c|%-3c|%%|%d]", "q", "r", "s", 0),
        printf_like("[%d|%u|%x|%d|%u]", -1234567890123, 2**64 - 1, 0x123456789ABCDEF, -7, 7),
        printf_like("[%d|%d|%u]", -(2**31), 2**31 - 1, 0),
        "[0x80000040|0x0]",
        "[12345-a|12]",  # snprintf keeps 7 characters and the NUL, returns the full length
        "memcpy ok 208 of 208",
        "memset 0 5a 5a 0 memcmp -1 1 0 strlen 0 5",
        f"alloc {a:#x} {b:#x} {c:#x} 0x0",  # the last request is larger than main memory
    ]
    assert out.splitlines() == want
    assert code == 0


def test_build_cache_and_errors(tmp_path: Path) -> None:
    src = tmp_path / "prog.c"
    src.write_text('#include "pyard.h"\nint main(void) { return VALUE; }\n')
    first = build_firmware(CFG, [src], defines={"VALUE": 3}, out_dir=tmp_path / "fw")
    assert build_firmware(CFG, [src], defines={"VALUE": 3}, out_dir=tmp_path / "fw") == first  # cached
    other = build_firmware(CFG, [src], defines={"VALUE": 4}, out_dir=tmp_path / "fw")
    assert other != first
    assert run_iss(first)[0] == 3 and run_iss(other)[0] == 4
    src.write_text("int main(void) { return undefined_name; }\n")
    with pytest.raises(ToolchainError, match="undefined_name"):
        build_firmware(CFG, [src], out_dir=tmp_path / "fw")
    with pytest.raises(ToolchainError, match="no such firmware source"):
        build_firmware(CFG, [tmp_path / "missing.c"], out_dir=tmp_path / "fw")

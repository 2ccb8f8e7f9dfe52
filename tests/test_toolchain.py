"""The firmware toolchain helper: compiler discovery, cached builds, ELF loading."""

import struct
from pathlib import Path

import pytest

from sim.toolchain import ToolchainError, build, find_toolchain, load_elf

PROGRAM = """
int table[3] = {10, 20, 30};
int zeroed[5];
int main(void) { return table[1] + zeroed[2]; }
"""
START = """
  .section .text.init
  .globl _start
_start: la sp, _stack_top; call main; 1: j 1b
"""


def _sources(tmp_path: Path) -> list[Path]:
    (tmp_path / "main.c").write_text(PROGRAM)
    (tmp_path / "start.S").write_text(START)
    return [tmp_path / "start.S", tmp_path / "main.c"]


def test_build_outputs_and_cache(tmp_path: Path) -> None:
    srcs, out = _sources(tmp_path), tmp_path / "fw"
    fw = build(srcs, out_dir=out)
    assert fw.elf.exists() and fw.bin.exists() and fw.hex.exists()
    words = [int(line, 16) for line in fw.hex.read_text().split()]
    assert words == list(struct.unpack(f"<{len(words)}I", fw.bin.read_bytes().ljust(4 * len(words), b"\0")))
    mtime = fw.elf.stat().st_mtime_ns
    assert build(srcs, out_dir=out).elf.stat().st_mtime_ns == mtime  # cached: not rebuilt
    (tmp_path / "main.c").write_text(PROGRAM.replace("20", "21"))
    assert build(srcs, out_dir=out).elf != fw.elf  # new source contents, new build


def test_elf_loader_finds_segments_and_symbols(tmp_path: Path) -> None:
    elf = load_elf(build(_sources(tmp_path), out_dir=tmp_path / "fw").elf)
    assert elf.entry == elf.symbols["_start"] == 0
    words = elf.words(0, 64 * 1024)
    table = elf.symbols["table"]
    assert words[table // 4 : table // 4 + 3] == [10, 20, 30]
    assert words[elf.symbols["zeroed"] // 4] == 0
    # The first instruction is the auipc of `la sp, _stack_top`.
    assert words[0] & 0x7F == 0x17 and (words[0] >> 7) & 31 == 2


def test_build_error_carries_compiler_output(tmp_path: Path) -> None:
    (tmp_path / "bad.c").write_text("int main(void) { return undefined_name; }\n")
    with pytest.raises(ToolchainError, match="undefined_name"):
        build([tmp_path / "bad.c"], out_dir=tmp_path / "fw")


def test_toolchain_targets_rv32ima() -> None:
    tc = find_toolchain()
    flags = " ".join(tc.arch_flags)
    assert ("rv32ima" in flags) or ("generic_rv32+m+a" in flags)

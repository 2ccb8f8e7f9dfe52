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


INCLUDING = """
#include "sub/deep.h"
#include "../outside.h"
int table[3] = {
#include "values.inc"
};
int main(void) { return table[1] + DEEP + OUTSIDE; }
"""


@pytest.mark.parametrize("toolchain", ["gcc", "zig"])
def test_cache_follows_every_file_the_compiler_read(toolchain: str, tmp_path: Path) -> None:
    """A header in a subfolder, one in a parent folder and an .inc file are all part of the build:
    changing any of them rebuilds; changing a file nothing includes does not."""
    tc = find_toolchain(toolchain)
    src_dir = tmp_path / "src"
    (src_dir / "sub").mkdir(parents=True)
    (tmp_path / "outside.h").write_text("#define OUTSIDE 100\n")
    (src_dir / "sub" / "deep.h").write_text("#define DEEP 1000\n")
    (src_dir / "values.inc").write_text("10, 20, 30\n")
    (src_dir / "main.c").write_text(INCLUDING)
    (src_dir / "start.S").write_text(START)
    (src_dir / "unrelated.h").write_text("#define NOTHING 0\n")
    srcs, out = [src_dir / "start.S", src_dir / "main.c"], tmp_path / "fw"

    def table_and_code() -> tuple[int, bytes]:
        fw = build(srcs, out_dir=out, toolchain=tc)
        elf = load_elf(fw.elf)
        return elf.words(0, 64 * 1024)[elf.symbols["table"] // 4 + 1], fw.bin.read_bytes()

    value, first = table_and_code()
    assert value == 20
    (src_dir / "unrelated.h").write_text("#define NOTHING 1\n")
    assert table_and_code() == (20, first)
    (src_dir / "values.inc").write_text("10, 21, 30\n")
    assert table_and_code()[0] == 21
    for header, text in [
        (src_dir / "sub" / "deep.h", "#define DEEP 2000\n"),
        (tmp_path / "outside.h", "#define OUTSIDE 7\n"),
    ]:
        before = table_and_code()[1]
        header.write_text(text)
        assert table_and_code()[1] != before, header


def test_build_dir_moves_every_cache(tmp_path: Path) -> None:
    """PYARD_BUILD_DIR is the root of the firmware cache as of the Verilator and synthesis ones."""
    import subprocess
    import sys

    code = (
        "from sim.build import BUILD_ROOT; from sim.firmware import BUILD_DIR as F; "
        "from sim.toolchain import BUILD_DIR as T; print(BUILD_ROOT, F, T, sep='\\n')"
    )
    env = {**__import__("os").environ, "PYARD_BUILD_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert [Path(line) for line in out.split()] == [tmp_path, tmp_path / "fw", tmp_path / "fw"]


def test_pyard_run_shows_the_compilers_message_first(tmp_path: Path, capsys) -> None:
    from sim.cli import main

    (tmp_path / "bad.c").write_text("int main(void) { return undefined_name; }\n")
    assert main(["run", "--config", "4x4-int8", str(tmp_path / "bad.c")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    first = err.splitlines()[0]
    assert first.startswith("pyard: error: ") and len(first) < 120, first
    assert "undefined_name" in err

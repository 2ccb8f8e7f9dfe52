"""An ELF the SoC cannot run is refused before any SoC is built, with one line: linked for a
bigger data RAM (its data or its stacks), an entry point the harts do not start at, a 64-bit,
big-endian, non-RISC-V, truncated or non-ELF file."""

import struct
from pathlib import Path

import pytest

from sim.cli import main
from sim.elf_check import ElfError, check_elf
from sim.firmware import build_firmware
from soc.config import SocConfig

TARGET = SocConfig.from_name("4x4-int8", cores=1)  # 64 KiB of data RAM
BIGGER = TARGET.replace(dram_kib=256)
SMALL_PROGRAM = "int main(void) { return 0; }\n"
BIG_DATA = "static volatile char big[100 * 1024];\nint main(void) { big[99 * 1024] = 1; return big[5]; }\n"


def _elf(tmp_path: Path, cfg: SocConfig, source: str, name: str) -> Path:
    path = tmp_path / f"{name}.c"
    path.write_text(source)
    return build_firmware(cfg, [path])


def _patched(tmp_path: Path, elf: Path, offset: int, fmt: str, value: int) -> Path:
    raw = bytearray(elf.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    out = tmp_path / f"patched-{offset}.elf"
    out.write_bytes(raw)
    return out


def test_an_elf_built_for_the_target_passes(tmp_path) -> None:
    check_elf(TARGET, _elf(tmp_path, TARGET, SMALL_PROGRAM, "ok"))


def test_data_larger_than_the_targets_data_ram_is_refused(tmp_path) -> None:
    elf = _elf(tmp_path, BIGGER, BIG_DATA, "big")
    check_elf(BIGGER, elf)
    with pytest.raises(ElfError, match="does not fit the memories"):
        check_elf(TARGET, elf)


def test_stacks_outside_the_targets_data_ram_are_refused(tmp_path) -> None:
    """Linked for a bigger data RAM, data that fits the target's RAM but leaves no room there for
    the stacks placed after it."""
    almost = "static volatile char big[63 * 1024];\nint main(void) { big[5] = 1; return big[5]; }\n"
    with pytest.raises(ElfError, match=r"does not fit the memories|__stack_top = .* outside the data RAM"):
        check_elf(TARGET, _elf(tmp_path, BIGGER, almost, "almost"))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "message"),
    [
        (24, "<I", 0x100, "entry point 0x100, but the harts start at 0x0"),
        (4, "<B", 2, "a 64-bit ELF"),
        (5, "<B", 2, "big-endian"),
        (18, "<H", 62, "not RISC-V"),
    ],
)
def test_header_fields_the_soc_cannot_run(offset, fmt, value, message, tmp_path) -> None:
    elf = _patched(tmp_path, _elf(tmp_path, TARGET, SMALL_PROGRAM, "ok"), offset, fmt, value)
    with pytest.raises(ElfError, match=message):
        check_elf(TARGET, elf)


@pytest.mark.parametrize("keep", [0, 40, 200])
def test_truncated_or_empty_files(keep: int, tmp_path) -> None:
    raw = _elf(tmp_path, TARGET, SMALL_PROGRAM, "ok").read_bytes()
    cut = tmp_path / "cut.elf"
    cut.write_bytes(raw[:keep])
    with pytest.raises(ElfError, match=r"truncated|not an ELF"):
        check_elf(TARGET, cut)


def test_pyard_run_refuses_before_building_a_soc(tmp_path, capsys, monkeypatch) -> None:
    import sim.run

    def no_build(*args, **kwargs):
        raise AssertionError("a SoC was built for an ELF that cannot run on it")

    monkeypatch.setattr(sim.run, "build_soc", no_build)
    elf = _elf(tmp_path, BIGGER, BIG_DATA, "big")
    assert main(["run", "--config", "4x4-int8", str(elf)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not fit the memories of" in err and "Traceback" not in err

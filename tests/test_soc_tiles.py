"""Many tiles on one SoC (docs/tiles.md): the config field, the memory map and generated files, the
DMA arbiter tree, and a Verilator run of 2 harts sharing 2 tiles through the resource manager.

Default-suite cost: one SoC build (4x4-int8, 2 cores, 2 tiles); the slow test adds a 3-tile one.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Fragment

from rtl.config import ConfigError, load_config
from sim.cli import main as pyard
from sim.firmware import build_firmware
from sim.run import run_elf
from sim.toolchain import load_elf
from soc.config import SocConfig
from soc.memmap import ACCEL_BASE, ACCEL_SIZE, accel_base, c_header, linker_script
from soc.soc import Soc, address_regions, mem_id_bits

REPO = Path(__file__).resolve().parent.parent
CFG = SocConfig.from_name("4x4-int8", cores=2, tiles=2)
# The sharing runs: 1x1 tiles with small memories build in a fraction of the time of 4x4 ones, and
# the resource manager, the windows and the arbiter tree do not depend on the tile's size.
SHARED = SocConfig(accel=load_config("1x1-int8").replace(sp_kib=16, acc_kib=16), cores=2, tiles=2)
JOBS, M, K, N = 4, 16, 32, 16  # smaller than firmware/examples/tiles.c's defaults


@pytest.mark.parametrize("tiles", [0, 9, 2.0, True])
def test_tiles_out_of_range_is_refused(tiles) -> None:
    with pytest.raises(ConfigError, match=r"tiles = .* is invalid: allowed an integer from 1 to 8"):
        SocConfig.from_name("4x4-int8", tiles=tiles)


@pytest.mark.parametrize("command", ["run", "verilog"])
@pytest.mark.parametrize("tiles", ["0", "9"])
def test_cli_refuses_bad_tiles_in_one_line(command: str, tiles: str, tmp_path, capsys) -> None:
    argv = [command, "--config", "4x4-int8", "--tiles", tiles]
    argv += [str(REPO / "firmware/examples/tiles.c")] if command == "run" else ["--top", "soc", "-o", str(tmp_path)]
    assert pyard(argv) == 2
    err = capsys.readouterr().err
    assert f"tiles = {tiles} is invalid" in err and len(err.strip().splitlines()) == 1


def test_config_records_tiles_and_a_one_tile_config_is_unchanged() -> None:
    one = SocConfig.from_name("4x4-int8", cores=2)
    assert "tiles" not in one.to_dict() and one.name == "4x4-int8-2c"  # old config.json files and build keys
    assert SocConfig.from_dict(one.to_dict()) == one
    assert CFG.to_dict()["tiles"] == 2 and CFG.name == "4x4-int8-2t-2c"
    assert SocConfig.from_dict(CFG.to_dict()) == CFG


def test_windows_follow_each_other_and_the_generated_files_name_them() -> None:
    cfg = CFG.replace(tiles=8)
    assert [accel_base(t) for t in range(3)] == [ACCEL_BASE, ACCEL_BASE + ACCEL_SIZE, ACCEL_BASE + 2 * ACCEL_SIZE]
    regions = address_regions(cfg)["periph"]
    assert (ACCEL_BASE, 8 * ACCEL_SIZE) in regions
    header = c_header(cfg)
    assert "#define PYARD_NTILES 8\n" in header
    assert "#define PYARD_ACCEL_TILE_BASE(t) (PYARD_ACCEL_BASE + PYARD_ACCEL_SIZE * (t))" in header
    assert "__ntiles = 8;" in linker_script(cfg)


@pytest.mark.parametrize("tiles", [1, 2, 3, 5, 8])
def test_main_memory_port_carries_every_masters_id(tiles: int) -> None:
    """The arbiter tree elaborates (its widths connect) and the port's ID width is mem_id_bits."""
    soc = Soc(CFG.replace(tiles=tiles))
    Fragment.get(soc, None)
    assert len(soc.m_axi.arid) == len(soc.m_axi.rid) == mem_id_bits(tiles)
    assert mem_id_bits(1) == 5  # the single-tile SoC's port, as before


def _grid(data: bytes, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def test_two_harts_share_two_tiles_through_the_resource_manager() -> None:
    check_sharing(SHARED)


@pytest.mark.slow
def test_two_harts_share_three_tiles_behind_an_unbalanced_arbiter_tree() -> None:
    """Three tiles: the tree's halves have different ID widths (tiles 0-1 behind one more level)."""
    check_sharing(SHARED.replace(tiles=3))


def check_sharing(cfg: SocConfig) -> None:
    """Every GEMM equals NumPy's exactly; every tile served jobs; no tile was ever held twice; each
    tile's own MAC counter (read through its own window) matches the jobs it ran."""
    elf = build_firmware(
        cfg, [REPO / "firmware/examples/tiles.c"], defines={"JOBS": JOBS, "GEMM_M": M, "GEMM_K": K, "GEMM_N": N}
    )
    sym = load_elf(elf).symbols
    h = cfg.cores
    dumps = {
        "a": (sym["job_a"], h * JOBS * M * K),
        "b": (sym["job_b"], h * JOBS * K * N),
        "c": (sym["job_c"], h * JOBS * M * N * 4),
        "tile": (sym["job_tile"], h * JOBS * 4),
        "err": (sym["job_err"], h * JOBS * 4),
        "violations": (sym["violations"], 4),
        **{f"regs{t}": (accel_base(t), 0x10C) for t in range(cfg.tiles)},
    }
    result = run_elf(cfg, elf, 3_000_000, dumps=dumps)
    assert result.exit_code == 0, result.console
    a = _grid(result.dumps["a"], np.int8, (h, JOBS, M, K)).astype(np.int64)
    b = _grid(result.dumps["b"], np.int8, (h, JOBS, K, N)).astype(np.int64)
    c = _grid(result.dumps["c"], np.int32, (h, JOBS, M, N))
    np.testing.assert_array_equal(c, a @ b)
    assert np.any(a) and np.any(c)  # the operands were written: the comparison is not 0 == 0
    assert not np.any(_grid(result.dumps["err"], np.int32, (h, JOBS)))
    tiles = _grid(result.dumps["tile"], np.uint32, (h, JOBS))
    assert set(tiles.flat) == set(range(cfg.tiles))
    assert struct.unpack("<I", result.dumps["violations"]) == (0,)
    for t in range(cfg.tiles):
        regs = struct.unpack(f"<{0x10C // 4}I", result.dumps[f"regs{t}"])
        assert regs[0] == 0x5059_4144  # ID: a tile answers in every window
        assert regs[0x104 // 4] == np.count_nonzero(tiles == t) * M * K * N  # MACS_LO: the jobs it ran
    grants = " ".join(str(np.count_nonzero(tiles == t)) for t in range(cfg.tiles))
    assert f"grants {grants}," in result.console

"""Config validation and the command line's handling of bad input."""

import json
import subprocess
import sys

import pytest

from rtl.config import PE_STAGES, AccelConfig, ConfigError, load_config


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"rows": 0}, "rows"),
        ({"rows": 65}, "rows"),
        ({"cols": True}, "cols"),
        ({"cols": 2.5}, "cols"),
        ({"dtype": "fp8"}, "dtype"),
        ({"dtype": "int8", "acc_dtype": "fp32"}, "acc_dtype"),
        ({"dtype": "bf16", "acc_dtype": "int32"}, "acc_dtype"),
        ({"pe_stages": 0}, "pe_stages"),
        ({"pe_stages": max(PE_STAGES) + 1}, "pe_stages"),
        ({"sp_kib": 100}, "sp_kib"),
        ({"acc_banks": 0}, "acc_banks"),
        ({"dma_bits": 48}, "dma_bits"),
        ({"vector": "off"}, "vector"),
        ({"vector": 0}, "vector"),
        ({"dtype": "bf16", "vector": False, "update_lanes": 1}, "update_lanes"),  # UPDATE is a VEC op
    ],
)
def test_invalid_field_is_named(fields: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        AccelConfig(**fields)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field} = ") and "allowed" in str(err.value)


@pytest.mark.parametrize(
    ("name", "rows", "cols", "dtype", "acc"),
    [
        ("4x4-bf16", 4, 4, "bf16", "fp32"),
        ("16x16-int8", 16, 16, "int8", "int32"),
        ("4x16-int8", 4, 16, "int8", "int32"),
        ("thesis-8x8", 8, 8, "bf16", "fp32"),
        ("thesis-4x4-compressed", 4, 4, "bf16", "bf16"),
    ],
)
def test_names(name: str, rows: int, cols: int, dtype: str, acc: str) -> None:
    cfg = AccelConfig.from_name(name)
    assert (cfg.rows, cfg.cols, cfg.dtype, cfg.acc_dtype) == (rows, cols, dtype, acc)


def test_dma_width_follows_array_size() -> None:
    assert AccelConfig.from_name("8x8-int8").dma_bits == 64
    assert AccelConfig.from_name("16x16-bf16").dma_bits == 128
    assert AccelConfig(rows=8, cols=8, dma_bits=128).dma_bits == 128


def test_json_round_trip(tmp_path) -> None:
    cfg = AccelConfig(rows=3, cols=7, dtype="bf16", acc_dtype="bf16", pe_stages=2, sp_kib=64)
    path = tmp_path / "config.json"
    path.write_text(cfg.to_json())
    assert load_config(str(path)) == cfg


def test_json_unknown_field_refused(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"rows": 4, "colz": 4}))
    with pytest.raises(ConfigError, match="colz"):
        load_config(str(path))


def test_replace_dtype_resets_accumulator() -> None:
    assert AccelConfig(dtype="int8").replace(dtype="bf16").acc_dtype == "fp32"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--rows", "0"], "rows"),
        (["--config", "4x4-int9"], "config"),
        (["--config", "4x4-int8", "--acc-dtype", "fp32"], "acc_dtype"),
        (["--top", "nope"], "top"),
        (["--config", "missing.json"], "config"),
    ],
)
def test_cli_refuses_bad_config_in_one_line(args: list[str], field: str, tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", "verilog", "-o", str(tmp_path), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pyard: error: {field} = "), proc.stderr
    assert not list(tmp_path.iterdir()), "a refused config must not write anything"


def test_replace_derives_defaulted_fields_again() -> None:
    """A field left to its default follows the other fields (``--rows 2 --cols 3`` on the default
    config used to keep the 4x4 default 256 KiB scratchpad, which 2x3 rows cannot address)."""
    small = AccelConfig().replace(rows=2, cols=3)
    assert small.sp_kib == AccelConfig(rows=2, cols=3).sp_kib < AccelConfig().sp_kib
    big = AccelConfig.from_name("4x4-int8").replace(rows=16, cols=16)
    assert big.dma_bits == AccelConfig(rows=16, cols=16).dma_bits == 128
    assert AccelConfig(sp_kib=64).replace(rows=8).sp_kib == 64  # chosen, not derived: kept
    assert AccelConfig(dtype="bf16", acc_dtype="bf16").replace(rows=8).acc_dtype == "bf16"


def test_a_tile_without_the_vector_engine() -> None:
    bare = AccelConfig.from_name("4x4-bf16").replace(vector=False)
    assert bare.update_lanes == 0 and AccelConfig.from_name("4x4-bf16").update_lanes == 1
    assert bare.name == "4x4-bf16-novector" and bare.replace(vector=True) == AccelConfig.from_name("4x4-bf16")
    assert AccelConfig.from_dict(json.loads(bare.to_json())) == bare

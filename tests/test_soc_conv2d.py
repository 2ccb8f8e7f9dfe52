"""Full-system Conv2D: pyard_conv2d (the CONV2D loop command) from C on the SoC in Verilator, the
output read back from main memory and compared exactly with the NumPy model: im2col (rtl/conv_model)
followed by the tile's GEMM model (tb.tile_tb.gemm_loop_reference) in the loop's K-tile order
(tb.tile_tb.conv_k_tiles), with bias, ReLU, stride,
padding, a scale and both output widths.

Also the example firmware/examples/conv2d.c, which checks itself against a direct C convolution.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from rtl.conv_model import im2col, out_size
from rtl.gemm_loop_model import conv_k_tiles
from sim.firmware import build_firmware, c_bytes
from sim.run import run_elf
from sim.toolchain import load_elf
from soc.config import SocConfig
from tb import stimulus
from tb.tile_tb import gemm_loop_reference

REPO = Path(__file__).resolve().parent.parent
# The builds tests/test_soc_firmware.py uses.
SOC = {"int8": SocConfig.from_name("4x4-int8", cores=2), "bf16": SocConfig.from_name("4x4-bf16", cores=4)}
MAX_CYCLES = 3_000_000

# batch, c_in, h, w, c_out, kh, kw, stride, pad, bias, act, out (1 = full), scale ("narrow" = not 1)
CONV_CASES = [
    {"batch": 1, "cin": 3, "h": 6, "w": 5, "cout": 4, "kh": 3, "kw": 3, "stride": 1, "pad": 0},
    {"batch": 2, "cin": 5, "h": 9, "w": 7, "cout": 6, "kh": 3, "kw": 2, "stride": 2, "pad": 1, "bias": 1, "act": 1},
    {"batch": 1, "cin": 4, "h": 5, "w": 5, "cout": 9, "kh": 1, "kw": 1, "stride": 1, "pad": 0, "out": 0, "scale": 1},
    {"batch": 1, "cin": 2, "h": 7, "w": 8, "cout": 3, "kh": 5, "kw": 5, "stride": 3, "pad": 2, "bias": 1, "out": 0},
]
NARROW_SCALE = {"int32": 6, "fp32": 0x3E99999A}


def _case(cfg, case: dict, rng: np.random.Generator) -> dict:
    case = {"bias": 0, "act": 0, "out": 1, "scale": 0} | case
    one = 0 if cfg.acc_dtype == "int32" else 0x3F800000
    scale = NARROW_SCALE[cfg.acc_dtype] if case["scale"] else one
    in_t = np.uint8 if cfg.dtype == "int8" else np.uint16
    acc_t = np.uint32 if cfg.acc_bits == 32 else np.uint16
    out_t = acc_t if case["out"] == 1 else in_t
    x = stimulus.inputs(cfg, rng, (case["batch"], case["h"], case["w"], case["cin"]), special=0.0)
    w = stimulus.inputs(cfg, rng, (case["kh"], case["kw"], case["cin"], case["cout"]), special=0.0)
    bias = stimulus.accumulators(cfg, rng, (1, case["cout"])) if case["bias"] else None
    oh = out_size(case["h"], case["kh"], case["stride"], case["pad"])
    ow = out_size(case["w"], case["kw"], case["stride"], case["pad"])
    cols = im2col(x, case["kh"], case["kw"], case["stride"], case["pad"])
    readout = {"scale": scale, "act": case["act"], "out": case["out"]}
    k_tiles = conv_k_tiles(cfg, case["kh"], case["kw"], case["cin"])  # C_in slices at each kernel position
    want = gemm_loop_reference(cfg, cols, w.reshape(-1, case["cout"]), bias, readout, k_tiles).astype(out_t)
    mem = {"input": x.astype(in_t).tobytes(), "weights": w.astype(in_t).tobytes()}
    if bias is not None:
        mem["bias"] = bias.astype(acc_t).tobytes()
    out_len = case["batch"] * oh * ow * case["cout"] * np.dtype(out_t).itemsize
    return {"case": case, "scale": scale, "mem": mem, "want": want, "out_t": out_t, "out_len": out_len}


def _header(cases: list[dict]) -> str:
    lines = []
    for i, g in enumerate(cases):
        for key, data in [*g["mem"].items(), ("output", bytes(g["out_len"]))]:
            lines.append(f"PYARD_MEM uint8_t case{i}_{key}[{len(data) + (-len(data) % 4)}];")
            if key != "output":
                lines.append(c_bytes(f"case{i}_{key}_init", data))

    def buf(i: int, g: dict, key: str) -> str:
        if key == "output":
            return f"{{NULL, case{i}_output, sizeof case{i}_output}}"
        if key in g["mem"]:
            return f"{{case{i}_{key}_init, case{i}_{key}, sizeof case{i}_{key}}}"
        return "{NULL, NULL, 0}"

    rows = []
    for i, g in enumerate(cases):
        c = g["case"]
        conv = (
            f"{{{c['batch']}, {c['cin']}, {c['h']}, {c['w']}, {c['cout']}, {c['kh']}, {c['kw']}, {c['stride']}, "
            f"{c['pad']}, NULL, NULL, NULL, NULL, {g['scale']}u, {c['act']}, {c['out']}, false, 0, 0}}"
        )
        bufs = ", ".join(buf(i, g, key) for key in ("input", "weights", "bias", "output"))
        rows.append(f"  {{{conv}, {bufs}}},")
    return "\n".join([*lines, f"#define NCASES {len(cases)}", "static const conv_case_t cases[] = {", *rows, "};", ""])


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_conv2d(dtype: str, tmp_path: Path) -> None:
    cfg = SOC[dtype]
    rng = np.random.default_rng(7)
    gen = [_case(cfg.accel, case, rng) for case in CONV_CASES]
    (tmp_path / "conv_cases.h").write_text(_header(gen))
    elf = build_firmware(
        cfg, [REPO / "firmware/tests/soc/conv_cases.c"], include_dirs=[tmp_path], defines={"PYARD_NHARTS_ACTIVE": 1}
    )
    sym = load_elf(elf).symbols
    dumps = {f"o{i}": (sym[f"case{i}_output"], g["out_len"]) for i, g in enumerate(gen)}
    result = run_elf(cfg, elf, max_cycles=MAX_CYCLES, dumps=dumps)
    assert result.exit_code == 0, result.console
    for i, g in enumerate(gen):
        got = np.frombuffer(result.dumps[f"o{i}"], dtype=g["out_t"]).reshape(g["want"].shape)
        bad = np.argwhere(got != g["want"])
        assert not bad.size, (
            f"case {i} {g['case']}: {len(bad)} wrong, first at {tuple(bad[0])}: "
            f"{got[tuple(bad[0])]:#x} != {g['want'][tuple(bad[0])]:#x}"
        )


@pytest.mark.parametrize("dtype", ["int8", "bf16"])
def test_conv2d_example(dtype: str) -> None:
    cfg = SOC[dtype]
    result = run_elf(cfg, build_firmware(cfg, [REPO / "firmware/examples/conv2d.c"]), max_cycles=MAX_CYCLES)
    assert result.exit_code == 0, result.console
    assert re.search(r"conv2d .* on 4x4-\w+: ok, \d+ cycles", result.console), result.console

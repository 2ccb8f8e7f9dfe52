"""CONV2D outputs more than 65,535 pixels high or wide (docs/isa.md: every field at its full range;
with stride 1 and padding, OH = H + 2·pad − kh + 1 reaches 66,045), on the C++ tile simulator,
exact against the NumPy model (im2col and the loop's rounding)."""

import pytest

from rtl.config import AccelConfig
from tb.tile_cases import conv_case
from tilesim.run import run_case

# The smallest memories: the loop cuts M (about 200,000 pixels) into many blocks.
CFG = AccelConfig(rows=4, cols=4, dtype="int8", sp_kib=1, acc_kib=1)

WIDE_CASES = [
    # OW = 65,535 + 2 − 1 + 1 = 65,537, OH = 3 (padding rows above and below).
    {"batch": 1, "h": 1, "w": 65535, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "pad": 1, "out": 0},
    # OH = 65,537 (two images: the step from an image's last output row to the next's first).
    {"batch": 2, "h": 65535, "w": 1, "cin": 1, "cout": 1, "kh": 1, "kw": 1, "pad": 1, "out": 0},
    # OW = 65,537 with a 3 × 3 kernel: each kernel column's inside columns end past 2^16.
    {"batch": 1, "h": 1, "w": 65535, "cin": 2, "cout": 3, "kh": 3, "kw": 3, "pad": 2, "out": 0},
]


@pytest.mark.slow
@pytest.mark.parametrize("case", WIDE_CASES, ids=lambda c: f"{c['batch']}x{c['h']}x{c['w']}k{c['kh']}p{c['pad']}")
def test_conv_output_above_16_bits(case: dict) -> None:
    run_case(CFG, conv_case(CFG, case, seed=11))

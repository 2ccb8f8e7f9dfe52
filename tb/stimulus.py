"""Random operands for testbenches, as bit patterns in the config's formats.

Most values are ordinary numbers (so sums are meaningful); a fraction are special values (±0,
±Inf, NaN, subnormals, extremes) so that every rule of the arithmetic is exercised in the array.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.fp_model import f64_to_bf16_bits

BF16_SPECIALS = np.array(
    [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80],
    dtype=np.uint16,
)


def inputs(cfg: AccelConfig, rng: np.random.Generator, shape: tuple[int, ...], special: float = 0.02):
    """Input-format operands (int8 or bf16 bit patterns)."""
    if cfg.dtype == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8).view(np.uint8)
    bits = f64_to_bf16_bits(rng.standard_normal(shape) * 4.0)
    mask = rng.random(shape) < special
    return np.where(mask, rng.choice(BF16_SPECIALS, shape), bits).astype(np.uint16)


def accumulators(cfg: AccelConfig, rng: np.random.Generator, shape: tuple[int, ...]) -> npt.NDArray:
    """Accumulator-format operands (int32, fp32 or bf16 bit patterns)."""
    if cfg.acc_dtype == "int32":
        return rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32).view(np.uint32)
    values = rng.standard_normal(shape) * 16.0
    if cfg.acc_dtype == "bf16":
        return f64_to_bf16_bits(values)
    return values.astype(np.float32).view(np.uint32)

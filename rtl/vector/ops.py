"""The vector engine's operations: the 5-bit codes of the command ISA and which tile dtype defines which.

The codes are fixed (the command ISA carries them); ``rtl/vector/lane_model.py`` and
docs/arithmetic.md ("Vector engine lanes") give each op's rule for both dtypes.
"""

import enum

__all__ = ["FLOAT_OPS", "FUNCTION_OPS", "INT_OPS", "SCALAR_OPS", "VecOp"]


class VecOp(enum.IntEnum):
    """One lane operation on the operands ``a``, ``b`` (a second row) and ``s`` (the scalar)."""

    COPY = 0  # a
    ADD = 1  # a + b
    SUB = 2  # a − b
    MUL = 3  # a · b
    MADDS = 4  # a · s + b
    MULS = 5  # a · s
    ADDS = 6  # a + s
    RSUBS = 7  # s − a (1 − x with s = 1)
    NEG = 8  # −a
    MAX = 9  # max(a, b)
    MIN = 10  # min(a, b)
    RELU = 11  # max(a, 0)
    SIGMOID = 12
    TANH = 13
    EXP = 14
    RECIP = 15  # 1/a
    # 16 is not a lane op: the FPTT update unit's whole update of θ, θ̄, λ from g
    # (rtl/vector/update_unit.py), defined on bf16 tiles with an update unit.
    UPDATE = 16
    # TFLite's int8 requantization (int8 tiles): per column, a multiplier and a shift from two
    # accumulator rows at B, a zero point and a clamp range in the scalar (docs/isa.md, "VEC").
    REQUANT = 17


# The functions evaluated in bf16 by the function unit outside the lane; its ``fn`` select is
# ``op - VecOp.SIGMOID`` (0 sigmoid, 1 tanh, 2 exp, 3 reciprocal).
FUNCTION_OPS = frozenset({VecOp.SIGMOID, VecOp.TANH, VecOp.EXP, VecOp.RECIP})
# The ops of the lanes on bf16 tiles (UPDATE is the update unit's; REQUANT is int8 only).
FLOAT_OPS = frozenset(VecOp) - {VecOp.UPDATE, VecOp.REQUANT}
# int8 tiles work on int32 values and have no function unit.
INT_OPS = (FLOAT_OPS - FUNCTION_OPS) | {VecOp.REQUANT}
# The ops that read the scalar ``s``.
SCALAR_OPS = frozenset({VecOp.MADDS, VecOp.MULS, VecOp.ADDS, VecOp.RSUBS})

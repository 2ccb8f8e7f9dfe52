"""NumPy model of the FPTT update unit (``rtl/vector/update_unit.py``) and of VEC op 16 (UPDATE).

The unit is defined as the 13 commands of ``rtl/vector/programs.fptt_update`` applied to one
parameter: each operation is the lane's (``rtl/vector/lane_model.lane``, fp32 work values) followed
by the scratchpad's bf16 narrowing (``rtl.fp_model.round_bf16``). So this model is written against
the program, not against the unit's single-rounding bf16 adders, and the unit's tests check that
the two agree bit for bit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.fp_model import round_bf16
from rtl.vector.lane_model import lane
from rtl.vector.ops import VecOp

__all__ = ["HALF_BF16", "update"]

HALF_BF16 = 0x3F00
U16 = npt.NDArray[np.uint16]


def _op(op: VecOp, a: npt.ArrayLike, b: npt.ArrayLike = 0, s: int = 0) -> U16:
    """One command of the program on bf16 operands: the lane's op, then the bf16 write."""
    wide = [np.asarray(x, dtype=np.uint32) << 16 for x in (a, b)]
    return round_bf16(lane("bf16", op, wide[0], wide[1], (s & 0xFFFF) << 16))


def update(
    theta: npt.ArrayLike, theta_bar: npt.ArrayLike, lam: npt.ArrayLike, grad: npt.ArrayLike,
    eta: int, alpha: int, kappa: int,
) -> tuple[U16, U16, U16]:  # fmt: skip
    """(θ', θ̄', λ') of bf16 bit patterns; ``eta``, ``alpha``, ``kappa`` (= 1/(2α)) are bf16 bits."""
    th, tb, lm, g = (np.asarray(x, dtype=np.uint16) for x in (theta, theta_bar, lam, grad))
    reg = _op(VecOp.SUB, _op(VecOp.MULS, _op(VecOp.SUB, th, tb), s=alpha), lm)  # 4.17
    th_new = _op(VecOp.SUB, th, _op(VecOp.MULS, _op(VecOp.ADD, g, reg), s=eta))  # 4.19
    lm_new = _op(VecOp.SUB, lm, _op(VecOp.MULS, _op(VecOp.SUB, th_new, tb), s=alpha))  # 4.20
    half = _op(VecOp.MULS, _op(VecOp.ADD, tb, th_new), s=HALF_BF16)
    tb_new = _op(VecOp.SUB, half, _op(VecOp.MULS, lm_new, s=kappa))  # 4.21
    return th_new, tb_new, lm_new

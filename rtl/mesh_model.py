"""Bit-exact NumPy model of ``rtl/mesh.py``.

One output row is ``c[j] = d[j] + a[0]·W[0, j] + … + a[rows-1]·W[rows-1, j]``, accumulated in that
order (top PE first) with the PE's own multiply and add, so floating-point rounding matches.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.mac_model import accumulate, multiply

__all__ = ["mesh_tile"]


def mesh_tile(
    cfg: AccelConfig, a: npt.ArrayLike, w: npt.ArrayLike, d: npt.ArrayLike
) -> npt.NDArray[np.unsignedinteger]:
    """Outputs of one weight tile: ``a`` (M × rows), ``w`` (rows × cols), ``d`` (M × cols), all bit patterns."""
    a, w = np.asarray(a), np.asarray(w)
    acc = np.asarray(d)
    for i in range(cfg.rows):
        acc = accumulate(cfg, acc, multiply(cfg, a[:, i : i + 1], w[i : i + 1, :]))
    return acc

"""NumPy model of the CONV2D loop: im2col, and the convolution as the GEMM the tile runs.

Layouts as in docs/isa.md: input NHWC, weights HWIO (kh × kw × C_in × C_out), output NHWC. The
convolution is ``im2col(x) @ w.reshape(-1, C_out)`` with K ordered (kh, kw, c_in), the order the
loop walks its K tiles in; so the bit-exact GEMM models give the exact hardware result.
"""

from __future__ import annotations

import numpy as np

__all__ = ["im2col", "out_size"]


def out_size(size: int, kernel: int, stride: int, pad: int) -> int:
    """Output height or width: ``(size + 2·pad − kernel) // stride + 1``."""
    return (size + 2 * pad - kernel) // stride + 1


def im2col(x: np.ndarray, kh: int, kw: int, stride: int, pad: int) -> np.ndarray:
    """Rows (n, oh, ow) of receptive fields, columns (kh, kw, c_in); padding reads as zero."""
    batch, h, w, cin = x.shape
    oh, ow = out_size(h, kh, stride, pad), out_size(w, kw, stride, pad)
    padded = np.zeros((batch, h + 2 * pad, w + 2 * pad, cin), dtype=x.dtype)
    padded[:, pad : pad + h, pad : pad + w] = x
    cols = np.empty((batch, oh, ow, kh, kw, cin), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, :, i, j] = padded[:, i : i + stride * oh : stride, j : j + stride * ow : stride]
    return cols.reshape(batch * oh * ow, kh * kw * cin)

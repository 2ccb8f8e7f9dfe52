"""Where the tile testbench puts a command's operands in main memory, from their sizes alone.

Shared by the cocotb testbench (tb/tile_tb.py) and ``pyard bench gemm/conv`` (which sizes the
testbench's memory from it and refuses what cannot fit), so operands never overlap whatever the
shapes, and an overlap can never show up as a hardware mismatch.
"""

from __future__ import annotations

import numpy as np

from rtl.config import AccelConfig
from rtl.conv_model import out_size

BASE = 0x1000  # the first operand's address; below it stays zero
ALIGN = 0x100
GAP = 0x100  # bytes at least between operands, so a read past an operand's end does not touch the next
# The testbench's AXI memory is one Python buffer addressed by the tile's 32-bit addresses.
MAX_MEM_MIB = 2048
# Row padding of regression GEMMs (odd strides, rows straddling bus beats); benchmarks are dense.
GEMM_PAD = {"A": 3, "B": 5, "C": 2, "D": 1}


def place(sizes: dict[str, int]) -> tuple[dict[str, int], int]:
    """Addresses for operands of the given byte sizes one after another, and the bytes used."""
    addr, out = BASE, {}
    for name, size in sizes.items():
        out[name] = addr
        addr = (addr + size + GAP + ALIGN - 1) & ~(ALIGN - 1)
    return out, addr


def mem_mib(sizes: dict[str, int]) -> int:
    """The smallest power-of-two memory in MiB (at least 1) that holds the operands."""
    used = place(sizes)[1]
    mib = 1
    while mib << 20 < used:
        mib *= 2
    return mib


def element_types(cfg: AccelConfig, out: int) -> tuple[type, type, type]:
    """NumPy types of input, accumulator and output elements (``out`` 0 narrow, 1 full width)."""
    in_t = np.uint8 if cfg.dtype == "int8" else np.uint16
    acc_t = np.uint32 if cfg.acc_bits == 32 else np.uint16
    return in_t, acc_t, acc_t if out == 1 else in_t


def gemm_strides(case: dict) -> dict[str, int]:
    """Elements per stored row of A, B, C and D (padded unless the case is dense)."""
    m, k, n = case["m"], case["k"], case["n"]
    ld = {"A": m if case.get("trans_a") else k, "B": k if case.get("trans_b") else n, "C": n, "D": n}
    pad = dict.fromkeys(ld, 0) if case.get("dense") else GEMM_PAD
    return {key: ld[key] + pad[key] for key in ld}


def gemm_sizes(cfg: AccelConfig, case: dict) -> dict[str, int]:
    """Bytes of A, B, C and D of one GEMM command."""
    m, k, n = case["m"], case["k"], case["n"]
    in_t, acc_t, out_t = element_types(cfg, case.get("out", 1))
    ld = gemm_strides(case)
    rows = {"A": k if case.get("trans_a") else m, "B": n if case.get("trans_b") else k, "C": m, "D": m}
    # C is read as accumulators (acc_c) and written as outputs: room for the wider of the two.
    byte = {"A": in_t, "B": in_t, "C": max(out_t, acc_t, key=lambda t: np.dtype(t).itemsize), "D": acc_t}
    return {key: rows[key] * ld[key] * np.dtype(byte[key]).itemsize for key in "ABCD"}


def conv_sizes(cfg: AccelConfig, case: dict) -> dict[str, int]:
    """Bytes of the input, weights, output and bias of one CONV2D command."""
    in_t, acc_t, out_t = element_types(cfg, case.get("out", 1))
    stride, pad = case.get("stride", 1), case.get("pad", 0)
    oh, ow = out_size(case["h"], case["kh"], stride, pad), out_size(case["w"], case["kw"], stride, pad)
    isz, osz = np.dtype(in_t).itemsize, np.dtype(out_t).itemsize
    return {
        "in": case["batch"] * case["h"] * case["w"] * case["cin"] * isz,
        "w": case["kh"] * case["kw"] * case["cin"] * case["cout"] * isz,
        "out": case["batch"] * oh * ow * case["cout"] * osz,
        "bias": case["cout"] * np.dtype(acc_t).itemsize,
    }

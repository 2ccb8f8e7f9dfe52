"""Device instructions: one block of work as pyard commands on one device, and the NumPy model of
exactly what the tile computes for it (the tile's reference models: rtl/gemm_loop_model.py,
rtl/vector/engine_model.py).

Every instruction places its operands from address 0 of the device's memory, runs one command batch
and reads its result back, all as unsigned element bit patterns (int8 in uint8, bf16 in uint16,
int32/fp32 accumulators in uint32). The tensorizer (runtime/ops.py) cuts operators into blocks that
each fit one instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rtl.config import AccelConfig
from rtl.conv_model import im2col, out_size
from rtl.gemm_loop_model import conv_k_tiles, loop_result
from rtl.vector import engine_model
from rtl.vector.engine_model import B_OPERAND_OPS, VecCommand
from rtl.vector.ops import VecOp
from runtime.device import Device, RunRecord

__all__ = ["ALIGN", "Block", "conv2d", "fold", "gemm", "max_vec_rows", "unit_scale", "vec"]

ALIGN = 64  # operand addresses: a bus beat of any config's DMA width
FENCE = [0x04]
OUT_FULL = 1  # the read-out keeps the accumulator type (GEMM, CONV2D, STORE)


@dataclass(frozen=True)
class Block:
    """An instruction's result and the device record of its run."""

    out: npt.NDArray
    record: RunRecord
    device: int


def unit_scale(cfg: AccelConfig) -> int:
    """The identity read-out scale: shift 0 (int32 accumulators) or 1.0 (fp32)."""
    return 0 if cfg.acc_dtype == "int32" else 0x3F800000


def _in_type(cfg: AccelConfig) -> type:
    return np.uint8 if cfg.in_bits == 8 else np.uint16


def _place(sizes: list[int]) -> list[int]:
    addrs, addr = [], 0
    for size in sizes:
        addrs.append(addr)
        addr = (addr + size + ALIGN - 1) // ALIGN * ALIGN
    return addrs


def _check_memory(dev: Device, sizes: list[int], what: str) -> list[int]:
    addrs = _place(sizes)
    if addrs[-1] + sizes[-1] > dev.mem_bytes:
        raise ValueError(
            f"{what}: {addrs[-1] + sizes[-1]} bytes of operands exceed the device memory of {dev.mem_bytes}"
        )
    return addrs


# -- GEMM ---------------------------------------------------------------------------------------


def gemm_model(cfg: AccelConfig, a: npt.NDArray, b: npt.NDArray) -> npt.NDArray[np.uint32]:
    """A·B as the GEMM command computes it, full accumulators (docs/isa.md, GEMM)."""
    return loop_result(cfg, a, b, None, unit_scale(cfg), 0, OUT_FULL).astype(np.uint32)


def gemm(dev: Device, a: npt.NDArray, b: npt.NDArray, budget: int) -> Block:
    """One GEMM command: ``a`` (M × K) times ``b`` (K × N), input bit patterns, dense rows."""
    cfg = dev.cfg
    (m, k), n = a.shape, b.shape[1]
    in_t = _in_type(cfg)
    in_size = np.dtype(in_t).itemsize
    a_at, b_at, c_at = _check_memory(dev, [a.size * in_size, b.size * in_size, m * n * 4], "gemm")
    dev.write(a_at, np.ascontiguousarray(a, in_t).tobytes())
    dev.write(b_at, np.ascontiguousarray(b, in_t).tobytes())
    flags = OUT_FULL << 19
    words = [0x10 | flags, m, k, n, a_at, k * in_size, b_at, n * in_size, c_at, n * 4, 0, 0, unit_scale(cfg)]
    record = dev.run([words], budget)
    out = np.frombuffer(dev.read(c_at, m * n * 4), np.uint32).reshape(m, n)
    return Block(out, record, dev.index)


# -- CONV2D -------------------------------------------------------------------------------------


def conv2d_model(cfg: AccelConfig, x: npt.NDArray, w: npt.NDArray, stride: int, pad: int) -> npt.NDArray[np.uint32]:
    """The CONV2D command's result (NHWC input, HWIO weights), full accumulators, NHWC."""
    kh, kw, cin, cout = w.shape
    a = im2col(x, kh, kw, stride, pad)
    out = loop_result(cfg, a, w.reshape(-1, cout), None, unit_scale(cfg), 0, OUT_FULL, conv_k_tiles(cfg, kh, kw, cin))
    batch, h, wid, _ = x.shape
    return out.astype(np.uint32).reshape(batch, out_size(h, kh, stride, pad), out_size(wid, kw, stride, pad), cout)


def conv2d(dev: Device, x: npt.NDArray, w: npt.NDArray, stride: int, pad: int, budget: int) -> Block:
    """One CONV2D command: ``x`` (N, H, W, C_in), ``w`` (kh, kw, C_in, C_out), input bit patterns."""
    cfg = dev.cfg
    batch, h, wid, cin = x.shape
    kh, kw, _, cout = w.shape
    oh, ow = out_size(h, kh, stride, pad), out_size(wid, kw, stride, pad)
    in_t = _in_type(cfg)
    size = np.dtype(in_t).itemsize
    x_at, w_at, o_at = _check_memory(dev, [x.size * size, w.size * size, batch * oh * ow * cout * 4], "conv2d")
    dev.write(x_at, np.ascontiguousarray(x, in_t).tobytes())
    dev.write(w_at, np.ascontiguousarray(w, in_t).tobytes())
    words = [
        0x11 | OUT_FULL << 19, batch | cin << 16, h | wid << 16, cout | kh << 16 | kw << 24, stride | pad << 8,
        x_at, w_at, o_at, 0, unit_scale(cfg),
    ]  # fmt: skip
    record = dev.run([words], budget)
    out = np.frombuffer(dev.read(o_at, batch * oh * ow * cout * 4), np.uint32)
    return Block(out.reshape(batch, oh, ow, cout), record, dev.index)


# -- VEC: element-wise operations and row folds -------------------------------------------------


def max_vec_rows(cfg: AccelConfig, regions: int) -> int:
    """Rows of one element-wise block: ``regions`` operands side by side in the scratchpad."""
    return min(65535, cfg.sp_rows // regions)


def _vec_command(cfg: AccelConfig, op: VecOp, rows: int, scalar: int, shift: int, **fields: object) -> VecCommand:
    return VecCommand(op=op, rows=rows, elems=cfg.dim, scalar=scalar & 0xFFFFFFFF, shift=shift, **fields)


def vec_model(
    cfg: AccelConfig, op: VecOp, a: npt.NDArray, b: npt.NDArray | None, scalar: int = 0, shift: int = 0
) -> npt.NDArray:
    """``op`` over rows of ``cfg.dim`` elements in the scratchpad, as the vector engine computes it."""
    rows = a.shape[0]
    sp = np.zeros((3 * rows, cfg.dim), np.uint64)
    sp[:rows] = a
    if b is not None:
        sp[rows : 2 * rows] = b
    command = _vec_command(cfg, op, rows, scalar, shift, a=0, b=rows, d=2 * rows)
    engine_model.run(cfg, command, sp, np.zeros((1, cfg.cols), np.uint64))
    return sp[2 * rows :].astype(_in_type(cfg))


def vec(
    dev: Device, op: VecOp, a: npt.NDArray, b: npt.NDArray | None, budget: int, scalar: int = 0, shift: int = 0
) -> Block:
    """LOAD A (and B) into the scratchpad, one VEC command, STORE D: rows of ``cfg.dim`` elements."""
    cfg = dev.cfg
    rows, width = a.shape
    in_t = _in_type(cfg)
    row_bytes = width * np.dtype(in_t).itemsize
    addrs = _check_memory(dev, [rows * row_bytes] * 3, "vec")
    loads = []
    for k, operand in enumerate((a, b) if op in B_OPERAND_OPS else (a,)):
        dev.write(addrs[k], np.ascontiguousarray(operand, in_t).tobytes())
        loads.append([0x01, addrs[k], row_bytes, rows | width << 16, k * rows])
    command = _vec_command(cfg, op, rows, scalar, shift, a=0, b=rows, d=2 * rows)
    store = [0x02 | 1 << 12, addrs[2], row_bytes, rows | width << 16, 2 * rows, 0]  # from the scratchpad
    record = dev.run([*loads, FENCE, command.words(), FENCE, store, FENCE], budget)
    out = np.frombuffer(dev.read(addrs[2], rows * row_bytes), in_t).reshape(rows, width)
    return Block(out, record, dev.index)


def fold_model(cfg: AccelConfig, a: npt.NDArray, reduce_max: bool) -> npt.NDArray:
    """Each row folded into one value: a max in the input type, or a sum in the accumulator type."""
    rows = a.shape[0]
    sp = np.zeros((rows + (rows if reduce_max else 0), cfg.dim), np.uint64)
    sp[:rows] = a
    acc = np.zeros((1 if reduce_max else rows, cfg.cols), np.uint64)
    op = VecOp.MAX if reduce_max else VecOp.COPY
    command = _vec_command(cfg, op, rows, 0, 0, a=0, b=0, d=rows if reduce_max else 0, d_acc=not reduce_max,
                           reduce=True, reduce_max=reduce_max)  # fmt: skip
    engine_model.run(cfg, command, sp, acc)
    if reduce_max:
        return sp[rows:, 0].astype(_in_type(cfg))
    return acc[:, 0].astype(np.uint32)


def fold(dev: Device, a: npt.NDArray, reduce_max: bool, budget: int) -> Block:
    """Each row of ``a`` folded on the vector engine: its max (into the scratchpad, input type) or
    its sum (COPY folded by ADD into the accumulator, so int8 sums do not saturate)."""
    cfg = dev.cfg
    rows, width = a.shape
    in_t = _in_type(cfg)
    in_size = np.dtype(in_t).itemsize
    out_size_ = in_size if reduce_max else 4
    a_at, d_at = _check_memory(dev, [rows * width * in_size, rows * out_size_], "fold")
    dev.write(a_at, np.ascontiguousarray(a, in_t).tobytes())
    load = [0x01, a_at, width * in_size, rows | width << 16, 0]
    op = VecOp.MAX if reduce_max else VecOp.COPY
    command = _vec_command(cfg, op, rows, 0, 0, a=0, b=0, d=rows if reduce_max else 0, d_acc=not reduce_max,
                           reduce=True, reduce_max=reduce_max)  # fmt: skip
    if reduce_max:  # element 0 of each scratchpad row, no read-out
        store = [0x02 | 1 << 12, d_at, in_size, rows | 1 << 16, rows, 0]
    else:  # element 0 of each accumulator row, full width
        store = [0x02 | OUT_FULL << 15, d_at, 4, rows | 1 << 16, 0, unit_scale(cfg)]
    record = dev.run([load, FENCE, command.words(), FENCE, store, FENCE], budget)
    out = np.frombuffer(dev.read(d_at, rows * out_size_), in_t if reduce_max else np.uint32)
    return Block(out.copy(), record, dev.index)

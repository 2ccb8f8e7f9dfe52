"""A VEC command over ``n`` elements as a tile-simulator case (``pyard bench vector``): operands
loaded, the command, the result stored back and its model result, so the run is checked exactly."""

from __future__ import annotations

import numpy as np

from rtl.config import AccelConfig
from rtl.readout_model import readout
from rtl.vector import engine_model
from rtl.vector.engine_model import B_OPERAND_OPS, VecCommand
from rtl.vector.ops import VecOp
from tb import stimulus
from tb.tile_cases import LoopCase, unit_scale

__all__ = ["MEMORIES", "vector_case", "vector_rows"]

MEMORIES = ("sp", "acc")
BASE = 0x1000


def vector_rows(cfg: AccelConfig, n: int, memory: str) -> tuple[int, int]:
    """(rows, elements per row) of ``n`` elements in whole rows of the memory."""
    width = cfg.dim if memory == "sp" else cfg.cols
    return -(-n // width), min(n, width)


def _operands(cfg: AccelConfig, rng: np.random.Generator, shape: tuple[int, int], memory: str) -> np.ndarray:
    if memory == "sp":
        return stimulus.inputs(cfg, rng, shape, special=0.0).astype(np.uint64)
    return stimulus.accumulators(cfg, rng, shape).astype(np.uint64)


def vector_case(cfg: AccelConfig, op: VecOp, n: int, memory: str, seed: int) -> LoopCase:
    """``D = op(A, B, s)`` over ``n`` elements (whole rows), A, B and D in ``memory``."""
    rows, elems = vector_rows(cfg, n, memory)
    acc = memory == "acc"
    width = cfg.cols if acc else cfg.dim
    bits = cfg.acc_bits if acc else cfg.in_bits
    dtype = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    rng = np.random.default_rng(seed)
    a, b = (_operands(cfg, rng, (rows, width), memory) for _ in range(2))
    uses_b = op in B_OPERAND_OPS
    scalar = 0x3F000000 if cfg.dtype == "bf16" else 3  # 0.5, or 3
    command = VecCommand(
        op=op, rows=rows, elems=elems, a=0, b=rows, d=2 * rows, a_acc=acc, b_acc=acc, d_acc=acc,
        scalar=scalar, shift=1 if cfg.dtype == "int8" else 0,
    )  # fmt: skip
    mem = np.zeros((3 * rows, width), dtype=np.uint64)
    mem[:rows], mem[rows : 2 * rows] = a, b
    other = np.zeros((1, cfg.cols if not acc else cfg.dim), dtype=np.uint64)
    engine_model.run(cfg, command, *((other, mem) if acc else (mem, other)))
    want = mem[2 * rows :, :elems]
    if acc:
        want = readout(cfg, want, unit_scale(cfg), 0, 1)
    row_bytes = width * bits // 8
    addr = {"A": BASE, "B": BASE + rows * row_bytes, "D": BASE + 2 * rows * row_bytes}
    target = 1 << 12 if acc else 0
    loads = [[0x01 | target, addr["A"], row_bytes, rows | width << 16, 0]]
    if uses_b:
        loads.append([0x01 | target, addr["B"], row_bytes, rows | width << 16, rows])
    store = [0x02 | (1 << 15 if acc else 1 << 12), addr["D"], row_bytes, rows | elems << 16, 2 * rows, unit_scale(cfg)]
    return LoopCase(
        label=f"VEC {op.name} of {rows * elems} elements ({memory})",
        words=command.words(),
        writes=[(addr["A"], a.astype(dtype).tobytes()), (addr["B"], b.astype(dtype).tobytes())],
        out_addr=addr["D"],
        out_shape=(rows, elems),
        out_dtype=dtype,
        out_stride=width,
        want=want.astype(dtype),
        mem_bytes=addr["D"] + rows * row_bytes,
        stream=[*loads, [0x04], command.words(), [0x04], store, [0x04]],
    )

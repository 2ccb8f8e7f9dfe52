"""A VEC command over ``n`` elements as a tile-simulator case (``pyard bench vector``): operands
loaded, the command, the result stored back and its model result, so the run is checked exactly."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rtl.config import AccelConfig
from rtl.readout_model import readout
from rtl.vector import engine_model
from rtl.vector.engine_model import B_OPERAND_OPS, VecCommand
from rtl.vector.ops import VecOp
from tb import stimulus
from tb.tile_cases import LoopCase, unit_scale

__all__ = [
    "MEMORIES",
    "operand_rows",
    "stream_case",
    "update_case",
    "update_commands",
    "update_regions",
    "vector_case",
    "vector_rows",
]

MEMORIES = ("sp", "acc")
BASE = 0x1000


def vector_rows(cfg: AccelConfig, n: int, memory: str) -> tuple[int, int]:
    """(rows, elements per row) of ``n`` elements in whole rows of the memory."""
    width = cfg.dim if memory == "sp" else cfg.cols
    return -(-n // width), min(n, width)


def operand_rows(cfg: AccelConfig, memory: str, span: int, count: int) -> list[int]:
    """First rows of ``count`` regions of ``span`` rows, each in a bank of its own where they fit:
    a bank has one read port, so two operands in one bank take turns (half rate)."""
    banks, bank_rows = (cfg.sp_banks, cfg.sp_bank_rows) if memory == "sp" else (cfg.acc_banks, cfg.acc_bank_rows)
    if span <= bank_rows and count <= banks:
        return [k * bank_rows for k in range(count)]
    return [k * span for k in range(count)]


def _scalar_fields(cfg: AccelConfig) -> dict[str, int]:
    """The benchmarks' scalar: 0.5 (bf16 tiles), or 3 with a shift of 1 (int8 tiles)."""
    return {"scalar": 0x3F000000, "shift": 0} if cfg.dtype == "bf16" else {"scalar": 3, "shift": 1}


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
    at = dict(zip("abd", operand_rows(cfg, memory, rows, 3), strict=True))
    command = VecCommand(op=op, rows=rows, elems=elems, a_acc=acc, b_acc=acc, d_acc=acc, **at, **_scalar_fields(cfg))
    mem = np.zeros((at["d"] + rows, width), dtype=np.uint64)
    mem[at["a"] : at["a"] + rows], mem[at["b"] : at["b"] + rows] = a, b
    other = np.zeros((1, cfg.cols if not acc else cfg.dim), dtype=np.uint64)
    engine_model.run(cfg, command, *((other, mem) if acc else (mem, other)))
    want = mem[at["d"] :, :elems]
    if acc:
        want = readout(cfg, want, unit_scale(cfg), 0, 1)
    row_bytes = width * bits // 8
    addr = {"A": BASE, "B": BASE + rows * row_bytes, "D": BASE + 2 * rows * row_bytes}
    target = 1 << 12 if acc else 0
    loads = [[0x01 | target, addr["A"], row_bytes, rows | width << 16, at["a"]]]
    if uses_b:
        loads.append([0x01 | target, addr["B"], row_bytes, rows | width << 16, at["b"]])
    store = [0x02 | (1 << 15 if acc else 1 << 12), addr["D"], row_bytes, rows | elems << 16, at["d"], unit_scale(cfg)]
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


WAIT_VEC, SIGNAL_VEC = 1 << 28, 1 << 29  # LOAD/STORE: tokens with VEC; VEC: tokens with LOAD
WAIT_NEXT, SIGNAL_NEXT = 1 << 9, 1 << 11  # VEC: tokens with STORE


def _stream_commands(cfg: AccelConfig, op: VecOp, rows: int, chunk: int, addr: dict[str, int]) -> list[list[int]]:
    """Double-buffered chunks: LOAD → (token) VEC → (token) STORE, each buffer reused only after
    the unit that reads it gave its token back; tokens balance, so none is left over."""
    row_bytes = cfg.dim * cfg.in_bits // 8
    names = ["A", "B"] if op in B_OPERAND_OPS else ["A"]
    regions = operand_rows(cfg, "sp", 2 * chunk, 3)  # two buffers each of A, B and D
    base = dict(zip(["A", "B", "D"], regions, strict=True))
    starts = list(range(0, rows, chunk))
    loads, vecs, stores = [], [], []
    for k, r0 in enumerate(starts):
        n_rows, buf = min(chunk, rows - r0), (k % 2) * chunk
        reuse, more = k >= 2, k + 2 < len(starts)
        for i, name in enumerate(names):
            flags = (WAIT_VEC if reuse and i == 0 else 0) | (SIGNAL_VEC if i == len(names) - 1 else 0)
            loads.append(
                [0x01 | flags, addr[name] + r0 * row_bytes, row_bytes, n_rows | cfg.dim << 16, base[name] + buf]
            )
        deps = WAIT_VEC | SIGNAL_NEXT | (WAIT_NEXT if reuse else 0) | (SIGNAL_VEC if more else 0)
        command = VecCommand(
            op=op, rows=n_rows, elems=cfg.dim, a=base["A"] + buf, b=base.get("B", 0) + buf, d=base["D"] + buf,
            deps=deps, **_scalar_fields(cfg),
        )  # fmt: skip
        vecs.append(command.words())
        stores.append([0x02 | 1 << 12 | WAIT_VEC | (SIGNAL_VEC if more else 0), addr["D"] + r0 * row_bytes,
                       row_bytes, n_rows | cfg.dim << 16, base["D"] + buf, 0])  # fmt: skip
    # Each unit runs its commands in order, so the queue order only has to let loads run ahead.
    per_chunk = len(names)
    stream = loads[: 2 * per_chunk]
    for k in range(len(starts)):
        stream += [vecs[k], stores[k], *loads[(k + 2) * per_chunk : (k + 3) * per_chunk]]
    return [*stream, [0x04]]


def stream_case(cfg: AccelConfig, op: VecOp, n: int, chunk: int, seed: int) -> LoopCase:
    """``D = op(A, B, s)`` over ``n`` elements streamed from main memory in chunks of ``chunk``
    scratchpad rows and stored back as they are done (the FPTT update's pattern)."""
    rows, _ = vector_rows(cfg, n, "sp")
    dtype = np.uint8 if cfg.in_bits == 8 else np.uint16
    rng = np.random.default_rng(seed)
    a, b = (_operands(cfg, rng, (rows, cfg.dim), "sp") for _ in range(2))
    row_bytes = cfg.dim * cfg.in_bits // 8
    addr = {"A": BASE, "B": BASE + rows * row_bytes, "D": BASE + 2 * rows * row_bytes}
    mem = np.concatenate([a, b, np.zeros_like(a)])
    command = VecCommand(op=op, rows=rows, elems=cfg.dim, a=0, b=rows, d=2 * rows, **_scalar_fields(cfg))
    engine_model.run(cfg, command, mem, np.zeros((1, cfg.cols), dtype=np.uint64))
    return LoopCase(
        label=f"streamed VEC {op.name} of {rows * cfg.dim} elements",
        words=command.words(),
        writes=[(addr["A"], a.astype(dtype).tobytes()), (addr["B"], b.astype(dtype).tobytes())],
        out_addr=addr["D"],
        out_shape=(rows, cfg.dim),
        out_dtype=dtype,
        out_stride=cfg.dim,
        want=mem[2 * rows :].astype(dtype),
        mem_bytes=addr["D"] + rows * row_bytes,
        stream=_stream_commands(cfg, op, rows, chunk, addr),
    )


# θ, θ̄, λ and the gradient stream in; θ, θ̄, λ stream out. R' and a scratch tensor stay local.
UPDATE_IN, UPDATE_OUT = ("theta", "theta_bar", "lam", "grad"), ("theta", "theta_bar", "lam")
# Banks of the program's tensors: every command of the program reads two tensors of different
# banks (a bank has one read port), e.g. θ − θ̄, tmp − λ, grad + R'.
UPDATE_BANKS = {"theta": 0, "theta_bar": 1, "lam": 2, "grad": 3, "reg": 2, "tmp": 3}
BUFFERS = 3  # program: chunk k + 3 reuses chunk k's rows: one chunk loads while the next two are in use
# UPDATE: 4 buffers, so that an UPDATE does not wait for the STOREs of the chunk before it (only
# for those of two chunks before: the buffer the LOAD after it reuses).
FUSED_BUFFERS = 4

Regions = Callable[[int], dict[str, int]]


def update_regions(cfg: AccelConfig, chunk: int, fused: bool = True) -> Regions | None:
    """The first rows of each tensor of buffer b (a function of b), or None if they do not fit."""
    return _fused_regions(cfg, chunk) if fused else _program_regions(cfg, chunk)


def _program_regions(cfg: AccelConfig, chunk: int) -> Regions | None:
    """BUFFERS buffers of each of the program's tensors, each tensor in its bank (UPDATE_BANKS)."""
    banks, bank_rows = cfg.sp_banks, cfg.sp_bank_rows
    span = BUFFERS * chunk
    if banks >= 4 and 2 * span <= bank_rows:
        used: dict[int, int] = {}
        regions = {}
        for name, bank in UPDATE_BANKS.items():
            regions[name] = bank * bank_rows + used.get(bank, 0)
            used[bank] = used.get(bank, 0) + span
    elif len(UPDATE_BANKS) * span <= cfg.sp_rows:
        regions = {name: k * span for k, name in enumerate(UPDATE_BANKS)}
    else:
        return None
    return lambda b: {name: row + b * chunk for name, row in regions.items()}


def _fused_regions(cfg: AccelConfig, chunk: int) -> Regions | None:
    """FUSED_BUFFERS buffers of θ, θ̄, λ, g. UPDATE reads θ then λ on one read port and θ̄ then g
    on the other, so θ and λ share a bank and θ̄ and g another; and buffer b uses the bank pair
    b mod 2, so the LOAD of the next chunk (the scratchpad's first write port) never writes a bank
    the UPDATE writes (its second port, refused when the first writes the same bank)."""
    banks, bank_rows = cfg.sp_banks, cfg.sp_bank_rows
    if banks >= 4 and FUSED_BUFFERS * chunk <= bank_rows:

        def region(b: int) -> dict[str, int]:
            first, second = (2 * (b % 2) + k for k in range(2))
            slot = (b // 2) * 2 * chunk
            return {
                "theta": first * bank_rows + slot, "lam": first * bank_rows + slot + chunk,
                "theta_bar": second * bank_rows + slot, "grad": second * bank_rows + slot + chunk,
            }  # fmt: skip

        return region
    if 4 * FUSED_BUFFERS * chunk > cfg.sp_rows:
        return None
    return lambda b: {name: (4 * b + k) * chunk for k, name in enumerate(UPDATE_IN)}


def update_case(
    cfg: AccelConfig, n: int, chunk: int, seed: int, eta: float = 0.05, alpha: float = 0.5, fused: bool = True
) -> LoopCase:
    """The FPTT update of ``n`` bf16 parameters streamed from main memory in chunks of ``chunk``
    rows: LOAD θ, θ̄, λ, g → one VEC UPDATE per chunk (``fused``; the update unit) or the 13-command
    program (rtl/vector/programs.py, ``fptt_update``) → STORE θ, θ̄, λ. The expected result is the
    program's, through the engine model, either way."""
    from rtl.vector.programs import Loc, UpdateChunk, bf16_scalar, fptt_update

    rows, _ = vector_rows(cfg, n, "sp")
    regions = update_regions(cfg, chunk, fused)
    assert cfg.dtype == "bf16" and regions is not None
    rng = np.random.default_rng(seed)
    tensors = {name: stimulus.inputs(cfg, rng, (rows, cfg.dim), special=0.0).astype(np.uint64) for name in UPDATE_IN}
    scalars = {"eta": bf16_scalar(eta), "alpha": bf16_scalar(alpha)}
    # The model: the same program over all rows at once (every command is row-wise).
    whole = {name: k * rows for k, name in enumerate(UPDATE_BANKS)}
    mem = np.zeros((len(whole) * rows, cfg.dim), dtype=np.uint64)
    for name in UPDATE_IN:
        mem[whole[name] : whole[name] + rows] = tensors[name]
    for command in fptt_update(rows, cfg.dim, UpdateChunk(**{k: Loc(v) for k, v in whole.items()}), **scalars):
        engine_model.run(cfg, command, mem, np.zeros((1, cfg.cols), dtype=np.uint64))
    want = np.concatenate([mem[whole[name] : whole[name] + rows] for name in UPDATE_OUT])

    row_bytes = cfg.dim * 2
    addr = {name: BASE + k * rows * row_bytes for k, name in enumerate(UPDATE_IN)}
    out_addr = BASE + len(UPDATE_IN) * rows * row_bytes
    stream = update_commands(cfg, rows, chunk, addr, out_addr, regions, scalars, fused)
    return LoopCase(
        label=f"FPTT update of {rows * cfg.dim} parameters ({'UPDATE' if fused else 'program'})",
        words=stream[0],
        writes=[(addr[name], tensors[name].astype(np.uint16).tobytes()) for name in UPDATE_IN],
        out_addr=out_addr,
        out_shape=(len(UPDATE_OUT) * rows, cfg.dim),
        out_dtype=np.uint16,
        out_stride=cfg.dim,
        want=want.astype(np.uint16),
        mem_bytes=out_addr + len(UPDATE_OUT) * rows * row_bytes,
        stream=stream,
    )


def update_commands(
    cfg: AccelConfig, rows: int, chunk: int, addr: dict, out_addr: int, regions: Regions, scalars: dict, fused: bool
) -> list[list[int]]:
    """With B buffers (BUFFERS for the program, FUSED_BUFFERS for UPDATE), chunk k: LOADs L_k (the
    last gives VEC a token; from k = B the first waits for the token of P_{k-2}), P_k (one UPDATE,
    or the program: its first command waits for L_k and, from k = B - 2, for the STOREs
    S_{k-B+2} of the buffer L_{k+2} reuses; its last gives STORE a token, and LOAD one for L_{k+2}),
    STOREs S_k (the first waits for P_k, the last gives P_{k+B-2} a token). Pushed as L_0 … L_{B-1},
    then P_k S_k L_{k+2}: a command that waits is never pushed before the one that gives its
    token. With B = 4 an UPDATE does not wait for the STOREs just before it, so VEC and STORE
    overlap; its commands are pushed in the order the units start them (below)."""
    from rtl.vector.programs import Loc, UpdateChunk, fptt_update, fptt_update_fused

    row_bytes = cfg.dim * 2
    starts = list(range(0, rows, chunk))
    count = len(starts)
    buffers = FUSED_BUFFERS if fused else BUFFERS
    lag = buffers - 2  # P_k waits for S_{k - lag}
    # Loads pushed without a token: all free buffers for the program; for UPDATE only two, so that
    # every later L_{k+2} starts when P_k ends, as in the steady state (loads queued ahead of it
    # were measured to halve the rate of the UPDATEs they overlap).
    free = 2 if fused else buffers

    def size(k: int) -> int:
        return min(chunk, rows - starts[k])

    def loads(k: int) -> list[list[int]]:
        out = []
        for i, name in enumerate(UPDATE_IN):
            flags = (WAIT_VEC if k >= free and i == 0 else 0) | (SIGNAL_VEC if i == len(UPDATE_IN) - 1 else 0)
            source = addr[name] + starts[k] * row_bytes
            out.append([0x01 | flags, source, row_bytes, size(k) | cfg.dim << 16, regions(k % buffers)[name]])
        return out

    def program(k: int) -> list[list[int]]:
        where = regions(k % buffers)
        if fused:
            locs = UpdateChunk(**{name: Loc(where[name]) for name in UPDATE_IN}, reg=Loc(0), tmp=Loc(0))
            cmds = [fptt_update_fused(size(k), cfg.dim, locs, **scalars)]
        else:
            cmds = fptt_update(size(k), cfg.dim, UpdateChunk(**{n: Loc(r) for n, r in where.items()}), **scalars)
        words = [c.words() for c in cmds]
        words[0][0] |= WAIT_VEC | (WAIT_NEXT if k >= lag else 0)
        words[-1][0] |= SIGNAL_NEXT | (SIGNAL_VEC if k + 2 >= free and k + 2 < count else 0)
        return words

    def stores(k: int) -> list[list[int]]:
        out = []
        for i, name in enumerate(UPDATE_OUT):
            last = i == len(UPDATE_OUT) - 1
            flags = (WAIT_VEC if i == 0 else 0) | (SIGNAL_VEC if last and k + lag < count else 0)
            target = out_addr + (i * rows + starts[k]) * row_bytes
            local = regions(k % buffers)[name]
            out.append([0x02 | 1 << 12 | flags, target, row_bytes, size(k) | cfg.dim << 16, local, 0])
        return out

    stream = [words for k in range(min(free, count)) for words in loads(k)]
    if not fused:
        for k in range(count):
            stream += program(k) + stores(k)
            if buffers <= k + 2 < count:
                stream += loads(k + 2)
        return [*stream, [0x04]]
    # In the order the units start them, so that no command waiting in its unit's gate holds up
    # the queue in front of another unit's: P_{k+1} (it starts when P_k ends), then the loads of
    # L_{k+2} and the stores of S_k alternately (both start when P_k ends, one DMA each).
    stream += program(0)
    for k in range(count):
        if k + 1 < count:
            stream += program(k + 1)
        after = loads(k + 2) if free <= k + 2 < count else []
        for i in range(max(len(after), len(UPDATE_OUT))):
            stream += after[i : i + 1] + stores(k)[i : i + 1]
    return [*stream, [0x04]]

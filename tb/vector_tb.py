"""cocotb testbench of the tile's vector engine through the tile's ports (AXI4-Lite commands, AXI4
memory), against ``rtl/vector/engine_model.py`` bit for bit.

Rows are loaded into the scratchpad and the accumulator, a stream of random VEC commands runs over
them, and every row is stored back and compared with the model that ran the same commands. Chains
with the mesh check the tokens between EXEC, VEC and STORE; bad VEC commands must set their error.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from rtl.cmd import ERR
from rtl.config import AccelConfig
from rtl.readout_model import readout
from rtl.vector import engine_model
from rtl.vector.engine_model import VecCommand
from rtl.vector.ops import FLOAT_OPS, INT_OPS, VecOp
from tb import stimulus
from tb.tile_cases import unit_scale
from tb.tile_tb import EXEC, FENCE, LOAD, STORE, Tile, gemm_reference, get, put, run_gemm_loop, start, tb_args
from tb.vector_cases import stream_case

ROWS = 80  # rows of each memory the tests use
WAIT_PREV, WAIT_NEXT, SIGNAL_PREV, SIGNAL_NEXT = 1 << 8, 1 << 9, 1 << 10, 1 << 11
# LOAD's, EXEC's and STORE's tokens with the vector unit; on VEC, its tokens with LOAD.
WAIT_VEC, SIGNAL_VEC = 1 << 28, 1 << 29
SP_MEM, ACC_MEM, SP_OUT, ACC_OUT = 0x10000, 0x20000, 0x30000, 0x40000
F32_EDGES = [
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
    0x80400000, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F808000, 0x3F818000, 0x3EFFFFFF,
]  # fmt: skip
I32_EDGES = [0, 1, -1, 127, -128, 2**31 - 1, -(2**31), 255, 1 << 16, -(1 << 20)]


def _acc_values(cfg: AccelConfig, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    values = stimulus.accumulators(cfg, rng, shape).astype(np.uint64)
    edges = np.array(I32_EDGES if cfg.acc_dtype == "int32" else F32_EDGES, dtype=np.int64) & 0xFFFFFFFF
    if cfg.acc_bits == 16:
        edges = edges >> 16
    mask = rng.random(shape) < 0.1
    return np.where(mask, rng.choice(edges.astype(np.uint64), shape), values)


BF16_SCALARS = [0x3F80, 0x3F00, 0x3D4D, 0x0000, 0x8000, 0x7F80, 0x7FC0, 0x0080, 0x0001, 0x7F7F, 0xC2F7]


def random_update(cfg: AccelConfig, rng: np.random.Generator) -> VecCommand:
    """A valid UPDATE: θ from rows 0-15, θ̄ 16-31, λ 40-55, g 56-71 (apart, 1-8 rows each), edge
    or random bf16 scalars (α = 0 with κ = 0 included)."""

    def scalar() -> int:
        return (
            int(rng.choice(BF16_SCALARS)) if rng.random() < 0.4 else int(np.float32(rng.normal()).view(np.uint32) >> 16)
        )

    return VecCommand(
        op=VecOp.UPDATE, rows=int(rng.integers(1, 9)), elems=int(rng.integers(1, cfg.dim + 1)),
        a=int(rng.integers(0, 8)), b=int(rng.integers(16, 24)), d=int(rng.integers(40, 48)),
        g=int(rng.integers(56, 64)), scalar=scalar() | scalar() << 16, kappa=scalar(),
    )  # fmt: skip


# REQUANT's multipliers (QuantizeMultiplier's ends 2^30, 2^31 − 1; INT32_MIN for the saturation
# of INT32_MIN · INT32_MIN) and shifts (the limits −31, 30 and beyond them, clamped).
RQ_MULTS = [1 << 30, 2**31 - 1, 1518500250, -(2**31), 0, 1]
RQ_SHIFTS = [-31, -30, -8, -1, 0, 1, 7, 30, 31, -40, 2**31 - 1, -(2**31)]


def random_requant(cfg: AccelConfig, rng: np.random.Generator) -> VecCommand:
    """A valid REQUANT: A from rows 0-15 of either memory, multipliers and shifts in accumulator
    rows 16-24 (their values are written into the accumulator's initial contents by ``requant_rows``),
    D in either memory's rows 40-55; both roundings, random zero points and clamp ranges."""
    a_acc, d_acc = (bool(x) for x in rng.integers(0, 2, 2))
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    if rng.random() < 0.5:
        lo, hi = -128, 127
    scalar = engine_model.requant_scalar(int(rng.integers(-128, 128)), lo, hi, bool(rng.random() < 0.5))
    return VecCommand(
        op=VecOp.REQUANT, rows=int(rng.integers(1, 9)), elems=int(rng.integers(1, cfg.cols + 1)),
        a=int(rng.integers(0, 8)), b=2 * int(rng.integers(8, 12)), d=int(rng.integers(40, 48)),
        a_acc=a_acc, b_acc=True, d_acc=d_acc, scalar=scalar,
    )  # fmt: skip


def requant_rows(cfg: AccelConfig, rng: np.random.Generator, acc: np.ndarray) -> None:
    """Accumulator rows 16-24 as REQUANT's B pairs (even rows multipliers, odd rows shifts)."""
    for row in range(16, 25):
        values = RQ_MULTS if row % 2 == 0 else RQ_SHIFTS
        random = rng.integers(1 << 30, 1 << 31, cfg.cols) if row % 2 == 0 else rng.integers(-31, 31, cfg.cols)
        acc[row] = np.where(rng.random(cfg.cols) < 0.5, rng.choice(values, cfg.cols), random) & 0xFFFFFFFF


def random_command(cfg: AccelConfig, rng: np.random.Generator) -> VecCommand:
    """A valid VEC command over rows 0-71: A from rows 0-15, B from 16-31, D in 40-55, or in place;
    on tiles with the update unit, one in eight an UPDATE; on int8 tiles, one in eight a REQUANT."""
    if cfg.update_lanes and rng.random() < 0.125:
        return random_update(cfg, rng)
    if cfg.dtype == "int8" and rng.random() < 0.125:
        return random_requant(cfg, rng)
    op = VecOp(
        int(rng.choice(sorted(FLOAT_OPS - {VecOp.REQUANT} if cfg.dtype == "bf16" else INT_OPS - {VecOp.REQUANT})))
    )
    a_acc, b_acc, d_acc = (bool(x) for x in rng.integers(0, 2, 3))
    rows = int(rng.integers(1, 9))
    a, b, d = int(rng.integers(0, 8)), int(rng.integers(16, 24)), int(rng.integers(40, 48))
    if rng.random() < 0.2:
        d_acc, d = a_acc, a  # in place
    accumulate = d_acc and d != a and rng.random() < 0.4
    d_one = accumulate and rng.random() < 0.5
    reduce = bool(rng.random() < 0.25)  # fold each row into its element 0
    used = (a_acc, d_acc, b_acc) if op in engine_model.B_OPERAND_OPS else (a_acc, d_acc)
    widths = [cfg.cols if acc else cfg.dim for acc in used]
    if cfg.dtype == "bf16":
        scalar = int(rng.choice(F32_EDGES)) if rng.random() < 0.4 else int(np.float32(rng.normal() * 2).view(np.uint32))
        shift = 0
    else:
        scalar = int(rng.choice(I32_EDGES)) if rng.random() < 0.4 else int(rng.integers(-300, 300))
        shift = int(rng.integers(0, 32)) if rng.random() < 0.7 else int(rng.integers(0, 9))
    return VecCommand(
        op=op, rows=rows, elems=int(rng.integers(1, min(widths) + 1)), a=a, b=b, d=d,
        a_acc=a_acc, b_acc=b_acc, d_acc=d_acc, b_one=bool(rng.random() < 0.3), d_one=d_one,
        accumulate=accumulate, scalar=scalar & 0xFFFFFFFF, shift=shift,
        reduce=reduce, reduce_max=reduce and bool(rng.random() < 0.5),
    )  # fmt: skip


def every_op(cfg: AccelConfig, rng: np.random.Generator, cmds: list[VecCommand]) -> list[VecCommand]:
    """``cmds`` plus, for each op of the tile's type that none of them uses, one random command with
    that op (drawn until one comes up), so every batch runs every op whatever the seed."""
    ops = FLOAT_OPS if cfg.dtype == "bf16" else INT_OPS
    out = list(cmds)
    for op in sorted(ops - {VecOp(c.op) for c in cmds}):
        while (c := random_command(cfg, rng)).op != op:
            pass
        out.insert(int(rng.integers(0, len(out) + 1)), c)
    return out


class Memories:
    """The first ROWS rows of both memories, in the tile and in the model."""

    def __init__(self, t: Tile, rng: np.random.Generator) -> None:
        cfg = t.cfg
        self.t, self.cfg = t, cfg
        self.sp = stimulus.inputs(cfg, rng, (ROWS, cfg.dim), special=0.1).astype(np.uint64)
        self.acc = _acc_values(cfg, rng, (ROWS, cfg.cols))
        if cfg.dtype == "int8":
            requant_rows(cfg, rng, self.acc)

    @property
    def in_dtype(self):
        return np.uint8 if self.cfg.in_bits == 8 else np.uint16

    @property
    def acc_dtype(self):
        return np.uint32 if self.cfg.acc_bits == 32 else np.uint16

    def load_commands(self) -> list[list[int]]:
        cfg = self.cfg
        put(self.t, SP_MEM, self.sp.astype(self.in_dtype))
        put(self.t, ACC_MEM, self.acc.astype(self.acc_dtype))
        sp_bytes, acc_bytes = cfg.dim * cfg.in_bits // 8, cfg.cols * cfg.acc_bits // 8
        return [
            [LOAD, SP_MEM, sp_bytes, ROWS | cfg.dim << 16, 0],
            [LOAD | 1 << 12, ACC_MEM, acc_bytes, ROWS | cfg.cols << 16, 0],
            [FENCE],
        ]

    def store_commands(self) -> list[list[int]]:
        cfg = self.cfg
        sp_bytes, acc_bytes = cfg.dim * cfg.in_bits // 8, cfg.cols * cfg.acc_bits // 8
        return [
            [FENCE],  # the units are ordered only by tokens or a FENCE: the VECs finish first
            [STORE | 1 << 12, SP_OUT, sp_bytes, ROWS | cfg.dim << 16, 0],
            [STORE | 1 << 15, ACC_OUT, acc_bytes, ROWS | cfg.cols << 16, 0, unit_scale(cfg)],
            [FENCE],
        ]

    def check(self, label: str) -> None:
        cfg = self.cfg
        got_sp = get(self.t, SP_OUT, (ROWS, cfg.dim), self.in_dtype).astype(np.uint64)
        got_acc = get(self.t, ACC_OUT, (ROWS, cfg.cols), self.acc_dtype).astype(np.uint64)
        want_acc = readout(cfg, self.acc, unit_scale(cfg), 0, 1).astype(np.uint64)
        for name, got, want in (("scratchpad", got_sp, self.sp), ("accumulator", got_acc, want_acc)):
            bad = np.argwhere(got != want)
            assert bad.size == 0, (
                f"{label}: {len(bad)} wrong {name} elements, first at row/element {tuple(bad[0])}: "
                f"{int(got[tuple(bad[0])]):#x} != {int(want[tuple(bad[0])]):#x}"
            )


async def run_commands(t: Tile, commands: list[list[int]], max_cycles: int = 200_000) -> None:
    for words in commands:
        while (await t.read("STATUS")) >> 16 & 0xFF == 0:  # wait for a free queue slot
            await ClockCycles(t.dut.clk, 16)
        await t.push(words)
    status = await t.wait_idle(max_cycles)
    assert not status & 4, f"error status {status:#x} (unit {status >> 4 & 7}, code {status >> 8 & 0xFF})"


@cocotb.test()
async def tile_vector(dut) -> None:
    """Random VEC command streams over both memories, every operation, flag and edge value."""
    t = await start(dut)
    args = tb_args(seed=1, batches=3, commands=40)
    for batch in range(args["batches"]):
        rng = np.random.default_rng(args["seed"] + batch)
        mems = Memories(t, rng)
        cmds = every_op(t.cfg, rng, [random_command(t.cfg, rng) for _ in range(args["commands"])])
        await t.write("CONTROL", 0b100)
        await run_commands(t, mems.load_commands() + [c.words() for c in cmds] + mems.store_commands())
        elements = await t.read("VEC_ELEMS")
        for c in cmds:
            engine_model.run(t.cfg, c, mems.sp, mems.acc)
        mems.check(f"batch {batch}")
        assert elements == sum(c.rows * c.elems for c in cmds), f"VEC_ELEMS {elements}"


@cocotb.test()
async def tile_vector_chain(dut) -> None:
    """Tokens between the units: VEC → EXEC (a transformed A), EXEC → VEC (an activation of the
    result, written to the scratchpad) → STORE, with no FENCE between them."""
    t = await start(dut)
    cfg = t.cfg
    rng = np.random.default_rng(tb_args(seed=2)["seed"])
    mems = Memories(t, rng)
    m_rows = 12
    a_row, a2_row, b_row, h_row, c_row = 0, 16, 32, 48, 20
    transform = VecCommand(op=VecOp.NEG, rows=m_rows, elems=cfg.rows, a=a_row, d=a2_row, deps=SIGNAL_PREV)
    act = VecOp.SIGMOID if cfg.dtype == "bf16" else VecOp.MULS
    activate = VecCommand(
        op=act, rows=m_rows, elems=cfg.cols, a=c_row, a_acc=True, d=h_row, scalar=3,
        shift=4 if cfg.dtype == "int8" else 0, deps=WAIT_PREV | SIGNAL_NEXT,
    )  # fmt: skip
    sp_bytes = cfg.dim * cfg.in_bits // 8
    commands = [
        *mems.load_commands(),
        transform.words(),
        [EXEC | WAIT_VEC | SIGNAL_VEC, b_row | cfg.rows << 16, a2_row, m_rows, c_row],
        activate.words(),
        [STORE | 1 << 12 | WAIT_VEC, SP_OUT, sp_bytes, ROWS | cfg.dim << 16, 0],
        [FENCE],
    ]
    await run_commands(t, commands)
    engine_model.run(cfg, transform, mems.sp, mems.acc)
    a = mems.sp[a2_row : a2_row + m_rows, : cfg.rows].astype(mems.in_dtype)
    b = mems.sp[b_row : b_row + cfg.rows, : cfg.cols].astype(mems.in_dtype)
    mems.acc[c_row : c_row + m_rows] = gemm_reference(cfg, a, b)
    engine_model.run(cfg, activate, mems.sp, mems.acc)
    got = get(t, SP_OUT, (ROWS, cfg.dim), mems.in_dtype).astype(np.uint64)
    bad = np.argwhere(got != mems.sp)
    assert bad.size == 0, f"{len(bad)} wrong elements, first at {tuple(bad[0])}"


def bad_commands(cfg: AccelConfig) -> list[tuple[list[int], int]]:
    """Each VEC rule broken once (docs/isa.md, "VEC"), with the error code it must raise."""
    ok = VecCommand(op=VecOp.ADD, rows=4, elems=1, a=0, b=8, d=16)
    undefined = 31 if cfg.dtype == "bf16" else VecOp.RECIP  # 31: the op field's last code
    return [
        (VecCommand(op=undefined, rows=1, elems=1).words(), ERR["BAD_FIELD"]),
        (VecCommand(op=VecOp.COPY, rows=1, elems=1, d=8, accumulate=True).words(), ERR["BAD_FIELD"]),
        (VecCommand(op=VecOp.COPY, rows=1, elems=1, d=8, d_acc=True, d_one=True).words(), ERR["BAD_FIELD"]),
        ([ok.words()[0] | 1 << 25, *ok.words()[1:]], ERR["BAD_FIELD"]),
        (VecCommand(op=VecOp.ADD, rows=4, elems=1, a=0, b=8, d=16, reduce_max=True).words(), ERR["BAD_FIELD"]),
        ([FENCE | WAIT_VEC], ERR["BAD_DEPS"]),
        ([0x11 | SIGNAL_VEC, 1 | 1 << 16, 1 | 1 << 16, 1 | 1 << 16 | 1 << 24, 1], ERR["BAD_DEPS"]),
        (VecCommand(op=VecOp.COPY, rows=0, elems=1).words(), ERR["ZERO_DIM"]),
        (VecCommand(op=VecOp.COPY, rows=1, elems=0).words(), ERR["ZERO_DIM"]),
        (VecCommand(op=VecOp.COPY, rows=1, elems=cfg.dim + 1, d=8).words(), ERR["TOO_LARGE"]),
        (VecCommand(op=VecOp.COPY, rows=1, elems=cfg.cols + 1, d=8, a_acc=True).words(), ERR["TOO_LARGE"]),
        (VecCommand(op=VecOp.COPY, rows=2, elems=1, a=cfg.sp_rows - 1, d=8).words(), ERR["SP_RANGE"]),
        (VecCommand(op=VecOp.ADD, rows=2, elems=1, b=cfg.sp_rows - 1, d=8).words(), ERR["SP_RANGE"]),
        (VecCommand(op=VecOp.COPY, rows=2, elems=1, d=cfg.acc_rows - 1, d_acc=True).words(), ERR["ACC_RANGE"]),
        (VecCommand(op=VecOp.COPY, rows=4, elems=1, a=0, d=2).words(), ERR["BAD_SHAPE"]),
        (VecCommand(op=VecOp.ADD, rows=4, elems=1, a=0, b=9, d=8).words(), ERR["BAD_SHAPE"]),
        (VecCommand(op=VecOp.ADD, rows=4, elems=1, a=20, b=8, d=8, b_one=True).words(), ERR["BAD_SHAPE"]),
        *_bad_updates(cfg),
        *_bad_requants(cfg),
    ]


def _bad_requants(cfg: AccelConfig) -> list[tuple[list[int], int]]:
    """REQUANT with a bad field (or on a bf16 tile at all), B outside the accumulator, D over B."""
    ok = {"op": VecOp.REQUANT, "rows": 4, "elems": 1, "a": 0, "b": 16, "d": 40, "a_acc": True, "b_acc": True}
    if cfg.dtype == "bf16":
        return [(VecCommand(**ok).words(), ERR["BAD_FIELD"])]
    bad = [{"b_acc": False}, {"b_one": True}, {"reduce": True}, {"shift": 3}, {"scalar": 1 << 25},
           {"scalar": engine_model.requant_scalar(0, 5, 4, False)}, {"d_acc": True, "accumulate": True}]  # fmt: skip
    return [
        *((VecCommand(**ok | b).words(), ERR["BAD_FIELD"]) for b in bad),
        (VecCommand(**ok | {"b": cfg.acc_rows - 1}).words(), ERR["ACC_RANGE"]),
        (VecCommand(**ok | {"elems": cfg.cols + 1}).words(), ERR["TOO_LARGE"]),
        (VecCommand(**ok | {"d": 17, "d_acc": True}).words(), ERR["BAD_SHAPE"]),
    ]


def _bad_updates(cfg: AccelConfig) -> list[tuple[list[int], int]]:
    """UPDATE's rules: undefined without the unit; scratchpad only, four disjoint spans in range."""
    ok = {"op": VecOp.UPDATE, "rows": 4, "elems": 1, "a": 0, "b": 8, "d": 16, "g": 24}
    if not cfg.update_lanes:
        return [(VecCommand(**ok).words(), ERR["BAD_FIELD"])]
    return [
        (VecCommand(**ok | {"d_acc": True}).words(), ERR["BAD_FIELD"]),
        (VecCommand(**ok | {"reduce": True}).words(), ERR["BAD_FIELD"]),
        (VecCommand(**ok | {"g": 18}).words(), ERR["BAD_SHAPE"]),
        (VecCommand(**ok | {"d": 0}).words(), ERR["BAD_SHAPE"]),
        (VecCommand(**ok | {"g": cfg.sp_rows - 3}).words(), ERR["SP_RANGE"]),
        (VecCommand(**ok | {"elems": cfg.dim + 1}).words(), ERR["TOO_LARGE"]),
    ]


@cocotb.test()
async def tile_vector_errors(dut) -> None:
    """Every bad VEC command raises its code (unit: decode) and runs nothing; the tile recovers."""
    t = await start(dut)
    for words, code in bad_commands(t.cfg):
        await t.push(words)
        await ClockCycles(dut.clk, 8)
        status = await t.read("STATUS")
        assert status & 4 and (status >> 8) & 0xFF == code, f"{words}: status {status:#x}, want code {code}"
        await t.write("CONTROL", 0b10)
        await ClockCycles(dut.clk, 4)
    assert await t.read("VEC_ELEMS") == 0, "a refused command computed elements"
    rng = np.random.default_rng(5)
    mems = Memories(t, rng)
    cmds = [random_command(t.cfg, rng) for _ in range(10)]
    await run_commands(t, mems.load_commands() + [c.words() for c in cmds] + mems.store_commands())
    for c in cmds:
        engine_model.run(t.cfg, c, mems.sp, mems.acc)
    mems.check("after the errors")


async def run_streamed(t: Tile, case) -> None:
    """A streamed case (tb/vector_cases.py): operands into memory, its command stream, the output
    compared exactly with the model's."""
    for addr, raw in case.writes:
        t.mem.data[addr : addr + len(raw)] = raw
    await run_commands(t, case.commands)
    got = get(t, case.out_addr, case.out_shape, case.out_dtype)
    bad = np.argwhere(got != case.want)
    assert bad.size == 0, f"{case.label}: {len(bad)} wrong elements, first at {tuple(bad[0])}"


@cocotb.test()
async def tile_vector_stream(dut) -> None:
    """Operands streamed from memory in double-buffered chunks, LOAD → VEC → STORE ordered only by
    tokens (VEC's with LOAD and with STORE), each buffer reused once its reader gave it back."""
    t = await start(dut)
    ops = [VecOp.ADD, VecOp.MULS] if t.cfg.dtype == "int8" else [VecOp.MADDS, VecOp.TANH]
    for seed, op in enumerate(ops):
        case = stream_case(t.cfg, op, n=37 * t.cfg.dim + 3, chunk=5, seed=seed)
        await run_streamed(t, case)


@cocotb.test(skip=not json.loads(os.environ.get("PYARD_CONFIG", "{}")).get("update_lanes"))
async def tile_fptt_update(dut) -> None:
    """The FPTT update streamed from memory, one UPDATE per chunk in four buffers, LOAD → UPDATE →
    STORE ordered by tokens only, against the 13-command program through the engine model."""
    from tb.vector_cases import update_case

    t = await start(dut)
    for seed, (alpha, chunk) in enumerate(((0.5, 5), (0.0, 3), (0.1, 8))):
        case = update_case(t.cfg, n=29 * t.cfg.dim + 3, chunk=chunk, seed=seed, alpha=alpha)
        await run_streamed(t, case)


def _bf16_tile() -> bool:
    return json.loads(os.environ.get("PYARD_CONFIG", "{}")).get("dtype") == "bf16"


@cocotb.test(skip=not _bf16_tile())
async def tile_lstm_step(dut) -> None:
    """One LSTM forward step on the tile: the gate GEMM as EXEC commands into the accumulator (the
    last gives VEC a token), then the vector engine's forward program (rtl/vector/programs.py),
    against the GEMM reference and the engine model bit for bit (B = 4, I = 4, H = cols)."""
    from rtl.vector.programs import Blocks, CellForward, Loc, lstm_forward, with_tokens

    t = await start(dut)
    cfg = t.cfg
    rng = np.random.default_rng(tb_args(seed=3)["seed"])
    mems = Memories(t, rng)
    batch, k_tiles, gates = 4, 2, 4  # xc = [x, h] of 2 · rows elements; one block per gate (H = cols)
    w_row, x_row, z_row = 0, 32, 0  # weight tiles (k, gate) in the scratchpad; z in the accumulator
    cell = CellForward(z=Loc(z_row, acc=True), s_prev=Loc(40), gates=Loc(44), s=Loc(60), ts=Loc(64), h=Loc(68))
    execs = []
    for g in range(gates):
        for k in range(k_tiles):
            last = g == gates - 1 and k == k_tiles - 1
            flags = (1 << 12 if k else 0) | (SIGNAL_VEC if last else 0)
            b_tile, a_slice = w_row + (k * gates + g) * cfg.rows, x_row + k * batch
            execs.append([EXEC | flags, b_tile | cfg.rows << 16, a_slice, batch, z_row + g * batch])
    program = with_tokens(lstm_forward(Blocks(batch, cfg.cols, cfg.cols), cell), signal_exec=False)
    await run_commands(t, mems.load_commands() + execs + [c.words() for c in program] + mems.store_commands())

    xc = np.concatenate(
        [mems.sp[x_row + k * batch : x_row + (k + 1) * batch, : cfg.rows] for k in range(k_tiles)], axis=1
    )
    for g in range(gates):
        w = np.concatenate(
            [mems.sp[w_row + (k * gates + g) * cfg.rows :][: cfg.rows, : cfg.cols] for k in range(k_tiles)]
        )
        z = gemm_reference(cfg, xc.astype(mems.in_dtype), w.astype(mems.in_dtype))
        mems.acc[z_row + g * batch : z_row + (g + 1) * batch] = z
    for command in program:
        engine_model.run(cfg, command, mems.sp, mems.acc)
    mems.check("LSTM step")


@cocotb.test()
async def tile_requant_then_gemm(dut) -> None:
    """The deploy executor's order on one tile: a GEMM with a bias row, then standalone LOADs, VEC
    REQUANTs and STOREs (the driver's requantization), then GEMMs with a bias again. The loop's
    outstanding counts must not take the standalone STOREs' finishes for its own (they drove its
    STORE count below zero, and a GEMM with a bias then waited forever for it)."""
    t = await start(dut)
    case = {"m": 3, "k": 5, "n": 7, "bias": 2}
    await run_gemm_loop(t, case, seed=41)
    rng = np.random.default_rng(41)
    mems = Memories(t, rng)
    cmds = [random_requant(t.cfg, rng) for _ in range(4)] if t.cfg.dtype == "int8" else []
    await run_commands(t, mems.load_commands() + [c.words() for c in cmds] + mems.store_commands())
    for c in cmds:
        engine_model.run(t.cfg, c, mems.sp, mems.acc)
    mems.check("requant")
    for seed in (42, 43):
        await run_gemm_loop(t, case, seed=seed)

"""Command decoder (rtl/decode.py): every error rule of docs/isa.md and the routing of valid commands."""

import pytest
from amaranth.sim import Simulator

from rtl.cmd import ERR
from rtl.config import AccelConfig
from rtl.decode import Decoder
from rtl.vector.engine_model import VecCommand, requant_scalar
from rtl.vector.ops import VecOp

CFG = AccelConfig(rows=4, cols=8, dtype="int8")  # dim 8; sp_rows 32768; acc_rows 2048 (int32)
assert (CFG.dim, CFG.sp_rows, CFG.acc_rows) == (8, 32768, 2048)

LOAD, STORE, EXEC, FENCE = 0x01, 0x02, 0x03, 0x04
WAIT_PREV, WAIT_NEXT, SIGNAL_PREV, SIGNAL_NEXT = 1 << 8, 1 << 9, 1 << 10, 1 << 11
ACC, TRANSPOSE = 1 << 12, 1 << 13


def load(flags=0, addr=0, stride=8, rows=4, elems=8, local=0) -> list[int]:
    return [LOAD | flags, addr, stride, rows | elems << 16, local]


def store(flags=0, addr=0, stride=8, rows=4, elems=8, local=0, scale=0) -> list[int]:
    return [STORE | flags, addr, stride, rows | elems << 16, local, scale]


def execute(flags=0, b=0, a=0, m=4, c=0) -> list[int]:
    return [EXEC | flags, b, a, m, c]


def gemm(flags=0, m=4, k=4, n=4, a=0, b=0, c=0, d=0) -> list[int]:
    return [0x10 | flags, m, k, n, a, 8, b, 8, c, 16, d, 16, 0]


def conv(flags=0, batch=1, cin=3, h=8, w=8, cout=4, kh=3, kw=3, stride=1, pad=1, x=0, wt=0, out=0, bias=0) -> list[int]:
    return [
        0x11 | flags,
        batch | cin << 16,
        h | w << 16,
        cout | kh << 16 | kw << 24,
        stride | pad << 8,
        x,
        wt,
        out,
        bias,
    ]


BF16 = AccelConfig(rows=4, cols=8, dtype="bf16")  # dim 8; acc rows fp32
WAIT_VEC, SIGNAL_VEC = 1 << 28, 1 << 29


def vec(**fields) -> list[int]:
    return VecCommand(**({"op": VecOp.ADD, "rows": 4, "elems": 8, "a": 0, "b": 8, "d": 16} | fields)).words()


# VEC on the int8 config: every rule of docs/isa.md, "VEC".
VEC_CASES = [
    (vec(), None),
    (vec(op=VecOp.SIGMOID), "BAD_FIELD"),  # no transcendental functions on int8 tiles
    (vec(op=VecOp.RECIP), "BAD_FIELD"),  # nor the reciprocal
    (vec(op=VecOp.UPDATE), "BAD_FIELD"),  # the FPTT update unit is on bf16 tiles only
    (vec(op=31), "BAD_FIELD"),
    (vec(shift=31, op=VecOp.MUL), None),
    (vec(accumulate=True), "BAD_FIELD"),  # accumulate into the scratchpad
    (vec(d_acc=True, d_one=True), "BAD_FIELD"),  # one D row without accumulate
    (vec(d_acc=True, d_one=True, accumulate=True), None),
    ([vec()[0] | 1 << 25, *vec()[1:]], "BAD_FIELD"),
    (vec(reduce=True), None),
    (vec(reduce=True, reduce_max=True, d_acc=True, d_one=True, accumulate=True), None),
    (vec(reduce_max=True), "BAD_FIELD"),  # a fold kind without a fold
    ([vec()[0] | WAIT_VEC | SIGNAL_VEC, *vec()[1:]], None),  # VEC's tokens with LOAD
    (vec(deps=WAIT_PREV | WAIT_NEXT | SIGNAL_PREV | SIGNAL_NEXT), None),
    (vec(rows=0), "ZERO_DIM"),
    (vec(elems=0), "ZERO_DIM"),
    (vec(elems=9), "TOO_LARGE"),
    (vec(elems=8, a_acc=True, b_acc=True, d_acc=True), None),  # accumulator rows: cols = 8 elements
    (vec(rows=32768, a=0, b=0, b_one=True, d=0, d_acc=True, d_one=True, accumulate=True), None),  # every row
    (vec(rows=65535, a=0, b=0, b_one=True, d=0, d_acc=True, d_one=True, accumulate=True), "SP_RANGE"),
    (vec(a=32767 - 3), None),
    (vec(a=32767 - 2), "SP_RANGE"),
    (vec(b=32767 - 2), "SP_RANGE"),
    (vec(op=VecOp.NEG, b=65535), None),  # NEG reads no B: its fields are not checked
    (vec(d=2047 - 2, d_acc=True), "ACC_RANGE"),
    (vec(a=2047 - 2, a_acc=True), "ACC_RANGE"),
    (vec(d=2), "BAD_SHAPE"),  # D overlaps A, not in place
    (vec(d=0), None),  # in place
    (vec(b=16, b_one=True), "BAD_SHAPE"),  # B's one row inside D
    (vec(b=16, b_one=True, b_acc=True), None),  # ... in the other memory
    (vec(d=0, d_acc=True, d_one=True, accumulate=True, a_acc=True), "BAD_SHAPE"),
    (execute(flags=WAIT_VEC | SIGNAL_VEC), None),
    (store(flags=WAIT_VEC | SIGNAL_VEC), None),
    (load(flags=SIGNAL_VEC | WAIT_VEC), None),
    ([0x10 | WAIT_VEC, 4, 4, 4, 0, 8, 0, 8, 0, 16, 0, 16, 0], "BAD_DEPS"),
    ([FENCE | WAIT_VEC], "BAD_DEPS"),
    (gemm(flags=SIGNAL_VEC), "BAD_DEPS"),
]

CASES = [
    *VEC_CASES,
    ([0x55], "BAD_OPCODE"),
    ([0x11], "ZERO_DIM"),
    (conv(cout=0), "ZERO_DIM"),
    (conv(kw=0), "ZERO_DIM"),
    (conv(kh=8, pad=4), "BAD_SHAPE"),  # kernels up to 7 × 7
    (conv(stride=0), "BAD_SHAPE"),
    (conv(h=2, kh=5, pad=1), "BAD_SHAPE"),  # no output row
    (conv(flags=1 << 14), "BAD_SHAPE"),  # bias: none or one value per output channel
    (conv(flags=2 << 14, bias=2), "MISALIGNED"),  # int32 bias
    (conv(flags=1 << 19, out=6), "MISALIGNED"),  # full int32 output
    (conv(flags=2 << 14 | 1 << 17, x=1, wt=3, out=5, bias=8), None),  # int8 input, weights and output
    (conv(h=1, w=1, kh=7, kw=7, pad=3), None),
    # The kernel fit is computed from the kernel's 3 bits: sizes and pads at and past them.
    (conv(h=2, w=8, kh=7, pad=2), "BAD_SHAPE"),  # 2 + 4 < 7
    (conv(h=8, w=1, kw=7, pad=2), "BAD_SHAPE"),
    (conv(h=3, w=3, kh=7, kw=7, pad=2), None),  # exactly the kernel
    (conv(h=7, w=7, kh=7, kw=7, pad=0), None),
    (conv(h=8, w=8, kh=7, kw=7, pad=0), None),
    (conv(h=1, w=1, kh=7, kw=7, pad=4), None),
    (conv(h=1, w=1, kh=6, kw=6, pad=0x80), None),
    (conv(h=1, w=1, kh=6, kw=6, pad=0x82), None),
    (conv(h=0x100, w=9, kh=7, kw=7, pad=0), None),
    (conv(h=0x100, w=6, kh=7, kw=7, pad=0), "BAD_SHAPE"),
    (conv(h=9, kh=8, pad=0), "BAD_SHAPE"),  # kernels up to 7 × 7, even when one would fit
    (conv(w=9, kw=15, pad=0), "BAD_SHAPE"),
    (conv(batch=0x8000, cin=0), "ZERO_DIM"),
    (conv(h=0), "ZERO_DIM"),
    (conv(w=0), "ZERO_DIM"),
    (conv(kh=0, kw=0x80), "ZERO_DIM"),
    (load(flags=ACC | 1 << 15, addr=2, stride=3), None),  # a zero fill reads no memory: any address
    ([0x10], "ZERO_DIM"),
    (gemm(m=65536), "TOO_LARGE"),
    (gemm(k=1 << 31), "TOO_LARGE"),
    (gemm(n=1 << 24), "TOO_LARGE"),
    (gemm(k=0), "ZERO_DIM"),
    (gemm(n=0), "ZERO_DIM"),
    (gemm(m=0, k=65536), "ZERO_DIM"),  # zero before too large
    (gemm(m=65536, n=0x10000), "TOO_LARGE"),
    (load(rows=0, elems=0x100), "ZERO_DIM"),
    (load(elems=0), "ZERO_DIM"),
    (execute(m=1 << 16), "ZERO_DIM"),  # M is word 3's low half
    (execute(m=4, c=2044), None),
    (execute(m=5, c=2044), "ACC_RANGE"),
    (execute(m=3, c=2045, flags=1 << 13, b=32767), None),
    (execute(m=3, b=32765), "SP_RANGE"),
    (gemm(flags=3 << 14), "BAD_SHAPE"),  # bias mode 3 is reserved
    (gemm(flags=1 << 16), "BAD_SHAPE"),  # accumulate into C with a narrow (int8) C
    (gemm(flags=1 << 16 | 1 << 19, c=2), "MISALIGNED"),  # full int32 C
    (gemm(flags=1 << 14, d=6), "MISALIGNED"),  # int32 bias
    (gemm(d=6), None),  # no bias: D is not used
    (gemm(flags=1 << 12 | 1 << 13 | 2 << 14, a=3, b=5, c=7), None),
    (load(flags=WAIT_PREV), "BAD_DEPS"),
    (load(flags=SIGNAL_PREV), "BAD_DEPS"),
    (store(flags=SIGNAL_NEXT), "BAD_DEPS"),
    (store(flags=WAIT_NEXT), "BAD_DEPS"),
    (load(rows=0), "ZERO_DIM"),
    (store(elems=0), "ZERO_DIM"),
    (execute(m=0), "ZERO_DIM"),
    (load(flags=TRANSPOSE, elems=9), "TOO_LARGE"),  # a transposed block is at most dim × dim
    (execute(b=5 << 16), "TOO_LARGE"),  # 5 weight rows on a 4-row mesh
    (load(flags=TRANSPOSE, rows=9, elems=4), "TOO_LARGE"),
    # split transfers (rows wider than a local row): the range check covers all their blocks
    (load(elems=9), None),
    (load(flags=ACC, elems=9, stride=36), None),
    (load(local=32760, rows=4, elems=16), None),  # two blocks of 4 rows: the last row is 32767
    (load(local=32761, rows=4, elems=16), "SP_RANGE"),
    (load(local=32760, rows=4, elems=17), "SP_RANGE"),  # a third block, of one element
    (store(local=2048 - 10, rows=2, elems=33, stride=64), None),  # accumulator: 5 blocks of 2 rows
    (store(local=2048 - 10, rows=2, elems=41, stride=64), "ACC_RANGE"),
    (load(rows=65535, elems=65535), "SP_RANGE"),  # counting stops at the memory's end
    (load(rows=1, elems=65535, local=32767 - 8191), None),  # 8192 blocks of one row: every row
    (load(local=32761, rows=4, elems=16, addr=0, stride=1), "SP_RANGE"),  # range before alignment
    (load(flags=ACC, local=2041, rows=4, elems=16, stride=2), "ACC_RANGE"),
    (load(flags=ACC, local=2000, rows=4, elems=16, stride=2), "MISALIGNED"),
    (load(rows=0, elems=9), "ZERO_DIM"),
    (load(local=32760, rows=9), "SP_RANGE"),
    (load(flags=TRANSPOSE, local=32765, rows=2, elems=4), "SP_RANGE"),  # transposed: spans `elems` rows
    (load(flags=ACC, local=2047, rows=2, stride=32), "ACC_RANGE"),
    (store(local=2045, rows=4), "ACC_RANGE"),
    (store(flags=ACC, local=32767, rows=2), "SP_RANGE"),  # source bit set: scratchpad
    (execute(b=32766), "SP_RANGE"),
    (execute(a=32766, m=3), "SP_RANGE"),
    (execute(c=2046, m=3), "ACC_RANGE"),
    (load(flags=ACC, addr=2, stride=32), "MISALIGNED"),  # int32 elements
    (load(flags=ACC, addr=4, stride=30), "MISALIGNED"),
    (store(flags=1 << 15, addr=2), "MISALIGNED"),  # full int32 output
    (load(rows=0, elems=5, flags=TRANSPOSE | ACC), "BAD_FIELD"),  # the first rule in the list wins
    # codes the tile does not define, and reserved bits, are refused rather than ignored
    (store(flags=2 << 13), "BAD_FIELD"),  # read-out activation 2
    (store(flags=3 << 13), "BAD_FIELD"),
    (store(flags=2 << 15), "BAD_FIELD"),  # output width 2
    (store(flags=ACC | 1 << 13), "BAD_FIELD"),  # a scratchpad source has no read-out
    (store(flags=1 << 17), "BAD_FIELD"),
    (load(flags=ACC | TRANSPOSE, stride=32), "BAD_FIELD"),  # transposing into the accumulator
    (load(flags=1 << 14), "BAD_FIELD"),  # accumulating into the scratchpad
    (load(flags=1 << 16), "BAD_FIELD"),
    (execute(flags=1 << 14), "BAD_FIELD"),
    ([FENCE | 1 << 12], "BAD_FIELD"),
    ([FENCE | WAIT_PREV], "BAD_DEPS"),
    (gemm(flags=2 << 17), "BAD_FIELD"),
    (gemm(flags=3 << 17), "BAD_FIELD"),
    (gemm(flags=2 << 19), "BAD_FIELD"),
    (gemm(flags=1 << 22), "BAD_FIELD"),
    (gemm(flags=1 << 21 | 1 << 13), "BAD_FIELD"),  # a resident B is not transposed
    (gemm(flags=SIGNAL_NEXT), "BAD_DEPS"),  # a loop command has no dependency flags
    (conv(flags=2 << 17), "BAD_FIELD"),
    (conv(flags=3 << 19), "BAD_FIELD"),
    (conv(flags=1 << 12), "BAD_FIELD"),  # GEMM's transpose flags are not CONV2D's
    (conv(flags=1 << 16), "BAD_FIELD"),  # nor its accumulate into C
    (conv(flags=WAIT_PREV), "BAD_DEPS"),
    # valid ones
    (load(addr=3, stride=5), None),  # int8: any byte address
    (load(local=32760, rows=8), None),
    (load(flags=ACC, addr=4, stride=32, local=2046, rows=2), None),
    (store(addr=3), None),  # narrow int8 output
    (store(flags=1 << 13 | 1 << 15, addr=4, stride=32), None),  # ReLU, full int32 output
    (gemm(flags=1 << 17 | 1 << 19, c=4), None),  # ReLU, full output
    (gemm(m=65535, k=65535, n=65535), None),  # the largest GEMM
    (conv(batch=65535, cin=65535, h=65535, w=65535, cout=65535, kh=7, kw=7, stride=255, pad=255), None),
    (execute(b=32764, a=32764, m=4, c=2044), None),
    (execute(b=4 << 16 | 7), None),
    (execute(flags=1 << 13, b=32767, m=4), None),  # kept weights: the tile address is not used
    (load(flags=WAIT_NEXT | SIGNAL_NEXT), None),
    (store(flags=WAIT_PREV | SIGNAL_PREV), None),
]


PORTS = ("load", "store", "exec", "vec", "loop")
SPAN_CYCLES = 9000  # the longest count above: 8192 blocks


def decode(words: list[int], units_idle: int = 1, cfg: AccelConfig = CFG) -> dict:
    dut = Decoder(cfg)
    out: dict = {}

    async def bench(ctx) -> None:
        for k, word in enumerate(words + [0] * (16 - len(words))):
            ctx.set(dut.cmd.p.words[k], word)
        ctx.set(dut.cmd.p.seq, 7)
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.units_idle, units_idle)
        for port in ("load", "store", "exec", "vec", "loop"):
            ctx.set(getattr(dut, port).ready, 1)
        # CHECK and VERIFY register the error code; the command is offered (or reported) in the
        # cycle after (a split transfer first counts its blocks, one a cycle). A FENCE is offered
        # to no unit: it is taken, and the queue told so, once the units are idle.
        assert not ctx.get(dut.cmd.ready) and not ctx.get(dut.error.valid)
        await ctx.tick()
        assert not ctx.get(dut.cmd.ready) and not ctx.get(dut.error.valid)
        await ctx.tick()
        for _ in range(SPAN_CYCLES):
            if ctx.get(dut.error.valid) or any(ctx.get(getattr(dut, p).valid) for p in PORTS):
                break
            if ctx.get(dut.cmd.ready):
                break
            await ctx.tick()
        out["routes"] = [p for p in ("load", "store", "exec", "vec", "loop") if ctx.get(getattr(dut, p).valid)]
        out["error"] = ctx.get(dut.error.payload.code) if ctx.get(dut.error.valid) else None
        out["error_seq"] = ctx.get(dut.error.payload.seq)
        out["load"] = {k: ctx.get(getattr(dut.load.p.op, k)) for k in ("kind", "dram_addr", "rows", "elems")}
        out["store_kind"] = ctx.get(dut.store.p.op.kind)
        out["loop"] = {k: ctx.get(getattr(dut.loop.p, k)) for k in ("conv", "b_sp", "b", "ldb", "c")}
        out["exec"] = {k: ctx.get(getattr(dut.exec.p.op, k)) for k in ("b_addr", "k_rows", "a_addr", "m", "c_addr")}
        out["deps"] = ctx.get(dut.load.p.deps.as_value())
        out["vec"] = {k: ctx.get(getattr(dut.vec.p.op, k)) for k in ("op", "rows", "elems", "a", "b", "d", "uses_b")}
        out["vec_update"] = {k: ctx.get(getattr(dut.vec.p.op, k)) for k in ("update", "g", "kappa", "scalar")}
        # POP: a command taken (or reported) in ISSUE leaves the queue in the cycle after its last block.
        if not ctx.get(dut.cmd.ready):
            await ctx.tick()
            while ctx.get(dut.load.valid) or ctx.get(dut.store.valid):  # the blocks after the first
                await ctx.tick()
        out["ready"] = ctx.get(dut.cmd.ready)
        offered_again = any(ctx.get(getattr(dut, p).valid) for p in ("load", "store", "exec", "vec", "loop"))
        assert not (out["ready"] and (offered_again or ctx.get(dut.error.valid)))  # offered once only

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize(("words", "error"), CASES, ids=[f"{c[1]}-{n}" for n, c in enumerate(CASES)])
def test_rules(words: list[int], error: str | None) -> None:
    out = decode(words)
    if error is None:
        assert out["error"] is None and len(out["routes"]) == 1
    else:
        assert out["error"] == ERR[error] and out["routes"] == [] and out["error_seq"] == 7
    assert out["ready"] == 1  # an invalid command is consumed, never left blocking the queue


def test_routing_and_fields() -> None:
    out = decode(load(flags=ACC | WAIT_NEXT, addr=0x1000, stride=32, rows=3, elems=5))
    assert out["routes"] == ["load"]
    assert out["load"] == {"kind": 1, "dram_addr": 0x1000, "rows": 3, "elems": 5}
    assert out["deps"] == 0b0010
    assert decode(store())["store_kind"] == 2
    assert decode(store(flags=ACC))["store_kind"] == 3
    assert decode(load())["load"]["kind"] == 0
    out = decode(execute(b=3 << 16 | 10, a=20, m=30, c=40))
    assert out["routes"] == ["exec"]
    assert out["exec"] == {"b_addr": 10, "k_rows": 3, "a_addr": 20, "m": 30, "c_addr": 40}


@pytest.mark.parametrize(
    ("words", "error"),
    [
        (vec(op=VecOp.SIGMOID), None),
        (vec(op=VecOp.EXP, d_acc=True), None),
        (vec(op=VecOp.RECIP), None),
        (vec(op=31), "BAD_FIELD"),
        (vec(op=VecOp.MUL, shift=1), "BAD_FIELD"),  # no shift on bf16 tiles
        (store(flags=2 << 13), None),  # read-out sigmoid
        (store(flags=3 << 13), None),  # read-out tanh
        (store(flags=ACC | 2 << 13), "BAD_FIELD"),
        (gemm(flags=3 << 17 | 1 << 19), None),
        (conv(flags=2 << 17 | 1 << 19), None),
        (gemm(b=5), "MISALIGNED"),  # B's address in bytes of bf16 elements
        (gemm(flags=1 << 21, b=5), None),  # a resident B's first row: any row (the loop checks its rows)
        (conv(wt=5), "MISALIGNED"),  # weights in memory: bytes of bf16 elements
        (conv(flags=1 << 21, wt=5), None),  # resident weights: a scratchpad row
        (conv(flags=1 << 22), "BAD_FIELD"),
    ],
)
def test_rules_bf16(words: list[int], error: str | None) -> None:
    out = decode(words, cfg=BF16)
    assert out["error"] == (None if error is None else ERR[error])


def update(**fields) -> list[int]:
    """UPDATE with θ, θ̄, λ, g at rows 0, 100, 200, 300 (4 rows each) unless changed."""
    return vec(**({"op": VecOp.UPDATE, "a": 0, "b": 100, "d": 200, "g": 300} | fields))


BF16_ROWS = BF16.sp_rows


@pytest.mark.parametrize(
    ("words", "error"),
    [
        (update(), None),
        (update(rows=65535, a=0, b=0, d=0, g=0), "SP_RANGE"),
        (update(g=BF16_ROWS - 4), None),  # every tensor may end at the last row
        (update(g=BF16_ROWS - 3), "SP_RANGE"),
        (update(a=BF16_ROWS - 3), "SP_RANGE"),
        (update(b=BF16_ROWS - 3), "SP_RANGE"),  # B is read although UPDATE is not a B op of the lanes
        (update(d=BF16_ROWS - 3), "SP_RANGE"),
        (update(elems=9), "TOO_LARGE"),
        (update(elems=8, rows=1), None),
        (update(rows=0), "ZERO_DIM"),
        (update(d=0), "BAD_SHAPE"),  # λ in θ's rows: no in-place exception
        (update(b=3), "BAD_SHAPE"),  # θ̄ overlaps θ by one row
        (update(b=4), None),  # adjacent, not overlapping
        (update(g=203), "BAD_SHAPE"),  # g overlaps λ
        (update(g=100), "BAD_SHAPE"),  # g is θ̄
        (update(a_acc=True), "BAD_FIELD"),  # scratchpad tensors only
        (update(d_acc=True), "BAD_FIELD"),
        (update(b_one=True), "BAD_FIELD"),
        (update(reduce=True), "BAD_FIELD"),
        (update(d_acc=True, d_one=True, accumulate=True), "BAD_FIELD"),
        (update(deps=WAIT_PREV | SIGNAL_NEXT), None),
    ],
)
def test_rules_update(words: list[int], error: str | None) -> None:
    out = decode(words, cfg=BF16)
    assert out["error"] == (None if error is None else ERR[error])
    if error is None:
        assert out["routes"] == ["vec"]


def test_update_needs_the_unit() -> None:
    """A bf16 tile built without the update unit (update_lanes = 0) refuses UPDATE."""
    assert decode(update(), cfg=BF16.replace(update_lanes=0))["error"] == ERR["BAD_FIELD"]


@pytest.mark.parametrize("cfg", [BF16, AccelConfig(rows=4, cols=4, dtype="int8")], ids=["bf16", "int8"])
def test_vec_needs_the_engine(cfg: AccelConfig) -> None:
    """A tile built without the vector engine refuses every VEC operation, and only VEC."""
    bare = cfg.replace(vector=False)
    for op in VecOp:
        assert decode(vec(op=op, elems=cfg.dim), cfg=bare)["error"] == ERR["BAD_FIELD"], op
    assert decode(vec(op=VecOp.ADD, elems=cfg.dim), cfg=cfg)["error"] is None
    for words in (execute(), load(), store(), gemm(), conv()):
        assert decode(words, cfg=bare) == decode(words, cfg=cfg)


def test_update_fields() -> None:
    out = decode(update(a=1, b=2000, d=3000, g=4000, scalar=0x3F003D4D, kappa=0x3F80), cfg=BF16)
    assert out["vec"] == {"op": 16, "rows": 4, "elems": 8, "a": 1, "b": 2000, "d": 3000, "uses_b": 0}
    assert out["vec_update"] == {"update": 1, "g": 4000, "kappa": 0x3F80, "scalar": 0x3F003D4D}
    assert decode(vec(op=VecOp.ADD), cfg=BF16)["vec_update"]["update"] == 0


def requant(**fields) -> list[int]:
    """REQUANT of 4 accumulator rows from row 0, B's pair at accumulator rows 100-101, D at scratchpad row 16."""
    scalar = requant_scalar(-3, -128, 127, True)
    return vec(**({"op": VecOp.REQUANT, "a_acc": True, "b": 100, "b_acc": True, "scalar": scalar} | fields))


@pytest.mark.parametrize(
    ("words", "error", "cfg"),
    [
        (requant(), None, CFG),
        (requant(a_acc=False), None, CFG),  # int8 rows from the scratchpad are int32 values too
        (requant(b=CFG.acc_rows - 2), None, CFG),  # the pair may end at the last row
        (requant(b=CFG.acc_rows - 1), "ACC_RANGE", CFG),  # the shifts' row past the end
        (requant(b_acc=False), "BAD_FIELD", CFG),
        (requant(b_one=True), "BAD_FIELD", CFG),
        (requant(d_acc=True, d=101), "BAD_SHAPE", CFG),  # D over the shifts' row
        (requant(d_acc=True, d=102), None, CFG),
        (requant(d_acc=True, d_one=True, accumulate=True), "BAD_FIELD", CFG),
        (requant(reduce=True), "BAD_FIELD", CFG),
        (requant(shift=1), "BAD_FIELD", CFG),
        (requant(scalar=1 << 25), "BAD_FIELD", CFG),  # word 1 [31:25] must be 0
        (requant(scalar=requant_scalar(0, 1, 0, False)), "BAD_FIELD", CFG),  # minimum above maximum
        (requant(scalar=requant_scalar(0, 7, 7, False)), None, CFG),
        (requant(elems=9), "TOO_LARGE", CFG),
        (requant(), "BAD_FIELD", BF16),  # int8 tiles only
    ],
)
def test_rules_requant(words: list[int], error: str | None, cfg: AccelConfig) -> None:
    out = decode(words, cfg=cfg)
    assert out["error"] == (None if error is None else ERR[error])


def test_vec_fields() -> None:
    out = decode(vec(op=VecOp.MADDS, rows=300, elems=7, a=1, b=2, d=30000))
    assert out["routes"] == ["vec"]
    assert out["vec"] == {"op": 4, "rows": 300, "elems": 7, "a": 1, "b": 2, "d": 30000, "uses_b": 1}
    assert decode(vec(op=VecOp.RELU))["vec"]["uses_b"] == 0


def test_fence_and_gemm_wait_for_idle_units() -> None:
    for words in ([FENCE], gemm()):
        assert decode(words, units_idle=0)["ready"] == 0
        assert decode(words, units_idle=1)["ready"] == 1
    assert decode(gemm(), units_idle=0)["routes"] == []
    assert decode(gemm(), units_idle=1)["routes"] == ["loop"]


def blocks_issued(words: list[int], cfg: AccelConfig, seed: int) -> tuple[list[dict], int]:
    """Every descriptor the decoder hands out for ``words``, under random back-pressure; and the
    cycles until the command left the queue."""
    import random

    dut = Decoder(cfg)
    port = "store" if words[0] & 0xFF == STORE else "load"
    issued: list[dict] = []
    cycles = [0]

    async def bench(ctx) -> None:
        rng = random.Random(seed)
        for k, word in enumerate(words + [0] * (16 - len(words))):
            ctx.set(dut.cmd.p.words[k], word)
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.units_idle, 1)
        unit = getattr(dut, port)
        while not ctx.get(dut.cmd.ready):
            assert not ctx.get(dut.error.valid), f"error {ctx.get(dut.error.payload.code)}"
            ready = rng.random() < 0.6
            ctx.set(unit.ready, ready)
            if ready and ctx.get(unit.valid):
                op = unit.p.op
                fields = ("dram_addr", "dram_stride", "rows", "elems", "local_addr", "kind", "zero", "scale")
                issued.append({f: ctx.get(getattr(op, f)) for f in fields} | {"deps": ctx.get(unit.p.deps.as_value())})
            await ctx.tick()
            cycles[0] += 1
            assert cycles[0] < 10_000

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return issued, cycles[0]


# deps bits of a LOAD / STORE descriptor: wait_prev 0, wait_next 1, signal_prev 2, signal_next 3,
# wait_side 4, signal_side 5 (rtl/ops.py deps_layout)
WAITS, SIGNALS = 0b010011, 0b101100


@pytest.mark.parametrize(
    ("words", "cfg", "esize", "width"),
    [
        (load(addr=0x100, stride=40, rows=3, elems=20, local=7, flags=WAIT_NEXT | SIGNAL_NEXT), CFG, 1, 8),
        (load(addr=0x100, stride=40, rows=3, elems=16, local=7, flags=WAIT_VEC | SIGNAL_VEC), CFG, 1, 8),
        (load(addr=0x10, stride=6, rows=5, elems=3, local=1), CFG, 1, 8),  # one block
        (load(addr=0x100, stride=16, rows=3, elems=16, local=7, flags=SIGNAL_NEXT), CFG, 1, 8),  # contiguous: one
        (store(flags=ACC | WAIT_VEC, addr=0x200, stride=256, rows=4, elems=128, local=64), BF16, 2, 8),  # one
        (load(flags=ACC | WAIT_NEXT | 1 << 14, addr=0x40, stride=200, rows=2, elems=50, local=9), CFG, 4, 8),
        (load(flags=1 << 15 | SIGNAL_NEXT, rows=4, elems=17, local=100), CFG, 1, 8),  # zero fill
        (store(addr=0x200, stride=64, rows=2, elems=33, local=5, scale=3, flags=WAIT_PREV | SIGNAL_PREV), CFG, 1, 8),
        (store(flags=1 << 15 | SIGNAL_VEC, addr=0x200, stride=160, rows=2, elems=33, local=5), CFG, 4, 8),
        (store(flags=ACC | WAIT_VEC, addr=0x202, stride=258, rows=4, elems=128, local=64), BF16, 2, 8),
        (store(flags=2 << 13, addr=0x202, stride=258, rows=4, elems=19, local=64), BF16, 2, 8),  # narrow bf16
        (load(addr=0x202, stride=1026, rows=4, elems=128, local=64), AccelConfig(rows=3, cols=5, dtype="bf16"), 2, 5),
    ],
)
def test_split_transfers(words: list[int], cfg: AccelConfig, esize: int, width: int) -> None:
    """A LOAD / STORE wider than a local row: one descriptor per block, as `transfer_blocks`
    models it, in order, with the command's waits on the first and its signals on the last."""
    from rtl.ops import transfer_blocks

    rows, elems = words[3] & 0xFFFF, words[3] >> 16
    want = transfer_blocks(words[1], words[2], rows, elems, words[4], width, esize)
    deps = (words[0] >> 8 & 0xF) | (words[0] >> 28 & 3) << 4
    for seed in range(3):
        got, _ = blocks_issued(words, cfg, seed)
        assert len(got) == len(want)
        for j, (g, w) in enumerate(zip(got, want, strict=True)):
            assert (g["dram_addr"], g["dram_stride"], g["rows"], g["elems"], g["local_addr"]) == tuple(w)
            assert g["zero"] == (words[0] >> 15 & 1 and words[0] & 0xFF == LOAD)
            assert g["scale"] == (words[5] if len(words) > 5 else 0)
            mask = (WAITS if j == 0 else 0) | (SIGNALS if j == len(want) - 1 else 0)
            assert g["deps"] == deps & mask


def queue_issued(commands: list[list[int]], flushes: dict[int, int], seed: int) -> list[list]:
    """Per command of ``commands``, run back to back as the queue presents them, the descriptors
    the decoder hands out (under random back-pressure) or its error code. ``flushes`` maps a
    command's index to the cycle, after it was first presented, in which a flush drops it (the
    command is then presented again, as software would push it anew)."""
    import random

    dut = Decoder(CFG)
    results: list[list] = []
    fields = ("dram_addr", "dram_stride", "rows", "elems", "local_addr")

    async def bench(ctx) -> None:
        rng = random.Random(seed)
        ctx.set(dut.units_idle, 1)
        pending, index = dict(flushes), 0
        while index < len(commands):
            for k, word in enumerate(commands[index] + [0] * (16 - len(commands[index]))):
                ctx.set(dut.cmd.p.words[k], word)
            ctx.set(dut.cmd.valid, 1)
            got: list = []
            for cycle in range(10_000):
                ready = rng.random() < 0.6
                flush = pending.get(index) == cycle
                ctx.set(dut.flush, flush)
                for port in ("load", "store"):
                    unit = getattr(dut, port)
                    ctx.set(unit.ready, ready)
                    if ready and ctx.get(unit.valid):
                        got.append(tuple(ctx.get(getattr(unit.p.op, f)) for f in fields))
                if ctx.get(dut.error.valid):
                    got.append(("error", ctx.get(dut.error.payload.code)))
                popped = ctx.get(dut.cmd.ready)
                await ctx.tick()
                if popped:
                    break
            ctx.set(dut.flush, 0)
            if flush:
                del pending[index]
                continue
            results.append(got)
            index += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return results


@pytest.mark.parametrize("seed", range(4))
def test_split_transfers_back_to_back(seed: int) -> None:
    """Split transfers right after each other, after a refused one and after a flush in any of
    their steps (SPAN, ISSUE): each starts from its own words (the decoder's block registers are
    cleared between commands, not loaded, see ``Decoder._blocks``)."""
    from rtl.ops import transfer_blocks

    commands = [
        load(addr=0x100, stride=40, rows=3, elems=20, local=7),
        load(addr=0x300, stride=16, rows=3, elems=16, local=2),  # contiguous: one block
        load(addr=0x100, stride=40, rows=2, elems=20, local=32765),  # 6 local rows: SP_RANGE
        store(addr=0x200, stride=64, rows=2, elems=33, local=5),
        load(addr=0x10, stride=6, rows=5, elems=3, local=1),  # not split
        load(addr=0x104, stride=44, rows=4, elems=20, local=9),
        store(addr=0x280, stride=64, rows=3, elems=41, local=1000),
    ]

    def blocks(w: list[int]) -> list:
        if w[4] == 32765:
            return [("error", ERR["SP_RANGE"])]
        return [tuple(b) for b in transfer_blocks(w[1], w[2], w[3] & 0xFFFF, w[3] >> 16, w[4], 8, 1)]

    want = [blocks(w) for w in commands]
    flushes = {0: 2 + seed, 3: 5 + 2 * seed, 5: 9 + seed}
    assert queue_issued(commands, flushes, seed) == want


def test_transfer_blocks_model() -> None:
    """The model against a plain element map: element ``e`` of memory row ``r`` lands once, in
    local row ``r·⌈elems / width⌉ + e // width`` at column ``e % width``; contiguous rows that
    are a multiple of ``width`` long take one descriptor."""
    from rtl.ops import transfer_blocks

    cases = [
        (3, 20, 8, 40),
        (1, 8, 8, 16),
        (4, 128, 5, 256),
        (2, 1, 4, 2),
        (4, 16, 8, 32),
        (4, 16, 8, 34),
        (1, 24, 8, 0),
    ]
    for rows, elems, width, stride in cases:
        blocks = transfer_blocks(1000, stride, rows, elems, 10, width, 2)
        seen = {}
        for b in blocks:
            for i in range(b.rows):
                start = b.addr + i * b.stride - 1000
                r, first = divmod(start, stride) if stride else (0, start)
                for c in range(b.elems):
                    assert (r, first // 2 + c) not in seen
                    seen[(r, first // 2 + c)] = (b.local + i, c)
        n = -(-elems // width)
        assert seen == {(r, e): (10 + r * n + e // width, e % width) for r in range(rows) for e in range(elems)}
        assert (len(blocks) == 1) == (elems <= width or (elems % width == 0 and (stride == 2 * elems or rows == 1)))


def test_conv_resident_weights_fields() -> None:
    """CONV2D flag [21]: word 6 is B's first scratchpad row, word 10 the rows between its N tiles;
    without it, B is HWIO in memory with rows of C_out elements (word 10 ignored)."""
    words = [*conv(flags=1 << 21, cout=20, wt=300, out=0x800), 0, 99]
    assert decode(words)["loop"] == {"conv": 1, "b_sp": 1, "b": 300, "ldb": 99, "c": 0x800}
    words = [*conv(cout=20, wt=0x400, out=0x800), 0, 99]
    assert decode(words, cfg=BF16)["loop"] == {"conv": 1, "b_sp": 0, "b": 0x400, "ldb": 40, "c": 0x800}

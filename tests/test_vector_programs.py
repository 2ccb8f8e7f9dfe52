"""Vector-engine programs (rtl/vector/programs.py, docs/vector.md) run through the engine model
against the bf16 FPTT reference (tb/fptt): the LSTM cell forward and backward, bias gradients and
the FPTT update. Every generated command must also pass the decoder's VEC rules."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rtl.config import AccelConfig
from rtl.gemm_loop_model import loop_result
from rtl.vector import engine_model
from rtl.vector.engine_model import B_OPERAND_OPS, VecCommand
from rtl.vector.functions import reference as function_reference
from rtl.vector.ops import FLOAT_OPS, INT_OPS, VecOp
from rtl.vector.programs import (
    GATES,
    Ages,
    Blocks,
    CellBackward,
    CellForward,
    HeadBackwardRows,
    Loc,
    SoftmaxRows,
    UpdateChunk,
    age_parts,
    bf16_scalar,
    bias_gradient,
    bias_gradient_finish,
    fptt_update,
    from_rows,
    head_backward,
    lstm_backward,
    lstm_forward,
    softmax,
    to_rows,
    with_tokens,
)
from tb.fptt import hardware
from tb.fptt.arith import BF16, Arith
from tb.fptt.model import (
    _cell_carry,
    _ds_from_h,
    _gate_grads,
    _head_backward,
    _lstm_step,
    backward,
    carry_mode,
    forward,
    head,
    init_params,
    s_window_start,
    window_start,
)
from tb.fptt.model import fptt_update as ref_fptt_update
from tb.fptt.tensors import Dims, FpttState, Params

CONFIGS = {
    "4x4": AccelConfig(rows=4, cols=4, dtype="bf16"),
    "4x8": AccelConfig(rows=4, cols=8, dtype="bf16"),
    "4x4-acc-bf16": AccelConfig(rows=4, cols=4, dtype="bf16", acc_dtype="bf16"),
}
BATCH = 4
HIDDENS = (8, 6)  # a multiple of the block width and not


# -- the decoder's VEC rules (rtl/decode.py, docs/isa.md "VEC") ------------------------------


def vec_error(cfg: AccelConfig, c: VecCommand) -> str | None:
    """The error a VEC command raises on ``cfg``'s tile, or None: rtl/decode.py's checks in order."""
    ops = FLOAT_OPS if cfg.dtype == "bf16" else INT_OPS
    if (
        c.op not in {int(op) for op in ops}
        or (cfg.dtype == "bf16" and c.shift)
        or (c.accumulate and not c.d_acc)
        or (c.d_one and not c.accumulate)
    ):
        return "BAD_FIELD"
    if c.rows == 0 or c.elems == 0 or c.rows > 0xFFFF or c.elems > 0xFFFF:
        return "ZERO_DIM"
    uses_b = VecOp(c.op) in B_OPERAND_OPS
    d_rows = 1 if c.d_one else c.rows
    operands = [
        (c.a, c.rows, c.a_acc, True),
        (c.b, 1 if c.b_one else c.rows, c.b_acc, uses_b),
        (c.d, d_rows, c.d_acc, True),
    ]
    used = [(base, span, acc) for base, span, acc, use in operands if use]
    if any(c.elems > (cfg.cols if acc else cfg.dim) for _, _, acc in used):
        return "TOO_LARGE"
    if any(not acc and base + span > cfg.sp_rows for base, span, acc in used):
        return "SP_RANGE"
    if any(acc and base + span > cfg.acc_rows for base, span, acc in used):
        return "ACC_RANGE"
    for base, span, acc in used[:-1]:
        in_place = base == c.d and span == c.rows and d_rows == c.rows
        if acc == c.d_acc and base < c.d + d_rows and c.d < base + span and not in_place:
            return "BAD_SHAPE"
    return None


def test_checker_catches_overlap_and_width() -> None:
    cfg = CONFIGS["4x4"]
    assert vec_error(cfg, VecCommand(VecOp.ADD, 4, 4, a=0, b=8, d=0)) is None  # in place on A
    assert vec_error(cfg, VecCommand(VecOp.ADD, 4, 4, a=0, b=8, d=2)) == "BAD_SHAPE"
    assert vec_error(cfg, VecCommand(VecOp.ADD, 4, 5, a=0, b=8, d=16)) == "TOO_LARGE"
    assert vec_error(cfg, VecCommand(VecOp.COPY, 4, 4, a=0, d=0, d_one=True)) == "BAD_FIELD"
    assert vec_error(cfg, VecCommand(VecOp.COPY, 4, 4, a=0, d=cfg.acc_rows - 1, d_acc=True)) == "ACC_RANGE"


# -- memories and placement ------------------------------------------------------------------


class Tile:
    """NumPy memories of a tile and a bump allocator for tensor rows in each."""

    def __init__(self, cfg: AccelConfig) -> None:
        self.cfg = cfg
        self.sp = np.zeros((cfg.sp_rows, cfg.dim), dtype=np.uint64)
        self.acc = np.zeros((cfg.acc_rows, cfg.cols), dtype=np.uint64)
        self.free = {False: 0, True: 0}

    def alloc(self, rows: int, acc: bool = False) -> Loc:
        loc = Loc(self.free[acc], acc)
        self.free[acc] += rows + 3  # a gap, so a stray row would show
        return loc

    def mem(self, loc: Loc) -> np.ndarray:
        return self.acc if loc.acc else self.sp

    def put(self, loc: Loc, rows: np.ndarray) -> None:
        """Float rows (n, width) stored as the memory's element type (bf16 or fp32 bits)."""
        bits16 = not loc.acc or self.cfg.acc_dtype == "bf16"
        f = np.asarray(rows, dtype=np.float32)
        bits = f.astype(BF16).view(np.uint16) if bits16 else f.view(np.uint32)
        self.mem(loc)[loc.row : loc.row + len(rows), : rows.shape[1]] = bits

    def get(self, loc: Loc, n: int, width: int) -> np.ndarray:
        raw = self.mem(loc)[loc.row : loc.row + n, :width]
        if not loc.acc or self.cfg.acc_dtype == "bf16":
            return (raw.astype(np.uint32) << 16).view(np.float32)
        return raw.astype(np.uint32).view(np.float32)

    def run(self, cmds: list[VecCommand]) -> None:
        for c in cmds:
            assert vec_error(self.cfg, c) is None, c
            engine_model.run(self.cfg, c, self.sp, self.acc)


def put_gates(tile: Tile, blocks: Blocks, loc: Loc, x: np.ndarray) -> None:
    """A (B, 4H) tensor in the gate layout: four (B, H) tensors one after another."""
    h = blocks.features
    for k in range(GATES):
        tile.put(loc.offset(k * blocks.rows), to_rows(blocks, x[:, k * h : (k + 1) * h]))


def get_gates(tile: Tile, blocks: Blocks, loc: Loc) -> np.ndarray:
    return np.concatenate([get(tile, blocks, loc.offset(k * blocks.rows)) for k in range(GATES)], axis=1)


def get(tile: Tile, blocks: Blocks, loc: Loc) -> np.ndarray:
    return from_rows(blocks, tile.get(loc, blocks.rows, blocks.width))


def bf16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(BF16).astype(np.float32)


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return np.array_equal(np.asarray(x, np.float32).view(np.uint32), np.asarray(y, np.float32).view(np.uint32))


def function_unit(name: str, z: np.ndarray) -> np.ndarray:
    """The SIGMOID/TANH op on fp32 values: bf16-rounded input, correctly rounded bf16 result."""
    x = bf16(z).astype(BF16).view(np.uint16)
    return (function_reference(name, x).astype(np.uint32) << 16).view(np.float32)


def test_reference_functions_are_correctly_rounded() -> None:
    """tb/fptt's bf16 sigmoid/tanh (float32, then rounded to bf16) equal the function unit on every
    bf16 input, ±Inf and NaN included. The reference only applies them to bf16 values (its GEMM
    rounds z), so the forward step's double rounding never shows: it is bit-exact."""
    every = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    ar = Arith("bf16")
    with np.errstate(invalid="ignore"):
        assert same_bits(ar.sigmoid(every), function_unit("sigmoid", every))
        assert same_bits(ar.tanh(every), function_unit("tanh", every))


# -- the LSTM cell forward -------------------------------------------------------------------


def reference_forward(ar: Arith, z: np.ndarray, s_prev: np.ndarray) -> tuple[np.ndarray, ...]:
    """``_lstm_step`` with xc = I and W = z, so its gate GEMM gives bf16(z) exactly."""
    bsz, four_h = z.shape
    s = np.zeros((2, bsz, four_h // 4), np.float32)
    s[0] = s_prev
    ts, gates = np.zeros_like(s[:1]), np.zeros((1, bsz, four_h), np.float32)
    h = _lstm_step(np.eye(bsz, dtype=np.float32), z, np.zeros(four_h, np.float32), s, ts, gates, 0, ar)
    return gates[0], s[1], ts[0], h


def forward_case(
    cfg: AccelConfig, hidden: int, scale: float, seed: int
) -> tuple[Tile, Blocks, CellForward, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    blocks = Blocks(BATCH, hidden, cfg.cols)
    tile = Tile(cfg)
    n = blocks.rows
    t = CellForward(
        z=tile.alloc(GATES * n, acc=True),
        s_prev=tile.alloc(n),
        gates=tile.alloc(GATES * n),
        s=tile.alloc(n),
        ts=tile.alloc(n),
        h=tile.alloc(n),
    )
    z = (rng.standard_normal((BATCH, 4 * hidden)) * scale).astype(np.float32)
    s_prev = bf16(rng.standard_normal((BATCH, hidden)) * 1.5)
    put_gates(tile, blocks, t.z, z)
    tile.put(t.s_prev, to_rows(blocks, s_prev))
    return tile, blocks, t, z, s_prev


@pytest.mark.parametrize("scale", [2.0, 8.0])
@pytest.mark.parametrize("hidden", HIDDENS)
@pytest.mark.parametrize("name", CONFIGS)
def test_lstm_forward_bit_exact(name: str, hidden: int, scale: float) -> None:
    cfg = CONFIGS[name]
    tile, blocks, t, z, s_prev = forward_case(cfg, hidden, scale, seed=hidden)
    cmds = lstm_forward(blocks, t)
    assert len(cmds) == 7
    tile.run(cmds)
    if cfg.acc_dtype == "bf16":
        z = bf16(z)  # the accumulator held it rounded already
    gates, s, ts, h = reference_forward(Arith("bf16"), z, s_prev)
    assert same_bits(get_gates(tile, blocks, t.gates), gates)
    assert same_bits(get(tile, blocks, t.s), s)
    assert same_bits(get(tile, blocks, t.ts), ts)
    assert same_bits(get(tile, blocks, t.h), h)
    # zero-padded z and s_prev keep s, tanh(s) and h zero past H: h feeds the next GEMM as is
    pad = slice(hidden % blocks.width or blocks.width, blocks.width)
    for loc in (t.s, t.ts, t.h):
        assert not tile.sp[loc.row + blocks.rows - BATCH : loc.row + blocks.rows, pad].any()


def test_with_tokens() -> None:
    blocks = Blocks(BATCH, 8, 4)
    cmds = with_tokens(lstm_forward(blocks, CellForward(*(Loc(k * 64) for k in range(6)))))
    assert [c.words()[0] >> 8 & 0xF for c in cmds] == [1, 0, 0, 0, 0, 0, 4]  # WAIT_PREV ... SIGNAL_PREV


# -- the LSTM cell backward ------------------------------------------------------------------


@pytest.mark.parametrize("hidden", HIDDENS)
@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("carry", ["loss-step", "middle", "oldest", "none"])
def test_lstm_backward_bit_exact(name: str, hidden: int, carry: str) -> None:
    cfg = CONFIGS[name]
    rng = np.random.default_rng(hidden + 31)
    blocks = Blocks(BATCH, hidden, cfg.cols)
    tile = Tile(cfg)
    n = blocks.rows
    with_in = carry in ("middle", "oldest")
    with_out = carry in ("loss-step", "middle")
    t = CellBackward(
        dh=tile.alloc(n, acc=True),
        gates=tile.alloc(GATES * n),
        ts=tile.alloc(n),
        s_prev=tile.alloc(n),
        dz=tile.alloc(GATES * n),
        ds=tile.alloc(n),
        tmp=tile.alloc(3 * n),
        carry_in=tile.alloc(n) if with_in else None,
        carry_out=tile.alloc(n) if with_out else None,
    )
    ar = Arith("bf16")
    z = (rng.standard_normal((BATCH, 4 * hidden)) * 2).astype(np.float32)
    s_prev = bf16(rng.standard_normal((BATCH, hidden)))
    gates, _, ts, _ = reference_forward(ar, z, s_prev)  # realistic activations
    dh = (rng.standard_normal((BATCH, hidden)) * 0.1).astype(np.float32)
    carry_in = bf16(rng.standard_normal((BATCH, hidden)) * 0.05)
    put_gates(tile, blocks, t.gates, gates)
    for loc, x in ((t.dh, dh), (t.ts, ts), (t.s_prev, s_prev), (t.carry_in, carry_in)):
        if loc is not None:
            tile.put(loc, to_rows(blocks, x))
    cmds = lstm_backward(blocks, t)
    assert len(cmds) == 14 + 1 + with_in + with_out  # dh comes from the accumulator here
    tile.run(cmds)

    if cfg.acc_dtype != "bf16":
        dh = ar.rnd(dh)  # the recurrent GEMM's output, rounded as ar.gemm does
    dz = np.zeros((BATCH, 4 * hidden), np.float32)
    ds0 = _ds_from_h(bf16(dh), gates, ts, dz, ar)
    mode = "none" if carry == "none" else "carry"
    ds, carry_out = _cell_carry(
        ds0, carry_in if with_in else None, gates[:, hidden : 2 * hidden], mode, None, not with_out, ar
    )
    _gate_grads(ds, gates, s_prev, dz, ar)
    assert same_bits(get_gates(tile, blocks, t.dz), dz)
    assert same_bits(get(tile, blocks, t.ds), ds)
    if with_out:
        assert same_bits(get(tile, blocks, t.carry_out), carry_out)


# -- bias gradient ---------------------------------------------------------------------------


@pytest.mark.parametrize("hidden", HIDDENS)
@pytest.mark.parametrize("name", ["4x4", "4x8"])
def test_bias_gradient_bit_exact(name: str, hidden: int) -> None:
    """db = sum over steps and batch of dz, fp32 in the accumulator, rounded once: ``sum_rows``."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(hidden)
    blocks = Blocks(BATCH, hidden, cfg.cols)
    tile = Tile(cfg)
    steps, count = 3, GATES * blocks.count
    dz = bf16(rng.standard_normal((steps, BATCH, 4 * hidden)) * 0.01)
    locs = [tile.alloc(GATES * blocks.rows) for _ in range(steps)]
    db, out = tile.alloc(count, acc=True), tile.alloc(count)
    cmds: list[VecCommand] = []
    for j, loc in enumerate(locs):  # in step order, as the reference sums them
        put_gates(tile, blocks, loc, dz[j])
        step = bias_gradient(BATCH, count, blocks.width, loc, db, first=j == 0)
        assert len(step) == count * (2 if j == 0 else 1)
        cmds += step
    cmds += bias_gradient_finish(count, blocks.width, db, out)
    tile.run(cmds)
    got = get_gates(tile, Blocks(1, hidden, cfg.cols), out)
    want = Arith("bf16").sum_rows(dz)
    assert same_bits(got[0], want)


# -- FPTT update -----------------------------------------------------------------------------


def random_params(rng: np.random.Generator, scale: float, rounded: bool = True) -> Params:
    """Parameter-shaped tensors; bf16 unless ``rounded`` is False (a gradient GEMM's fp32 output)."""
    r = bf16 if rounded else (lambda x: np.asarray(x, np.float32))
    return Params(
        w_gate=r(rng.standard_normal((5, 24)) * scale),
        b_gate=r(rng.standard_normal(24) * scale),
        w_out=r(rng.standard_normal((6, 3)) * scale),
        b_out=r(rng.standard_normal(3) * scale),
    )


def chunk(param: np.ndarray, rows: int, width: int) -> np.ndarray:
    """A parameter flattened into ``rows`` rows of ``width`` elements, padding zero."""
    flat = np.zeros(rows * width, np.float32)
    flat[: param.size] = param.ravel()
    return flat.reshape(rows, width)


@pytest.mark.parametrize("grad_acc", [False, True])
@pytest.mark.parametrize("alpha", [0.1, 0.0, 0.5])
@pytest.mark.parametrize("name", ["4x4", "4x8"])
def test_fptt_update_bit_exact(name: str, alpha: float, grad_acc: bool) -> None:
    """Each parameter flattened into rows of ``width`` is one chunk; θ, θ̄, λ, R' bit-exact, with
    the gradient in the scratchpad (bf16) or as a gradient GEMM leaves it in the fp32 accumulator."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(int(alpha * 10))
    eta, width = 0.05, cfg.cols
    theta, theta_bar = random_params(rng, 0.3), random_params(rng, 0.3)
    grads = random_params(rng, 0.05, rounded=not grad_acc)
    lam = random_params(rng, 0.0 if alpha == 0 else 0.02)
    state = FpttState(theta=theta.astype(BF16), theta_bar=theta_bar.astype(BF16), lam=lam.astype(BF16))
    new_state, reg = ref_fptt_update(state, grads.astype(BF16), eta, alpha, Arith("bf16"))

    for name_ in ("w_gate", "b_gate", "w_out", "b_out"):
        tile = Tile(cfg)
        size = getattr(theta, name_).size
        rows = -(-size // width)

        t = UpdateChunk(*(tile.alloc(rows, acc=grad_acc and k == 3) for k in range(6)))
        for loc, p in ((t.theta, theta), (t.theta_bar, theta_bar), (t.lam, lam), (t.grad, grads)):
            tile.put(loc, chunk(getattr(p, name_), rows, width))
        cmds = fptt_update(rows, width, t, bf16_scalar(eta), bf16_scalar(alpha))
        assert len(cmds) == 13 + grad_acc
        tile.run(cmds)
        for loc, p in (
            (t.theta, new_state.theta),
            (t.theta_bar, new_state.theta_bar),
            (t.lam, new_state.lam),
            (t.reg, reg),
        ):
            got = tile.get(loc, rows, width).ravel()[:size]
            assert same_bits(got, np.asarray(getattr(p, name_), np.float32).ravel()), (name_, loc)


def test_bf16_scalar() -> None:
    assert bf16_scalar(1.0) == 0x3F800000
    assert bf16_scalar(0.05) == int(np.float32(0.05).astype(BF16).astype(np.float32).view(np.uint32))
    assert bf16_scalar(-0.0) == 0x80000000


# -- softmax and the head's backward ---------------------------------------------------------


def softmax_case(cfg: AccelConfig, batch: int, classes: int, z_acc: bool) -> tuple[Tile, Blocks, SoftmaxRows]:
    """A tile with room for the softmax of (batch, classes) logits held transposed."""
    blocks = Blocks(classes, batch, cfg.cols)  # rows: the classes of each batch block
    tile, n = Tile(cfg), classes * blocks.count
    t = SoftmaxRows(
        z=tile.alloc(n, acc=z_acc),
        e=tile.alloc(n),
        probs=tile.alloc(n),
        tmp=tile.alloc(2 * ((classes + 1) // 2)),
        total=tile.alloc(blocks.count, acc=True),
        recip=tile.alloc(blocks.count),
    )
    return tile, blocks, t


def logits(rng: np.random.Generator, batch: int, classes: int, spread: float) -> np.ndarray:
    """bf16 logits; one batch row all equal, one with a tie for the max, so the edge cases always run."""
    z = bf16(rng.standard_normal((batch, classes)) * spread)
    z[0] = z[0, 0]
    if classes > 2:
        z[-1, 1] = z[-1].max()
    return z


SOFTMAX_CASES = [  # config, batch, classes: one block, two blocks (the second partial), odd class counts
    ("4x4", 4, 10),
    ("4x4", 6, 5),
    ("4x8", 4, 10),
    ("4x4-acc-bf16", 4, 10),
    ("4x4", 3, 1),
    ("4x4", 4, 2),
]


@pytest.mark.parametrize("spread", [1.0, 40.0])
@pytest.mark.parametrize("z_acc", [True, False])
@pytest.mark.parametrize(("name", "batch", "classes"), SOFTMAX_CASES)
def test_softmax_bit_exact(name: str, batch: int, classes: int, z_acc: bool, spread: float) -> None:
    """``programs.softmax`` through the engine model equals the contract's softmax bit for bit; with
    spread 40 most exponentials underflow to 0 and the max's own is 1. The probabilities sum to 1
    within the roundings (so neither side is a trivially wrong constant)."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(batch * classes + int(spread))
    z = logits(rng, batch, classes, spread)
    tile, blocks, t = softmax_case(cfg, batch, classes, z_acc)
    tile.put(t.z, to_rows(blocks, z.T))
    cmds = softmax(blocks, t)
    tile.run(cmds)
    got = from_rows(blocks, tile.get(t.probs, classes * blocks.count, blocks.width)).T
    want = Arith("bf16", tile=cfg).softmax(z)
    assert same_bits(got, want)
    if classes == 10 and blocks.count == 1:
        assert len(cmds) == 10 + z_acc  # ⌈log2 10⌉ = 4 MAX, SUB, EXP, 2 sums, RECIP, MUL (+ the COPY)
    np.testing.assert_allclose(want.astype(np.float64).sum(axis=1), 1.0, rtol=classes * 2.0**-7)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(want, e / e.sum(axis=1, keepdims=True), rtol=2.0**-5, atol=2.0**-9)


@pytest.mark.parametrize("weight", [1.0, 0.3])
@pytest.mark.parametrize(("name", "batch", "classes"), SOFTMAX_CASES)
def test_head_backward_bit_exact(name: str, batch: int, classes: int, weight: float) -> None:
    """dlogits = (probs − onehot) · weight/B and db_out = Σ_b dlogits, in the transposed layout,
    against the contract's ``_head_backward`` steps."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(classes + batch)
    ar = Arith("bf16", tile=cfg)
    probs = ar.softmax(logits(rng, batch, classes, 2.0))
    labels = rng.integers(0, classes, batch)
    onehot = np.zeros((batch, classes), np.float32)
    onehot[np.arange(batch), labels] = 1.0
    blocks = Blocks(classes, batch, cfg.cols)
    tile, n = Tile(cfg), classes * blocks.count
    t = HeadBackwardRows(
        probs=tile.alloc(n), onehot=tile.alloc(n), dlogits=tile.alloc(n), db=tile.alloc(classes, acc=True),
        db_out=tile.alloc(classes),
    )  # fmt: skip
    tile.put(t.probs, to_rows(blocks, probs.T))
    tile.put(t.onehot, to_rows(blocks, onehot.T))
    cmds = head_backward(blocks, t, bf16_scalar(weight / batch))
    assert len(cmds) == 3 + blocks.count
    tile.run(cmds)
    dlogits = ar.scale(ar.sub(probs, onehot), ar.const(weight / batch))
    assert same_bits(from_rows(blocks, tile.get(t.dlogits, n, blocks.width)).T, dlogits)
    assert same_bits(tile.get(t.db_out, classes, 1)[:, 0], hardware.fold_sum(cfg, dlogits))


# -- a whole partition -----------------------------------------------------------------------


@pytest.mark.parametrize("hidden", HIDDENS)
def test_partition_forward_backward_bias(hidden: int) -> None:
    """Three chained steps forward, the backward window with the carry handed on in the same rows,
    and db over the window, against tb/fptt's ``forward`` and ``backward``. The GEMMs between the
    programs are the reference's own (``Arith.gemm``), their results placed in the accumulator."""
    cfg, steps, inputs, classes = CONFIGS["4x4"], 3, 3, 5
    rng = np.random.default_rng(hidden)
    dims = Dims(inputs=inputs, hidden=hidden, classes=classes, batch=BATCH)
    theta = init_params(dims, rng).astype(BF16)
    x = rng.standard_normal((BATCH, steps, inputs)).astype(np.float32)
    labels = rng.integers(0, classes, BATCH)
    h0, s0 = (bf16(rng.standard_normal((BATCH, hidden)) * 0.5) for _ in range(2))
    ar = Arith("bf16")
    st = forward(theta, x, h0, s0, ar)
    out = head(theta, st.h_last, labels, ar)
    ref = backward(theta, st, out, labels, ar)

    blocks = Blocks(BATCH, hidden, cfg.cols)
    tile, n = Tile(cfg), blocks.rows
    w, b = ar.load(theta.w_gate), ar.load(theta.b_gate)
    s = [tile.alloc(n) for _ in range(steps + 1)]
    fwd = [
        CellForward(
            tile.alloc(GATES * n, acc=True), s[j], tile.alloc(GATES * n), s[j + 1], tile.alloc(n), tile.alloc(n)
        )
        for j in range(steps)
    ]
    tile.put(s[0], to_rows(blocks, s0))
    h = h0
    for j, t in enumerate(fwd):
        xc = np.concatenate([bf16(x[:, j]), h], axis=1)
        put_gates(tile, blocks, t.z, ar.gemm(xc, w, "fwd_gate", bias=b))
        tile.run(lstm_forward(blocks, t))
        h = get(tile, blocks, t.h)
        assert same_bits(get(tile, blocks, t.s), np.asarray(st.s[j + 1], np.float32))
    assert same_bits(h, np.asarray(st.h_last, np.float32))

    w_h_t = np.ascontiguousarray(w[-hidden:].T)
    dh = _head_backward(theta, st, out, labels, 1.0, ar)[2]
    dz = [tile.alloc(GATES * n) for _ in range(steps)]
    dh_loc, ds, carry, tmp = tile.alloc(n, acc=True), tile.alloc(n), tile.alloc(n), tile.alloc(3 * n)
    for j in range(steps - 1, -1, -1):
        tile.put(dh_loc, to_rows(blocks, dh))
        t = CellBackward(
            dh_loc,
            fwd[j].gates,
            fwd[j].ts,
            s[j],
            dz[j],
            ds,
            tmp,
            carry if j < steps - 1 else None,
            carry if j else None,
        )
        tile.run(lstm_backward(blocks, t))
        dz_j = get_gates(tile, blocks, dz[j])
        assert same_bits(dz_j, np.asarray(ref.dz[j], np.float32))
        dh = ar.gemm(dz_j, w_h_t, "bwd_rec")
        for k in range(GATES):  # zero padding in, zero padding out (σ(0) = 0.5 in the gates' padding)
            last = dz[j].row + (k + 1) * n - BATCH
            assert not tile.sp[last : last + BATCH, hidden % blocks.width or blocks.width : blocks.width].any()

    count, db, db_out = (
        GATES * blocks.count,
        tile.alloc(GATES * blocks.count, acc=True),
        tile.alloc(GATES * blocks.count),
    )
    for j in range(steps):
        tile.run(bias_gradient(BATCH, count, blocks.width, dz[j], db, first=j == 0))
    tile.run(bias_gradient_finish(count, blocks.width, db, db_out))
    assert same_bits(get_gates(tile, Blocks(1, hidden, cfg.cols), db_out)[0], np.asarray(ref.grads.b_gate, np.float32))


# -- a whole partition on the hardware contract ------------------------------------------------


def bits16(x: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of bf16 values."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def tile_gemm(cfg: AccelConfig, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The accumulator after a GEMM command (``loop_result``, read through the identity read-out):
    fp32 values, or bf16 values with a bf16 accumulator."""
    out = loop_result(cfg, bits16(a), bits16(b), None, 0x3F800000, 0, 1)
    if cfg.acc_dtype == "bf16":
        return (out.astype(np.uint32) << 16).view(np.float32)
    return out.astype(np.uint32).view(np.float32)


def f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def with_ones(a: np.ndarray, axis: int) -> np.ndarray:
    """``a`` with a column (axis 1) or a row (axis 0) of ones appended: the bias's partner in a
    GEMM whose other operand carries the bias as its last K row (the contract, docs/fptt.md)."""
    shape = (a.shape[0], 1) if axis == 1 else (1, a.shape[1])
    return np.concatenate([a, np.ones(shape, np.float32)], axis=axis)


class Chain:
    """One partition on a NumPy tile: the engine programs, and between them the tile's GEMM model
    whose results stay unrounded in the accumulator; each stage checks its tensors against ``ref``
    (the contract reference's forward ``st``, head ``out`` and backward ``bw``)."""

    def __init__(self, cfg: AccelConfig, theta: Params, hidden: int, st, out, bw) -> None:
        self.cfg, self.theta, self.st, self.out, self.bw = cfg, theta, st, out, bw
        self.tile, self.blocks = Tile(cfg), Blocks(BATCH, hidden, cfg.cols)
        self.w = f32(theta.w_gate)
        self.grads: dict[str, np.ndarray] = {}

    def forward(self, x: np.ndarray, h0: np.ndarray, s0: np.ndarray) -> None:
        tile, blocks, n = self.tile, self.blocks, self.blocks.rows
        self.s = [tile.alloc(n) for _ in range(x.shape[1] + 1)]
        tile.put(self.s[0], to_rows(blocks, s0))
        self.fwd, self.xcs, self.h = [], [], h0
        for j in range(x.shape[1]):
            t = CellForward(tile.alloc(GATES * n, acc=True), self.s[j], tile.alloc(GATES * n), self.s[j + 1],
                            tile.alloc(n), tile.alloc(n))  # fmt: skip
            self.xcs.append(np.concatenate([bf16(x[:, j]), self.h], axis=1))
            w_aug = np.concatenate([self.w, f32(self.theta.b_gate)[None]])
            put_gates(tile, blocks, t.z, tile_gemm(self.cfg, with_ones(self.xcs[j], 1), w_aug))
            tile.run(lstm_forward(blocks, t))
            self.fwd.append(t)
            self.h = get(tile, blocks, t.h)
            assert same_bits(get_gates(tile, blocks, t.gates), f32(self.st.gates[j]))
        assert same_bits(self.h, f32(self.st.h_last))

    def head(self, labels: np.ndarray) -> np.ndarray:
        """logitsᵀ = W_outᵀ · hᵀ + D (b_out along each row), softmax, head backward; returns dh."""
        tile, classes, h = self.tile, len(self.theta.b_out), self.h
        w_out = f32(self.theta.w_out)
        heads = Blocks(classes, BATCH, self.cfg.cols)
        n = classes * heads.count
        sm = SoftmaxRows(tile.alloc(n, acc=True), tile.alloc(n), tile.alloc(n), tile.alloc(2 * ((classes + 1) // 2)),
                         tile.alloc(heads.count, acc=True), tile.alloc(heads.count))  # fmt: skip
        w_out_t = np.concatenate([w_out.T, f32(self.theta.b_out)[:, None]], axis=1)  # [W_out; b_out]ᵀ
        tile.put(sm.z, to_rows(heads, tile_gemm(self.cfg, w_out_t, with_ones(np.ascontiguousarray(h.T), 0))))
        tile.run(softmax(heads, sm))
        assert same_bits(from_rows(heads, tile.get(sm.probs, n, heads.width)).T, f32(self.out.probs))
        onehot = np.zeros((classes, BATCH), np.float32)
        onehot[labels, np.arange(BATCH)] = 1.0
        hb = HeadBackwardRows(
            sm.probs, tile.alloc(n), tile.alloc(n), tile.alloc(classes, acc=True), tile.alloc(classes)
        )
        tile.put(hb.onehot, to_rows(heads, onehot))
        tile.run(head_backward(heads, hb, bf16_scalar(1.0 / BATCH)))
        dlogits = from_rows(heads, tile.get(hb.dlogits, n, heads.width)).T
        assert same_bits(dlogits, f32(self.bw.dlogits))
        # [dW_out; db_out] = [h, 1]ᵀ · dlogits: the bias gradient is the GEMM's ones row
        dw_out = bf16(tile_gemm(self.cfg, np.ascontiguousarray(with_ones(h, 1).T), dlogits))
        self.grads["w_out"], self.grads["b_out"] = dw_out[:-1], dw_out[-1]
        return tile_gemm(self.cfg, dlogits, np.ascontiguousarray(w_out.T))

    def backward(self, dh: np.ndarray, trunc_h: int | None, trunc_s: int | None) -> None:
        """The backward pass (the cell-state gradient running past a window of trunc_h + 1 steps,
        a single carry or, with trunc_s, its parts by age), dW and the bias sums."""
        tile, blocks, n, steps = self.tile, self.blocks, self.blocks.rows, len(self.fwd)
        lo, first = window_start(steps, trunc_h), s_window_start(steps, trunc_h, trunc_s)
        ages = carry_mode(steps, trunc_h, trunc_s) == "ages"
        w_h_t = np.ascontiguousarray(self.w[-blocks.features :].T)
        dz = {j: tile.alloc(GATES * n) for j in range(first, steps)}
        dh_loc, ds, carry, tmp = tile.alloc(n, acc=True), tile.alloc(n), tile.alloc(n), tile.alloc(3 * n)
        parts, parts_acc = tile.alloc((trunc_s or 1) * n), tile.alloc(n, acc=True)
        dzs = []
        for j in range(steps - 1, first - 1, -1):
            if j >= lo:
                tile.put(dh_loc, to_rows(blocks, dh))
            else:  # past the window: dz[o] zero-filled, as a LOAD with zero fill would
                tile.put(dz[j].offset(2 * n), np.zeros((n, blocks.width), np.float32))
            t = CellBackward(dh_loc if j >= lo else None, self.fwd[j].gates, self.fwd[j].ts, self.s[j], dz[j], ds,
                             tmp, carry if j < steps - 1 else None, carry if j > first else None)  # fmt: skip
            if ages:
                summed, kept = age_parts(steps - 1 - j, steps - lo, trunc_s)
                age = Ages(parts, parts_acc, summed - (j >= lo), kept if j > first else 0)
                t = replace(t, carry_in=None, carry_out=None, ages=age)
            tile.run(lstm_backward(blocks, t))
            dzs.insert(0, get_gates(tile, blocks, dz[j]))
            assert same_bits(dzs[0], f32(self.bw.dz[j - first])), j
            if j > lo:
                dh = tile_gemm(self.cfg, dzs[0], w_h_t)
        # [dW; db] = [xc, 1]ᵀ · dz: db is the gradient GEMM's ones row
        xc_t = np.ascontiguousarray(with_ones(np.concatenate(self.xcs[first:]), 1).T)
        dw = bf16(tile_gemm(self.cfg, xc_t, np.concatenate(dzs)))
        self.grads["w_gate"], self.grads["b_gate"] = dw[:-1], dw[-1]
        for key, g in self.grads.items():
            want = f32(getattr(self.bw.grads, key))
            assert same_bits(g.reshape(want.shape), want), key

    def update(self, state: FpttState, new_state: FpttState, eta: float, alpha: float) -> None:
        """``fptt_update`` with each parameter one chunk, from this chain's gradients."""
        for key, g in self.grads.items():
            size, width = g.size, self.cfg.cols
            rows = -(-size // width)
            u = UpdateChunk(*(self.tile.alloc(rows) for _ in range(6)))
            for loc, p in ((u.theta, state.theta), (u.theta_bar, state.theta_bar), (u.lam, state.lam)):
                self.tile.put(loc, chunk(f32(getattr(p, key)), rows, width))
            self.tile.put(u.grad, chunk(g, rows, width))
            self.tile.run(fptt_update(rows, width, u, bf16_scalar(eta), bf16_scalar(alpha)))
            for loc, p in ((u.theta, new_state.theta), (u.theta_bar, new_state.theta_bar), (u.lam, new_state.lam)):
                got = self.tile.get(loc, rows, width).ravel()[:size]
                assert same_bits(got, f32(getattr(p, key)).ravel()), key


@pytest.mark.parametrize(("trunc_h", "trunc_s"), [(None, None), (1, None), (None, 1), (2, 1), (1, 2)])
@pytest.mark.parametrize("hidden", HIDDENS)
@pytest.mark.parametrize("name", ["4x4", "4x4-acc-bf16"])
def test_partition_on_the_contract(name: str, hidden: int, trunc_h: int | None, trunc_s: int | None) -> None:
    """A whole partition (forward, head, backward, bias gradients, update) of the contract
    reference (``Arith("bf16", tile=cfg)``) equals the engine-model programs chained with the tile's
    GEMM model, every GEMM result left unrounded in the accumulator for the next program to read:
    gates, states, probabilities, dlogits, every dz, all four gradients and θ, θ̄, λ after the update.
    With trunc_h shorter than the part, the oldest steps are reached by the cell-state carry only
    (Algorithm 3 line 15); with trunc_s, the carry is kept in parts by age ("ages")."""
    cfg, steps, inputs, classes, eta, alpha = CONFIGS[name], 5, 3, 5, 0.05, 0.1
    rng = np.random.default_rng(hidden + 100)
    dims = Dims(inputs=inputs, hidden=hidden, classes=classes, batch=BATCH)
    theta = init_params(dims, rng).astype(BF16)
    x = rng.standard_normal((BATCH, steps, inputs)).astype(np.float32)
    labels = rng.integers(0, classes, BATCH)
    h0, s0 = (bf16(rng.standard_normal((BATCH, hidden)) * 0.5) for _ in range(2))
    ar = Arith("bf16", tile=cfg)
    st = forward(theta, x, h0, s0, ar)
    out = head(theta, st.h_last, labels, ar)
    bw = backward(theta, st, out, labels, ar, trunc_h, trunc_s)
    assert bw.window_start == s_window_start(steps, trunc_h, trunc_s)
    state = FpttState(
        theta=theta,
        theta_bar=theta.map(lambda p: bf16(f32(p) * 0.9).astype(BF16)),
        lam=theta.map(lambda p: bf16(f32(p) * 0.01).astype(BF16)),
    )
    new_state, _ = ref_fptt_update(state, bw.grads, eta, alpha, ar)

    chain = Chain(cfg, theta, hidden, st, out, bw)
    chain.forward(x, h0, s0)
    chain.backward(chain.head(labels), trunc_h, trunc_s)
    chain.update(state, new_state, eta, alpha)

"""Vector-engine programs: the LSTM cell (forward, backward), bias gradients, the FPTT update, the
softmax and the loss head's backward as short fixed sequences of VEC commands (docs/vector.md).

Every program works on whole tensors at once, whatever the batch and hidden sizes, so an LSTM step
or the update of a parameter chunk is a constant handful of commands. The order of the commands and
of their roundings is the contract; it follows tb/fptt/model.py in bf16 mode (docs/vector.md says
where it differs and by how much).

Row layout (``Blocks``): a (batch, features) tensor is cut into column blocks of ``width`` elements,
block-major, ``batch`` rows per block: element (b, c) is at row ``first + (c // width) · batch + b``,
element ``c % width``. The last block's columns past ``features`` are padding (computed on, never
read back). This is the layout EXEC leaves a B × N result in the accumulator (one N tile of ``cols``
columns after another), so with ``width = cols`` the gate GEMM's output needs no re-blocking. A gate
tensor (batch, 4H) is four such tensors, gates i, f, o, g in that order, each padded to whole blocks
(the gate GEMM's weight columns padded per gate), so one command covers several gates.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from rtl.vector.engine_model import VecCommand
from rtl.vector.ops import VecOp

__all__ = [
    "GATES",
    "Ages",
    "Blocks",
    "CellBackward",
    "CellForward",
    "HeadBackwardRows",
    "Loc",
    "SoftmaxRows",
    "UpdateChunk",
    "age_parts",
    "bf16_scalar",
    "bias_gradient",
    "bias_gradient_finish",
    "fptt_update",
    "fptt_update_fused",
    "from_rows",
    "head_backward",
    "lstm_backward",
    "lstm_forward",
    "softmax",
    "to_rows",
    "with_tokens",
]

GATES = 4  # i, f, o, g
ONE = 0x3F800000  # 1.0 as fp32 bits
HALF = 0x3F000000  # 0.5


@dataclass(frozen=True)
class Blocks:
    """The row layout of a (batch, features) tensor: ``count`` column blocks of ``width`` elements."""

    batch: int
    features: int
    width: int

    @property
    def count(self) -> int:
        return math.ceil(self.features / self.width)

    @property
    def rows(self) -> int:
        """Rows one tensor occupies (one gate of a gate tensor)."""
        return self.batch * self.count


@dataclass(frozen=True)
class Loc:
    """Where a tensor starts: its first row, in the accumulator or the scratchpad."""

    row: int
    acc: bool = False

    def offset(self, rows: int) -> Loc:
        return Loc(self.row + rows, self.acc)


def to_rows(blocks: Blocks, x: npt.ArrayLike) -> np.ndarray:
    """A (batch, features) array in the row layout: (rows, width), padding zero."""
    x = np.asarray(x)
    padded = np.zeros((blocks.batch, blocks.count * blocks.width), dtype=x.dtype)
    padded[:, : blocks.features] = x
    return padded.reshape(blocks.batch, blocks.count, blocks.width).transpose(1, 0, 2).reshape(-1, blocks.width)


def from_rows(blocks: Blocks, rows: npt.ArrayLike) -> np.ndarray:
    """The inverse of ``to_rows``: (rows, width) → (batch, features)."""
    r = np.asarray(rows).reshape(blocks.count, blocks.batch, blocks.width).transpose(1, 0, 2)
    return r.reshape(blocks.batch, -1)[:, : blocks.features]


def bf16_scalar(value: float) -> int:
    """``value`` rounded to bf16 (via fp32, nearest even, as tb/fptt's ``Arith.const``), as fp32 bits."""
    w = struct.unpack("<I", struct.pack("<f", value))[0]
    if (w >> 23) & 0xFF == 0:  # a subnormal constant reads as zero, as the lanes flush it
        return w & 0x80000000
    return ((w + 0x7FFF + ((w >> 16) & 1)) >> 16) << 16 & 0xFFFFFFFF


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def _cmd(op: VecOp, rows: int, width: int, a: Loc, d: Loc, b: Loc | None = None, scalar: int = 0) -> VecCommand:
    b = b or Loc(0)
    return VecCommand(op, rows, width, a=a.row, b=b.row, d=d.row, a_acc=a.acc, b_acc=b.acc, d_acc=d.acc, scalar=scalar)


# Dependency flags of word 0 (docs/isa.md, "Dependency tokens"): for VEC, EXEC is the previous unit.
WAIT_EXEC = 1 << 8  # WAIT_PREV: take an EXEC → VEC token ("results are ready") before starting
SIGNAL_EXEC = 1 << 10  # SIGNAL_PREV: give a VEC → EXEC token when finished ("rows are ready")


def with_tokens(cmds: list[VecCommand], wait_exec: bool = True, signal_exec: bool = True) -> list[VecCommand]:
    """A program bracketed by tokens: its first command waits for EXEC (e.g. the gate GEMM's last
    EXEC gave ``SIGNAL_VEC``), its last tells EXEC its output is ready (taken with ``WAIT_VEC``).
    The VEC commands in between need none: each starts when the one before has written every row."""
    out = list(cmds)
    if wait_exec:
        out[0] = replace(out[0], deps=out[0].deps | WAIT_EXEC)
    if signal_exec:
        out[-1] = replace(out[-1], deps=out[-1].deps | SIGNAL_EXEC)
    return out


# -- LSTM cell forward -----------------------------------------------------------------------


@dataclass(frozen=True)
class CellForward:
    """Tensors of one forward step. ``z``: gate pre-activations (gate layout, usually in the
    accumulator); ``gates``: i, f, o, g activations (gate layout); ``s_prev``, ``s``, ``ts``, ``h``:
    s_{t-1}, s_t, tanh(s_t), h_t. Outputs belong in the scratchpad (bf16) to follow the reference."""

    z: Loc
    s_prev: Loc
    gates: Loc
    s: Loc
    ts: Loc
    h: Loc


def lstm_forward(blocks: Blocks, t: CellForward) -> list[VecCommand]:
    """Eqs. 4.3-4.8 as ``_lstm_step``: gates, s = f·s_prev + i·g, ts = tanh(s), h = o·ts. 7 commands.

    ``ts`` holds i·g until the TANH overwrites it, so the step needs no scratch rows."""
    n, w = blocks.rows, blocks.width
    i, f, o, g = (t.gates.offset(k * n) for k in range(GATES))
    return [
        _cmd(VecOp.SIGMOID, 3 * n, w, t.z, i),
        _cmd(VecOp.TANH, n, w, t.z.offset(3 * n), g),
        _cmd(VecOp.MUL, n, w, f, t.s, b=t.s_prev),
        _cmd(VecOp.MUL, n, w, i, t.ts, b=g),
        _cmd(VecOp.ADD, n, w, t.s, t.s, b=t.ts),
        _cmd(VecOp.TANH, n, w, t.s, t.ts),
        _cmd(VecOp.MUL, n, w, o, t.h, b=t.ts),
    ]


# -- LSTM cell backward ----------------------------------------------------------------------


@dataclass(frozen=True)
class CellBackward:
    """Tensors of one backward step. Inputs: ``dh`` (from the recurrent GEMM, accumulator or
    scratchpad), ``gates``, ``ts``, ``s_prev`` (kept from the forward step), ``carry_in`` (ds·f handed
    back from step j+1; None at the loss step or without a carry). Outputs: ``dz`` (gate layout),
    ``ds`` (total ds_j), ``carry_out`` (ds_j·f_j for step j-1; None at the window's oldest step).
    ``tmp``: 3 gates' worth of scratch rows.

    ``dh = None``: a step past the window that only the cell-state carry reaches (Algorithm 3 line
    15, ``s_window_start``): ds = carry_in, and the caller zero-fills dz[o] beforehand (LOAD with
    zero fill), which the sigmoid' multiply then keeps at +0, as the reference's dz[o] = 0."""

    dh: Loc | None
    gates: Loc
    ts: Loc
    s_prev: Loc
    dz: Loc
    ds: Loc
    tmp: Loc
    carry_in: Loc | None = None
    carry_out: Loc | None = None
    ages: Ages | None = None


@dataclass(frozen=True)
class Ages:
    """The "ages" carry (``_cell_carry`` when trunc_s is shorter than the path): ds split by how far
    it has followed the cell state. ``parts``: trunc_s slots of n rows, slot a holding the youngest
    but a carried part; ``count_in`` arrive at this step, ``count_out`` go on to the next (0 at the
    last step; ``age_parts`` gives both); ``acc``: n accumulator rows for their sum."""

    parts: Loc
    acc: Loc
    count_in: int
    count_out: int


def age_parts(q: int, window: int, trunc_s: int) -> tuple[int, int]:
    """(parts summed, parts handed on) at the step ``q`` steps before the loss step, for a window of
    ``window`` steps: the window steps' ds₀ that have followed s at most trunc_s steps, and of them
    those that may follow it one more (``_cell_carry``'s ``keep``). Inside the window the parts
    summed include the step's own ds₀ (so ``count_in`` is one less)."""
    newest = min(q, window - 1)
    return newest - max(0, q - trunc_s) + 1, newest - max(0, q - trunc_s + 1) + 1


def lstm_backward(blocks: Blocks, t: CellBackward) -> list[VecCommand]:
    """``_ds_from_h``, ``_cell_carry`` (modes "none" and "carry") and ``_gate_grads`` of one step:
    14 commands, +1 to round an accumulator ``dh`` to bf16, +1 with ``carry_in``, +1 with ``carry_out``;
    past the window (``dh`` None) 10, +1 with ``carry_out``."""
    n, w = blocks.rows, blocks.width
    i, f, o, g = (t.gates.offset(k * n) for k in range(GATES))
    dz_i, dz_f, dz_o, dz_g = (t.dz.offset(k * n) for k in range(GATES))
    tmp0 = t.tmp
    out = [] if t.dh is None else _ds_from_h_cmds(blocks, t, dz_o, o)
    if t.ages is not None:
        out += _ages_cmds(blocks, t, t.ages, f)
    elif t.dh is None:
        assert t.carry_in is not None, "a step past the window is reached by the carry only"
        out.append(_cmd(VecOp.COPY, n, w, t.carry_in, t.ds))  # ds = the carry (exact)
    elif t.carry_in is not None:
        out.append(_cmd(VecOp.ADD, n, w, t.ds, t.ds, b=t.carry_in))
    if t.carry_out is not None:
        out.append(_cmd(VecOp.MUL, n, w, t.ds, t.carry_out, b=f))
    return [
        *out,
        _cmd(VecOp.MUL, n, w, t.ds, dz_i, b=g),
        _cmd(VecOp.MUL, n, w, t.ds, dz_f, b=t.s_prev),
        # sigmoid' = a·(1 - a) for i, f, o in one pass each, then times d_sig in place
        _cmd(VecOp.RSUBS, 3 * n, w, i, t.tmp, scalar=ONE),
        _cmd(VecOp.MUL, 3 * n, w, i, t.tmp, b=t.tmp),
        _cmd(VecOp.MUL, 3 * n, w, dz_i, dz_i, b=t.tmp),
        _cmd(VecOp.MUL, n, w, t.ds, dz_g, b=i),  # d g
        _cmd(VecOp.MUL, n, w, g, tmp0, b=g),
        _cmd(VecOp.RSUBS, n, w, tmp0, tmp0, scalar=ONE),  # tanh' = 1 - g²
        _cmd(VecOp.MUL, n, w, dz_g, dz_g, b=tmp0),
    ]


def _ages_cmds(blocks: Blocks, t: CellBackward, ages: Ages, f: Loc) -> list[VecCommand]:
    """ds = Σ parts in age order (ds₀ first inside the window) in the accumulator, one rounding;
    then the kept parts times f, each into its next slot (oldest first, so no part is overwritten
    before it is read; past the window the slots keep their order and are updated in place)."""
    n, w = blocks.rows, blocks.width
    inside = t.dh is not None
    slot = [ages.parts.offset(a * n) for a in range(max(ages.count_in, ages.count_out))]
    sources = ([t.ds] if inside else []) + slot[: ages.count_in]
    assert sources, "no gradient reaches this step"
    out = []
    if len(sources) > 1:
        out.append(_cmd(VecOp.COPY, n, w, sources[0], ages.acc))
        out += [replace(_cmd(VecOp.COPY, n, w, src, ages.acc), accumulate=True) for src in sources[1:]]
    elif not inside:
        out.append(_cmd(VecOp.COPY, n, w, sources[0], t.ds))
    for a in range(ages.count_out - 1, -1, -1):
        src = slot[a] if not inside else slot[a - 1] if a else t.ds
        out.append(_cmd(VecOp.MUL, n, w, src, slot[a], b=f))
    if len(sources) > 1:
        out.append(_cmd(VecOp.COPY, n, w, ages.acc, t.ds))
    return out


def _ds_from_h_cmds(blocks: Blocks, t: CellBackward, dz_o: Loc, o: Loc) -> list[VecCommand]:
    """ds₀ and d o from dh (commands 0-5 of docs/vector.md's backward table)."""
    n, w = blocks.rows, blocks.width
    tmp0, tmp1, tmp2 = (t.tmp.offset(k * n) for k in range(3))
    out: list[VecCommand] = []
    dh = t.dh
    assert dh is not None
    if dh.acc:  # the reference rounds the GEMM's dh to bf16 before using it
        out.append(_cmd(VecOp.COPY, n, w, dh, tmp0))
        dh = tmp0
    return [
        *out,
        _cmd(VecOp.MUL, n, w, dh, dz_o, b=t.ts),  # d o (pre-sigmoid' factor)
        _cmd(VecOp.MUL, n, w, dh, tmp1, b=o),  # d ts
        _cmd(VecOp.MUL, n, w, t.ts, tmp2, b=t.ts),
        _cmd(VecOp.RSUBS, n, w, tmp2, tmp2, scalar=ONE),  # tanh'(s) = 1 - ts²
        _cmd(VecOp.MUL, n, w, tmp1, t.ds, b=tmp2),  # ds0
    ]


# -- bias gradient ---------------------------------------------------------------------------


def bias_gradient(batch: int, count: int, width: int, dz: Loc, db: Loc, first: bool) -> list[VecCommand]:
    """Add one step's column sums of ``dz`` (``count`` blocks of ``batch`` rows) into ``db``
    (``count`` accumulator rows, one per block): one accumulating "D is one row" command per block.

    With ``first``, each block's first row is copied into ``db`` instead of added, so ``db`` needs
    no clearing and the sum starts from the first element as NumPy's does (2 commands per block)."""
    assert db.acc, "bias sums accumulate, which only the accumulator does"
    out: list[VecCommand] = []
    for k in range(count):
        src, dst = dz.offset(k * batch), db.offset(k)
        rest = batch
        if first:
            out.append(_cmd(VecOp.COPY, 1, width, src, dst))
            src, rest = src.offset(1), batch - 1
        if rest:
            out.append(replace(_cmd(VecOp.COPY, rest, width, src, dst), d_one=True, accumulate=True))
    return out


def bias_gradient_finish(count: int, width: int, db: Loc, out: Loc) -> list[VecCommand]:
    """The fp32 sums rounded once to bf16 into the scratchpad (``Arith.sum_rows``'s one rounding)."""
    return [_cmd(VecOp.COPY, count, width, db, out)]


# -- FPTT update -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdateChunk:
    """A chunk of parameters, all tensors of the same rows: θ, θ̄, λ updated in place, the gradient
    ``grad`` read (scratchpad, or the accumulator a gradient GEMM left it in), R' (eq. 4.17) written
    to ``reg``, ``tmp`` scratch. All but ``grad`` in the scratchpad, so every result is rounded to bf16."""

    theta: Loc
    theta_bar: Loc
    lam: Loc
    grad: Loc
    reg: Loc
    tmp: Loc


def fptt_update(
    rows: int, width: int, t: UpdateChunk, eta: int, alpha: int, inv_2alpha: int | None = None
) -> list[VecCommand]:
    """Eqs. 4.17, 4.19-4.21 as ``fptt_update`` computes them, every product and sum rounded to bf16
    by a scratchpad write: 13 commands (14 with ``grad`` in the accumulator). ``eta``, ``alpha``:
    fp32 bits of the scalars (the reference uses them rounded to bf16, ``bf16_scalar``);
    ``inv_2alpha`` defaults to 1/(2α) rounded to bf16 (0 for α = 0, as the reference takes it)."""
    if inv_2alpha is None:
        a = _f32(alpha)
        inv_2alpha = 0 if a == 0 else bf16_scalar(1.0 / (2.0 * a))
    th, tb, lm, tmp = t.theta, t.theta_bar, t.lam, t.tmp

    def c(op: VecOp, a: Loc, d: Loc, b: Loc | None = None, scalar: int = 0) -> VecCommand:
        return _cmd(op, rows, width, a, d, b=b, scalar=scalar)

    # The reference reads the gradient as stored (bf16): one straight from a GEMM in an fp32
    # accumulator is rounded first.
    grad = (
        [c(VecOp.COPY, t.grad, tmp), c(VecOp.ADD, tmp, tmp, b=t.reg)]
        if t.grad.acc
        else [c(VecOp.ADD, t.grad, tmp, b=t.reg)]
    )
    return [
        c(VecOp.SUB, th, tmp, b=tb),  # 4.17: R' = α(θ - θ̄) - λ
        c(VecOp.MULS, tmp, tmp, scalar=alpha),
        c(VecOp.SUB, tmp, t.reg, b=lm),
        *grad,  # 4.19: θ ← θ - η(g + R')
        c(VecOp.MULS, tmp, tmp, scalar=eta),
        c(VecOp.SUB, th, th, b=tmp),
        c(VecOp.SUB, th, tmp, b=tb),  # 4.20: λ ← λ - α(θ - θ̄)
        c(VecOp.MULS, tmp, tmp, scalar=alpha),
        c(VecOp.SUB, lm, lm, b=tmp),
        c(VecOp.ADD, tb, tmp, b=th),  # 4.21: θ̄ ← ½(θ̄ + θ) - λ/(2α)
        c(VecOp.MULS, tmp, tmp, scalar=HALF),
        c(VecOp.MULS, lm, tb, scalar=inv_2alpha),  # θ̄ is read for the last time above
        c(VecOp.SUB, tmp, tb, b=tb),
    ]


# -- softmax and the loss head's backward ----------------------------------------------------


@dataclass(frozen=True)
class SoftmaxRows:
    """Tensors of the softmax over the classes, all held transposed, (classes, batch), in
    ``Blocks(classes, batch, width)``: class c of batch element b at row ``(b // width) · classes
    + c``, element ``b % width``. That is how the head GEMM issued as logitsᵀ = W_outᵀ · hᵀ + D
    (D = b_out repeated along each row) leaves its M = classes × N = batch result in the accumulator.

    ``z``: the logits (accumulator or scratchpad); ``e``: exp(z − max), and first bf16(z) when z is
    in the accumulator; ``probs``: the result; those three tensor-sized. ``tmp``: 2 · ceil(classes / 2)
    rows (the max tree); ``total``: one accumulator row per block (Σ e); ``recip``: one row per block."""

    z: Loc
    e: Loc
    probs: Loc
    tmp: Loc
    total: Loc
    recip: Loc


def softmax(blocks: Blocks, t: SoftmaxRows) -> list[VecCommand]:
    """``tb.fptt.hardware.softmax``: per block a tree of MAX (exact, so the order is free), then
    SUB of the max row, EXP, the sum in class order in the accumulator, RECIP, MUL. For 10 classes
    and one block: 10 commands (11 with z in the accumulator)."""
    classes, w, count = blocks.batch, blocks.width, blocks.count
    out: list[VecCommand] = []
    src = t.z
    if t.z.acc:  # the reference rounds the GEMM's logits to bf16 before using them
        out.append(_cmd(VecOp.COPY, classes * count, w, t.z, t.e))
        src = t.e
    for k in range(count):
        first = src.offset(k * classes)
        m, cmds = _max_tree(first, classes, w, t.tmp)
        out += cmds
        out.append(replace(_cmd(VecOp.SUB, classes, w, first, t.e.offset(k * classes), b=m), b_one=True))
    out.append(_cmd(VecOp.EXP, classes * count, w, t.e, t.e))
    for k in range(count):
        out += _row_sum(t.e.offset(k * classes), classes, w, t.total.offset(k))
    out.append(_cmd(VecOp.RECIP, count, w, t.total, t.recip))
    for k in range(count):
        rows = t.e.offset(k * classes)
        out.append(
            replace(_cmd(VecOp.MUL, classes, w, rows, t.probs.offset(k * classes), b=t.recip.offset(k)), b_one=True)
        )
    return out


def _max_tree(first: Loc, n: int, width: int, tmp: Loc) -> tuple[Loc, list[VecCommand]]:
    """The element-wise max of rows ``first … first + n − 1``: rows i and i + ⌊n/2⌋ paired (the middle
    one of an odd n with itself) into ⌈n/2⌉ rows, alternating between the two halves of ``tmp`` (a
    destination may not overlap its operands). Returns the row holding the max and the commands."""
    half = (n + 1) // 2
    bufs = (tmp, tmp.offset(half))
    out: list[VecCommand] = []
    src, which = first, 0
    while n > 1:
        keep, h = n - n // 2, n // 2
        out.append(_cmd(VecOp.MAX, keep, width, src, bufs[which], b=src.offset(h)))
        src, which, n = bufs[which], 1 - which, keep
    return src, out


def _row_sum(first: Loc, n: int, width: int, total: Loc) -> list[VecCommand]:
    """Σ of rows ``first … first + n − 1`` in row order into the accumulator row ``total``: the
    first row copied, the rest added by the accumulator's adder (as ``bias_gradient``)."""
    out = [_cmd(VecOp.COPY, 1, width, first, total)]
    if n > 1:
        out.append(replace(_cmd(VecOp.COPY, n - 1, width, first.offset(1), total), d_one=True, accumulate=True))
    return out


@dataclass(frozen=True)
class HeadBackwardRows:
    """The loss head's backward (``_head_backward``), in the softmax's transposed layout: ``probs``
    and ``onehot`` (the labels as 0 / 1, written by the host) in, ``dlogits`` out (scratchpad);
    ``db``: ``classes`` accumulator rows for db_out's sums, ``db_out``: ``classes`` scratchpad rows,
    db_out[c] in element 0 of row c."""

    probs: Loc
    onehot: Loc
    dlogits: Loc
    db: Loc
    db_out: Loc


def head_backward(blocks: Blocks, t: HeadBackwardRows, scale: int) -> list[VecCommand]:
    """dlogits = bf16(bf16(probs − onehot) · scale), ``scale`` the fp32 bits of bf16(weight / B);
    db_out = Σ over the batch of dlogits (``tb.fptt.hardware.fold_sum``): each block's batch
    elements folded in order by a row reduction, the blocks' folds added in the accumulator, one
    rounding. 4 commands for one block, + 1 per further block."""
    classes, w, count = blocks.batch, blocks.width, blocks.count
    rows = classes * count
    out = [
        _cmd(VecOp.SUB, rows, w, t.probs, t.dlogits, b=t.onehot),
        _cmd(VecOp.MULS, rows, w, t.dlogits, t.dlogits, scalar=scale),
    ]
    for k in range(count):
        elems = min(w, blocks.features - k * w)  # the padding of the last block is not summed
        fold = _cmd(VecOp.COPY, classes, elems, t.dlogits.offset(k * classes), t.db)
        out.append(replace(fold, reduce=True, accumulate=k > 0))
    out.append(_cmd(VecOp.COPY, classes, 1, t.db, t.db_out))
    return out


def fptt_update_fused(
    rows: int, width: int, t: UpdateChunk, eta: int, alpha: int, inv_2alpha: int | None = None
) -> VecCommand:
    """The same update as ``fptt_update`` (bit for bit) as one VEC UPDATE command for the FPTT
    update unit: θ at A, θ̄ at B, λ at D, g in word 5, all in the scratchpad (``reg`` and ``tmp``
    are not used: R' is not written). Scalars as for ``fptt_update`` (fp32 bits of bf16 values)."""
    assert not any(loc.acc for loc in (t.theta, t.theta_bar, t.lam, t.grad)), "UPDATE reads the scratchpad"
    if inv_2alpha is None:
        a = _f32(alpha)
        inv_2alpha = 0 if a == 0 else bf16_scalar(1.0 / (2.0 * a))
    return VecCommand(
        VecOp.UPDATE, rows, width, a=t.theta.row, b=t.theta_bar.row, d=t.lam.row, g=t.grad.row,
        scalar=eta >> 16 | (alpha >> 16) << 16, kappa=inv_2alpha >> 16,
    )  # fmt: skip

"""One LSTM time step (forward, backward) and one FPTT update as the tile's command streams, with
every tensor's expected bits from the reference under the hardware contract (``tb/fptt``,
``Arith("bf16", tile=cfg)``).

Python plays the host and the firmware: it lays the tensors out in main memory as
firmware/fptt/fptt.c keeps them (bf16, row-major; θ in ``Params`` order, so the gate weights and
their bias are one (I+H+1) × 4H matrix ``[W; b]``; a step's GEMM input ``[x, h, 1]``) and issues
that firmware's command sequence for one step, phase by phase: the gate GEMMs with σ / tanh in the
read-out, LOAD → the cell program → STORE, the cell-backward program, dh by a GEMM with B
transposed, ``[dW; db]`` by a GEMM with A transposed, and the update by streamed VEC UPDATEs. The
scratchpad regions and the VEC programs are the firmware's own (``fptt_soc.layout.Layout``).
The expected values come from the reference's functions (``forward``, ``cell_backward``,
``Arith.gemm``, ``Arith.sum_rows``, ``fptt_update``) on the same inputs, never from the programs.
tb/fptt_tile_tb.py runs the phases on the tile and compares every tensor each one wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fptt_soc.layout import FpttProblem, Layout
from rtl.config import AccelConfig
from rtl.vector.engine_model import VecCommand
from rtl.vector.programs import bf16_scalar
from tb.fptt.arith import BF16, Arith, round_bf16
from tb.fptt.model import cell_backward, forward, fptt_update, init_params
from tb.fptt.tensors import Dims, FpttState, Hyper, Params, PartitionStates
from tb.tile_cases import gemm_words
from tb.vector_cases import update_commands, update_regions

__all__ = ["Phase", "StepCase", "Tensor", "step_case"]

LOAD, STORE, FENCE = 0x01, 0x02, 0x04
SP_SOURCE = 1 << 12  # STORE: from the scratchpad
WAIT_VEC, SIGNAL_VEC = 1 << 28, 1 << 29  # LOAD / STORE: tokens with VEC; VEC: tokens with LOAD
SIGNAL_NEXT = 1 << 11  # VEC: a token to STORE
SIGMOID, TANH = 2, 3  # the GEMM's read-out activation (docs/isa.md, GEMM)
SCALE_ONE = 0x3F800000
BASE, ALIGN = 0x1000, 64
Dma = Callable[[int, int, int, int], list[int]]  # a LOAD or STORE: (address, rows, local row, flags)


@dataclass(frozen=True)
class Tensor:
    """Where a phase's output lies in main memory: ``shape`` bf16 elements, rows ``stride`` apart."""

    addr: int
    shape: tuple[int, int]
    stride: int


@dataclass
class Phase:
    """The commands the firmware issues between two of its waits for the tile, and what they write."""

    name: str
    commands: list[list[int]]
    outputs: dict[str, Tensor] = field(default_factory=dict)
    want: dict[str, npt.NDArray[np.uint16]] = field(default_factory=dict)


@dataclass
class StepCase:
    label: str
    writes: list[tuple[int, bytes]]  # (address, bytes) the host writes before the first phase
    phases: list[Phase]
    mem_bytes: int


def _bits(a: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """bf16 bit patterns (values not bf16 already are rounded to nearest even)."""
    return np.asarray(a, np.float32).astype(BF16).view(np.uint16)


def _flat(p: Params) -> npt.NDArray[np.uint16]:
    """θ (or θ̄, λ, a gradient) in the firmware's order: w_gate, b_gate, w_out, b_out."""
    return np.concatenate([_bits(a).ravel() for _, a in p.items()])


class _Memory:
    """Main memory as the host fills it: named regions of bf16 elements, laid out one after another."""

    def __init__(self) -> None:
        self.addr: dict[str, int] = {}
        self.writes: list[tuple[int, bytes]] = []
        self.end = BASE

    def region(self, name: str, elems: int, data: npt.NDArray[np.uint16] | None = None) -> int:
        self.addr[name] = self.end
        self.end += -(-2 * elems // ALIGN) * ALIGN
        if data is not None:
            self.writes.append((self.addr[name], np.ascontiguousarray(data, np.uint16).tobytes()))
        return self.addr[name]


def _random_state(theta: Params, rng: np.random.Generator) -> FpttState:
    """θ, a θ̄ near it and a small λ, so that every term of the update is non-zero."""

    def near(a: npt.ArrayLike) -> npt.NDArray[np.float32]:
        return round_bf16(np.asarray(a, np.float32) + rng.normal(0.0, 0.05, np.shape(a)))

    def small(a: npt.ArrayLike) -> npt.NDArray[np.float32]:
        return round_bf16(rng.normal(0.0, 0.02, np.shape(a)))

    return FpttState(theta, theta.map(near).astype(BF16), theta.map(small).astype(BF16))


class _Commands:
    """The command words of firmware/fptt/fptt.c's helpers (load, store, load_gates, program, gemm)."""

    def __init__(self, lay: Layout) -> None:
        self.lay, self.w = lay, lay.width
        self.row_bytes = 2 * self.w

    def load(self, addr: int, rows: int, local: int, flags: int = 0) -> list[int]:
        return [LOAD | flags, addr, self.row_bytes, rows | self.w << 16, local]

    def store(self, addr: int, rows: int, local: int, flags: int = 0) -> list[int]:
        return [STORE | SP_SOURCE | flags, addr, self.row_bytes, rows | self.w << 16, local, 0]

    def per_batch(self, op: Dma, addr: int, row: int, local: int, flags: list[int]) -> list[list[int]]:
        """A (B, H) tensor whose batch rows lie ``row`` elements apart: one LOAD / STORE per row."""
        count = self.lay.count
        return [op(addr + 2 * b * row, count, local + b * count, f) for b, f in enumerate(flags)]

    def gates(self, op: Dma, addr: int, local: int, first: int = 0) -> list[list[int]]:
        """The four gates of a (B, 4H) tensor into (out of) the gate layout, ``first`` the flags of
        the first command (the firmware's load_gates / store_gates)."""
        d = self.lay.problem.dims
        out: list[list[int]] = []
        for k in range(4):
            flags = [first if k == 0 and b == 0 else 0 for b in range(d.batch)]
            out += self.per_batch(op, addr + 2 * k * d.hidden, 4 * d.hidden, local + k * self.lay.r, flags)
        return out

    @staticmethod
    def program(cmds: list[VecCommand]) -> list[list[int]]:
        """The first waits for the LOADs before it (their last gave VEC a token), the last lets the
        STOREs go."""
        words = [c.words() for c in cmds]
        words[0][0] |= WAIT_VEC
        words[-1][0] |= SIGNAL_NEXT
        return words

    @staticmethod
    def gemm(
        m: int, k: int, n: int, a: tuple[int, int, bool], b: tuple[int, int, bool], c: tuple[int, int], act: int = 0
    ) -> list[list[int]]:
        """``C = act(A·B)`` in bf16, each operand (address, row stride in elements, transposed), then
        the FENCE the firmware's gemm() pushes (later LOADs read C)."""
        case = {"m": m, "k": k, "n": n, "trans_a": a[2], "trans_b": b[2], "bias": 0, "acc_c": 0}
        case |= {"act": act, "out": 0, "scale": SCALE_ONE}
        addr = {"A": a[0], "B": b[0], "C": c[0], "D": 0}
        ld = {"A": 2 * a[1], "B": 2 * b[1], "C": 2 * c[1], "D": 0}
        return [gemm_words(case, addr, ld), [FENCE]]


F32 = npt.NDArray[np.float32]
UPDATED = ("θ", "θ̄", "λ")


@dataclass
class _Step:
    """One step's random inputs (bf16 values) and the reference's results for them."""

    dims: Dims
    hyper: Hyper
    carry_in: bool  # the backward's variant: a cell-state carry from the step after
    hand_on: bool  # ... and one for the step before
    state: FpttState
    x: F32  # (B, 1, I)
    h0: F32
    s0: F32
    dh: F32
    carry: F32
    head_grad: F32  # the output layer's gradient, which the host writes
    fwd: PartitionStates
    dz: F32
    carry_out: F32 | None
    dh_prev: F32
    grads: Params
    new: FpttState


def _reference(cfg: AccelConfig, seed: int, hidden: int, batch: int, rng: np.random.Generator) -> _Step:
    """Random inputs, then the reference's step forward, its backward and the update."""
    d = Dims(inputs=1 + seed % 3, hidden=hidden, classes=4, batch=batch)
    hyper = Hyper(eta=0.05, alpha=0.3, K=1)
    ar = Arith("bf16", tile=cfg)
    state = _random_state(init_params(d, rng).astype(BF16), rng)
    x = round_bf16(rng.random((batch, 1, d.inputs)))
    h0, s0 = round_bf16(rng.uniform(-1, 1, (batch, hidden))), round_bf16(rng.normal(0, 1, (batch, hidden)))
    dh, carry = (round_bf16(rng.normal(0, 0.5, (batch, hidden))) for _ in range(2))
    head_grad = round_bf16(rng.normal(0, 0.1, (hidden + 1) * d.classes))
    carry_in, hand_on = bool(seed >> 1 & 1), bool(seed & 1)

    fwd = forward(state.theta, x, h0, s0, ar)
    gates, ts = ar.load(fwd.gates[0]), ar.load(fwd.ts[0])
    dz, carry_out = cell_backward(dh, carry if carry_in else None, gates, ts, s0, ar, hand_on)
    w_h_t = np.ascontiguousarray(ar.load(state.theta.w_gate)[d.inputs :].T)  # dh_{t-1} = dz · W_hᵀ
    xc = ar.load(fwd.xc[0])
    grads = Params(
        w_gate=ar.gemm(np.ascontiguousarray(xc.T), dz, "bwd_gate_w"),
        b_gate=ar.sum_rows(dz),
        w_out=head_grad[: hidden * d.classes].reshape(hidden, d.classes),
        b_out=head_grad[hidden * d.classes :],
    ).astype(BF16)
    new, _ = fptt_update(state, grads, hyper.eta, hyper.alpha, ar)
    return _Step(
        d, hyper, carry_in, hand_on, state, x, h0, s0, dh, carry, head_grad,
        fwd, dz, carry_out, ar.gemm(dz, w_h_t, "bwd_rec"), grads, new,
    )  # fmt: skip


def _host_memory(st: _Step, lay: Layout, p_rows: int, rng: np.random.Generator) -> _Memory:
    """What the host writes (θ, θ̄, λ, the gradient's output-layer part, x, h, s, dh, the carry) and
    the regions the phases write, as fptt.c's buffers; θ, θ̄, λ, g padded to whole rows."""
    d, w = st.dims, lay.cfg.dim
    mem = _Memory()

    def padded(flat: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint16]:
        return np.concatenate([flat, np.zeros(p_rows * w - flat.size, np.uint16)])

    for name in ("theta", "theta_bar", "lam"):
        mem.region(name, p_rows * w, padded(_flat(getattr(st.state, name))))
    # the gradient's gate part is the step's to write: random bits there until it does
    gate_part = _bits(rng.normal(0, 1, lay.problem.gate_params))
    mem.region("grad", p_rows * w, padded(np.concatenate([gate_part, _bits(st.head_grad)])))
    xw = d.xc_width + 1
    xc = np.zeros((2, d.batch, xw), np.uint16)  # steps t and t + 1
    xc[0, :, : d.inputs], xc[0, :, d.inputs : -1], xc[:, :, -1] = _bits(st.x[:, 0]), _bits(st.h0), _bits(1.0)
    mem.region("xc", xc.size, xc)
    for name, value in (("s_prev", st.s0), ("dh", st.dh), ("carry_in", st.carry)):
        mem.region(name, value.size, _bits(value))
    bh, g4 = d.batch * d.hidden, 4 * d.batch * d.hidden
    for name, elems in (("gates", g4), ("s", bh), ("ts", bh), ("dz", g4), ("carry_out", bh), ("dh_prev", bh)):
        mem.region(name, elems)
    mem.region("updated", 3 * p_rows * w)
    return mem


def _forward(st: _Step, c: _Commands, a: dict[str, int]) -> list[Phase]:
    """fptt.c's forward_step: the gate GEMMs, then LOAD → the cell program → STORE."""
    lay, sp = c.lay, c.lay.regions
    i_, h_, b_ = st.dims.inputs, st.dims.hidden, st.dims.batch
    g4, xw = 4 * h_, i_ + h_ + 1
    h_next = a["xc"] + 2 * (b_ * xw + i_)  # h goes into the next step's GEMM input
    xc = (a["xc"], xw, False)
    gemms = Phase(
        "forward gate GEMMs",
        [
            *c.gemm(b_, xw, 3 * h_, xc, (a["theta"], g4, False), (a["gates"], g4), SIGMOID),
            *c.gemm(b_, xw, h_, xc, (a["theta"] + 6 * h_, g4, False), (a["gates"] + 6 * h_, g4), TANH),
        ],
        {"gates": Tensor(a["gates"], (b_, g4), g4)},
        {"gates": _bits(st.fwd.gates[0])},
    )
    cell = Phase(
        "forward cell",
        [
            *c.gates(c.load, a["gates"], sp["G"]),
            c.load(a["s_prev"], lay.r, sp["SP"], SIGNAL_VEC),
            *c.program(lay.forward_cell()),
            c.store(a["s"], lay.r, sp["S"], WAIT_VEC),
            c.store(a["ts"], lay.r, sp["TS"]),
            *c.per_batch(c.store, h_next, xw, sp["H"], [0] * b_),
        ],
        {"s": Tensor(a["s"], (b_, h_), h_), "ts": Tensor(a["ts"], (b_, h_), h_), "h": Tensor(h_next, (b_, h_), xw)},
        {"s": _bits(st.fwd.s[1]), "ts": _bits(st.fwd.ts[0]), "h": _bits(st.fwd.h_last)},
    )
    return [gemms, cell]


def _backward(st: _Step, c: _Commands, a: dict[str, int]) -> list[Phase]:
    """fptt.c's backward for one step: the cell-backward program, the dh GEMM, the gradient GEMM."""
    lay, sp = c.lay, c.lay.regions
    i_, h_, b_ = st.dims.inputs, st.dims.hidden, st.dims.batch
    g4, xw = 4 * h_, i_ + h_ + 1
    cell = Phase(
        f"backward cell ({'a' if st.carry_in else 'no'} carry in, {'a' if st.hand_on else 'no'} carry out)",
        [
            c.load(a["dh"], lay.r, sp["DH"]),
            c.load(a["ts"], lay.r, sp["TS"]),
            *c.gates(c.load, a["gates"], sp["G"]),
            *([c.load(a["carry_in"], lay.r, sp["CARRY"])] if st.carry_in else []),
            c.load(a["s_prev"], lay.r, sp["SP"], SIGNAL_VEC),
            *c.program(lay.backward_cell(st.carry_in, st.hand_on)),
            *c.gates(c.store, a["dz"], sp["DZ"], first=WAIT_VEC),
        ],
        {"dz": Tensor(a["dz"], (b_, g4), g4)},
        {"dz": _bits(st.dz)},
    )
    if st.carry_out is not None:
        cell.commands.append(c.store(a["carry_out"], lay.r, sp["CARRY"]))
        cell.outputs["carry"], cell.want["carry"] = Tensor(a["carry_out"], (b_, h_), h_), _bits(st.carry_out)
    # W_h, rows I..I+H-1 of [W; b], is dh's B stored N × K
    dh_gemm = Phase(
        "dh GEMM (B transposed)",
        c.gemm(b_, g4, h_, (a["dz"], g4, False), (a["theta"] + 2 * i_ * g4, g4, True), (a["dh_prev"], h_)),
        {"dh_prev": Tensor(a["dh_prev"], (b_, h_), h_)},
        {"dh_prev": _bits(st.dh_prev)},
    )
    dw_gemm = Phase(
        "gradient GEMM [dW; db] = [x, h, 1]ᵀ · dz (A transposed)",
        c.gemm(xw, b_, g4, (a["xc"], xw, True), (a["dz"], g4, False), (a["grad"], g4)),
        {"dW;db": Tensor(a["grad"], (xw, g4), g4)},
        {"dW;db": np.concatenate([_bits(st.grads.w_gate), _bits(st.grads.b_gate)[None]])},
    )
    return [cell, dh_gemm, dw_gemm]


def _update(st: _Step, cfg: AccelConfig, a: dict[str, int], p_rows: int, chunk: int) -> Phase:
    """θ, θ̄, λ by VEC UPDATE, streamed in chunks through four buffers (fptt.c's fused update),
    stored to ``updated`` (θ, θ̄, λ one after another) rather than in place, so the inputs stay."""
    regions = update_regions(cfg, chunk, fused=True)
    assert regions is not None, f"{chunk}-row chunks of the update do not fit the scratchpad"
    # η, α as bf16; 1/(2α) from α itself, as the reference takes the constant (Layout.update_fused)
    hp = st.hyper
    scalars = {
        "eta": bf16_scalar(hp.eta),
        "alpha": bf16_scalar(hp.alpha),
        "inv_2alpha": bf16_scalar(1.0 / (2.0 * hp.alpha)),
    }
    sources = {name: a[name] for name in ("theta", "theta_bar", "lam", "grad")}
    params = st.state.theta.size()
    new = (st.new.theta, st.new.theta_bar, st.new.lam)
    return Phase(
        "FPTT update (VEC UPDATE, streamed)",
        update_commands(cfg, p_rows, chunk, sources, a["updated"], regions, scalars, fused=True),
        {k: Tensor(a["updated"] + 2 * j * p_rows * cfg.dim, (1, params), params) for j, k in enumerate(UPDATED)},
        {k: _flat(p)[None] for k, p in zip(UPDATED, new, strict=True)},
    )


def step_case(cfg: AccelConfig, seed: int, chunk: int = 16, hidden: int = 8, batch: int = 2) -> StepCase:
    """A random LSTM (inputs 1-3 by ``seed``, ``hidden``, 4 classes, ``batch``), one step of it from
    a random h and s, a random dh into its backward, and the update of θ, θ̄, λ by the gradient the
    step produced (streamed in chunks of ``chunk`` rows). The backward is the firmware's variant
    ``seed % 4`` inside the window, a cell-state carry in (a random one) << 1 | a carry out: four
    seeds in a row cover a part of one step (neither), the loss step of a longer part (a carry
    out), the part's first step (a carry in) and a step between (both)."""
    rng = np.random.default_rng(seed)
    st = _reference(cfg, seed, hidden, batch, rng)
    lay = Layout(cfg, FpttProblem(st.dims, 1, st.hyper))
    params = lay.problem.params
    p_rows = -(-params // cfg.dim)  # the update streams rows of `dim` elements
    mem = _host_memory(st, lay, p_rows, rng)
    c = _Commands(lay)
    phases = [*_forward(st, c, mem.addr), *_backward(st, c, mem.addr), _update(st, cfg, mem.addr, p_rows, chunk)]
    d = st.dims
    label = f"seed {seed}: I={d.inputs} H={d.hidden} B={d.batch} C={d.classes}, {params} parameters"
    return StepCase(label, mem.writes, phases, mem.end)

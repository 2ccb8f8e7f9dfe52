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

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fptt_soc.layout import FpttProblem, Layout
from rtl.config import AccelConfig
from rtl.vector.engine_model import VecCommand
from rtl.vector.programs import bf16_scalar
from tb.fptt.arith import BF16, Arith, round_bf16
from tb.fptt.model import cell_backward, forward, fptt_update, init_params
from tb.fptt.tensors import Dims, FpttState, Hyper, Params
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
    """bf16 bit patterns of bf16-exact values."""
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

    def per_batch(self, op, addr: int, row: int, local: int, flags: list[int]) -> list[list[int]]:
        """A (B, H) tensor whose batch rows lie ``row`` elements apart: one LOAD / STORE per row."""
        count = self.lay.count
        return [op(addr + 2 * b * row, count, local + b * count, f) for b, f in enumerate(flags)]

    def gates(self, op, addr: int, local: int, first: int = 0, last: int = 0) -> list[list[int]]:
        """The four gates of a (B, 4H) tensor into (out of) the gate layout: ``first`` on the first
        command, ``last`` on the last (the firmware's load_gates / store_gates)."""
        d = self.lay.problem.dims
        out: list[list[int]] = []
        for k in range(4):
            flags = [0] * d.batch
            flags[0] |= first if k == 0 else 0
            flags[-1] |= last if k == 3 else 0
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
    def gemm(m: int, k: int, n: int, a: tuple[int, int, bool], b: tuple[int, int, bool], c: tuple[int, int], act=0):
        """``C = act(A·B)`` in bf16, each operand (address, row stride in elements, transposed), then
        the FENCE the firmware's gemm() pushes (later LOADs read C)."""
        case = {"m": m, "k": k, "n": n, "trans_a": a[2], "trans_b": b[2], "bias": 0, "acc_c": 0}
        case |= {"act": act, "out": 0, "scale": SCALE_ONE}
        addr = {"A": a[0], "B": b[0], "C": c[0], "D": 0}
        ld = {"A": 2 * a[1], "B": 2 * b[1], "C": 2 * c[1], "D": 0}
        return [gemm_words(case, addr, ld), [FENCE]]


def step_case(cfg: AccelConfig, seed: int, chunk: int = 16, hidden: int = 8, batch: int = 2) -> StepCase:
    """A random LSTM (inputs 1-3 by ``seed``, ``hidden``, 4 classes, ``batch``), one step of it from
    a random h and s, a random dh into its backward, and the update of θ, θ̄, λ by the gradient the
    step produced (streamed in chunks of ``chunk`` rows). The backward is the firmware's variant
    ``seed % 4`` inside the window: a cell-state carry in (a random one) << 1 | a carry out, so four
    seeds in a row run the loss step, the part's first step, both and a part of one step."""
    rng = np.random.default_rng(seed)
    d = Dims(inputs=1 + seed % 3, hidden=hidden, classes=4, batch=batch)
    hyper = Hyper(eta=0.05, alpha=0.3, K=1)
    lay = Layout(cfg, FpttProblem(d, 1, hyper))
    ar = Arith("bf16", tile=cfg)
    i_, h_, b_, g4, xw = d.inputs, d.hidden, d.batch, 4 * d.hidden, d.xc_width + 1
    state = _random_state(init_params(d, rng).astype(BF16), rng)
    x = round_bf16(rng.random((b_, 1, i_)))
    h0, s0 = round_bf16(rng.uniform(-1, 1, (b_, h_))), round_bf16(rng.normal(0, 1, (b_, h_)))
    dh, carry = (round_bf16(rng.normal(0, 0.5, (b_, h_))) for _ in range(2))
    head_grad = round_bf16(rng.normal(0, 0.1, (h_ + 1) * d.classes))  # the output layer's, from the host

    # -- the reference: one step forward, its backward, the update --------------------------------
    st = forward(state.theta, x, h0, s0, ar)
    carry_in, hand_on = bool(seed >> 1 & 1), bool(seed & 1)
    dz, carry_out = cell_backward(
        dh, carry if carry_in else None, ar.load(st.gates[0]), ar.load(st.ts[0]), s0, ar, hand_on
    )
    w_h_t = np.ascontiguousarray(ar.load(state.theta.w_gate)[i_:].T)  # dh_{t-1} = dz · W_hᵀ
    dh_prev = ar.gemm(dz, w_h_t, "bwd_rec")
    xc = ar.load(st.xc[0])
    grads = Params(
        w_gate=ar.gemm(np.ascontiguousarray(xc.T), dz, "bwd_gate_w"),
        b_gate=ar.sum_rows(dz),
        w_out=head_grad[: h_ * d.classes].reshape(h_, d.classes),
        b_out=head_grad[h_ * d.classes :],
    ).astype(BF16)
    new, _ = fptt_update(state, grads, hyper.eta, hyper.alpha, ar)

    # -- main memory ---------------------------------------------------------------------------
    params, w = lay.problem.params, cfg.dim  # the update streams rows of `dim` elements
    p_rows = -(-params // w)
    mem = _Memory()

    def padded(flat: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint16]:
        return np.concatenate([flat, np.zeros(p_rows * w - flat.size, np.uint16)])

    for name in ("theta", "theta_bar", "lam"):
        mem.region(name, p_rows * w, padded(_flat(getattr(state, name))))
    # the gradient's gate part is the step's to write: random bits there until it does
    gate_part = lay.problem.gate_params
    mem.region("grad", p_rows * w, padded(np.concatenate([_bits(rng.normal(0, 1, gate_part)), _bits(head_grad)])))
    xc_mem = np.zeros((2, b_, xw), np.uint16)
    xc_mem[0, :, :i_], xc_mem[0, :, i_:-1], xc_mem[:, :, -1] = _bits(x[:, 0]), _bits(h0), _bits(1.0)
    mem.region("xc", xc_mem.size, xc_mem)
    mem.region("s_prev", b_ * h_, _bits(s0))
    mem.region("dh", b_ * h_, _bits(dh))
    mem.region("carry_in", b_ * h_, _bits(carry))
    for name, elems in (("gates", b_ * g4), ("s", b_ * h_), ("ts", b_ * h_), ("dz", b_ * g4)):
        mem.region(name, elems)
    for name in ("carry_out", "dh_prev"):
        mem.region(name, b_ * h_)
    mem.region("updated", 3 * p_rows * w)
    a = mem.addr
    xc1 = a["xc"] + 2 * b_ * xw

    # -- the phases, as the firmware's forward_step, backward (one step) and update ----------------
    c, sp = _Commands(lay), lay.regions
    bh, gates_t = (b_, h_), (b_, g4)
    fwd_gemm = Phase(
        "forward gate GEMMs",
        [
            *c.gemm(b_, xw, 3 * h_, (a["xc"], xw, False), (a["theta"], g4, False), (a["gates"], g4), SIGMOID),
            *c.gemm(
                b_, xw, h_, (a["xc"], xw, False), (a["theta"] + 6 * h_, g4, False), (a["gates"] + 6 * h_, g4), TANH
            ),
        ],
        {"gates": Tensor(a["gates"], gates_t, g4)},
        {"gates": _bits(st.gates[0])},
    )
    fwd_cell = Phase(
        "forward cell",
        [
            *c.gates(c.load, a["gates"], sp["G"]),
            c.load(a["s_prev"], lay.r, sp["SP"], SIGNAL_VEC),
            *c.program(lay.forward_cell()),
            c.store(a["s"], lay.r, sp["S"], WAIT_VEC),
            c.store(a["ts"], lay.r, sp["TS"]),
            *c.per_batch(c.store, xc1 + 2 * i_, xw, sp["H"], [0] * b_),  # h into the next step's xc
        ],
        {"s": Tensor(a["s"], bh, h_), "ts": Tensor(a["ts"], bh, h_), "h": Tensor(xc1 + 2 * i_, bh, xw)},
        {"s": _bits(st.s[1]), "ts": _bits(st.ts[0]), "h": _bits(st.h_last)},
    )
    bwd_cell = Phase(
        f"backward cell ({'a' if carry_in else 'no'} carry in, {'a' if hand_on else 'no'} carry out)",
        [
            c.load(a["dh"], lay.r, sp["DH"]),
            c.load(a["ts"], lay.r, sp["TS"]),
            *c.gates(c.load, a["gates"], sp["G"]),
            *([c.load(a["carry_in"], lay.r, sp["CARRY"])] if carry_in else []),
            c.load(a["s_prev"], lay.r, sp["SP"], SIGNAL_VEC),
            *c.program(lay.backward_cell(carry_in, hand_on)),
            *c.gates(c.store, a["dz"], sp["DZ"], first=WAIT_VEC),
        ],
        {"dz": Tensor(a["dz"], gates_t, g4)},
        {"dz": _bits(dz)},
    )
    if hand_on:
        bwd_cell.commands.append(c.store(a["carry_out"], lay.r, sp["CARRY"]))
        bwd_cell.outputs["carry"], bwd_cell.want["carry"] = Tensor(a["carry_out"], bh, h_), _bits(carry_out)
    # W_h, rows I..I+H-1 of [W; b], is dh's B stored N × K
    dh_gemm = Phase(
        "dh GEMM (B transposed)",
        c.gemm(b_, g4, h_, (a["dz"], g4, False), (a["theta"] + 2 * i_ * g4, g4, True), (a["dh_prev"], h_)),
        {"dh_prev": Tensor(a["dh_prev"], bh, h_)},
        {"dh_prev": _bits(dh_prev)},
    )
    dw_gemm = Phase(
        "gradient GEMM [dW; db] = [x, h, 1]ᵀ · dz (A transposed)",
        c.gemm(xw, b_, g4, (a["xc"], xw, True), (a["dz"], g4, False), (a["grad"], g4)),
        {"dW;db": Tensor(a["grad"], (xw, g4), g4)},
        {"dW;db": np.concatenate([_bits(grads.w_gate), _bits(grads.b_gate)[None]])},
    )
    regions = update_regions(cfg, chunk, fused=True)
    assert regions is not None, f"{chunk}-row chunks of the update do not fit the scratchpad"
    # η, α as bf16; 1/(2α) from α itself, as the reference takes the constant (Layout.update_fused)
    scalars = {"eta": bf16_scalar(hyper.eta), "alpha": bf16_scalar(hyper.alpha)}
    scalars["inv_2alpha"] = bf16_scalar(1.0 / (2.0 * hyper.alpha))
    sources = {name: a[name] for name in ("theta", "theta_bar", "lam", "grad")}
    update = Phase(
        "FPTT update (VEC UPDATE, streamed)",
        update_commands(cfg, p_rows, chunk, sources, a["updated"], regions, scalars, fused=True),
        {k: Tensor(a["updated"] + 2 * j * p_rows * w, (1, params), params) for j, k in enumerate(("θ", "θ̄", "λ"))},
        {k: _flat(p)[None] for k, p in zip(("θ", "θ̄", "λ"), (new.theta, new.theta_bar, new.lam), strict=True)},
    )
    label = f"seed {seed}: I={i_} H={h_} B={b_} C={d.classes}, {params} parameters"
    return StepCase(label, mem.writes, [fwd_gemm, fwd_cell, bwd_cell, dh_gemm, dw_gemm, update], mem.end)

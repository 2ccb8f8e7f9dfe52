"""Where the FPTT firmware keeps things, and the vector-engine programs it runs (docs/fptt.md,
"On the SoC").

The firmware (firmware/fptt/fptt.c) is written once; everything that depends on the problem's
dimensions is generated here into ``fptt_layout.h``: the sizes, the scratchpad regions of each
phase and the VEC programs as command words, produced by rtl/vector/programs.py, so the firmware
and the bf16 reference follow the same program and no rounding order is written twice.

Scratchpad rows hold ``width = cols`` elements. A (batch, H) tensor occupies ``R = batch · H/width``
rows, batch-major (row ``b · H/width + c // width``): that is what one LOAD per batch row of a
row-major tensor in main memory gives. The programs are element-wise, so any row order works as
long as every tensor of a program uses the same one; gate tensors are four such tensors, one per
gate, as the programs expect. Nothing stays in the scratchpad across a GEMM (the GEMM loop uses the
whole scratchpad), so each phase loads what it reads and stores what it writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rtl.config import AccelConfig, ConfigError
from rtl.vector.engine_model import VecCommand
from rtl.vector.ops import VecOp
from rtl.vector.programs import (
    GATES,
    Blocks,
    CellBackward,
    CellForward,
    Loc,
    SoftmaxRows,
    UpdateChunk,
    bf16_scalar,
    fptt_update,
    fptt_update_fused,
    lstm_backward,
    lstm_forward,
    softmax,
)
from tb.fptt.model import partition_bounds
from tb.fptt.tensors import Dims, Hyper

__all__ = ["ELEMENTWISE", "FpttProblem", "Layout", "check_elementwise"]

# Where the element-wise steps run: the tile's vector engine, or the cores in integer C (the
# software-only baseline; the GEMMs stay on the tile either way).
ELEMENTWISE = ("engine", "cores")
MAX_UPDATE_ROWS = 4096  # rows of one parameter chunk of the update (each of θ, θ̄, λ, g, R', tmp)


def check_elementwise(value: str, cfg: AccelConfig) -> str:
    """``value`` if it names a mode of ELEMENTWISE that ``cfg`` can run, else a ConfigError naming
    the field (the engine's mode needs a tile built with the vector engine)."""
    if value not in ELEMENTWISE:
        raise ConfigError("elementwise", value, " or ".join(ELEMENTWISE))
    if value == "engine" and not cfg.vector:
        raise ConfigError("vector", cfg.vector, "true for --elementwise engine (or --elementwise cores)")
    return value


@dataclass(frozen=True)
class FpttProblem:
    """One FPTT-K training run on the SoC: network and batch sizes, sequence length, hyper-parameters."""

    dims: Dims
    steps: int  # T
    hyper: Hyper
    # Gate weights resident in the scratchpad for each part's forward steps where they fit, instead of
    # streamed by every gate GEMM: a reload per part against a few cycles saved per step (docs/fptt.md).
    resident_weights: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.hyper.K <= self.steps:
            raise ConfigError("K", self.hyper.K, f"an integer from 1 to the sequence length {self.steps}")
        if self.hyper.trunc_s not in (None, 0) and self.hyper.trunc_s < self.longest_part - 1:
            raise ConfigError(
                "trunc_s",
                self.hyper.trunc_s,
                f"0 or at least {self.longest_part - 1} (the firmware carries one cell-state gradient)",
            )

    @property
    def parts(self) -> list[tuple[int, int]]:
        return partition_bounds(self.steps, self.hyper.K)

    @property
    def longest_part(self) -> int:
        return max(b - a for a, b in self.parts)

    @property
    def xc_width(self) -> int:
        """Columns of a step's GEMM input ``[x, h, 1]``: the trailing 1 multiplies the bias row."""
        return self.dims.inputs + self.dims.hidden + 1

    @property
    def gate_params(self) -> int:
        """w_gate and b_gate: one (I+H+1) × 4H matrix, the bias its last row (Params order)."""
        return self.xc_width * 4 * self.dims.hidden

    @property
    def params(self) -> int:
        return self.gate_params + (self.dims.hidden + 1) * self.dims.classes


@dataclass(frozen=True)
class Layout:
    """Scratchpad regions and programs for ``problem`` on ``cfg``'s tile."""

    cfg: AccelConfig
    problem: FpttProblem

    def __post_init__(self) -> None:
        cfg, d = self.cfg, self.problem.dims
        if cfg.dtype != "bf16":
            raise ConfigError("dtype", cfg.dtype, "bf16 (FPTT training runs on bf16 tiles)")
        if d.hidden % self.width:
            raise ConfigError("hidden", d.hidden, f"a multiple of the array's cols ({self.width})")
        if self.sp_end > cfg.sp_rows:
            raise ConfigError("hidden", d.hidden, f"a size whose tensors fit the {cfg.sp_rows}-row scratchpad")

    @property
    def width(self) -> int:
        return self.cfg.cols

    @property
    def count(self) -> int:
        """Rows of one batch row of an H-wide tensor."""
        return self.problem.dims.hidden // self.width

    @property
    def r(self) -> int:
        """Rows of a (batch, H) tensor."""
        return self.problem.dims.batch * self.count

    @property
    def blocks(self) -> Blocks:
        return Blocks(self.problem.dims.batch, self.problem.dims.hidden, self.width)

    @property
    def head_blocks(self) -> Blocks:
        """The head's tensors, transposed: a row per class, ``width`` sequences of the batch each."""
        d = self.problem.dims
        return Blocks(d.classes, d.batch, self.width)

    @property
    def head_rows(self) -> int:
        return self.head_blocks.rows

    # -- scratchpad regions (rows) ---------------------------------------------------------------

    @property
    def regions(self) -> dict[str, int]:
        """First row of every region; the same rows serve the phases that never overlap."""
        r, c, hc = self.r, self.problem.dims.classes, self.head_rows
        sizes = {
            "G": GATES * r,  # gates (forward), gates read back (backward)
            "SP": r,  # s_{t-1}
            "S": r,
            "TS": r,
            "H": r,
            "DH": r,
            "DZ": GATES * r,
            "DS": r,
            "TMP": 3 * r,
            "CARRY": r,
            # the head: (classes, batch) tensors held transposed, Blocks(classes, batch, width)
            "L": hc,  # logits
            "MAX": 2 * ((c + 1) // 2),  # the max tree
            "E": hc,
            "RCP": self.head_blocks.count,
            "P": hc,
            "OH": hc,  # the labels, one-hot
            "DL": hc,
        }
        out, row = {}, 0
        for name, size in sizes.items():
            out[name] = row
            row += size
        out["UPDATE"] = row
        return out

    @property
    def update_rows(self) -> int:
        """Rows of one update chunk: what fits beside the other regions, at most MAX_UPDATE_ROWS."""
        free = self.cfg.sp_rows - self.regions["UPDATE"]
        need = math.ceil(self.problem.params / self.width)
        return max(1, min(MAX_UPDATE_ROWS, need, free // 6))

    @property
    def fused_update(self) -> bool:
        """The update by the engine's update unit (VEC UPDATE), streamed through four buffers in
        bank pairs (docs/vector.md, "Streaming the update"); else the 13-command program."""
        return self.cfg.update_lanes > 0 and self.cfg.sp_banks >= 4

    @property
    def fused_chunk(self) -> int:
        """Rows of one chunk of the streamed update: two buffers of θ and λ (or θ̄ and g) per bank."""
        need = math.ceil(self.problem.params / self.width)
        return max(1, min(MAX_UPDATE_ROWS, need, self.cfg.sp_bank_rows // 4))

    @property
    def gate_weights_fit_row(self) -> int | None:
        """First scratchpad row the gate weights [W; b] (I+H+1 × 4H) would take when kept resident
        across a part's forward steps (GEMM flag [21], docs/isa.md: N tile j's rows from here +
        j·(I+H+1)), or None when they do not fit. They end at the top of the loop's A region, clear
        of the forward cell's regions (G to H) and with the gate GEMM's whole A (B rows per K slice)
        below them, so the loop neither streams A nor overwrites them."""
        d, sp = self.problem.dims, self.cfg.sp_layout
        xw, rows = self.problem.xc_width, self.cfg.rows
        row = sp.a_base + sp.a_rows - math.ceil(4 * d.hidden / self.cfg.cols) * xw
        a_rows = d.batch * math.ceil(xw / rows)
        lowest = max(sp.a_base + max(sp.slots, a_rows), self.regions["DH"])
        return row if row >= lowest else None

    @property
    def gate_weights_row(self) -> int | None:
        """Where the firmware keeps the gate weights resident: only when the problem asks for it
        (``resident_weights``; measured slower at the thesis' batch of 4, docs/fptt.md) and they fit."""
        return self.gate_weights_fit_row if self.problem.resident_weights else None

    @property
    def sp_end(self) -> int:
        return self.regions["UPDATE"] + 6 * self.update_rows

    def loc(self, name: str, offset: int = 0) -> Loc:
        return Loc(self.regions[name] + offset)

    # -- programs --------------------------------------------------------------------------------

    def forward_cell(self) -> list[VecCommand]:
        """Eqs. 4.7-4.8 on activated gates (the gate GEMM's read-out applied σ and tanh)."""
        t = CellForward(Loc(0), self.loc("SP"), self.loc("G"), self.loc("S"), self.loc("TS"), self.loc("H"))
        return lstm_forward(self.blocks, t)[2:]

    def backward_cell(self, carry_in: bool, carry_out: bool, inside: bool = True) -> list[VecCommand]:
        """One backward step; ``inside`` False: a step past the window, reached by the carry only
        (Algorithm 3 line 15), whose o gradient the firmware zeroes before the program."""
        t = CellBackward(
            dh=self.loc("DH") if inside else None,
            gates=self.loc("G"),
            ts=self.loc("TS"),
            s_prev=self.loc("SP"),
            dz=self.loc("DZ"),
            ds=self.loc("DS"),
            tmp=self.loc("TMP"),
            carry_in=self.loc("CARRY") if carry_in else None,
            carry_out=self.loc("CARRY") if carry_out else None,
        )
        return lstm_backward(self.blocks, t)

    def head(self) -> list[VecCommand]:
        """Softmax of the logits, then dlogits = (p − onehot) · scale; the scale (weight/B of the
        part) is the last command's scalar, which the firmware sets per part."""
        hb, n = self.head_blocks, self.head_rows
        t = SoftmaxRows(self.loc("L"), self.loc("E"), self.loc("P"), self.loc("MAX"), Loc(0, acc=True), self.loc("RCP"))
        return [
            *softmax(hb, t),
            VecCommand(VecOp.SUB, n, self.width, a=self.regions["P"], b=self.regions["OH"], d=self.regions["DL"]),
            VecCommand(VecOp.MULS, n, self.width, a=self.regions["DL"], d=self.regions["DL"]),
        ]

    @property
    def update_scalars(self) -> tuple[int, int, int]:
        """η, α and 1/(2α) of the update as fp32 bits of bf16 values; 1/(2α) from α itself, as the
        reference takes the constant (not from α rounded to bf16), 0 for α = 0."""
        hp = self.problem.hyper
        inv_2alpha = 0 if hp.alpha == 0 else bf16_scalar(1.0 / (2.0 * hp.alpha))
        return bf16_scalar(hp.eta), bf16_scalar(hp.alpha), inv_2alpha

    def update(self) -> list[VecCommand]:
        u = self.update_rows
        t = UpdateChunk(*(self.loc("UPDATE", k * u) for k in range(6)))
        return fptt_update(u, self.width, t, *self.update_scalars)

    def update_fused(self) -> VecCommand:
        """The UPDATE command's template; the firmware sets rows and the four tensors' rows per chunk."""
        t = UpdateChunk(*(Loc(0) for _ in range(6)))
        return fptt_update_fused(1, self.width, t, *self.update_scalars)

    # -- the generated header --------------------------------------------------------------------

    def c_header(self, snapshots: bool, elementwise: str = "engine") -> str:
        """``fptt_layout.h``: sizes, scratchpad regions and programs for firmware/fptt/fptt.c;
        ``elementwise`` "cores" builds the software-only mode (FPTT_CORES), which also reads the
        update's scalars and the accumulator's precision (the softmax sum) from here."""
        pr, d = self.problem, self.problem.dims
        eta, alpha, kappa = (bits >> 16 for bits in self.update_scalars)
        defs = {
            "FPTT_I": d.inputs,
            "FPTT_H": d.hidden,
            "FPTT_C": d.classes,
            "FPTT_B": d.batch,
            "FPTT_T": pr.steps,
            "FPTT_PARTS": len(pr.parts),
            "FPTT_PARAMS": pr.params,
            "FPTT_GATE_PARAMS": pr.gate_params,
            "FPTT_W": self.width,
            "FPTT_R": self.r,
            "FPTT_HEAD_BLOCKS": self.head_blocks.count,
            "FPTT_UPDATE_ROWS": self.update_rows,
            "FPTT_FUSED_UPDATE": int(self.fused_update),
            "FPTT_FUSED_CHUNK": self.fused_chunk,
            "FPTT_SP_BANK_ROWS": self.cfg.sp_bank_rows,
            "FPTT_TRUNC_H": -1 if pr.hyper.trunc_h is None else pr.hyper.trunc_h,
            "FPTT_CARRY": int(pr.hyper.trunc_s != 0),
            # Algorithm 3 line 15: the carry runs on past the window to the part's first step
            "FPTT_S_PAST_WINDOW": int(pr.hyper.trunc_s != 0 and not pr.hyper.cut_s_at_window),
            "FPTT_SNAPSHOTS": int(snapshots),
            "FPTT_CORES": int(check_elementwise(elementwise, self.cfg) == "cores"),
            "FPTT_ETA": f"0x{eta:04x}u",  # bf16 bits
            "FPTT_ALPHA": f"0x{alpha:04x}u",
            "FPTT_KAPPA": f"0x{kappa:04x}u",
            "FPTT_ACC_MANT": 7 if self.cfg.acc_dtype == "bf16" else 23,  # fraction bits of an accumulator sum
            # LOAD's token to the vector unit and VEC's wait for it (docs/isa.md, bits 28-29)
            "FPTT_LOAD_SIGNAL_VEC": "(1u << 29)",
            "FPTT_VEC_WAIT_LOAD": "(1u << 28)",
            "FPTT_LOAD_WAIT_VEC": "(1u << 28)",
            "FPTT_VEC_SIGNAL_LOAD": "(1u << 29)",
        }
        defs |= {f"FPTT_SP_{name}": row for name, row in self.regions.items()}
        resident = self.gate_weights_row
        defs |= {"FPTT_WGATE_RESIDENT": int(resident is not None), "FPTT_SP_WGATE": resident or 0}
        lines = [
            "/* Generated by fptt_soc/layout.py for this problem and tile: do not edit. */",
            "#ifndef FPTT_LAYOUT_H",
            "#define FPTT_LAYOUT_H",
            "#include <stdint.h>",
            "",
        ]
        lines += [f"#define {k} {v}" for k, v in defs.items()]
        lines += _c_program("fptt_forward_cell", self.forward_cell())
        lines += _c_program("fptt_head", self.head())
        lines += _c_program("fptt_update", self.update())
        fused = self.update_fused().words()
        lines += [f"static const uint32_t fptt_update_fused[6] = {{{', '.join(f'0x{w:08x}u' for w in fused)}}};", ""]
        # 0-3: inside the window, carry in << 1 | carry out; 4-5: past it (carry in), carry out
        variants = [self.backward_cell(bool(v >> 1), bool(v & 1)) for v in range(4)]
        variants += [self.backward_cell(True, bool(v), inside=False) for v in range(2)]
        longest = max(len(v) for v in variants)
        rows = ",\n".join("  {" + ", ".join(_c_words(c) for c in v) + "}" for v in variants)
        lines += [
            f"static const uint32_t fptt_backward_cell[6][{longest}][5] = {{\n{rows}\n}};",
            "static const unsigned fptt_backward_cell_len[6] = {" + ", ".join(str(len(v)) for v in variants) + "};",
            "",
            "#endif",
        ]
        return "\n".join(lines) + "\n"


def _c_words(c: VecCommand) -> str:
    return "{" + ", ".join(f"0x{w:08x}u" for w in c.words()) + "}"


def _c_program(name: str, cmds: list[VecCommand]) -> list[str]:
    body = ",\n  ".join(_c_words(c) for c in cmds)
    return [
        f"#define {name.upper()}_LEN {len(cmds)}",
        f"static const uint32_t {name}[{len(cmds)}][5] = {{\n  {body}\n}};",
        "",
    ]

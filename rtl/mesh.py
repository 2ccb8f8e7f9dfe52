"""The weight-stationary systolic mesh: ``rows × cols`` PEs plus the skew and deskew around them.

Interface (one transfer per cycle on each stream):

* ``weights``: one row ``W[i, :]`` of the next weight tile per transfer, rows in order 0 … rows-1.
  Loading overlaps computation with the current tile; the stream stalls only when a whole next
  tile is already waiting.
* ``inp``: one activation row ``a[0:rows]`` (the K slice) with the partial sums ``d[0:cols]`` that
  enter the top of the columns, a ``flip`` flag that starts using the most recently loaded weight
  tile from this row on, and a ``tag`` carried through to the output. A row with ``flip`` waits
  until a whole tile is loaded.
* ``out``: ``c[j] = d[j] + Σ_i a[i] · W[i, j]`` (accumulated from i = 0 down), with the row's tag,
  exactly ``latency = pe_stages · rows + cols`` cycles after the row was accepted. No backpressure:
  the consumer takes one row per cycle.

Rows and weights enter unskewed; the mesh delays row ``i`` of the activations by ``pe_stages · i``
cycles and column ``j`` of the sums and weights by ``j``, so a user never sees the skew.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.pe import PE, retimed, tag_bits, weight_layout
from rtl.shared import add_shared
from rtl.signals import delayed

__all__ = ["Mesh", "MeshRow", "mesh_latency"]


def mesh_latency(cfg: AccelConfig) -> int:
    """Cycles from the cycle an input row is accepted to the cycle its output row is valid."""
    return cfg.pe_stages * cfg.rows + cfg.cols


def _pe_key(cfg: AccelConfig, zero_acc: bool = False, early: bool = False) -> str:
    """Names the PE's Verilog module after everything the PE depends on."""
    key = f"pe_{cfg.dtype}_{cfg.acc_dtype}_s{cfg.pe_stages}_r{tag_bits(cfg)}" + ("_z" if zero_acc else "")
    return key + ("_e" if early and retimed(cfg) else "")


# The shortest BF16 mesh row kept out of line in a flat Verilator build (see Mesh.elaborate).
OUT_OF_LINE_BF16_COLS = 8


def _row_key(cfg: AccelConfig, zero_acc: bool = False, early: bool = False) -> str:
    return f"row_c{cfg.cols}_{_pe_key(cfg, zero_acc, early)}"


class MeshRow(wiring.Component):
    """One row of PEs: activations pass left to right, sums and weights enter at the top of each
    column and leave at the bottom. ``row`` is the row's index, tied off by the mesh; ``flip_in``
    runs one cycle ahead of ``a_in`` (see rtl/pe.py). ``zero_acc``: ``ps_in`` is always +0 (the
    PEs' ``zero_acc``). ``early``: a row below the top, retimed if ``retimed(cfg)`` (rtl/pe.py):
    ``a_early``, ``flip_early`` and ``w_early`` are ``a_in``, ``flip_in`` and ``w_in`` one cycle
    ahead (each PE's ``a_in`` and ``flip_in`` are the next one's early inputs)."""

    def __init__(self, cfg: AccelConfig, zero_acc: bool = False, early: bool = False) -> None:
        self.cfg, self.zero_acc = cfg, zero_acc
        self.early = early and retimed(cfg)
        w = data.ArrayLayout(weight_layout(cfg), cfg.cols)
        early = {"a_early": In(cfg.in_bits), "flip_early": In(1), "w_early": In(w)} if self.early else {}
        super().__init__(
            {
                "row": In(tag_bits(cfg)),
                "a_in": In(cfg.in_bits),
                **early,
                "flip_in": In(1),
                "ps_in": In(data.ArrayLayout(cfg.acc_bits, cfg.cols)),
                "w_in": In(data.ArrayLayout(weight_layout(cfg), cfg.cols)),
                "ps_out": Out(data.ArrayLayout(cfg.acc_bits, cfg.cols)),
                "w_out": Out(data.ArrayLayout(weight_layout(cfg), cfg.cols)),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        a, flip = self.a_in, self.flip_in
        if self.early:
            a_early, flip_early = self.a_early, self.flip_early
        for j in range(cfg.cols):
            key = _pe_key(cfg, self.zero_acc, self.early)
            pe = add_shared(m, f"pe_{j}", key, lambda: PE(cfg, self.zero_acc, self.early))
            if self.early:
                m.d.comb += [pe.a_early.eq(a_early), pe.flip_early.eq(flip_early), pe.w_early.eq(self.w_early[j])]
                a_early, flip_early = pe.a_in, pe.flip_in
            m.d.comb += [
                pe.row.eq(self.row),
                pe.a_in.eq(a),
                pe.flip_in.eq(flip),
                pe.ps_in.eq(0 if self.zero_acc else self.ps_in[j]),
                pe.w_in.eq(self.w_in[j]),
                self.ps_out[j].eq(pe.ps_out),
                self.w_out[j].eq(pe.w_out),
            ]
            a, flip = pe.a_out, pe.flip_out
        return m


class Mesh(wiring.Component):
    """``zero_d``: the user's ``d`` is always zero (+0; the EXEC unit's): the top row's PEs then
    round their products instead of adding them to it (``PE(zero_acc=True)``), with the same sums,
    and ``d`` is not read."""

    def __init__(self, cfg: AccelConfig, tag_bits: int = 8, zero_d: bool = False) -> None:
        self.cfg, self.zero_d = cfg, zero_d
        in_row = data.StructLayout(
            {
                "a": data.ArrayLayout(cfg.in_bits, cfg.rows),
                "d": data.ArrayLayout(cfg.acc_bits, cfg.cols),
                "flip": 1,
                "tag": tag_bits,
            }
        )
        out_row = data.StructLayout({"c": data.ArrayLayout(cfg.acc_bits, cfg.cols), "tag": tag_bits})
        super().__init__(
            {
                "weights": In(stream.Signature(data.ArrayLayout(cfg.in_bits, cfg.cols))),
                "inp": In(stream.Signature(in_row)),
                # A pipeline with no backpressure: valid and payload, no ready.
                "out": Out(wiring.Signature({"valid": Out(1), "payload": Out(out_row)})),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        # Every row is one shared Verilog module of shared PEs (rtl/shared.py): a large mesh is
        # converted and compiled as one row and `rows` instances of it, not as rows x cols copies.
        # A long BF16 row stays out of line in a flat Verilator build: inlined, the copies of its
        # large PEs overflow the instruction cache (16x16-bf16 tile: 46 k -> 51 k simulated
        # cycles/s, 8x8-bf16: 184 k -> 211 k); int8 rows and short rows run faster inlined
        # (16x16-int8 276 k inlined, 249 k not; 4x4-bf16 411 k, 398 k; docs/tile.md).
        out_of_line = cfg.dtype == "bf16" and cfg.cols >= OUT_OF_LINE_BF16_COLS
        rows = []
        for i in range(cfg.rows):
            zero = self.zero_d and i == 0 and cfg.dtype == "bf16"
            early = i > 0 and retimed(cfg)
            rows.append(
                add_shared(
                    m,
                    f"row_{i}",
                    _row_key(cfg, zero, early),
                    lambda zero=zero, early=early: MeshRow(cfg, zero, early),
                    hier_block=True,
                    no_inline=out_of_line,
                )
            )
        for i, row in enumerate(rows):
            m.d.comb += row.row.eq(i)

        in_fire, w_fire, w_row = self._handshake(m)
        row_reg = Signal.like(self.inp.payload)
        m.d.sync += row_reg.eq(self.inp.payload)
        # A row's flip enters the PEs one cycle ahead of its activations (rtl/pe.py): unregistered.
        flip = Signal()
        m.d.comb += flip.eq(in_fire & self.inp.payload.flip)

        for i, row in enumerate(rows):
            if i and retimed(cfg):
                # Retimed rows (rtl/pe.py) also take their inputs a cycle early: the inputs of the
                # last skew registers, and the row above's weights (its w_out is w_in registered).
                a_early = delayed(m, row_reg.a[i], i - 1, f"skew_a{i}")
                flip_early = delayed(m, flip, i - 1, f"skew_flip{i}")
                a_in = Signal.like(a_early, name=f"skew_a{i}_d{i - 1}")
                flip_in = Signal(name=f"skew_flip{i}_d{i - 1}")
                m.d.sync += [a_in.eq(a_early), flip_in.eq(flip_early)]
                m.d.comb += [
                    row.a_early.eq(a_early),
                    row.flip_early.eq(flip_early),
                    row.w_early.eq(rows[i - 1].w_in),
                    row.a_in.eq(a_in),
                    row.flip_in.eq(flip_in),
                ]
            else:
                m.d.comb += [
                    row.a_in.eq(delayed(m, row_reg.a[i], cfg.pe_stages * i, f"skew_a{i}")),
                    row.flip_in.eq(delayed(m, flip, cfg.pe_stages * i, f"skew_flip{i}")),
                ]
            if i:
                m.d.comb += [row.ps_in.eq(rows[i - 1].ps_out), row.w_in.eq(rows[i - 1].w_out)]

        w_reg = Signal(data.StructLayout(dict(weight_layout(cfg).members) | {"value": self.weights.payload.shape()}))
        m.d.sync += [w_reg.valid.eq(w_fire), w_reg.row.eq(w_row), w_reg.value.eq(self.weights.payload)]
        for j in range(cfg.cols):
            w_top = Signal(weight_layout(cfg), name=f"w_top{j}")
            m.d.comb += [w_top.valid.eq(w_reg.valid), w_top.row.eq(w_reg.row), w_top.value.eq(w_reg.value[j])]
            m.d.comb += rows[0].w_in[j].eq(delayed(m, w_top, j, f"skew_w{j}"))
            m.d.comb += rows[0].ps_in[j].eq(delayed(m, row_reg.d[j], j, f"skew_d{j}"))
            bottom = rows[-1].ps_out[j]
            m.d.comb += self.out.payload.c[j].eq(delayed(m, bottom, cfg.cols - 1 - j, f"deskew{j}"))

        valid, tag = in_fire, self.inp.payload.tag
        m.d.comb += [
            self.out.valid.eq(delayed(m, valid, mesh_latency(cfg), "out_valid")),
            self.out.payload.tag.eq(delayed(m, tag, mesh_latency(cfg), "out_tag")),
        ]
        return m

    def _handshake(self, m: Module):
        """Accept weight rows while the next-tile buffer has room and flip rows once it is full."""
        cfg = self.cfg
        loaded = Signal(range(cfg.rows + 1))
        # loaded == rows as a register: the flip (a clock enable of the top PEs' weights) and both
        # readies one LUT from flip-flops.
        full = Signal()
        m.d.comb += self.inp.ready.eq(~self.inp.payload.flip | full)
        in_fire = self.inp.valid & self.inp.ready
        flip_fire = in_fire & self.inp.payload.flip
        # The flipping row takes the waiting tile, so a weight row may enter in that same cycle.
        m.d.comb += self.weights.ready.eq(~full | flip_fire)
        w_fire = self.weights.valid & self.weights.ready
        base = Signal.like(loaded)
        m.d.comb += base.eq(loaded)
        with m.If(flip_fire):
            m.d.comb += base.eq(0)
        m.d.sync += [loaded.eq(base + w_fire), full.eq(base + w_fire == cfg.rows)]
        return in_fire, w_fire, base

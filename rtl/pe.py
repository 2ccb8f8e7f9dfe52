"""One weight-stationary processing element of the mesh.

Activations pass left to right in one cycle; partial sums and preloaded weights pass top to bottom
in ``pe_stages`` cycles: 1 multiplies and adds in one cycle, 2 registers the product, 3 to 5 also
split the adder into 2 to 4 pipeline stages (``rtl/fp.py``, ``ADD_CUTS``). Each PE holds two
weights: ``w_act``, used now, and ``w_next``, filled by the weight chain while the current tile
computes (double buffering). A weight on the chain carries
the index of the row it belongs to, so each PE picks its own out of the passing column. The
``flip`` bit travels with the first activation row of a new tile (one cycle ahead of it) and swaps
``w_next`` in exactly when that row reaches the PE, so consecutive tiles follow each other with no
bubble.

An integer PE with ``pe_stages`` 1 below the top row (``early``, ``retimed``) registers its product
instead of its activation and its weight: the mesh gives it each input one cycle ahead
(``a_early``, ``flip_early``, ``w_early``: the previous PE's or row's inputs, or the inputs of the
last skew registers), so ``w_mul``, a register, holds the weight the multiplier uses next cycle,
and the product register loads ``a_early * w_mul``. The multiply runs from registers to a register,
the sum's carry chain from one (``ps_in + product``): the same sums in the same cycles. The top row
cannot: its flip is the mesh's handshake of the same cycle (and its ``d``, zero in the EXEC unit,
leaves it a multiply alone).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import AccelConfig
from rtl.fp import RoundProduct
from rtl.mac import acc_mant_bits, adder_registers, make_adder, make_multiplier, product_flagged

__all__ = ["PE", "retimed", "tag_bits", "weight_layout"]


def tag_bits(cfg: AccelConfig) -> int:
    return max(1, (cfg.rows - 1).bit_length())


def retimed(cfg: AccelConfig) -> bool:
    """Whether the PEs below the top row register their products (module docstring)."""
    return cfg.dtype == "int8" and cfg.pe_stages == 1


def weight_layout(cfg: AccelConfig) -> data.StructLayout:
    """A weight on its way down a column: the value and the index of the row that keeps it."""
    return data.StructLayout({"valid": 1, "row": tag_bits(cfg), "value": cfg.in_bits})


class PE(wiring.Component):
    """``row`` is the index of the PE's row, a constant the mesh ties off (a port, not a parameter,
    so that every PE of a mesh is the same Verilog module). ``flip_in`` is the flip bit of the
    activation that arrives in the next cycle; ``flip_out`` keeps that lead for the next PE."""

    def __init__(self, cfg: AccelConfig, zero_acc: bool = False, early: bool = False) -> None:
        """``zero_acc``: ``ps_in`` is always +0 (the top row of a mesh whose ``d`` is zero): a bf16
        PE then rounds its product (``+0 + p``, see ``rtl.fp.RoundProduct``) instead of adding it.
        ``early``: a PE below the top row, retimed if ``retimed(cfg)`` (module docstring)."""
        self.cfg = cfg
        self.zero_acc = zero_acc and cfg.dtype == "bf16"
        self.early = early and retimed(cfg)
        w = weight_layout(cfg)
        early = {"a_early": In(cfg.in_bits), "flip_early": In(1), "w_early": In(w)} if self.early else {}
        super().__init__(
            {
                "row": In(tag_bits(cfg)),
                "a_in": In(cfg.in_bits),
                **early,
                "flip_in": In(1),
                "a_out": Out(cfg.in_bits),
                "flip_out": Out(1),
                "ps_in": In(cfg.acc_bits),
                "ps_out": Out(cfg.acc_bits),
                "w_in": In(w),
                "w_out": Out(w),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.mul = mul = make_multiplier(cfg)
        if self.zero_acc:
            add = RoundProduct(acc_mant_bits(cfg), adder_registers(cfg), flagged_x=product_flagged(cfg))
            m.submodules.round = add
        else:
            m.submodules.add = add = make_adder(cfg, adder_registers(cfg))

        w_next = Signal(cfg.in_bits)  # the next tile's weight
        w_act = Signal(cfg.in_bits)  # the weight the multiplier uses this cycle
        mine = self.w_in.valid & (self.w_in.row == self.row)
        with m.If(mine):
            m.d.sync += w_next.eq(self.w_in.value)
        # flip_in runs one cycle ahead of a_in: the weight switches as the flipping row arrives,
        # from a register, with no multiplexer in front of the multiplier. w_next as it will be
        # then includes a weight landing in this very cycle. Only the bottom row's can: the mesh
        # takes a flipping row once the whole tile has entered, its rows in order, so a weight
        # reaches its PE in the flip's cycle only when it is the tile's last row and the flip
        # followed it at once (rtl/mesh.py). The row is a constant the mesh ties off, so flat
        # synthesis keeps this multiplexer in the bottom row alone (16 LUT a bf16 PE, xc7).
        bypass = mine & (self.row == cfg.rows - 1)
        flipped = Mux(bypass, self.w_in.value, w_next)
        with m.If(self.flip_in):
            m.d.sync += w_act.eq(flipped)

        m.d.sync += [self.a_out.eq(self.a_in), self.flip_out.eq(self.flip_in)]
        if self.early:
            # w_mul is w_act one cycle ahead: it takes `flipped` as it will be in the next cycle
            # when the next cycle flips. w_early is the next cycle's w_in.
            w_mul = Signal(cfg.in_bits)
            e = self.w_early
            next_w_next = Mux(mine, self.w_in.value, w_next)
            next_flipped = Mux(e.valid & (e.row == self.row) & (self.row == cfg.rows - 1), e.value, next_w_next)
            with m.If(self.flip_early):
                m.d.sync += w_mul.eq(next_flipped)
            product = Signal(mul.p.shape())
            m.d.comb += [mul.a.eq(self.a_early), mul.b.eq(w_mul)]
            m.d.sync += product.eq(mul.p)
            m.d.comb += [add.acc.eq(self.ps_in), add.x.eq(product)]
            m.d.sync += [self.ps_out.eq(add.o), self.w_out.eq(self.w_in)]
            return m
        m.d.comb += [mul.a.eq(self.a_in), mul.b.eq(w_act)]
        # The vertical path takes pe_stages cycles: [product register,] the adder's own pipeline
        # registers, and the sum register. The weight chain keeps pace with it.
        domain = m.d.comb if cfg.pe_stages == 1 else m.d.sync
        if not self.zero_acc:
            domain += add.acc.eq(self.ps_in)
        if product_flagged(cfg):  # fields and flags: the adder decodes no IEEE special values of it
            domain += [add.x.eq(mul.p_bits), add.x_flags.eq(mul.p_flags)]
        else:
            domain += add.x.eq(mul.p)
        m.d.sync += self.ps_out.eq(add.o)
        w = self.w_in
        for k in range(cfg.pe_stages):
            reg = self.w_out if k == cfg.pe_stages - 1 else Signal.like(self.w_in, name=f"w_d{k}")
            m.d.sync += reg.eq(w)
            w = reg
        return m

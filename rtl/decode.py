"""The command decoder: checks each 16-word command against docs/isa.md and routes it to a unit.

A command that breaks a rule produces an error event (unit 1, decode) instead of an operation, so
no unit ever sees an invalid address or size. LOAD and STORE become DMA descriptors
(docs/tile.md), EXEC becomes an EXEC operation; each carries its dependency flags and sequence
number. FENCE waits until every unit is idle before letting later commands through.

Each command at the head of the queue takes four steps, each ending in registers, so that
neither the rule checks nor the units' ready signals reach across it into the queue or the units
(they were the tile's longest paths on ECP5): CHECK registers each rule's verdict (and the end of
the command's local range), and takes two cycles, the second registering the range compares and
the groups' flags from the first's registers; VERIFY the error code of the head command (the
rules' priority) and which unit it goes to, ISSUE offers it to that unit (or reports its error)
from those registers until taken, POP removes it from the queue. A split transfer counts its
local rows (SPAN) after its first VERIFY, then is checked again. So the queue holds the command
until it is handed over, and a command takes at least five cycles here.
"""

from dataclasses import dataclass
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.cmd import CMD_WORDS, ERR, ERROR_EVENTS
from rtl.config import AccelConfig
from rtl.exec_unit import exec_op_layout
from rtl.im2col import KERNEL_MAX
from rtl.ops import GemmCmd, deps_layout, dma_desc_layout
from rtl.signals import named
from rtl.vector.engine import vec_op_layout
from rtl.vector.engine_model import B_OPERAND_OPS, REQUANT_ROWS
from rtl.vector.ops import FLOAT_OPS, INT_OPS, VecOp

__all__ = ["OP", "Decoder"]

OP = {"LOAD": 0x01, "STORE": 0x02, "EXEC": 0x03, "FENCE": 0x04, "VEC": 0x05, "GEMM": 0x10, "CONV2D": 0x11}
UNIT_DECODE = 1
# Bits of word 0 each opcode defines above its opcode byte (docs/isa.md); any other bit set is a
# BAD_FIELD, so a mistyped flag is reported instead of silently meaning something else.
DEPS_BITS = 0xF << 8
SIDE_BITS = 0x3 << 28  # tokens between the vector unit and LOAD, EXEC or STORE
FLAG_BITS = {
    "LOAD": DEPS_BITS | SIDE_BITS | 0xF << 12,
    "STORE": DEPS_BITS | SIDE_BITS | 0x1F << 12,
    "EXEC": DEPS_BITS | SIDE_BITS | 0x3 << 12,
    "FENCE": 0,
    "VEC": DEPS_BITS | SIDE_BITS | 0x1FFF << 12,
    "GEMM": 0x3FF << 12,
    "CONV2D": 0x3 << 14 | 0x1F << 17,  # bias, act, out, resident weights: not bit 16 (GEMM's accumulate)
}
# Read-out activations defined: 0 none, 1 ReLU; float accumulators also 2 sigmoid, 3 tanh.
ACT_CODES = {"int8": 2, "bf16": 4}


def _log2(n: int) -> int:
    return n.bit_length() - 1


@dataclass(frozen=True)
class _Transfer:
    dma: Value
    sp_target: Value
    transpose: Value
    width: Value  # elements of a local row
    esize: Value  # bytes of an element in memory
    block_bytes: Value  # bytes of memory a local row's width of elements takes
    row_bytes: Value  # bytes of memory one row of the command's elements takes
    size_log2: Value  # log2 of esize


@dataclass(frozen=True)
class _Blocks:
    wide: Signal  # the head is a split transfer
    whole: Signal  # (registered) ... moved by one descriptor
    parts: Signal  # (registered) ... moved by a descriptor per memory row's full and partial rows
    counted: Signal  # SPAN has counted its local rows
    span: Signal  # ... which are these (or more than the memory has)
    last: Signal  # the block offered is the transfer's last
    desc: Signal  # the block's descriptor
    deps: Signal  # the block's share of the command's tokens
    start: Signal  # (in) the checked command goes to ISSUE: its first block next
    advance: Signal  # (in) a block was taken: the next one
    counting: Signal  # (in) SPAN
    forget: Signal  # (in) the head is done or gone
    checking: Signal  # (in) VERIFY: the next move of the block registers is a start, not an advance


def _gated(payload: data.Layout) -> stream.Signature:
    return stream.Signature(data.StructLayout({"op": payload, "deps": deps_layout, "seq": 16}))


def _kept(m: Module, value, name: str) -> Signal:
    """``value`` as a signal Yosys keeps (not merged into the logic around it)."""
    signal = Signal.like(Value.cast(value), name=name, attrs={"keep": 1})
    m.d.comb += signal.eq(value)
    return signal


def _first_broken(m: Module, checks: list, name: str) -> Signal:
    """The error code of the first rule of ``checks`` (condition, error name) broken, 0 if none."""
    code = Signal(8, name=name)
    # Neighbours with the same error are one rule (an OR): fewer steps of priority.
    merged: list = []
    for cond, error in checks:
        if merged and merged[-1][1] == error:
            merged[-1] = (merged[-1][0] | cond, error)
        else:
            merged.append((cond, error))
    for cond, error in reversed(merged):
        with m.If(cond):
            m.d.comb += code.eq(ERR[error])
    return code


class Decoder(wiring.Component):
    def __init__(self, cfg: AccelConfig) -> None:
        self.cfg = cfg
        self.sp_bits = (cfg.sp_rows - 1).bit_length()
        self.acc_bits = (cfg.acc_rows - 1).bit_length()
        super().__init__(
            {
                "cmd": In(stream.Signature(data.StructLayout({"words": data.ArrayLayout(32, CMD_WORDS), "seq": 16}))),
                "load": Out(_gated(dma_desc_layout())),
                "store": Out(_gated(dma_desc_layout())),
                "exec": Out(_gated(exec_op_layout(self.sp_bits, self.acc_bits))),
                "vec": Out(_gated(vec_op_layout())),
                "loop": Out(stream.Signature(GemmCmd)),
                "error": Out(ERROR_EVENTS),
                "units_idle": In(1),
                # A loop command runs (it owns the gates): the next command waits in CHECK. Only
                # CHECK reads it: a command is issued only while no loop command runs, and a loop
                # command starts only from ISSUE, so none starts while a checked one is offered.
                "hold": In(1),
                "flush": In(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        w = self.cmd.p.words
        opcode = w[0][:8]
        deps = data.View(deps_layout, Cat(w[0][8:12], w[0][28:30]))
        vec = self._vec(m, w)
        desc = Signal(dma_desc_layout())
        self._descriptor(m, w, opcode, desc)
        transfer = self._transfer(w, opcode)
        held = self._held(m, w, transfer)
        blocks = self._blocks(m, w, transfer, held, desc, deps)
        rules = self._check(m, w, opcode, deps, transfer, blocks)
        ex = Signal(self.exec.p.op.shape())
        m.d.comb += [
            ex.accumulate.eq(w[0][12]),
            ex.keep_weights.eq(w[0][13]),
            ex.b_addr.eq(w[1][:16]),
            ex.k_rows.eq(w[1][16:]),
            ex.a_addr.eq(w[2]),
            ex.m.eq(w[3]),
            ex.c_addr.eq(w[4]),
            ex.seq.eq(self.cmd.p.seq),
        ]

        self._gemm(m, w)
        for port, payload in ((self.load, blocks.desc), (self.store, blocks.desc), (self.exec, ex), (self.vec, vec)):
            m.d.comb += [port.p.op.eq(payload), port.p.seq.eq(self.cmd.p.seq)]
            m.d.comb += port.p.deps.eq(blocks.deps if port in (self.load, self.store) else deps)

        check, verify, issue, pop, span = range(5)
        state = Signal(range(5))
        code, ok = self._verified(m, rules)
        checked = Signal(8)  # the head command's error code, registered in VERIFY
        # Registered in VERIFY, cleared as ISSUE ends: the command is offered to this unit (its
        # code 0), or its error reported. The offers and their ends below read only these.
        units = ("load", "store", "exec", "vec", "loop", "fence")
        go = {name: Signal(name=f"go_{name}") for name in units}
        failed = Signal(name="go_error")
        valid = self.cmd.valid  # low once an error is recorded: nothing more is offered
        m.d.comb += [
            self.load.valid.eq(go["load"] & valid),
            self.store.valid.eq(go["store"] & valid),
            self.exec.valid.eq(go["exec"] & valid),
            # (Without the vector engine every VEC is refused: none is offered.)
            self.vec.valid.eq(go["vec"] & valid if self.cfg.vector else 0),
            # A loop command starts only when everything before it has finished (it owns the tile).
            self.loop.valid.eq(go["loop"] & self.units_idle & valid),
            self.error.valid.eq(failed & valid),
            self.error.payload.unit.eq(UNIT_DECODE),
            self.error.payload.code.eq(checked),
            self.error.payload.seq.eq(self.cmd.p.seq),
        ]
        # An invalid command is consumed (its error is reported once); a flush drops the head.
        # Each offer ends by its own unit's ready alone (the flags are set only for ISSUE, so they
        # stand for it): a unit's ready, the end of a chain through its gate, passes a level or
        # two of logic here, not the whole state machine's.
        ready = {
            "load": self.load.ready,
            "store": self.store.ready,
            "exec": self.exec.ready,
            "vec": self.vec.ready,
            "fence": self.units_idle,
            "loop": self.units_idle & self.loop.ready,
        }
        taken = {name: go[name] & ready[name] for name in units}
        dma_taken = taken["load"] | taken["store"]
        m.d.comb += blocks.advance.eq(valid & dma_taken & ~blocks.last)  # the next block of a split transfer
        ends = {name: taken[name] & (blocks.last if name in ("load", "store") else 1) for name in units}
        # A split transfer is told in CHECK (registered), counted after VERIFY, then checked.
        to_span = named(m, blocks.wide, "split_told", "sync") & ~blocks.counted
        starts = (state == verify) & valid & ~to_span & ~self.flush  # (a flush goes to CHECK)
        for name in units:
            m.d.sync += go[name].eq(Mux(starts, ok & rules.op[name], go[name] & ~ends[name] & valid & ~self.flush))
        m.d.sync += failed.eq(starts & ~ok)  # reported in the one ISSUE cycle, or dropped
        # The head's rules are registered in each CHECK cycle, and VERIFY's verdict from those a
        # cycle later: so a head goes on to VERIFY in its second CHECK cycle, when both are its own
        # (the head changes only by a POP or a flush, the counted span only in SPAN).
        seen = Signal(name="check_seen")
        m.d.sync += seen.eq((state == check) & valid & ~self.flush)
        with m.If((state == check) & seen & valid & ~self.hold):
            m.d.sync += state.eq(verify)
        with m.Elif(state == verify):
            with m.If(~valid):
                m.d.sync += state.eq(check)
            with m.Elif(to_span):  # count a split transfer's local rows first (then CHECK again)
                m.d.sync += state.eq(span)
            with m.Else():
                m.d.sync += [checked.eq(code), state.eq(issue)]
        with m.Elif(state == span):
            with m.If(~valid):
                m.d.sync += state.eq(check)
            with m.Elif(blocks.counted):
                m.d.sync += state.eq(check)
        with m.Elif(state == issue):
            with m.If(~valid):  # the head went away (a flush): check the next one
                m.d.sync += state.eq(check)
            with m.Elif(Cat(*ends.values(), failed).any()):
                m.d.sync += state.eq(pop)
        with m.Else():  # POP (or CHECK waiting for a command)
            m.d.sync += state.eq(check)
        m.d.comb += blocks.counting.eq((state == span) & valid)
        # (Not in the branch above: its enable would read the earlier branches' conditions, CHECK's
        # `hold` among them, the loop's busy.)
        m.d.comb += [blocks.start.eq(starts), blocks.checking.eq(state == verify)]
        m.d.comb += blocks.forget.eq((state == pop) | self.flush | ~valid)
        with m.If(self.flush):
            m.d.sync += state.eq(check)
        m.d.comb += self.cmd.ready.eq((state == pop) | self.flush)
        return m

    def _narrow_bytes(self) -> int:
        return 1 if self.cfg.dtype == "int8" else 2

    def _out_bytes(self, flags):
        """Bytes of one output element for a loop command's ``out`` flag (bits 20:19): narrow or full."""
        return Mux(flags[19:21] == 0, self._narrow_bytes(), self.cfg.acc_bits // 8)

    def _gemm(self, m: Module, w) -> None:
        """Both loop commands: GEMM's words as they are, CONV2D's as the GEMM of its im2col matrix
        (N = C_out; B, C and D are C_out elements wide; M and K follow from the shape, in the loop)."""
        f, p = w[0], self.loop.p
        cfg = self.cfg
        conv = w[0][:8] == OP["CONV2D"]
        cout = w[3][:16]
        m.d.comb += [
            p.bias.eq(f[14:16]),
            p.act.eq(f[17:19]),
            p.out.eq(f[19:21]),
            p.b_sp.eq(f[21]),
            p.b.eq(w[6]),
            p.n.eq(w[3][:16]),  # CONV2D's C_out
            # GEMM's own fields, which a CONV2D never reads: its M and packed K come from the
            # loop's setup, lda and ldd are only A's and a full D's (CONV2D has per-channel bias
            # only), and flags 12, 13 and 16 are reserved for it (set, the command is refused).
            # So they need no multiplexer.
            p.trans_a.eq(f[12]),
            p.trans_b.eq(f[13]),
            p.acc_c.eq(f[16]),
            p.m.eq(w[1]),
            p.k.eq(w[2]),
            p.lda.eq(w[5]),
            p.ldd.eq(w[11]),
            p.seq.eq(self.cmd.p.seq),
            p.conv.eq(conv),
            p.batch.eq(w[1][:16]),
            p.cin.eq(w[1][16:]),
            p.h.eq(w[2][:16]),
            p.w.eq(w[2][16:]),
            p.kh.eq(w[3][16:24]),
            p.kw.eq(w[3][24:]),
            p.stride.eq(w[4][:8]),
            p.pad.eq(w[4][8:16]),
        ]
        with m.If(conv):
            m.d.comb += [
                p.a.eq(w[5]),
                # A resident B's N tiles are word 10's rows apart (GEMM's ldb, word 7, is the output's
                # address here); weights in memory are HWIO rows of C_out elements.
                p.ldb.eq(Mux(f[21], w[10], cout * (cfg.in_bits // 8))),
                p.c.eq(w[7]),
                # Elements are 1, 2 or 4 bytes: a shift, not a multiplier (it took a DSP on ECP5).
                p.ldc.eq(Mux(f[19:21] == 0, cout << _log2(self._narrow_bytes()), cout << _log2(cfg.acc_bits // 8))),
                p.d.eq(w[8]),
                p.scale.eq(w[9]),
            ]
        with m.Else():
            m.d.comb += [
                p.a.eq(w[4]),
                p.ldb.eq(w[7]),
                p.c.eq(w[8]),
                p.ldc.eq(w[9]),
                p.d.eq(w[10]),
                p.scale.eq(w[12]),
            ]

    def _vec(self, m: Module, w) -> Signal:
        """A VEC command's fields (docs/isa.md, "VEC")."""
        v = Signal(vec_op_layout())
        f = w[0]
        op = f[18:23]
        m.d.comb += [
            v.a_acc.eq(f[12]),
            v.b_acc.eq(f[13]),
            v.d_acc.eq(f[14]),
            v.b_one.eq(f[15]),
            v.d_one.eq(f[16]),
            v.accumulate.eq(f[17]),
            v.reduce.eq(f[23]),
            v.reduce_max.eq(f[24]),
            v.op.eq(op),
            v.uses_b.eq(Cat(op == code for code in B_OPERAND_OPS).any()),
            v.scalar.eq(w[1]),
            v.rows.eq(w[2][:16]),
            v.elems.eq(w[2][16:]),
            v.a.eq(w[3][:16]),
            v.b.eq(w[3][16:]),
            v.d.eq(w[4][:16]),
            v.shift.eq(w[4][16:21]),
            v.update.eq(op == VecOp.UPDATE),
            v.requant.eq(op == VecOp.REQUANT),
            v.g.eq(w[5][:16]),
            v.kappa.eq(w[5][16:]),
        ]
        self._vec_fields = v
        return v

    def _vec_checks(self, vec) -> list:
        """VEC rules: a defined operation for the tile's type, accumulation only into the
        accumulator (and required with one destination row), no zero size, rows as wide as the
        memories they use and inside them, and no destination overlapping a source except in place."""
        cfg = self.cfg
        v = self._vec_fields
        if not cfg.vector:
            return [(vec, "BAD_FIELD")]  # without the engine no operation is defined
        ops = (FLOAT_OPS if cfg.dtype == "bf16" else INT_OPS) | ({VecOp.UPDATE} if cfg.update_lanes else set())
        undefined = ~Cat(v.op == code for code in ops).any()
        shift_bad = (v.shift != 0) if cfg.dtype == "bf16" else Const(0)
        # UPDATE works on four tensors of the scratchpad, whole rows: no other flag.
        flags = Cat(v.a_acc, v.b_acc, v.d_acc, v.b_one, v.d_one, v.accumulate, v.reduce, v.reduce_max)
        bad_field = (
            undefined | shift_bad | (v.accumulate & ~v.d_acc) | (v.d_one & ~v.accumulate) | (v.reduce_max & ~v.reduce)
            | (v.update & flags.any()) | (v.requant & self._requant_bad(v))
        )  # fmt: skip
        b_rows = Mux(v.b_one, 1, v.rows)
        d_rows = Mux(v.d_one, 1, v.rows)
        operands = [
            (v.a, v.rows, v.a_acc, Const(1)),
            (v.b, b_rows, v.b_acc, v.uses_b),
            (v.d, d_rows, v.d_acc, Const(1)),
            (v.b, v.rows, Const(0), v.update),  # UPDATE: θ̄ and g, rows spans in the scratchpad
            (v.g, v.rows, Const(0), v.update),
            (v.b, REQUANT_ROWS, Const(1), v.requant),  # REQUANT: the multipliers' and shifts' rows
        ]
        too_wide = Cat(used & (v.elems > Mux(acc, cfg.cols, cfg.dim)) for _, _, acc, used in operands).any()
        sp_out = Cat(used & ~acc & (base + span > cfg.sp_rows) for base, span, acc, used in operands).any()
        acc_out = Cat(used & acc & (base + span > cfg.acc_rows) for base, span, acc, used in operands).any()
        overlap = Cat(
            used & (acc == v.d_acc) & (base < v.d + d_rows) & (v.d < base + span)
            & ~((base == v.d) & (span == v.rows) & (d_rows == v.rows))
            for base, span, acc, used in operands[:2]
        ).any() & ~v.update  # fmt: skip
        overlap |= v.requant & v.d_acc & (v.b < v.d + d_rows) & (v.d < v.b + REQUANT_ROWS)
        # UPDATE: θ (A), θ̄ (B), λ (D) and g pairwise apart (each is read and three are written).
        tensors = (v.a, v.b, v.d, v.g)
        overlap |= (
            v.update
            & Cat((x < y + v.rows) & (y < x + v.rows) for i, x in enumerate(tensors) for y in tensors[i + 1 :]).any()
        )
        return [
            (vec & bad_field, "BAD_FIELD"),
            (vec & ((v.rows == 0) | (v.elems == 0)), "ZERO_DIM"),
            (vec & too_wide, "TOO_LARGE"),
            (vec & sp_out, "SP_RANGE"),
            (vec & acc_out, "ACC_RANGE"),
            (vec & overlap, "BAD_SHAPE"),
        ]

    @staticmethod
    def _requant_bad(v):
        """REQUANT's fields: B in the accumulator as two whole rows, no one-row, accumulating or
        folding form, shift 0, scalar bits [31:25] zero and a clamp range with min ≤ max."""
        forms = Cat(~v.b_acc, v.b_one, v.d_one, v.accumulate, v.reduce, v.reduce_max, v.shift != 0).any()
        return forms | (v.scalar[25:] != 0) | (v.scalar[8:16].as_signed() > v.scalar[16:24].as_signed())

    @staticmethod
    def _nonzero(w) -> SimpleNamespace:
        """Which half-words (bytes of the kernel's) of words 1–3 are non-zero, named by CONV2D's
        fields: every zero-size and 16-bit-limit rule of every opcode reads these few ORs."""
        return SimpleNamespace(
            batch=w[1][:16].any(), cin=w[1][16:].any(), h=w[2][:16].any(), w=w[2][16:].any(),
            n=w[3][:16].any(), kh=w[3][16:24].any(), kw=w[3][24:].any(),
        )  # fmt: skip

    @staticmethod
    def _fits(size, pad, kernel):
        """``size + 2·pad ≥ kernel``, for a kernel of at most KERNEL_MAX (a larger one is refused as
        BAD_SHAPE anyway, the same code): a size or pad past the kernel's bits fits any such kernel,
        so the sum is only as wide as the kernel (no 17-bit adder and compare per axis)."""
        bits = KERNEL_MAX.bit_length()
        low = size[:bits] + (pad[: bits - 1] << 1)
        return (size[bits:] != 0) | (pad[bits - 1 :] != 0) | (low >= kernel[:bits])

    def _conv_checks(self, w, conv, nz) -> list:
        """CONV2D rules: no zero size, a kernel of at most 7 × 7 that fits the padded input, a
        non-zero stride, bias none or per channel, element-aligned addresses. The shape is read from
        the loop command ``_gemm`` decodes (its CONV2D fields)."""
        cfg = self.cfg
        f, p = w[0], self.loop.p
        in_e, acc_e = cfg.in_bits // 8, cfg.acc_bits // 8
        zero = ~Cat(nz.batch, nz.cin, nz.h, nz.w, nz.n, nz.kh, nz.kw).all()
        bad = (p.kh > KERNEL_MAX) | (p.kw > KERNEL_MAX) | (p.stride == 0) | ~self._fits(p.h, p.pad, p.kh) | f[14]
        bad |= ~self._fits(p.w, p.pad, p.kw)
        bias_addr = Mux(f[15], p.d, 0)  # read only with a per-channel bias
        weights = Mux(f[21], 0, p.b)  # a resident B is given in scratchpad rows
        misaligned = (
            ((p.a | weights) & (in_e - 1)) | (p.c & (self._out_bytes(f) - 1)) | (bias_addr & (acc_e - 1))
        ) != 0
        return [(conv & zero, "ZERO_DIM"), (conv & bad, "BAD_SHAPE"), (conv & misaligned, "MISALIGNED")]

    def _gemm_checks(self, w, gemm, nz) -> list:
        """GEMM rules: dimensions 1–65535, element-aligned operands, a valid bias and output."""
        cfg = self.cfg
        f = w[0]
        in_e, acc_e = cfg.in_bits // 8, cfg.acc_bits // 8
        out_e = self._out_bytes(f)
        with_d = (f[14:16] != 0) | f[16]
        b_bytes = Mux(f[21], 0, w[6] | w[7])  # a resident B is given in scratchpad rows
        misaligned = (
            (((w[4] | w[5] | b_bytes) & (in_e - 1)) != 0)
            | (((w[8] | w[9]) & (out_e - 1)) != 0)
            | (with_d & (((w[10] | w[11]) & (acc_e - 1)) != 0))
        )
        zero = ~((nz.batch | nz.cin) & (nz.h | nz.w) & (nz.n | nz.kh | nz.kw))  # M, K or N is 0
        big = nz.cin | nz.w | nz.kh | nz.kw  # M, K or N ≥ 2^16
        bad = (f[14:16] == 3) | (f[16] & (f[19:21] == 0))  # accumulating into C needs full-width C
        return [
            (gemm & zero, "ZERO_DIM"),
            (gemm & big, "TOO_LARGE"),
            (gemm & bad, "BAD_SHAPE"),
            (gemm & misaligned, "MISALIGNED"),
        ]

    def _bad_field(self, flags, opcode, sp_target) -> list:
        """A reserved bit of word 0 set, or a field holding a code the tile does not define:
        read-out activation or output width codes 2–3, a STORE from the scratchpad with a
        read-out, a LOAD that transposes into or accumulates onto the wrong memory."""
        reserved = [(opcode == OP[name]) & ((flags[8:] & ~(mask >> 8)) != 0) for name, mask in FLAG_BITS.items()]
        store, loop = opcode == OP["STORE"], (opcode == OP["GEMM"]) | (opcode == OP["CONV2D"])
        store_act, store_out = flags[13:15], flags[15:17]
        loop_act, loop_out = flags[17:19], flags[19:21]
        act_codes = ACT_CODES[self.cfg.dtype]
        return [
            *reserved,
            store & ~sp_target & ((store_act >= act_codes) | (store_out > 1)),
            store & sp_target & ((store_act != 0) | (store_out != 0)),
            (opcode == OP["LOAD"]) & ((~sp_target & flags[13]) | (sp_target & flags[14])),
            (loop & ((loop_act >= act_codes) | (loop_out > 1)))
            | ((opcode == OP["GEMM"]) & flags[21] & flags[13]),  # a resident B is not transposed
        ]

    def _descriptor(self, m: Module, w, opcode, desc) -> None:
        store = opcode == OP["STORE"]
        m.d.comb += [
            # LOAD: bit 12 = 0 scratchpad → kind 0, 1 accumulator → 1.
            # STORE: bit 12 = 0 accumulator → kind 2, 1 scratchpad → 3.
            desc.kind.eq(Cat(w[0][12], store)),
            desc.dram_addr.eq(w[1]),
            desc.dram_stride.eq(w[2]),
            desc.rows.eq(w[3][:16]),
            desc.elems.eq(w[3][16:]),
            desc.local_addr.eq(w[4][:16]),
            desc.transpose.eq(~store & w[0][13]),
            desc.accumulate.eq(~store & w[0][14]),
            desc.zero.eq(~store & w[0][15]),
            desc.act.eq(w[0][13:15]),
            desc.out.eq(w[0][15:17]),
            desc.scale.eq(w[5]),
        ]

    def _transfer(self, w, opcode) -> _Transfer:
        """What a LOAD or STORE at the head moves: its local memory, row width and element size."""
        cfg = self.cfg
        load, store = opcode == OP["LOAD"], opcode == OP["STORE"]
        sp_target = Mux(load, ~w[0][12], w[0][12])
        narrow = store & ~sp_target & (w[0][15:17] == 0)
        # Element sizes are 1, 2 or 4 bytes: every byte count below is a shift by this.
        size_log2 = Mux(
            sp_target, _log2(cfg.in_bits // 8), Mux(narrow, _log2(self._narrow_bytes()), _log2(cfg.acc_bits // 8))
        )
        return self._sized(w, load | store, sp_target, load & sp_target & w[0][13], size_log2)

    def _sized(self, w, dma, sp_target, transpose, size_log2) -> _Transfer:
        width = Mux(sp_target, self.cfg.dim, self.cfg.cols)
        return _Transfer(
            dma=dma,
            sp_target=sp_target,
            transpose=transpose,
            width=width,
            esize=Const(1, 3) << size_log2,
            row_bytes=w[3][16:] << size_log2,
            block_bytes=width << size_log2,
            size_log2=size_log2,
        )

    def _held(self, m: Module, w, t: _Transfer) -> _Transfer:
        """The head's transfer from registers, for SPAN and ISSUE (which come after a CHECK): each
        cycle's head is registered (the words stay while it is the head, see ``_check``)."""
        regs = [named(m, v, f"transfer_{n}", "sync") for v, n in ((t.dma, "dma"), (t.sp_target, "sp"))]
        transpose = named(m, t.transpose, "transfer_transpose", "sync")
        return self._sized(w, regs[0], regs[1], transpose, named(m, t.size_log2, "transfer_size", "sync"))

    def _past(self, t: _Transfer, value, bound: str, times: int = 1, margin: int = 0):
        """``value > times · bound - margin`` for the transfer's row width or memory size: a compare
        with each memory's constant, then a choice (not one compare with a choice of constants)."""
        sp, acc = {"width": (self.cfg.dim, self.cfg.cols), "limit": (self.cfg.sp_rows, self.cfg.acc_rows)}[bound]
        return Mux(t.sp_target, value > times * sp - margin, value > times * acc - margin)

    def _blocks(self, m: Module, w, t: _Transfer, h: _Transfer, desc, deps) -> _Blocks:
        """A LOAD or STORE with rows longer than a local row is a *split* transfer (docs/isa.md):
        each memory row fills ``n = ⌈elements / w⌉`` consecutive local rows, ``w`` elements each
        (the last one the rest), memory row ``r`` from local row ``first + r·n``. The decoder
        hands its unit ordinary descriptors: one for the whole transfer when the memory rows are
        contiguous and a multiple of ``w`` long (the local rows are then one contiguous stretch
        of memory), else per memory row one for its full local rows (contiguous in memory) and one
        for its partial last row. The first descriptor waits for the command's tokens and the last
        signals them, so the DMA never sees a row wider than a local row.

        Before the range checks, a SPAN step counts a split transfer's local rows per memory row, one a
        cycle and at most until the memory's end, so the range check needs no divider or
        multiplier and takes no longer than writing those rows would.

        ``t`` is the head's transfer from its words (CHECK), ``h`` the same from registers (SPAN,
        ISSUE). What a unit is offered (descriptor, tokens) comes from registers and the words
        alone, so no rule check or count runs on into the units' inputs: the blocks' kind
        (`whole`, `parts`), the offered block's last flag and the address of a row's partial
        block are registered a cycle ahead."""
        rows, elems, addr, stride, local = w[3][:16], w[3][16:], w[1], w[2], w[4][:16]
        b = _Blocks(
            wide=Signal(name="split"),
            whole=Signal(name="split_whole"),
            parts=Signal(name="split_parts"),
            counted=Signal(name="split_counted"),
            span=Signal(18, name="split_span"),
            last=Signal(name="block_last"),
            desc=Signal(dma_desc_layout(), name="block_desc"),
            deps=Signal(deps_layout, name="block_deps"),
            start=Signal(name="block_start"),
            advance=Signal(name="block_advance"),
            counting=Signal(name="split_counting"),
            forget=Signal(name="split_forget"),
            checking=Signal(name="block_checking"),
        )
        m.d.comb += b.wide.eq(t.dma & ~t.transpose & self._past(t, elems, "width") & (rows != 0))
        # SPAN: per memory row `full` local rows of w elements and, if `rest` > 0, one of `rest`;
        # `tail` the bytes of memory before that last one. `span` counts all rows' local rows.
        # The registers of a head command's blocks are zero until it is counted and started (a
        # `forget` clears them, with the flip-flops' reset), so each starts as a sum: no
        # multiplexer of its first value beside its adder.
        # `ahead`: the elements of a memory row not yet in a counted full row, plus w (so the first
        # count loads the element count, not a difference: the register's adder needs no
        # multiplexer in front of it).
        begun, ahead = Signal(name="split_begun"), Signal(16, name="split_ahead")
        full, rest = Signal(16, name="split_full"), Signal(range(max(self.cfg.dim, 2)), name="split_rest")
        tail = Signal(32, name="split_tail")
        # The count's tests, registered as the count moves on (from the values it moves from, so
        # each is a compare with a constant): more than w elements left (`ahead` > w), at least 2w
        # (`ahead` > 2w - 1), the span past the memory. Read only once `begun`.
        more, two = Signal(name="split_more"), Signal(name="split_two")
        over = Signal(name="split_over")
        # No elements left, or beyond the memory (refused anyway).
        stop = begun & (~more | over)
        short = begun & ~stop & ~two  # fewer than w left: the rest
        # (The step named outside the count's branch: not gated by its enable.)
        tail_next = tail + named(m, h.block_bytes, "split_tail_step")
        with m.If(b.counting & ~b.counted):
            m.d.sync += begun.eq(1)
            # `ahead` moves to the element count, then on by w (tested only after a full row).
            m.d.sync += [
                more.eq(Mux(begun, self._past(h, ahead, "width", 2), self._past(h, elems, "width"))),
                two.eq(Mux(begun, self._past(h, ahead, "width", 3, 1), self._past(h, elems, "width", 2, 1))),
                # (A count behind, of the register, not its sum: a transfer past the memory counts
                # one more row of local rows, and is refused all the same.)
                over.eq(self._past(h, b.span, "limit")),
            ]
            with m.If(stop | short):
                m.d.sync += b.counted.eq(1)
            with m.If(short):
                m.d.sync += rest.eq(ahead - h.width)
            with m.If(~stop):
                m.d.sync += b.span.eq(b.span + rows)
            with m.If(~stop & ~short):
                m.d.sync += [full.eq(full + 1), tail.eq(tail_next)]
                m.d.sync += ahead.eq(Mux(begun, ahead - h.width, elems))
        # ISSUE: one descriptor for the whole transfer, or per memory row its full rows then its rest.
        # `row_local` is the offered block's first local row: it moves on by the full rows, then
        # by the rest's one. The kind is registered in the CHECK after SPAN (for VERIFY and ISSUE).
        rest0 = rest == 0
        # (Registered: it is read after SPAN, which takes a cycle or more.)
        contiguous = named(m, (stride == h.row_bytes) | (rows == 1), "split_contiguous", "sync")
        whole = rest0 & contiguous & (b.span >> 16 == 0)
        # (Only a split transfer is counted: after SPAN that register is the split test.)
        m.d.sync += [b.whole.eq(b.counted & whole), b.parts.eq(b.counted & ~whole)]
        # `left`: the memory rows from the offered block's on (counted down from the command's
        # rows, so that the last row is a compare of a register with a constant).
        row_addr, row_local, left = (
            Signal(32, name="row_addr"),
            Signal(16, name="row_local"),
            Signal(16, name="rows_left"),
        )
        at_rest, first = Signal(name="at_rest"), Signal(name="first_block")
        # The address of the offered row's partial block: registered, as it is offered only after
        # that row's full block (a cycle or more after `row_addr` moved to the row).
        rest_addr = named(m, row_addr + tail, "rest_addr", "sync")
        next_row = b.advance & (rest0 | at_rest)
        with m.If(b.start):
            m.d.sync += [at_rest.eq(0), first.eq(1)]
            # A whole or unsplit transfer is one block; else the first is last if its row is.
            m.d.sync += b.last.eq(~b.parts | ((rows == 1) & rest0))
        with m.If(b.advance):
            m.d.sync += [first.eq(0), at_rest.eq(~(rest0 | at_rest))]
            m.d.sync += b.last.eq(Mux(rest0 | at_rest, (left == 2) & rest0, left == 1))
        # The steps are chosen by the state register (a start comes only in VERIFY, an advance only
        # in ISSUE), not by the start's whole condition, which each bit's LUT would otherwise
        # repeat; and named ("a_...") for the tile's flattened order (see `rtl.signals.named`).
        # The sums are kept as signals: the units' ready, in the enables, then only enables the
        # registers (else Yosys gates the adders' operands with it, before their carry chains).
        addr_next = _kept(m, row_addr + named(m, Mux(b.checking, addr, stride), "a_row_addr_step"), "row_addr_next")
        left_next = _kept(m, left + named(m, Mux(b.checking, rows, 0xFFFF), "a_rows_left_step"), "rows_left_next")
        step = named(m, Mux(b.checking, local, Mux(at_rest, 1, full)), "a_row_local_step")
        local_next = _kept(m, row_local + step, "row_local_next")
        with m.If(b.start | next_row):
            m.d.sync += [row_addr.eq(addr_next), left.eq(left_next)]
        with m.If(b.start | b.advance):
            m.d.sync += row_local.eq(local_next)
        with m.If(b.forget):
            cleared = (begun, b.counted, b.span, full, tail, rest, row_addr, row_local, left)
            m.d.sync += [r.eq(0) for r in cleared]
        m.d.comb += [
            b.desc.eq(desc),
            b.deps.eq(deps),
            b.deps.wait_prev.eq(deps.wait_prev & first),
            b.deps.wait_next.eq(deps.wait_next & first),
            b.deps.wait_side.eq(deps.wait_side & first),
            b.deps.signal_prev.eq(deps.signal_prev & b.last),
            b.deps.signal_next.eq(deps.signal_next & b.last),
            b.deps.signal_side.eq(deps.signal_side & b.last),
        ]
        with m.If(b.whole):
            m.d.comb += [b.desc.dram_stride.eq(h.block_bytes), b.desc.rows.eq(b.span), b.desc.elems.eq(h.width)]
        with m.Elif(b.parts):
            m.d.comb += [b.desc.dram_addr.eq(row_addr), b.desc.local_addr.eq(row_local), b.desc.elems.eq(h.width)]
            m.d.comb += [b.desc.dram_stride.eq(h.block_bytes), b.desc.rows.eq(full)]
            with m.If(at_rest):
                m.d.comb += b.desc.dram_addr.eq(rest_addr)
                m.d.comb += [b.desc.rows.eq(1), b.desc.elems.eq(rest)]
        return b

    def _check(self, m: Module, w, opcode, deps, t: _Transfer, blocks: _Blocks) -> SimpleNamespace:
        """CHECK: the first rule the command breaks (0: none) of the rules before the range rules
        and of those after them, in the order of docs/isa.md; the end of its local range; and
        which unit it goes to. All registered each cycle: the head's words stay while it is the
        head, and VERIFY (see ``_verified``) follows a CHECK of the same head."""
        cfg = self.cfg
        rows, elems, local = w[3][:16], w[3][16:], w[4][:16]
        load, store = opcode == OP["LOAD"], opcode == OP["STORE"]
        sp_target, transpose, dma = t.sp_target, t.transpose, t.dma
        misaligned = (((w[1] | w[2]) & (t.esize - 1)) != 0) & ~(load & w[0][15])  # a zero fill reads no memory
        # An EXEC is neither transposed nor split: its span is M (word 3's rows) and the sum its C's
        # end. A split transfer is checked once counted (its `counted` register: no other head
        # command has a counted span, so that is the choice, not the split test's compare).
        # Only a LOAD, STORE or EXEC reads the end, so a transposing LOAD is told by opcode bit 1
        # (clear in LOAD's alone) and its flags: a choice of five bits per bit, not of the opcode's.
        assert OP["LOAD"] & 2 == 0 and OP["STORE"] & 2 and OP["EXEC"] & 2
        transposing = ~opcode[1] & ~w[0][12] & w[0][13]
        span = Mux(blocks.counted, blocks.span, Mux(transposing, elems, rows))
        ex, vec = opcode == OP["EXEC"], opcode == OP["VEC"]
        nz = self._nonzero(w)
        k_rows = w[1][16:]
        loop = (opcode == OP["GEMM"]) | (opcode == OP["CONV2D"])

        before = [
            (~(load | store | ex | vec | (opcode == OP["FENCE"]) | loop), "BAD_OPCODE"),
            ((load & (deps.wait_prev | deps.signal_prev)) | (store & (deps.wait_next | deps.signal_next)), "BAD_DEPS"),
            (~(load | store | ex | vec) & (w[0][8:12] != 0), "BAD_DEPS"),
            (~(load | store | ex | vec) & (w[0][28:30] != 0), "BAD_DEPS"),
            # Its parts are rules of their own (one register each, VERIFY ORs them).
            *((bad, "BAD_FIELD") for bad in self._bad_field(w[0], opcode, sp_target)),
            (((dma & ~nz.kh & ~nz.kw) | ((dma | ex) & ~nz.n)), "ZERO_DIM"),  # rows or elements (M) 0
            # Only the scratchpad is transposed into: its rows are dim wide.
            (dma & transpose & ((elems > cfg.dim) | (rows > cfg.dim)), "TOO_LARGE"),
            (ex & (k_rows > cfg.rows), "TOO_LARGE"),
        ]
        after = [
            (dma & misaligned, "MISALIGNED"),
            *self._gemm_checks(w, opcode == OP["GEMM"], nz),
            *self._conv_checks(w, opcode == OP["CONV2D"], nz),
            *self._vec_checks(vec),
        ]
        b_over = w[1][:16] > cfg.sp_rows - cfg.rows  # B's rows past the scratchpad: B + rows > sp_rows

        def reg(value, name: str) -> Signal:
            return named(m, value, f"checked_{name}", "sync")

        # Each rule's verdict is a register: their priority (a few levels of logic) is VERIFY's.
        return SimpleNamespace(
            before=[(reg(cond, f"before{k}"), error) for k, (cond, error) in enumerate(before)],
            after=[(reg(cond, f"after{k}"), error) for k, (cond, error) in enumerate(after)],
            end=reg(local + named(m, span, "span_checked"), "end"),
            # The range rules by opcode: the end in the scratchpad (a LOAD / STORE there) or in the
            # accumulator (one there, an EXEC's C); an EXEC's A and B past the scratchpad.
            sp_end=reg(dma & sp_target, "sp_end"),
            acc_end=reg((dma & ~sp_target) | ex, "acc_end"),
            ex_b=reg(ex & b_over & ~w[0][13], "ex_b"),
            a_over=reg(w[2][:16] + rows > cfg.sp_rows, "a_over"),  # an EXEC's A (VERIFY reads its opcode)
            op={
                name: reg(value, f"is_{name}")
                for name, value in (
                    ("load", load),
                    ("store", store),
                    ("exec", ex),
                    ("vec", vec),
                    ("loop", loop),
                    ("fence", opcode == OP["FENCE"]),
                )
            },
        )

    def _verified(self, m: Module, rules: SimpleNamespace) -> tuple[Value, Value]:
        """VERIFY: the command's error code from CHECK's registers (the rules before the range
        rules, the range rules, a compare of the registered end with each memory's size, the
        rules after them), and whether it is 0 (from the groups' flags, not a compare of it)."""
        cfg = self.cfg

        def reg(value, name: str) -> Signal:
            return named(m, value, f"verdict_{name}", "sync")

        # The range compares and the groups' flags are registers of their own, from CHECK's
        # registers a cycle earlier (the head's second CHECK cycle: see `seen`), so that VERIFY's
        # offers and code read a level or two of logic, not the end's compares and the rules' ORs.
        sp_range = reg(
            (rules.sp_end & (rules.end > cfg.sp_rows)) | rules.ex_b | (rules.op["exec"] & rules.a_over), "sp_range"
        )
        acc_range = reg(rules.acc_end & (rules.end > cfg.acc_rows), "acc_range")
        before_any = reg(Cat(cond for cond, _ in rules.before).any(), "before_any")
        after_any = reg(Cat(cond for cond, _ in rules.after).any(), "after_any")
        # The rules on the command's words alone are two signals of their own around the range
        # rules, so that with a gated command queue (CommandInterface's gate_queue) a simulator
        # evaluates them only when the head command changes, not in every cycle.
        first_before = _first_broken(m, rules.before, "broken_before")
        first_after = _first_broken(m, rules.after, "broken_after")
        after = Mux(sp_range, ERR["SP_RANGE"], Mux(acc_range, ERR["ACC_RANGE"], first_after))
        ok = ~(before_any | sp_range | acc_range | after_any)
        return Mux(before_any, first_before, after), ok

"""The instruction decoder: one 32-bit instruction word to the control fields the pipeline uses."""

from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bus import AmoOp

__all__ = ["Ctrl", "Decoder"]

# Major opcodes (instr[6:2]; instr[1:0] must be 0b11).
OP_LOAD, OP_MISC_MEM, OP_OP_IMM, OP_AUIPC = 0b00000, 0b00011, 0b00100, 0b00101
OP_STORE, OP_AMO, OP_OP, OP_LUI = 0b01000, 0b01011, 0b01100, 0b01101
OP_BRANCH, OP_JALR, OP_JAL, OP_SYSTEM = 0b11000, 0b11001, 0b11011, 0b11100

# AMO funct5 (instr[31:27]) to the bus operation.
AMO_FUNCT5 = {
    0b00010: AmoOp.LR,
    0b00011: AmoOp.SC,
    0b00001: AmoOp.SWAP,
    0b00000: AmoOp.ADD,
    0b00100: AmoOp.XOR,
    0b01100: AmoOp.AND,
    0b01000: AmoOp.OR,
    0b10000: AmoOp.MIN,
    0b10100: AmoOp.MAX,
    0b11000: AmoOp.MINU,
    0b11100: AmoOp.MAXU,
}

# Whole-word SYSTEM instructions without operands.
ECALL, EBREAK, MRET, WFI = 0x00000073, 0x00100073, 0x30200073, 0x10500073


class Ctrl(data.Struct):
    """Decoded control of one instruction, carried from decode into execute."""

    rd: 5
    rs1: 5
    rs2: 5
    uses_rs1: 1
    uses_rs2: 1
    writes_rd: 1  # rd != 0 and the instruction produces a result
    imm: 32
    funct3: 3  # ALU op, branch condition, memory width, mul/div op or CSR op
    alu_alt: 1  # SUB / SRA
    alu_add: 1  # the ALU adds regardless of funct3 (addresses, lui/auipc, link address)
    a_pc: 1  # ALU operand a is the pc (auipc, jal, jalr)
    a_zero: 1  # ALU operand a is zero (lui)
    b_imm: 1  # ALU operand b is the immediate
    b_four: 1  # ALU operand b is 4 (link address)
    branch: 1
    jal: 1
    jalr: 1
    load: 1
    store: 1
    amo: AmoOp  # NONE unless an A-extension instruction
    mul: 1
    div: 1
    csr: 1
    csr_imm: 1  # CSR source is the zero-extended rs1 field
    csr_write: 1  # the CSR instruction writes (not csrrs/csrrc with a zero source)
    ecall: 1
    ebreak: 1
    mret: 1
    fence_i: 1  # refetch from pc + 4 (imm): instructions the harts wrote to their ITCM become visible
    illegal: 1


class Decoder(wiring.Component):
    """Combinational decoder; ``illegal`` is set for every encoding outside RV32IMA + Zicsr + mret/wfi."""

    instr: In(32)
    ctrl: Out(Ctrl)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        i, c = self.instr, self.ctrl
        rd = i[7:12]
        self.legal = Signal()
        self.writes = Signal()
        m.d.comb += [
            c.rd.eq(rd),
            c.rs1.eq(i[15:20]),
            c.rs2.eq(i[20:25]),
            c.funct3.eq(i[12:15]),
            c.writes_rd.eq(self.writes & (rd != 0)),
            c.illegal.eq(~self.legal | (i[0:2] != 0b11)),
        ]
        with m.Switch(i[2:7]):
            self._upper_and_jumps(m)
            self._memory(m)
            self._arith(m)
            self._system(m)
        return m

    def _imm(self, kind: str) -> Value:
        i = self.instr
        return {
            "i": i[20:32].as_signed(),
            "s": Cat(i[7:12], i[25:32]).as_signed(),
            "b": Cat(Const(0, 1), i[8:12], i[25:31], i[7], i[31]).as_signed(),
            "u": Cat(Const(0, 12), i[12:32]),
            "j": Cat(Const(0, 1), i[21:31], i[20], i[12:20], i[31]).as_signed(),
        }[kind]

    def _upper_and_jumps(self, m: Module) -> None:
        c, f3 = self.ctrl, self.instr[12:15]
        with m.Case(OP_LUI):
            m.d.comb += [
                self.legal.eq(1),
                self.writes.eq(1),
                c.imm.eq(self._imm("u")),
                c.a_zero.eq(1),
                c.b_imm.eq(1),
                c.alu_add.eq(1),
            ]
        with m.Case(OP_AUIPC):
            m.d.comb += [
                self.legal.eq(1),
                self.writes.eq(1),
                c.imm.eq(self._imm("u")),
                c.a_pc.eq(1),
                c.b_imm.eq(1),
                c.alu_add.eq(1),
            ]
        with m.Case(OP_JAL):
            m.d.comb += [
                self.legal.eq(1),
                self.writes.eq(1),
                c.imm.eq(self._imm("j")),
                c.jal.eq(1),
                c.a_pc.eq(1),
                c.b_four.eq(1),
                c.alu_add.eq(1),
            ]
        with m.Case(OP_JALR):
            m.d.comb += [
                self.legal.eq(f3 == 0),
                self.writes.eq(1),
                c.imm.eq(self._imm("i")),
                c.jalr.eq(1),
                c.uses_rs1.eq(1),
                c.a_pc.eq(1),
                c.b_four.eq(1),
                c.alu_add.eq(1),
            ]
        with m.Case(OP_BRANCH):
            m.d.comb += [
                self.legal.eq((f3 != 0b010) & (f3 != 0b011)),
                c.imm.eq(self._imm("b")),
                c.branch.eq(1),
                c.uses_rs1.eq(1),
                c.uses_rs2.eq(1),
            ]

    def _memory(self, m: Module) -> None:
        c, i, f3 = self.ctrl, self.instr, self.instr[12:15]
        with m.Case(OP_LOAD):
            m.d.comb += [
                self.legal.eq((f3 != 0b011) & (f3 != 0b110) & (f3 != 0b111)),
                self.writes.eq(1),
                c.imm.eq(self._imm("i")),
                c.load.eq(1),
                c.uses_rs1.eq(1),
                c.b_imm.eq(1),
                c.alu_add.eq(1),
            ]
        with m.Case(OP_STORE):
            m.d.comb += [
                self.legal.eq(f3 < 0b011),
                c.imm.eq(self._imm("s")),
                c.store.eq(1),
                c.uses_rs1.eq(1),
                c.uses_rs2.eq(1),
                c.b_imm.eq(1),
                c.alu_add.eq(1),
            ]
        with m.Case(OP_AMO):
            funct5, is_lr = i[27:32], i[27:32] == 0b00010
            m.d.comb += [self.writes.eq(1), c.uses_rs1.eq(1), c.uses_rs2.eq(~is_lr), c.b_imm.eq(1), c.alu_add.eq(1)]
            with m.Switch(funct5):
                for code, op in AMO_FUNCT5.items():
                    with m.Case(code):
                        lr_ok = (i[20:25] == 0) if op == AmoOp.LR else 1
                        m.d.comb += [c.amo.eq(op), self.legal.eq((f3 == 0b010) & lr_ok)]
        with m.Case(OP_MISC_MEM):
            # fence orders nothing here (one outstanding data access, in order). fence.i discards
            # what fetch has read ahead and refetches the next instruction: stores to the ITCM
            # before it have been written by then (a store completes before the next instruction).
            m.d.comb += self.legal.eq(f3 < 0b010)
            with m.If(f3 == 0b001):
                m.d.comb += [c.fence_i.eq(1), c.imm.eq(4)]

    def _arith(self, m: Module) -> None:
        c, i, f3, f7 = self.ctrl, self.instr, self.instr[12:15], self.instr[25:32]
        with m.Case(OP_OP_IMM):
            shift = (f3 == 0b001) | (f3 == 0b101)
            shift_ok = (f7 == 0) | ((f7 == 0b0100000) & (f3 == 0b101))
            m.d.comb += [
                self.legal.eq(~shift | shift_ok),
                self.writes.eq(1),
                c.imm.eq(self._imm("i")),
                c.uses_rs1.eq(1),
                c.b_imm.eq(1),
                c.alu_alt.eq(shift & i[30]),
            ]
        with m.Case(OP_OP):
            alt_ok = (f3 == 0b000) | (f3 == 0b101)
            m.d.comb += [
                self.writes.eq(1),
                c.uses_rs1.eq(1),
                c.uses_rs2.eq(1),
                self.legal.eq((f7 == 0) | (f7 == 1) | ((f7 == 0b0100000) & alt_ok)),
                c.alu_alt.eq(f7 == 0b0100000),
                c.mul.eq((f7 == 1) & ~f3[2]),
                c.div.eq((f7 == 1) & f3[2]),
            ]

    def _system(self, m: Module) -> None:
        c, i, f3 = self.ctrl, self.instr, self.instr[12:15]
        with m.Case(OP_SYSTEM):
            with m.If(f3 == 0):
                m.d.comb += [
                    c.ecall.eq(i == ECALL),
                    c.ebreak.eq(i == EBREAK),
                    c.mret.eq(i == MRET),
                    self.legal.eq((i == ECALL) | (i == EBREAK) | (i == MRET) | (i == WFI)),
                ]
            with m.Else():
                zero_src = i[15:20] == 0
                m.d.comb += [
                    self.legal.eq(f3 != 0b100),
                    self.writes.eq(1),
                    c.csr.eq(1),
                    c.csr_imm.eq(f3[2]),
                    c.uses_rs1.eq(~f3[2]),
                    c.imm.eq(i[20:32]),
                    c.csr_write.eq((f3[0:2] == 0b01) | ~zero_src),
                ]

"""A small RV32IMA instruction-set simulator written from the ISA spec, used as the reference for
random-program tests of the core, plus an encoder for the instructions those tests generate.

It models one hart with a flat little-endian RAM; a store to ``exit_addr`` stops it. CSRs are plain
storage written by csrrw; traps and interrupts are not modelled (the assembly tests cover them
with hand-computed expectations).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Iss", "IssError", "encode"]

MASK = 0xFFFF_FFFF


def _s32(x: int) -> int:
    x &= MASK
    return x - (1 << 32) if x >> 31 else x


def _sext(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def _div(a: int, b: int) -> int:
    a, b = _s32(a), _s32(b)
    if b == 0:
        return MASK
    q = abs(a) // abs(b)
    return (-q if (a < 0) != (b < 0) else q) & MASK


def _rem(a: int, b: int) -> int:
    a, b = _s32(a), _s32(b)
    if b == 0:
        return a & MASK
    r = abs(a) % abs(b)
    return (-r if a < 0 else r) & MASK


# funct7 << 3 | funct3 of OP instructions -> operation on two unsigned 32-bit values.
_OP: dict[int, Callable[[int, int], int]] = {
    0x000: lambda a, b: a + b,
    0x100: lambda a, b: a - b,
    0x001: lambda a, b: a << (b & 31),
    0x002: lambda a, b: int(_s32(a) < _s32(b)),
    0x003: lambda a, b: int(a < b),
    0x004: lambda a, b: a ^ b,
    0x005: lambda a, b: a >> (b & 31),
    0x105: lambda a, b: _s32(a) >> (b & 31),
    0x006: lambda a, b: a | b,
    0x007: lambda a, b: a & b,
    0x008: lambda a, b: a * b,
    0x009: lambda a, b: (_s32(a) * _s32(b)) >> 32,
    0x00A: lambda a, b: (_s32(a) * b) >> 32,
    0x00B: lambda a, b: (a * b) >> 32,
    0x00C: _div,
    0x00D: lambda a, b: a // b if b else MASK,
    0x00E: _rem,
    0x00F: lambda a, b: a % b if b else a,
}
_AMO: dict[int, Callable[[int, int], int]] = {
    0b00001: lambda o, s: s,
    0b00000: lambda o, s: o + s,
    0b00100: lambda o, s: o ^ s,
    0b01100: lambda o, s: o & s,
    0b01000: lambda o, s: o | s,
    0b10000: lambda o, s: o if _s32(o) < _s32(s) else s,
    0b10100: lambda o, s: s if _s32(o) < _s32(s) else o,
    0b11000: lambda o, s: min(o, s),
    0b11100: lambda o, s: max(o, s),
}
_BRANCH: dict[int, Callable[[int, int], bool]] = {
    0: lambda a, b: a == b,
    1: lambda a, b: a != b,
    4: lambda a, b: _s32(a) < _s32(b),
    5: lambda a, b: _s32(a) >= _s32(b),
    6: lambda a, b: a < b,
    7: lambda a, b: a >= b,
}


class IssError(RuntimeError):
    """The program did something the ISS does not model (a trap, an unmapped access)."""


@dataclass
class Iss:
    mem: bytearray
    pc: int = 0
    exit_addr: int = 0x1000_0000
    regs: list[int] = field(default_factory=lambda: [0] * 32)
    exit_code: int | None = None
    retired: int = 0
    reservation: int | None = None
    csrs: dict[int, int] = field(default_factory=dict)

    def load(self, addr: int, size: int) -> int:
        if addr % size or addr + size > len(self.mem):
            raise IssError(f"load of {size} bytes at {addr:#x}")
        return int.from_bytes(self.mem[addr : addr + size], "little")

    def store(self, addr: int, size: int, value: int) -> None:
        if addr == self.exit_addr and size == 4:
            self.exit_code = value & MASK
            return
        if addr % size or addr + size > len(self.mem):
            raise IssError(f"store of {size} bytes at {addr:#x}")
        if self.reservation == addr & ~3:
            self.reservation = None
        self.mem[addr : addr + size] = (value & ((1 << 8 * size) - 1)).to_bytes(size, "little")

    def run(self, max_steps: int) -> None:
        for _ in range(max_steps):
            if self.exit_code is not None:
                return
            self.step()
        raise IssError(f"no exit within {max_steps} instructions")

    def step(self) -> None:
        i = self.load(self.pc, 4)
        opcode, rd, f3 = i & 0x7F, (i >> 7) & 31, (i >> 12) & 7
        a, b = self.regs[(i >> 15) & 31], self.regs[(i >> 20) & 31]
        imm_i = _sext(i >> 20, 12)
        next_pc, result = self.pc + 4, None
        if opcode == 0x37:
            result = i & 0xFFFFF000
        elif opcode == 0x17:
            result = self.pc + (i & 0xFFFFF000)
        elif opcode == 0x6F:
            imm = ((i >> 31) << 20) | (((i >> 12) & 0xFF) << 12) | (((i >> 20) & 1) << 11) | (((i >> 21) & 0x3FF) << 1)
            result, next_pc = self.pc + 4, self.pc + _sext(imm, 21)
        elif opcode == 0x67:
            result, next_pc = self.pc + 4, (a + imm_i) & ~1
        elif opcode == 0x63:
            imm = ((i >> 31) << 12) | (((i >> 7) & 1) << 11) | (((i >> 25) & 0x3F) << 5) | (((i >> 8) & 0xF) << 1)
            if _BRANCH[f3](a, b):
                next_pc = self.pc + _sext(imm, 13)
        elif opcode == 0x03:
            size, addr = 1 << (f3 & 3), (a + imm_i) & MASK
            value = self.load(addr, size)
            result = value if f3 & 4 or size == 4 else _sext(value, 8 * size)
        elif opcode == 0x23:
            imm = _sext(((i >> 25) << 5) | ((i >> 7) & 31), 12)
            self.store((a + imm) & MASK, 1 << f3, b)
        elif opcode == 0x13:
            key = (0x100 if f3 == 5 and i >> 30 & 1 else 0) | f3
            result = _OP[key](a, imm_i & MASK if f3 not in (1, 5) else imm_i & 31)
        elif opcode == 0x33:
            result = _OP[((i >> 25) << 3 if (i >> 25) != 0x20 else 0x100) | f3](a, b)
        elif opcode == 0x2F:
            result = self._amo(i >> 27, a, b, (i >> 20) & 31)
        elif opcode == 0x73 and f3 == 1:  # csrrw: CSRs are plain storage here (mtvec, mscratch)
            result, self.csrs[i >> 20] = self.csrs.get(i >> 20, 0), a
        else:
            raise IssError(f"unsupported instruction {i:#010x} at {self.pc:#x}")
        if result is not None and rd:
            self.regs[rd] = result & MASK
        self.pc = next_pc & MASK
        self.retired += 1

    def _amo(self, funct5: int, addr: int, src: int, src_reg: int) -> int:
        if funct5 == 0b00010:
            if src_reg:
                raise IssError("lr.w with rs2 != 0 is reserved")
            self.reservation = addr
            return self.load(addr, 4)
        if funct5 == 0b00011:
            ok = self.reservation == addr
            self.reservation = None
            if ok:
                self.store(addr, 4, src)
            return int(not ok)
        old = self.load(addr, 4)
        self.store(addr, 4, _AMO[funct5](old, src) & MASK)
        return old


def encode(op: str, rd: int = 0, rs1: int = 0, rs2: int = 0, imm: int = 0) -> int:
    """Encode one instruction of the subset the random tests use (R, I, S, U, AMO types, csrrw)."""
    r_ops = {
        "add": (0, 0),
        "sub": (0x20, 0),
        "sll": (0, 1),
        "slt": (0, 2),
        "sltu": (0, 3),
        "xor": (0, 4),
        "srl": (0, 5),
        "sra": (0x20, 5),
        "or": (0, 6),
        "and": (0, 7),
        "mul": (1, 0),
        "mulh": (1, 1),
        "mulhsu": (1, 2),
        "mulhu": (1, 3),
        "div": (1, 4),
        "divu": (1, 5),
        "rem": (1, 6),
        "remu": (1, 7),
    }
    i_ops = {"addi": 0, "slti": 2, "sltiu": 3, "xori": 4, "ori": 6, "andi": 7}
    shifts = {"slli": (0, 1), "srli": (0, 5), "srai": (0x20, 5)}
    loads = {"lb": 0, "lh": 1, "lw": 2, "lbu": 4, "lhu": 5}
    stores = {"sb": 0, "sh": 1, "sw": 2}
    amos = {
        "amoswap.w": 1,
        "amoadd.w": 0,
        "amoxor.w": 4,
        "amoand.w": 12,
        "amoor.w": 8,
        "amomin.w": 16,
        "amomax.w": 20,
        "amominu.w": 24,
        "amomaxu.w": 28,
        "lr.w": 2,
        "sc.w": 3,
    }
    if op in r_ops:
        f7, f3 = r_ops[op]
        return (f7 << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | 0x33
    if op in i_ops or op in loads:
        f3, opc = (i_ops[op], 0x13) if op in i_ops else (loads[op], 0x03)
        return ((imm & 0xFFF) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | opc
    if op in shifts:
        f7, f3 = shifts[op]
        return (f7 << 25) | ((imm & 31) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | 0x13
    if op in stores:
        return (((imm >> 5) & 0x7F) << 25) | (rs2 << 20) | (rs1 << 15) | (stores[op] << 12) | ((imm & 31) << 7) | 0x23
    if op in ("lui", "auipc"):
        return (imm & 0xFFFFF000) | (rd << 7) | (0x37 if op == "lui" else 0x17)
    if op == "csrrw":
        return (imm << 20) | (rs1 << 15) | (1 << 12) | (rd << 7) | 0x73
    if op in amos:
        return (amos[op] << 27) | (rs2 << 20) | (rs1 << 15) | (2 << 12) | (rd << 7) | 0x2F
    raise ValueError(f"cannot encode {op!r}")

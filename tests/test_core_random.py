"""Random straight-line programs (ALU, MUL/DIV, loads, stores, atomics) run on the core and on the
Python ISS; the register file and data memory must match exactly."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb.core_harness import EXIT_ADDR, HarnessConfig, run_program
from tb.rv32_iss import Iss, encode

DATA, DUMP, RAM_BYTES = 0x1000, 0x1200, 16 * 1024
REGS = range(1, 9)  # few registers, so back-to-back dependences (forwarding, hazards) are common
BASE = 31  # holds DATA, never written by the random part

R_OPS = [
    "add",
    "sub",
    "sll",
    "slt",
    "sltu",
    "xor",
    "srl",
    "sra",
    "or",
    "and",
    "mul",
    "mulh",
    "mulhsu",
    "mulhu",
    "div",
    "divu",
    "rem",
    "remu",
]
I_OPS = ["addi", "slti", "sltiu", "xori", "ori", "andi", "slli", "srli", "srai"]
MEM_OPS = {"lb": 1, "lh": 2, "lw": 4, "lbu": 1, "lhu": 2, "sb": 1, "sh": 2, "sw": 4}
AMO_OPS = [
    "amoswap.w",
    "amoadd.w",
    "amoxor.w",
    "amoand.w",
    "amoor.w",
    "amomin.w",
    "amomax.w",
    "amominu.w",
    "amomaxu.w",
    "lr.w",
    "sc.w",
]
WORD = st.one_of(st.integers(0, 0xFFFF_FFFF), st.sampled_from([0, 1, 0xFFFF_FFFF, 0x8000_0000, 0x7FFF_FFFF]))


def li(rd: int, value: int) -> list[int]:
    """lui + addi loading a 32-bit constant (addi sign-extends, so round the upper part)."""
    upper = ((value + 0x800) >> 12) & 0xFFFFF
    return [encode("lui", rd, imm=upper << 12), encode("addi", rd, rd, imm=value & 0xFFF)]


@st.composite
def instruction(draw: st.DrawFn) -> int:
    kind = draw(st.sampled_from(["r", "r", "r", "i", "mem", "mem", "amo", "lui"]))
    rd, rs1, rs2 = draw(st.sampled_from(REGS)), draw(st.sampled_from([0, *REGS])), draw(st.sampled_from([0, *REGS]))
    if kind == "r":
        return encode(draw(st.sampled_from(R_OPS)), rd, rs1, rs2)
    if kind == "i":
        return encode(draw(st.sampled_from(I_OPS)), rd, rs1, imm=draw(st.integers(-2048, 2047)))
    if kind == "lui":
        return encode(draw(st.sampled_from(["lui", "auipc"])), rd, imm=draw(st.integers(0, 0xFFFFF)) << 12)
    if kind == "amo":
        op = draw(st.sampled_from(AMO_OPS))
        return encode(op, rd, BASE, 0 if op == "lr.w" else rs2)
    op = draw(st.sampled_from(sorted(MEM_OPS)))
    offset = draw(st.integers(0, 255 // MEM_OPS[op])) * MEM_OPS[op]
    return encode(op, rd, BASE, rs2, imm=offset) if op[0] == "l" else encode(op, 0, BASE, rs2, imm=offset)


TRAPPED = 0xBAD


def build_program(init: list[int], body: list[int]) -> list[int]:
    """Prologue (registers, mtvec), body, register dump, EXIT; a trap exits with TRAPPED."""
    prologue = [w for r, v in zip(REGS, init, strict=False) for w in li(r, v)] + li(BASE, DATA)
    prologue += [0, encode("csrrw", 0, 30, imm=0x305)]  # li x30, handler; csrw mtvec, x30
    epilogue = [encode("sw", 0, BASE, r, imm=DUMP - DATA + 4 * r) for r in REGS]
    epilogue += [*li(30, EXIT_ADDR), *li(29, 1), encode("sw", 0, 30, 29), 0x0000006F]
    handler = len(prologue) + len(body) + len(epilogue)
    prologue[-2] = encode("addi", 30, 0, imm=4 * handler)
    trap_stub = [*li(30, EXIT_ADDR), *li(29, TRAPPED), encode("sw", 0, 30, 29), 0x0000006F]
    return prologue + body + epilogue + trap_stub


def check_against_iss(init: list[int], body: list[int], data: list[int], stall: bool) -> None:
    program = build_program(init, body)
    image = program + [0] * (DATA // 4 - len(program)) + data
    iss = Iss(bytearray(b"".join(w.to_bytes(4, "little") for w in image + [0] * (RAM_BYTES // 4 - len(image)))))
    iss.run(len(program) + 10)
    addrs = tuple(range(DATA, DATA + 256, 4)) + tuple(DUMP + 4 * r for r in REGS)
    result = run_program(
        image, HarnessConfig(ram_bytes=RAM_BYTES, stall=stall), budget=60 * len(program) + 500, read_words=addrs
    )
    assert result.exit_code == 1, "the core trapped on a program the ISS ran without trap"
    got_regs = {r: result.memory[DUMP + 4 * r] for r in REGS}
    assert got_regs == {r: iss.regs[r] for r in REGS}, "register file differs from the ISS"
    want_mem = {a: int.from_bytes(iss.mem[a : a + 4], "little") for a in addrs}
    assert result.memory == want_mem, "data memory differs from the ISS"


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    init=st.lists(WORD, min_size=8, max_size=8),
    body=st.lists(instruction(), min_size=1, max_size=40),
    data=st.lists(WORD, min_size=64, max_size=64),
)
def test_random_program_matches_iss(init: list[int], body: list[int], data: list[int]) -> None:
    check_against_iss(init, body, data, stall=False)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_program_with_bus_stalls(seed: int) -> None:
    # Longer programs under random back-pressure/latency, drawn from the same instruction mix.
    rng = random.Random(seed)
    body = [_random_instruction(rng) for _ in range(80)]
    init = [rng.getrandbits(32) for _ in REGS]
    check_against_iss(init, body, [rng.getrandbits(32) for _ in range(64)], stall=True)


def _random_instruction(rng: random.Random) -> int:
    rd, rs1, rs2 = rng.choice(REGS), rng.choice([0, *REGS]), rng.choice([0, *REGS])
    kind = rng.choice(["r", "r", "r", "i", "mem", "mem", "amo"])
    if kind == "r":
        return encode(rng.choice(R_OPS), rd, rs1, rs2)
    if kind == "i":
        return encode(rng.choice(I_OPS), rd, rs1, imm=rng.randint(-2048, 2047))
    if kind == "amo":
        op = rng.choice(AMO_OPS)
        return encode(op, rd, BASE, 0 if op == "lr.w" else rs2)
    op = rng.choice(sorted(MEM_OPS))
    offset = rng.randint(0, 255 // MEM_OPS[op]) * MEM_OPS[op]
    return encode(op, rd, BASE, rs2, imm=offset) if op[0] == "l" else encode(op, 0, BASE, rs2, imm=offset)


def test_division_by_zero_and_overflow_match_spec() -> None:
    # Every div/rem flavour with a zero divisor and the signed overflow case, against the ISS
    # and the values the spec defines.
    init = [0x8000_0000, 0xFFFF_FFFF, 0, 12345, 0xFFFF_FFF9, 0, 0, 0]
    body = [
        encode("div", 6, 5, 3),
        encode("rem", 7, 5, 3),
        encode("remu", 8, 4, 3),  # x / 0
        encode("divu", 4, 4, 3),
    ]
    body += [encode("div", 1, 1, 2), encode("rem", 2, 1, 2)]  # -2^31 / -1 (x1 overwritten after use)
    check_against_iss(init, body, [0] * 64, stall=False)
    program = build_program(init, body)
    image = program + [0] * (RAM_BYTES // 4 - len(program))
    regs = run_program(
        image, HarnessConfig(ram_bytes=RAM_BYTES), budget=2000, read_words=tuple(DUMP + 4 * r for r in REGS)
    ).memory
    got = [regs[DUMP + 4 * r] for r in (6, 7, 8, 4, 1, 2)]
    assert got == [0xFFFF_FFFF, 0xFFFF_FFF9, 12345, 0xFFFF_FFFF, 0x8000_0000, 0]

"""The correctly rounded bf16 sigmoid, tanh, exp and reciprocal (rtl/vector): the tables against an independent
mpmath computation on every input, hand-checked edge values, the FunctionUnit (one cycle, its ROMs
read synchronously) and the generated C header bit for bit against the tables on every input."""

import re
import shutil
import subprocess

import mpmath
import numpy as np
import pytest
from amaranth.back import verilog

from rtl.vector import functions
from rtl.vector.c_functions import functions_header
from rtl.vector.function_unit import ROM_WORDS, FunctionUnit
from rtl.vector.functions import FUNCTIONS, NAN, apply_rule, reference, rom_bits, rule
from tb.comb_eval import evaluate

ALL = np.arange(1 << 16)
INF, NEG_INF = 0x7F80, 0xFF80

# --- an independent definition: exact maths in mpmath, IEEE bf16 fields decoded by hand ---------

MP = {
    "sigmoid": lambda x: 1 / (1 + mpmath.exp(-x)),
    "tanh": mpmath.tanh,
    "exp": mpmath.exp,
    "recip": lambda x: 1 / x,
}
AT_ZERO = {
    "sigmoid": lambda s: 0x3F00,
    "tanh": lambda s: s << 15,
    "exp": lambda s: 0x3F80,
    "recip": lambda s: s << 15 | INF,
}
AT_INF = {"sigmoid": (0x3F80, 0x0000), "tanh": (0x3F80, 0xBF80), "exp": (0x7F80, 0x0000), "recip": (0x0000, 0x8000)}


def encode(r: mpmath.mpf) -> int:
    """bf16 bits of an 8-bit value ``r`` after the range rules (≥ 2^128 → ±Inf, < 2^-126 → ±0)."""
    sign = int(r < 0) << 15
    if abs(r) >= mpmath.mpf(2) ** 128:
        return sign | INF
    if abs(r) < mpmath.mpf(2) ** -126:
        return sign
    mant, exp = mpmath.frexp(abs(r))  # abs(r) = mant · 2^exp, mant in [0.5, 1)
    significand = int(mant * 256)  # 8 bits, exact
    assert significand == mant * 256 and 128 <= significand < 256
    return sign | (exp - 1 + 127) << 7 | (significand - 128)


def exact_bf16(name: str, bits: int) -> int:
    sign, exp, frac = bits >> 15, (bits >> 7) & 0xFF, bits & 0x7F
    if exp == 0xFF:
        return NAN if frac else AT_INF[name][sign]
    if exp == 0:  # zeros and subnormals read as ±0
        return AT_ZERO[name](sign)
    x = mpmath.ldexp(mpmath.mpf((-1) ** sign * (128 + frac)), exp - 127 - 7)
    with mpmath.workprec(160):
        v = MP[name](x)
    with mpmath.workprec(9):
        on_9_bits = +v == v
    with mpmath.workprec(8):
        r = +v  # round to nearest, ties to even, at 8 significant bits; the exponent is unbounded
    assert not (on_9_bits and r != v), "f(x) at 160 bits is a rounding midpoint: double rounding possible"
    return encode(r)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_table_equals_exact_maths_on_every_input(name: str) -> None:
    want = np.array([exact_bf16(name, b) for b in range(1 << 16)], dtype=np.uint16)
    got = reference(name, ALL)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(b), hex(got[b]), hex(want[b])) for b in bad[:8]]


# --- hand-checked values -----------------------------------------------------------------------

# Each value worked out by hand (bf16 significand = round(value / ulp) in its binade):
HAND = [
    # sigmoid(±0) = 0.5; a subnormal reads as 0
    ("sigmoid", 0x0000, 0x3F00), ("sigmoid", 0x8000, 0x3F00), ("sigmoid", 0x0001, 0x3F00),
    # sigmoid(1) = 0.731059: ·256 = 187.15 → 187 → 0x3F00 + 59; sigmoid(−1) = 0.268941: ·512 = 137.70 → 138
    ("sigmoid", 0x3F80, 0x3F3B), ("sigmoid", 0xBF80, 0x3E8A),
    ("sigmoid", INF, 0x3F80), ("sigmoid", NEG_INF, 0x0000),
    # sigmoid(−100) ≈ e^-100 ≈ 3.7e-44 < 2^-126: flushed to +0; sigmoid(10) = 1 − 4.5e-5 → 1
    ("sigmoid", 0xC2C8, 0x0000), ("sigmoid", 0x4120, 0x3F80),
    # tanh keeps the sign of zero; subnormals read as ±0
    ("tanh", 0x0000, 0x0000), ("tanh", 0x8000, 0x8000), ("tanh", 0x8001, 0x8000),
    # tanh(0.5) = 0.462117: ·512 = 236.60 → 237 = 128 + 109 at 2^-2
    ("tanh", 0x3F00, 0x3EED), ("tanh", 0xBF00, 0xBEED),
    # tanh(2^-4) = 2^-4 − 8.1e-5, above the midpoint 2^-4 − 1.2e-4: x itself
    ("tanh", 0x3D80, 0x3D80),
    # tanh(2^-3) = 0.124349: ·2^11 = 254.67 → 255 = 128 + 127 at 2^-4
    ("tanh", 0x3E00, 0x3DFF), ("tanh", 0xBE00, 0xBDFF),
    # tanh(±10) = ±(1 − 4e-9) → ±1; tanh(±Inf) = ±1; the smallest normal is its own tanh
    ("tanh", 0x4120, 0x3F80), ("tanh", 0xC120, 0xBF80), ("tanh", INF, 0x3F80), ("tanh", NEG_INF, 0xBF80),
    ("tanh", 0x0080, 0x0080), ("tanh", 0x8080, 0x8080),
    # exp(±0) = 1; exp(1) = 2.718282: ·64 = 173.97 → 174 = 128 + 46 at 2^1; exp(−1) = 0.367879: ·512 = 188.35
    ("exp", 0x0000, 0x3F80), ("exp", 0x8000, 0x3F80), ("exp", 0x3F80, 0x402E), ("exp", 0xBF80, 0x3EBC),
    # exp(±2^-9) is within half an ulp of 1; exp(−2^-8) = 1 − 2^-8 + 2^-17 → 1 − 2^-8
    ("exp", 0x3B00, 0x3F80), ("exp", 0xBB00, 0x3F80), ("exp", 0xBB80, 0x3F7F),
    # exp(88.5) = 2^127 · 1.60048: ·128 = 204.86 → 205 = 128 + 77, finite; exp(89) > 2^128 (ln 2^128 = 88.72)
    ("exp", 0x42B1, 0x7F4D), ("exp", 0x42B2, INF), ("exp", INF, INF), ("exp", NEG_INF, 0x0000),
    # exp(−87) = 2^-126 · 1.40010: ·128 = 179.21 → 179, kept; exp(−87.5) = 2^-127 · 1.698: flushed to +0
    ("exp", 0xC2AE, 0x00B3), ("exp", 0xC2AF, 0x0000),
    # 1/±0 = ±Inf (a subnormal reads as ±0), 1/±Inf = ±0, 1/1 = 1, 1/2 = 0.5, 1/−0.5 = −2
    ("recip", 0x0000, INF), ("recip", 0x8000, NEG_INF), ("recip", 0x0001, INF), ("recip", 0x807F, NEG_INF),
    ("recip", INF, 0x0000), ("recip", NEG_INF, 0x8000),
    ("recip", 0x3F80, 0x3F80), ("recip", 0x4000, 0x3F00), ("recip", 0xBF00, 0xC000),
    # 1/3 = 2^-2 · 1.3333: ·128 = 170.67 → 171 = 128 + 43; 1/1.0078125 = 0.99225: ·256 = 254.02 → 254
    ("recip", 0x4040, 0x3EAB), ("recip", 0x3F81, 0x3F7E),
    # 1/10 = 2^-4 · 1.6: ·128 = 204.8 → 205 = 128 + 77; 1/1.9921875 = 0.50196: ·256 = 128.50… → 129
    ("recip", 0x4120, 0x3DCD), ("recip", 0x3FFF, 0x3F01),
    # 1/2^-126 = 2^126; 1/2^126 = 2^-126, the smallest normal; 1/2^127 = 2^-127 and 1/(2^126 · 1.0078)
    # fall below 2^-126: flushed to ±0; 1/(2^-126 · 1.9921875) = 2^125 · 1.0039 → 2^125 · 1.0078125
    ("recip", 0x0080, 0x7E80), ("recip", 0x7E80, 0x0080), ("recip", 0x7F00, 0x0000), ("recip", 0xFE81, 0x8000),
    ("recip", 0x00FF, 0x7E01),
]  # fmt: skip


@pytest.mark.parametrize(("name", "x", "y"), HAND, ids=[f"{n}-{x:04x}" for n, x, _ in HAND])
def test_hand_checked_values(name: str, x: int, y: int) -> None:
    assert reference(name, [x])[0] == y


@pytest.mark.parametrize("name", FUNCTIONS)
def test_nan_inputs_give_the_canonical_nan(name: str) -> None:
    nans = [b for b in range(1 << 16) if (b >> 7) & 0xFF == 0xFF and b & 0x7F]
    assert len(nans) == 254
    assert np.all(reference(name, nans) == NAN)


# --- the rule, the mpmath decisions --------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCTIONS)
def test_rule_reproduces_the_table(name: str) -> None:
    r = rule(name)
    assert np.array_equal(apply_rule(r, ALL), reference(name, ALL))
    if name == "recip":
        assert len(r.rom) == 128 and max(r.rom) < 1 << r.width
        return
    assert r.odd == (name == "tanh")
    for side in r.sides:
        assert len(side.rom) == side.hi - side.lo + 1
        assert max(side.rom) < 1 << side.width


def test_rom_sizes() -> None:
    sizes = rom_bits()
    assert sizes == {name: (rule(name).rom_entries, rule(name).rom_bits) for name in FUNCTIONS}
    assert sizes["tanh"][0] < 1024  # odd: one side only
    assert sizes["recip"] == (128, 1024)  # the 7 fraction bits address it
    assert sum(bits for _, bits in sizes.values()) < 100_000


def test_mpmath_decides_inputs_near_midpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a guard wide enough that mpmath decides hundreds of inputs, the tables do not change:
    the float64 values are far more accurate than the guard assumes."""
    calls = []
    real_mp = functions._mp
    monkeypatch.setattr(functions, "GUARD_ULPS", 1 << 41)  # still below half a bf16 ulp (2^44)
    monkeypatch.setattr(functions, "_mp", lambda name, x: calls.append(x) or real_mp(name, x))
    for name in FUNCTIONS:
        before = len(calls)
        assert np.array_equal(functions.table.__wrapped__(name), reference(name, ALL))
        assert len(calls) - before > 50


# --- the hardware ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_unit_on_every_input(name: str) -> None:
    assert FunctionUnit.latency == 1
    fn = np.full(ALL.shape, FUNCTIONS.index(name))
    got = evaluate(FunctionUnit(), {"x": ALL, "fn": fn}, ("y",), latency=FunctionUnit.latency)["y"]
    np.testing.assert_array_equal(got, reference(name, ALL).astype(np.uint64))


def test_function_unit_subset_and_unknown_codes() -> None:
    """Codes of functions that were not built give the canonical NaN."""
    x = np.tile(ALL[::97], 4)
    fn = np.repeat(np.arange(4), len(ALL[::97]))
    got = evaluate(FunctionUnit(("tanh",)), {"x": x, "fn": fn}, ("y",), latency=FunctionUnit.latency)["y"]
    want = np.where(fn == 1, reference("tanh", x), NAN)
    np.testing.assert_array_equal(got, want.astype(np.uint64))
    with pytest.raises(ValueError, match="unknown"):
        FunctionUnit(("softplus",))


def test_function_unit_roms_are_synchronous_read_memories() -> None:
    """The sides' ROMs are memories in the Verilog, packed into ROMs of at most ``ROM_WORDS`` words
    (each side in exactly one), read only by a clocked process (so synthesis can map them to block
    RAM), never by combinational logic."""
    text = verilog.convert(FunctionUnit(), name="function_unit")
    assert "module function_unit" in text
    found = re.findall(r"^\s*reg \[\d+:0\] (\w+_rom) \[(\d+):0\];$", text, re.M)
    roms = [name for name, _ in found]
    assert all(int(top) < ROM_WORDS for _, top in found), found
    tables = [name for name in FUNCTIONS if name != "recip"]
    sides = {name: ("pos",) if rule(name).odd else ("pos", "neg") for name in tables}
    want = sorted(f"{name}_{side}" for name in tables for side in sides[name])
    packed = sorted(side for rom in roms if rom != "recip_rom" for side in _rom_sides(rom, want))
    assert packed == want and "recip_rom" in roms
    assert len(roms) < len(want) + 1, "sigmoid's positive side (1,223 words) and tanh's (677) share one ROM"
    lines = text.splitlines()
    for rom in roms:
        # Every use of the memory other than its initial contents (rom[<constant>] = <word>;).
        reads = [i for i, line in enumerate(lines) if f"{rom}[" in line and not re.match(rf"\s*{rom}\[\d+\] = ", line)]
        assert len(reads) == 1, (rom, [lines[i] for i in reads])
        assert re.match(rf"\s*\S+ <= {rom}\[", lines[reads[0]]), lines[reads[0]]
        assert lines[reads[0] - 1].strip() == "always @(posedge clk) begin", lines[reads[0] - 1]


def _rom_sides(rom: str, sides: list[str]) -> list[str]:
    """The sides a packed ROM's name lists (``<side>_<side>…_rom``)."""
    name, out = rom.removesuffix("_rom"), []
    while name:
        side = next(s for s in sides if name.startswith(s))
        out.append(side)
        name = name.removeprefix(side).removeprefix("_")
    return out


# --- the C header ------------------------------------------------------------------------------

C_MAIN = """
#include <stdio.h>
#include "pyard_vector_functions.h"
int main(void) {
    static uint16_t out[4][65536];
    for (uint32_t x = 0; x < 65536; x++) {
        out[0][x] = pyard_sigmoid_bf16((uint16_t)x);
        out[1][x] = pyard_tanh_bf16((uint16_t)x);
        out[2][x] = pyard_exp_bf16((uint16_t)x);
        out[3][x] = pyard_recip_bf16((uint16_t)x);
    }
    return fwrite(out, sizeof out, 1, stdout) == 1 ? 0 : 1;
}
"""


def test_c_header_on_every_input(tmp_path) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no host C compiler")
    (tmp_path / "pyard_vector_functions.h").write_text(functions_header())
    (tmp_path / "main.c").write_text(C_MAIN)
    flags = ["-std=c99", "-O1", "-Wall", "-Wextra", "-Wconversion", "-Werror"]
    subprocess.run([cc, *flags, "-o", str(tmp_path / "fns"), str(tmp_path / "main.c")], check=True)
    raw = subprocess.run([str(tmp_path / "fns")], check=True, capture_output=True).stdout
    got = np.frombuffer(raw, dtype="<u2").reshape(len(FUNCTIONS), 1 << 16)  # the host is little-endian (x86, RISC-V)
    for i, name in enumerate(FUNCTIONS):
        np.testing.assert_array_equal(got[i], reference(name, ALL), err_msg=name)


# --- the lane's arithmetic in C (rtl/vector/c_lane.py) --------------------------------------------

C_LANE_MAIN = """
#include <stdio.h>
#include <stdlib.h>
#include "pyard_vector_lane.h"
/* stdin: n, then n operand pairs (uint32 a, uint32 b); stdout: one uint32 per op and pair */
int main(void) {
    uint32_t n;
    if (fread(&n, 4, 1, stdin) != 1) return 1;
    uint32_t *ab = malloc(8u * n), *out = malloc(4u * 9u * n);
    if (!ab || !out || fread(ab, 8, n, stdin) != n) return 1;
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t a = ab[2 * k], b = ab[2 * k + 1];
        const uint16_t ha = (uint16_t)a, hb = (uint16_t)b;
        uint32_t *o = out + 9u * k;
        o[0] = pyard_fp_add(a, b, 23);
        o[1] = pyard_fp_add(a & 0xffff0000u, b, 7); /* a bf16 accumulator element */
        o[2] = pyard_f32_mul(a, b);
        o[3] = pyard_bf16_round(a);
        o[4] = pyard_bf16_add(ha, hb);
        o[5] = pyard_bf16_sub(ha, hb);
        o[6] = pyard_bf16_rsub(ha, hb);
        o[7] = pyard_bf16_mul(ha, hb);
        o[8] = pyard_bf16_max(ha, hb);
    }
    return fwrite(out, 4u * 9u, n, stdout) == n ? 0 : 1;
}
"""

BF16_EDGES = [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x8080, 0x00FF, 0x3F80, 0xBF80, 0x3F81, 0x3F7F, 0x3F00,
              0x4000, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0100, 0x1F80, 0x2000, 0x5F80,
              0x6000, 0x3400, 0x4B00, 0x0081, 0x3FFF, 0xC040]  # fmt: skip
F32_EDGES = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x80800000, 0x00800001, 0x3F800000,
             0xBF800000, 0x3F800001, 0x3F7FFFFF, 0x33800000, 0x33800001, 0xB3800000, 0x7F7FFFFF, 0xFF7FFFFF,
             0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001, 0x4B800000, 0x3F808000, 0x3F818000, 0x3F7F8000,
             0x01000000, 0x00FFFFFF, 0x3FFFFFFF, 0x34000000, 0x7F000000, 0x0C000000]  # fmt: skip


def _lane_operands() -> tuple[np.ndarray, np.ndarray]:
    """Pairs of operands: every pair of edge values (as bf16 and as fp32 bits), then random ones:
    any bits, nearby exponents (where sums round and cancel) and bf16 exponents 14 to 26 apart."""
    rng = np.random.default_rng(12)
    edges16 = np.array(BF16_EDGES, dtype=np.uint32)
    edges32 = np.array(F32_EDGES + [e << 16 for e in BF16_EDGES], dtype=np.uint32)
    a = [np.repeat(edges16, len(edges16)), np.repeat(edges32, len(edges32))]
    b = [np.tile(edges16, len(edges16)), np.tile(edges32, len(edges32))]
    n = 100_000
    for mask in (0xFFFF, 0xFFFFFFFF):
        a.append(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) & np.uint32(mask))
        b.append(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) & np.uint32(mask))
    x = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32)
    near = (x[0] & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)  # exponents 126 and 127 apart by < 4
    a += [near, near >> 16]
    b += [(x[1] & np.uint32(0x817FFFFF)) | np.uint32(0x3E800000), (x[1] & np.uint32(0x817FFFFF)) >> 16 | 0x3E80]
    # bf16 pairs whose exponents differ by 14 to 26, where the fp32 rounding of a sum starts to drop bits
    ea = rng.integers(27, 255, n)
    eb = ea - rng.integers(14, 27, n)
    frac = rng.integers(0, 1 << 8, (2, n))  # 7 fraction bits and the sign
    a.append((frac[0] >> 7 << 15 | ea << 7 | frac[0] & 0x7F).astype(np.uint32))
    b.append((frac[1] >> 7 << 15 | eb << 7 | frac[1] & 0x7F).astype(np.uint32))
    return np.concatenate(a).astype(np.uint32), np.concatenate(b).astype(np.uint32)


def _lane_want(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    from rtl.fp_model import fp32_mul, fp_add, round_bf16
    from rtl.vector.lane_model import lane
    from rtl.vector.ops import VecOp

    wa, wb = (a & 0xFFFF) << 16, (b & 0xFFFF) << 16

    def bf16(op: VecOp, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return round_bf16(lane("bf16", op, x, y, y))

    return [
        fp_add(a, b, 23),
        fp_add(a >> 16, b, 7),
        fp32_mul(a, b),
        round_bf16(a),
        bf16(VecOp.ADD, wa, wb),
        bf16(VecOp.SUB, wa, wb),
        bf16(VecOp.RSUBS, wa, wb),
        bf16(VecOp.MUL, wa, wb),
        bf16(VecOp.MAX, wa, wb),
    ]


def test_c_lane_header_against_the_models(tmp_path) -> None:
    """pyard_vector_lane.h (the FPTT software mode's arithmetic), compiled for the host, gives the
    lane model's bits for every op on edge-value pairs and random operands."""
    from rtl.vector.c_lane import write_headers

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no host C compiler")
    write_headers(tmp_path)
    (tmp_path / "main.c").write_text(C_LANE_MAIN)
    flags = ["-std=c99", "-O1", "-Wall", "-Wextra", "-Wconversion", "-Werror"]
    subprocess.run([cc, *flags, "-o", str(tmp_path / "lane"), str(tmp_path / "main.c")], check=True)
    a, b = _lane_operands()
    stdin = np.uint32(len(a)).tobytes() + np.stack([a, b], axis=1).astype("<u4").tobytes()
    raw = subprocess.run([str(tmp_path / "lane")], input=stdin, check=True, capture_output=True).stdout
    got = np.frombuffer(raw, dtype="<u4").reshape(len(a), 9)
    names = ["fp_add", "fp_add bf16 acc", "fp32_mul", "round_bf16", "ADD", "SUB", "RSUBS", "MUL", "MAX"]
    for k, want in enumerate(_lane_want(a, b)):
        bad = np.flatnonzero(got[:, k] != np.asarray(want, dtype=np.uint64))
        if len(bad):
            i = bad[0]
            first = f"a=0x{a[i]:08x} b=0x{b[i]:08x}: 0x{got[i, k]:x}, want 0x{want[i]:x}"
            pytest.fail(f"{names[k]}: {len(bad)} of {len(a)} differ, first {first}")

"""Correctly rounded bf16 sigmoid, tanh, exp and reciprocal: the tables, their compact rules, and a
C header.

Each function is defined on all 65,536 bf16 bit patterns (docs/arithmetic.md, "Transcendental
functions"): the input is flushed (subnormals read as ±0), the exact f(x) is rounded once to 8
significant bits, to nearest even, with an unbounded exponent, and then a magnitude ≥ 2^128 gives
±Inf and one below 2^-126 gives ±0 with the result's sign. NaN inputs give the canonical NaN 0x7FC0.

The table is computed in float64; wherever the float64 value lies within ``GUARD_ULPS`` float64 ulps
of a bf16 rounding midpoint, mpmath decides the rounding. f(x) is transcendental for every nonzero
x, so it never lies exactly on a midpoint and one decision at high precision is final. The
reciprocal is not transcendental, but 1/x of an 8-bit x is a midpoint (9 significant bits) only if
x · midpoint = 1, i.e. never: both would be powers of two, and a power of two is no midpoint.

The hardware (``function_unit.py``) and the C header are generated from one ``FunctionRule`` per
function: per input sign, magnitudes below a range give a constant (or x itself), magnitudes above
it a saturated constant, and magnitudes inside it read a dense ROM. The reciprocal has its own
``ReciprocalRule``: 1/x depends on x's 7 fraction bits (a 128-word ROM of the result for x in
[1, 2)) and on its exponent (which shifts that result's exponent), plus the zero and range rules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import mpmath
import numpy as np
import numpy.typing as npt

__all__ = [
    "FUNCTIONS",
    "NAN",
    "FunctionRule",
    "ReciprocalRule",
    "Rule",
    "Side",
    "apply_rule",
    "reference",
    "rom_bits",
    "rule",
    "table",
]

FUNCTIONS = ("sigmoid", "tanh", "exp", "recip")
NAN = 0x7FC0
INF_CODE = 0x7F80  # magnitude code (bits & 0x7FFF) of ±Inf; larger codes are NaNs
MIN_NORMAL_CODE = 0x0080
ONE_CODE = 0x3F80  # 1.0
RECIP_EXP_SUM = 253  # 1/x for x in (1, 2) has exponent field 126 = 253 − 127
GUARD_ULPS = 1 << 8  # float64 error of the float64 formulas is a few ulps; this is far wider
MP_PREC = 256  # bits for the mpmath decisions

Bits = npt.NDArray[np.uint16]


@dataclass(frozen=True)
class Side:
    """The rule for inputs of one sign, by magnitude code ``c = bits & 0x7FFF`` (NaN codes excluded).

    ``c < lo`` gives ``small`` (``None``: the flushed input itself); this covers ±0 and subnormals.
    ``c > hi`` gives ``large``; this covers ±Inf. ``lo ≤ c ≤ hi`` gives ``offset + rom[c - lo]``.
    """

    lo: int
    hi: int
    small: int | None
    large: int
    offset: int
    width: int  # bits of each ROM word
    rom: tuple[int, ...]


@dataclass(frozen=True)
class FunctionRule:
    """The whole function as rules plus ROMs.

    ``sides`` holds the rule for positive inputs, then the one for negative inputs. An ``odd``
    function (tanh) has only the positive side: a negative input reads the rule at its magnitude and
    flips the result's sign, which is exact because RNE and the flushes are symmetric.
    """

    name: str
    odd: bool
    sides: tuple[Side, ...]

    @property
    def rom_entries(self) -> int:
        return sum(len(s.rom) for s in self.sides)

    @property
    def rom_bits(self) -> int:
        return sum(len(s.rom) * s.width for s in self.sides)


@dataclass(frozen=True)
class ReciprocalRule:
    """1/x by fields: for x = ±1.f · 2^(e − 127) (e = 1 … 254), ``rom[f]`` holds 1/1.f rounded (bits
    6–0 its fraction, bit 7 set when its exponent field is 127, i.e. f = 0) and the result is
    ``±(rom[f] & 0x7F)`` with exponent field ``RECIP_EXP_SUM + rom[f][7] − e``, or ±0 where that is
    ≤ 0 (below 2^-126; ±Inf, e = 255, lands there too). e = 0 (±0, subnormals) gives ±Inf, NaN the
    canonical NaN. It never overflows: 1/x ≤ 2^126 for every normal x."""

    name: str
    rom: tuple[int, ...]
    width: int = 8

    @property
    def rom_entries(self) -> int:
        return len(self.rom)

    @property
    def rom_bits(self) -> int:
        return len(self.rom) * self.width


Rule = FunctionRule | ReciprocalRule


def _check_name(name: str) -> None:
    if name not in FUNCTIONS:
        raise ValueError(f"unknown function {name!r}; expected one of {FUNCTIONS}")


# --- the exact tables -------------------------------------------------------------------------


def _f64(name: str, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """f in float64, within a few ulps wherever the result is a normal bf16."""
    with np.errstate(over="ignore", under="ignore"):
        if name == "exp":
            return np.exp(x)
        if name == "tanh":
            return np.tanh(x)
        if name == "recip":
            with np.errstate(divide="ignore"):
                return 1.0 / x  # exact specials: 1/±0 = ±Inf, 1/±Inf = ±0
        e = np.exp(-np.abs(x))  # in (0, 1]: no overflow on either side
        return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _mp(name: str, x: float) -> mpmath.mpf:
    with mpmath.workprec(MP_PREC):
        v = mpmath.mpf(x)
        if name == "exp":
            return mpmath.exp(v)
        if name == "tanh":
            return mpmath.tanh(v)
        if name == "recip":
            return 1 / v
        return 1 / (1 + mpmath.exp(-v))


def _round8(name: str, x: npt.NDArray[np.float64], v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """RNE of f(x) to 8 significant bits (unbounded exponent), given its float64 value ``v``.

    Works on the float64 bit pattern: the low 45 bits of the magnitude are dropped. Where they lie
    within GUARD_ULPS of the half-way pattern, the float64 value cannot decide and mpmath does.
    """
    normal = np.isfinite(v) & (np.abs(v) >= np.finfo(np.float64).tiny)
    mag = np.abs(np.where(normal, v, 1.0)).view(np.int64)
    drop = 52 - 7
    keep, low = mag >> drop, mag & ((1 << drop) - 1)
    half = np.int64(1 << (drop - 1))
    up = (low > half) | ((low == half) & (keep & 1 == 1))
    for i in np.flatnonzero(normal & (np.abs(low - half) <= GUARD_ULPS)):
        midpoint = float(np.int64((int(keep[i]) << drop) | int(half)).view(np.float64))
        exact = abs(_mp(name, float(x[i])))
        if abs(exact - midpoint) <= midpoint * 2.0 ** (20 - MP_PREC):  # never for a transcendental f(x)
            raise ArithmeticError(f"{name}({x[i]!r}) is too close to a bf16 midpoint for {MP_PREC} bits")
        up[i] = exact > midpoint
    rounded = np.copysign(((keep + up) << drop).view(np.float64), v)
    return np.where(normal, rounded, v)


def _to_bf16_bits(r: npt.NDArray[np.float64]) -> Bits:
    """Apply the range rules to 8-bit values and encode them; NaN becomes the canonical NaN."""
    r = np.where(np.abs(r) >= 2.0**128, np.copysign(np.inf, r), r)
    r = np.where(np.abs(r) < 2.0**-126, np.copysign(0.0, r), r)
    bits = (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact: 8 bits, in range
    return np.where(np.isnan(r), np.uint16(NAN), bits).astype(np.uint16)


def _inputs() -> npt.NDArray[np.float64]:
    """Every bf16 bit pattern as its flushed value (subnormals → ±0)."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    bits = np.where((bits >> 7) & 0xFF == 0, bits & 0x8000, bits)
    with np.errstate(invalid="ignore"):
        return (bits << 16).astype(np.uint32).view(np.float32).astype(np.float64)


@functools.cache
def table(name: str) -> Bits:
    """f on all 65,536 bf16 bit patterns, indexed by the input's bits (read-only)."""
    _check_name(name)
    x = _inputs()
    with np.errstate(invalid="ignore"):
        v = _f64(name, x)  # ±0, ±Inf and NaN inputs give the exact specials in float64
    out = _to_bf16_bits(_round8(name, x, v))
    out.flags.writeable = False
    return out


def reference(name: str, x_bits: npt.ArrayLike) -> Bits:
    """f of bf16 bit patterns (any shape), from the table."""
    return table(name)[np.asarray(x_bits).astype(np.uint16)]


# --- the compact rule -------------------------------------------------------------------------


def _side(values: Bits, sign_bit: int) -> Side:
    """Rule for the 32,768 results ``values`` of one input sign, indexed by magnitude code."""
    codes = np.arange(INF_CODE + 1)
    vals = values[: INF_CODE + 1].astype(np.int64)
    flushed = np.where(codes < MIN_NORMAL_CODE, sign_bit, codes | sign_bit)
    identity = vals[MIN_NORMAL_CODE] == flushed[MIN_NORMAL_CODE]
    small = None if identity else int(vals[0])
    large = int(vals[INF_CODE])
    lo = int(np.argmax(vals != (flushed if identity else small)))
    hi = int(INF_CODE - np.argmax(vals[::-1] != large))
    assert lo <= hi, "a function with no ROM range"
    span = vals[lo : hi + 1]
    offset = int(span.min())
    rom = tuple(int(v) - offset for v in span)
    return Side(lo, hi, small, large, offset, max(1, max(rom).bit_length()), rom)


@functools.cache
def rule(name: str) -> Rule:
    """The compact form of ``table(name)``; checked to reproduce it on every input."""
    t = table(name)
    if name == "recip":
        r: Rule = _reciprocal_rule(t)
    else:
        pos, neg = t[: 1 << 15], t[1 << 15 :]
        codes = np.arange(1 << 15)
        odd = bool(np.all((codes > INF_CODE) | (neg == pos ^ 0x8000)))
        sides = (_side(pos, 0),) if odd else (_side(pos, 0), _side(neg, 0x8000))
        r = FunctionRule(name, odd, sides)
    if not np.array_equal(apply_rule(r, np.arange(1 << 16)), t):  # the hardware and C are built from r
        raise AssertionError(f"{name}: the rule does not reproduce its table")
    return r


def _reciprocal_rule(t: Bits) -> ReciprocalRule:
    """The ROM of 1/x for x = 1.f (f the 7 fraction bits): the result's fraction, and in bit 7
    whether its exponent field is 127 (x = 1) rather than 126 (x in (1, 2), 1/x in (0.5, 1))."""
    words = []
    for f in range(1 << 7):
        y = int(t[ONE_CODE | f])
        high = ((y >> 7) & 0xFF) - (RECIP_EXP_SUM - 127)
        assert high in (0, 1), f"1/x of x in [1, 2) must lie in (0.5, 1]: {y:#06x}"
        words.append(high << 7 | (y & 0x7F))
    return ReciprocalRule("recip", tuple(words))


def apply_rule(r: Rule, x_bits: npt.ArrayLike) -> Bits:
    """Evaluate a rule the way the hardware and the C header do (vectorized)."""
    if isinstance(r, ReciprocalRule):
        return _apply_reciprocal(r, x_bits)
    x = np.asarray(x_bits).astype(np.int64)
    sign, code = x & 0x8000, x & 0x7FFF
    out = np.full(x.shape, NAN, dtype=np.int64)
    for i, side in enumerate(r.sides):
        side_sign = 0x8000 * i
        mine = (sign == side_sign) | r.odd
        flushed = np.where(code < MIN_NORMAL_CODE, side_sign, code | side_sign)  # the input this side sees
        small = flushed if side.small is None else side.small
        rom = np.asarray(side.rom, dtype=np.int64)
        inside = side.offset + rom[np.clip(code - side.lo, 0, len(rom) - 1)]
        y = np.where(code < side.lo, small, np.where(code > side.hi, side.large, inside))
        y = y ^ sign if r.odd else y
        out = np.where(mine & (code <= INF_CODE), y, out)
    return out.astype(np.uint16)


def _apply_reciprocal(r: ReciprocalRule, x_bits: npt.ArrayLike) -> Bits:
    x = np.asarray(x_bits).astype(np.int64)
    sign, exp, frac = x & 0x8000, (x >> 7) & 0xFF, x & 0x7F
    word = np.asarray(r.rom, dtype=np.int64)[frac]
    out_exp = RECIP_EXP_SUM + (word >> 7) - exp  # ≤ 0: below 2^-126, flushed
    y = np.where(out_exp <= 0, sign, sign | np.clip(out_exp, 0, 0xFF) << 7 | (word & 0x7F))
    y = np.where(exp == 0, sign | INF_CODE, y)  # ±0 and subnormals read as ±0: 1/±0 = ±Inf
    return np.where((x & 0x7FFF) > INF_CODE, NAN, y).astype(np.uint16)


def rom_bits() -> dict[str, tuple[int, int]]:
    """(ROM entries, ROM bits) per function."""
    return {name: (rule(name).rom_entries, rule(name).rom_bits) for name in FUNCTIONS}

"""``pyard_vector_lane.h``: the vector lane's bf16-tile arithmetic (``lane_model``) in integer C,
for firmware on cores without an FPU (the FPTT software-only mode, docs/fptt.md).

The rules are ``rtl/fp_model.py``'s: subnormal inputs read as zero, a sum or product rounded once,
nearest even, at the output precision with an unbounded exponent, then ≥ 2^128 → ±Inf and
< 2^-126 → ±0, canonical NaNs. A scratchpad write narrows the lane's fp32 result to bf16
(``round_bf16``), so a bf16 add is two roundings (fp32, then bf16), as the engine computes it.
The functions (sigmoid, tanh, exp, 1/x) come from ``pyard_vector_functions.h`` (c_functions.py).

``tests/test_vector_functions.py`` compiles the header for the host and checks every function
against the Python models on edge cases and random operands.
"""

from pathlib import Path

from rtl.fp_model import BF16_NAN, F32_NAN
from rtl.vector.c_functions import HEADER_NAME as FUNCTIONS_HEADER
from rtl.vector.c_functions import functions_header

__all__ = ["LANE_HEADER", "lane_header", "write_headers"]

LANE_HEADER = "pyard_vector_lane.h"

_BODY = """
#define PYARD_F32_SIGN 0x80000000u
#define PYARD_F32_INF 0x7f800000u
#define PYARD_F32_NAN 0x{f32_nan:08x}u
#define PYARD_BF16_NAN 0x{bf16_nan:04x}u

/* Subnormal fp32 bits read as a zero of the same sign. */
static inline uint32_t pyard_f32_ftz(uint32_t a) {{
    return (a & PYARD_F32_INF) ? a : (a & PYARD_F32_SIGN);
}}

/* A value rounded to a bf16 (or fp32) result: `sign`, biased exponent `e` of the leading bit,
 * significand `q` with `mant` fraction bits below its leading one; the range rules applied. Returns
 * fp32 bits (a bf16 result in the top half). */
static inline uint32_t pyard_fp_pack_(uint32_t sign, int e, uint32_t q, int mant) {{
    if (e >= 255) return sign | PYARD_F32_INF;
    if (e <= 0) return sign; /* below 2^-126: ±0 */
    return sign | (uint32_t)e << 23 | (q & ((1u << mant) - 1u)) << (23 - mant);
}}

/* `s` >> `drop`, nearest even; `*e` incremented when the significand carries into bit `p`. */
static inline uint32_t pyard_fp_round_(uint32_t s, int drop, int p, int *e) {{
    if (drop <= 0) return s << -drop;
    uint32_t q = s >> drop, rem = s & ((1u << drop) - 1u), half = 1u << (drop - 1);
    if (rem > half || (rem == half && (q & 1u))) {{
        q++;
        if (q >> p) {{
            q >>= 1;
            (*e)++;
        }}
    }}
    return q;
}}

/* What both adders do first, on fp32 bits (a bf16 operand in the top half): subnormal inputs read
 * as zero; NaN and ∞ operands settle the sum (1 is returned, the sum in `*r`: ∞ − ∞ and any NaN
 * give the canonical NaN); otherwise `*a` becomes the operand of larger magnitude, whose sign the
 * sum takes, and 0 is returned. */
static inline int pyard_add_order_(uint32_t *a, uint32_t *b, uint32_t *r) {{
    const uint32_t x = pyard_f32_ftz(*a), y = pyard_f32_ftz(*b);
    const uint32_t ax = x & ~PYARD_F32_SIGN, ay = y & ~PYARD_F32_SIGN;
    if (ax > PYARD_F32_INF || ay > PYARD_F32_INF || (ax == PYARD_F32_INF && ay == ax && ((x ^ y) & PYARD_F32_SIGN))) {{
        *r = PYARD_F32_NAN;
        return 1;
    }}
    if (ax == PYARD_F32_INF || ay == PYARD_F32_INF) {{
        *r = ax == PYARD_F32_INF ? x : y;
        return 1;
    }}
    *a = ax < ay ? y : x;
    *b = ax < ay ? x : y;
    return 0;
}}

/* a + b of fp32 bits rounded once to `mant` fraction bits (23: fp32 bits; 7: bf16 bits, the
 * bf16 accumulator's adder): rtl.fp_model.fp_add. */
static inline uint32_t pyard_fp_add(uint32_t a, uint32_t b, int mant) {{
    const int shift = mant == 23 ? 0 : 16;
    uint32_t r;
    if (pyard_add_order_(&a, &b, &r)) return r >> shift;
    const uint32_t aa = a & ~PYARD_F32_SIGN, ab = b & ~PYARD_F32_SIGN;
    if (aa == 0) return (a & b) >> shift; /* ±0 + ±0: −0 only for two −0 */
    const int ea = (int)(aa >> 23), eb = (int)(ab >> 23), d = ea - eb;
    /* significands at bits 30..7: room for the carry above and guard bits below */
    const uint32_t ma = ((aa & 0x7fffffu) | 0x800000u) << 7;
    uint32_t mb = ab ? ((ab & 0x7fffffu) | 0x800000u) << 7 : 0;
    if (d >= 31) mb = mb != 0; /* only a sticky bit remains */
    else if (d > 0) mb = (mb >> d) | ((mb << (32 - d)) != 0);
    const uint32_t s = ((a ^ b) & PYARD_F32_SIGN) ? ma - mb : ma + mb;
    if (s == 0) return 0; /* exact cancellation: +0 */
    /* the leading bit: 31 or 30 for a sum, lower after a cancellation (by a loop: a clz would be a
     * library call on cores without Zbb, and it spills the registers of the inlined caller) */
    int msb = (int)(s >> 31) + 30;
    while (!(s >> msb)) msb--;
    int e = ea + msb - 30;
    const uint32_t q = pyard_fp_round_(s, msb - mant, mant + 1, &e);
    return pyard_fp_pack_(a & PYARD_F32_SIGN, e, q, mant) >> shift;
}}

/* a · b of fp32 bits rounded once to fp32: rtl.fp_model.fp32_mul. */
static inline uint32_t pyard_f32_mul(uint32_t a, uint32_t b) {{
    const uint32_t sign = (a ^ b) & PYARD_F32_SIGN;
    a = pyard_f32_ftz(a);
    b = pyard_f32_ftz(b);
    const uint32_t aa = a & ~PYARD_F32_SIGN, ab = b & ~PYARD_F32_SIGN;
    if (aa > PYARD_F32_INF || ab > PYARD_F32_INF) return PYARD_F32_NAN;
    if (aa == PYARD_F32_INF || ab == PYARD_F32_INF) return (aa == 0 || ab == 0) ? PYARD_F32_NAN : sign | PYARD_F32_INF;
    if (aa == 0 || ab == 0) return sign;
    const uint64_t p = (uint64_t)((aa & 0x7fffffu) | 0x800000u) * ((ab & 0x7fffffu) | 0x800000u);
    int e = (int)(aa >> 23) + (int)(ab >> 23) - 127;
    const int top = (int)(p >> 47); /* the product is in [2^46, 2^48) */
    e += top;
    const int drop = 23 + top;
    uint32_t q = (uint32_t)(p >> drop);
    const uint64_t rem = p & ((1ull << drop) - 1u), half = 1ull << (drop - 1);
    if (rem > half || (rem == half && (q & 1u))) {{
        q++;
        if (q >> 24) {{
            q >>= 1;
            e++;
        }}
    }}
    return pyard_fp_pack_(sign, e, q, 23);
}}

/* fp32 bits narrowed to bf16 by a scratchpad write (rtl.fp_model.round_bf16): nearest even at
 * bit 16, a carry into the next binade or ±Inf, any NaN canonical, nothing flushed. */
static inline uint16_t pyard_bf16_round(uint32_t w) {{
    if ((w & ~PYARD_F32_SIGN) > PYARD_F32_INF) return PYARD_BF16_NAN;
    return (uint16_t)((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
}}

/* The lane's ops on bf16 operands (a scratchpad row widened), each result written back as bf16.
 *
 * ADD: the sum rounded to fp32, flushed below 2^-126, then rounded to bf16 (pyard_fp_add, then
 * pyard_bf16_round), computed here on the exact integer sum of the two 8-bit significands: it has
 * at most 32 bits while the exponents differ by at most 23, and beyond that the fp32 sum lies
 * within an fp32 ulp of the larger operand, which the bf16 rounding gives back. */
static inline uint16_t pyard_bf16_add(uint16_t a16, uint16_t b16) {{
    uint32_t wa = (uint32_t)a16 << 16, wb = (uint32_t)b16 << 16, r;
    if (pyard_add_order_(&wa, &wb, &r)) return (uint16_t)(r >> 16);
    const uint16_t a = (uint16_t)(wa >> 16), b = (uint16_t)(wb >> 16);
    const uint16_t aa = a & 0x7fffu, ab = b & 0x7fffu;
    if (ab == 0) return aa ? a : (uint16_t)(a & b); /* ±0 + ±0: −0 only for two −0 */
    const int eb = ab >> 7, d = (aa >> 7) - eb;
    if (d > 23) return a;
    const uint32_t ma = (uint32_t)((aa & 0x7fu) | 0x80u) << d, mb = (ab & 0x7fu) | 0x80u;
    uint32_t s = ((a ^ b) & 0x8000u) ? ma - mb : ma + mb; /* in units of b's last bit */
    if (s == 0) return 0;                                  /* exact cancellation: +0 */
    int msb = 8 + d;
    while (!(s >> msb)) msb--;
    int e = eb + msb - 7; /* biased exponent of the leading bit */
    if (msb > 23) {{      /* the fp32 rounding */
        s = pyard_fp_round_(s, msb - 23, 24, &e);
        msb = 23;
    }}
    if (e <= 0) return a & 0x8000u; /* the fp32 sum is below 2^-126 */
    const uint32_t q = pyard_fp_round_(s, msb - 7, 8, &e);
    return (uint16_t)(pyard_fp_pack_((uint32_t)(a & 0x8000u) << 16, e, q, 7) >> 16);
}}

static inline uint16_t pyard_bf16_sub(uint16_t a, uint16_t b) {{ return pyard_bf16_add(a, (uint16_t)(b ^ 0x8000u)); }}

/* s − a (RSUBS, e.g. 1 − x) */
static inline uint16_t pyard_bf16_rsub(uint16_t a, uint16_t s) {{ return pyard_bf16_add(s, (uint16_t)(a ^ 0x8000u)); }}

/* A bf16 product is exact in fp32 (8 × 8 significand bits), so MUL then the bf16 write is one
 * rounding of the exact product to 8 bits; a product below 2^-126 is flushed before it. */
static inline uint16_t pyard_bf16_mul(uint16_t a, uint16_t b) {{
    const uint32_t sign = (uint32_t)((a ^ b) & 0x8000u) << 16;
    const uint32_t aa = a & 0x7fffu, ab = b & 0x7fffu;
    const int ea = (int)(aa >> 7), eb = (int)(ab >> 7);
    if ((ea == 255 && (aa & 0x7fu)) || (eb == 255 && (ab & 0x7fu))) return PYARD_BF16_NAN;
    if (ea == 255 || eb == 255) return (ea == 0 || eb == 0) ? PYARD_BF16_NAN : (uint16_t)((sign | PYARD_F32_INF) >> 16);
    if (ea == 0 || eb == 0) return (uint16_t)(sign >> 16);
    const uint32_t p = ((aa & 0x7fu) | 0x80u) * ((ab & 0x7fu) | 0x80u); /* in [2^14, 2^16) */
    int e = ea + eb - 127;
    const int top = (int)(p >> 15);
    e += top;
    if (e <= 0) return (uint16_t)(sign >> 16); /* the exact product is below 2^-126 */
    const uint32_t q = pyard_fp_round_(p, 7 + top, 8, &e);
    return (uint16_t)(pyard_fp_pack_(sign, e, q, 7) >> 16);
}}

/* MAX of flushed operands, −0 below +0, NaN in either → NaN (the max of bf16 rows is exact). */
static inline uint16_t pyard_bf16_max(uint16_t a, uint16_t b) {{
    if ((a & 0x7fffu) > 0x7f80u || (b & 0x7fffu) > 0x7f80u) return PYARD_BF16_NAN;
    if (!(a & 0x7f80u)) a &= 0x8000u;
    if (!(b & 0x7f80u)) b &= 0x8000u;
    const uint16_t ka = (a & 0x8000u) ? (uint16_t)~a : (uint16_t)(a | 0x8000u);
    const uint16_t kb = (b & 0x8000u) ? (uint16_t)~b : (uint16_t)(b | 0x8000u);
    return ka > kb ? a : b;
}}
"""


def lane_header() -> str:
    """The text of ``pyard_vector_lane.h`` (it includes ``pyard_vector_functions.h``)."""
    guard = "PYARD_VECTOR_LANE_H"
    return "\n".join(
        [
            "/* Generated by pyard (rtl/vector/c_lane.py). Do not edit. */",
            "/* The vector lane's bf16-tile arithmetic on bit patterns, integer only (docs/arithmetic.md). */",
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            "#include <stdint.h>",
            "",
            f'#include "{FUNCTIONS_HEADER}"',
            _BODY.format(f32_nan=F32_NAN, bf16_nan=BF16_NAN),
            f"#endif /* {guard} */",
            "",
        ]
    )


def write_headers(directory: Path) -> None:
    """Both headers into ``directory``, rewritten only when their text changed (build caches)."""
    for name, text in ((FUNCTIONS_HEADER, functions_header()), (LANE_HEADER, lane_header())):
        path = directory / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)

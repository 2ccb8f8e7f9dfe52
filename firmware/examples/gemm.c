/* GEMM on the accelerator through pyard_matmul, checked against a plain C reference.
 *
 *   pyard run --config 4x4-int8 firmware/examples/gemm.c
 *   pyard run --config 4x4-bf16 firmware/examples/gemm.c
 *
 * C = ReLU(scale · (A·B + bias)) for an M×K by K×N product (sizes need not be multiples of the
 * array), once at full width (int32 / fp32, scale 1) and once narrowed to the input type with a scale
 * (int8: a rounding right shift by 8, saturated; bf16: × 0.25, rounded to nearest even).
 * The bf16 inputs are small multiples of 1/8, so every sum is exact in fp32 and the integer-only C
 * reference is bit-exact too (the regressions check random bf16 data against the NumPy model). */
#include "pyard.h"

#ifndef M
#define M 20
#endif
#ifndef K
#define K 36
#endif
#ifndef N
#define N 28
#endif

/* The reference's copies live in the data RAM (fast for the CPU); the accelerator's in main memory. */
static int32_t a_val[M][K], b_val[K][N], bias_val[N]; /* values in units of 1/8 (bf16) or 1 (int8) */
static PYARD_MEM pyard_in_t a[M][K], b[K][N];
static PYARD_MEM pyard_acc_t bias[N], c_full[M][N];
static PYARD_MEM pyard_in_t c_narrow[M][N];

static uint32_t rng_state = 12345;
static int32_t rand_range(int32_t lo, int32_t hi) { /* uniform in [lo, hi] */
  rng_state = rng_state * 1664525u + 1013904223u;
  return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

static uint16_t bf16_rne(uint32_t f32) { return (uint16_t)((f32 + 0x7fffu + ((f32 >> 16) & 1)) >> 16); }

static void make_inputs(void) {
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) a_val[i][k] = PYARD_DTYPE_INT8 ? rand_range(-128, 127) : rand_range(-32, 32);
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) b_val[k][j] = PYARD_DTYPE_INT8 ? rand_range(-128, 127) : rand_range(-32, 32);
  for (int j = 0; j < N; j++) bias_val[j] = PYARD_DTYPE_INT8 ? rand_range(-20000, 20000) : rand_range(-500, 500);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) a[i][k] = PYARD_DTYPE_INT8 ? (pyard_in_t)a_val[i][k] : bf16_rne(pyard_f32_bits(a_val[i][k], 3));
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) b[k][j] = PYARD_DTYPE_INT8 ? (pyard_in_t)b_val[k][j] : bf16_rne(pyard_f32_bits(b_val[k][j], 3));
  /* The bias is in the accumulator type: int32, or fp32 in units of 1/64 like the products. */
  for (int j = 0; j < N; j++) bias[j] = PYARD_ACC_INT32 ? (pyard_acc_t)bias_val[j] : (pyard_acc_t)pyard_f32_bits(bias_val[j], 6);
}

#define NARROW_SHIFT 8                /* int8: the read-out's rounding right shift */
#define NARROW_SCALE_F32 0x3E800000u  /* bf16: 0.25 */

/* x / 2^s rounded half to even (the int32 read-out's scale). */
static int64_t round_shift(int64_t x, int s) {
  if (s == 0) return x;
  int64_t q = x >> s, r = x - (q << s), half = (int64_t)1 << (s - 1);
  return q + (r > half || (r == half && (q & 1)));
}

/* Expected element (i, j), full width and narrow, as bit patterns. */
static void reference(int i, int j, uint32_t *full, uint32_t *narrow) {
  int64_t acc = bias_val[j]; /* int8: units of 1; bf16: units of 1/64 */
  for (int k = 0; k < K; k++) acc += (int64_t)a_val[i][k] * b_val[k][j];
  const int64_t relu = acc < 0 ? 0 : acc;
  if (PYARD_ACC_INT32) {
    int64_t y = round_shift(acc, NARROW_SHIFT);
    y = y < 0 ? 0 : y > 127 ? 127 : y;
    *full = (uint32_t)relu;
    *narrow = (uint32_t)y;
  } else {
    *full = pyard_f32_bits(relu, 6);
    *narrow = bf16_rne(pyard_f32_bits(relu, 8)); /* × 0.25 is exact */
  }
}

static int check(void) {
  int bad = 0;
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      uint32_t full, narrow;
      reference(i, j, &full, &narrow);
      uint32_t got_full = (uint32_t)c_full[i][j];
      uint32_t got_narrow = (uint32_t)c_narrow[i][j] & (PYARD_DTYPE_INT8 ? 0xffu : 0xffffu);
      if (got_full != full || got_narrow != narrow) {
        if (bad++ < 5) {
          printf("  C[%d][%d]: full 0x%08x (want 0x%08x), narrow 0x%x (want 0x%x)\n", i, j, (unsigned)got_full,
                 (unsigned)full, (unsigned)got_narrow, (unsigned)narrow);
        }
      }
    }
  }
  return bad;
}

int main(void) {
  if (PYARD_ACC_BF16) {
    puts("gemm.c checks int32 and fp32 accumulators; this config accumulates in bf16");
    return 4;
  }
  int err = pyard_init();
  if (err) {
    pyard_perror("pyard_init", err);
    return 1;
  }
  make_inputs();
  uint64_t t0 = pyard_cycles();
  err = pyard_matmul(M, K, N, a, b, bias, c_full, K, N, 0, N, PYARD_SCALE_ONE, PYARD_ACT_RELU, PYARD_BIAS_ROW, false,
                     false, false, true);
  uint64_t t1 = pyard_cycles();
  if (!err) {
    const uint32_t scale = PYARD_ACC_INT32 ? NARROW_SHIFT : NARROW_SCALE_F32;
    err = pyard_matmul(M, K, N, a, b, bias, c_narrow, K, N, 0, N, scale, PYARD_ACT_RELU, PYARD_BIAS_ROW, false, false,
                       false, false);
  }
  if (err) {
    pyard_perror("pyard_matmul", err);
    return 2;
  }
  pyard_counters_t counters = pyard_read_counters();
  int bad = check();
  printf("gemm %dx%dx%d %s on %s: %s, %llu cycles (full-width C)\n", M, K, N, PYARD_DTYPE_INT8 ? "int8" : "bf16",
         PYARD_CONFIG_NAME, bad ? "MISMATCH" : "ok", (unsigned long long)(t1 - t0));
  pyard_print_counters(&counters);
  return bad ? 3 : 0;
}

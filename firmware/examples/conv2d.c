/* 2-D convolution on the accelerator through pyard_conv2d (CONV2D, implicit im2col), checked
 * against a direct C convolution.
 *
 *   pyard run --config 4x4-int8 firmware/examples/conv2d.c
 *
 * out = ReLU(conv(x, w) + bias), NHWC input, HWIO weights, NHWC output at full width. As in gemm.c,
 * bf16 values are small multiples of 1/8 so that every sum is exact and the reference bit-exact. */
#include "pyard.h"

#ifndef BATCH
#define BATCH 2
#endif
#define CIN 3
#define H 9
#define W 7
#define COUT 5
#define KH 3
#define KW 3
#define STRIDE 2
#define PAD 1
#define OH ((H + 2 * PAD - KH) / STRIDE + 1)
#define OW ((W + 2 * PAD - KW) / STRIDE + 1)

static int32_t x_val[BATCH][H][W][CIN], w_val[KH][KW][CIN][COUT], bias_val[COUT];
static PYARD_MEM pyard_in_t x[BATCH][H][W][CIN], w[KH][KW][CIN][COUT];
static PYARD_MEM pyard_acc_t bias[COUT], out[BATCH][OH][OW][COUT];

static uint32_t rng_state = 777;
static int32_t rand_range(int32_t lo, int32_t hi) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

static pyard_in_t to_in(int32_t v) { return PYARD_DTYPE_INT8 ? (pyard_in_t)v : (pyard_in_t)(pyard_f32_bits(v, 3) >> 16); }

static void make_inputs(void) {
  const int32_t lim = PYARD_DTYPE_INT8 ? 127 : 16; /* bf16: |v|/8 has at most 5 significant bits */
  int32_t *xs = &x_val[0][0][0][0], *ws = &w_val[0][0][0][0];
  pyard_in_t *xd = &x[0][0][0][0], *wd = &w[0][0][0][0];
  for (int i = 0; i < BATCH * H * W * CIN; i++) xd[i] = to_in(xs[i] = rand_range(-lim, lim));
  for (int i = 0; i < KH * KW * CIN * COUT; i++) wd[i] = to_in(ws[i] = rand_range(-lim, lim));
  for (int o = 0; o < COUT; o++) {
    bias_val[o] = rand_range(-300, 300);
    bias[o] = PYARD_ACC_INT32 ? (pyard_acc_t)bias_val[o] : (pyard_acc_t)pyard_f32_bits(bias_val[o], 6);
  }
}

static uint32_t reference(int n, int oy, int ox, int o) {
  int64_t acc = bias_val[o];
  for (int ky = 0; ky < KH; ky++) {
    for (int kx = 0; kx < KW; kx++) {
      const int iy = oy * STRIDE - PAD + ky, ix = ox * STRIDE - PAD + kx;
      if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue; /* padding reads as zero */
      for (int c = 0; c < CIN; c++) acc += (int64_t)x_val[n][iy][ix][c] * w_val[ky][kx][c][o];
    }
  }
  if (acc < 0) acc = 0;
  return PYARD_ACC_INT32 ? (uint32_t)acc : pyard_f32_bits(acc, 6);
}

int main(void) {
  if (PYARD_ACC_BF16) {
    puts("conv2d.c checks int32 and fp32 accumulators; this config accumulates in bf16");
    return 4;
  }
  int err = pyard_init();
  if (err) {
    pyard_perror("pyard_init", err);
    return 1;
  }
  make_inputs();
  const pyard_conv2d_t conv = {
      .batch = BATCH, .in_ch = CIN, .in_h = H, .in_w = W, .out_ch = COUT, .k_h = KH, .k_w = KW,
      .stride = STRIDE, .pad = PAD, .input = x, .weights = w, .bias = bias, .output = out,
      .scale = PYARD_SCALE_ONE, .act = PYARD_ACT_RELU, .full_out = true,
  };
  const uint64_t t0 = pyard_cycles();
  err = pyard_conv2d(&conv);
  const uint64_t t1 = pyard_cycles();
  if (err) {
    pyard_perror("pyard_conv2d", err);
    return 2;
  }
  int bad = 0;
  for (int n = 0; n < BATCH; n++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int o = 0; o < COUT; o++) {
          const uint32_t want = reference(n, oy, ox, o), got = (uint32_t)out[n][oy][ox][o];
          if (got != want && bad++ < 5) printf("  out[%d][%d][%d][%d] = 0x%08x, want 0x%08x\n", n, oy, ox, o,
                                               (unsigned)got, (unsigned)want);
        }
  printf("conv2d %dx%dx%dx%d * %dx%d -> %d channels, stride %d, pad %d on %s: %s, %llu cycles\n", BATCH, H, W, CIN,
         KH, KW, COUT, STRIDE, PAD, PYARD_CONFIG_NAME, bad ? "MISMATCH" : "ok", (unsigned long long)(t1 - t0));
  return bad ? 3 : 0;
}

/* pyard deploy's executor (docs/deploy.md): runs an int8 model's layer table on the harts and tiles.
 *
 * The model is not compiled in: the host (deploy/firmware.py) loads a blob at __mem_free_start (main
 * memory, which the tiles' DMA reaches) before the run: a header, the layer records, the constants
 * (weights, biases, requantization multipliers and shifts) and one activation arena per hart. Every
 * active hart runs inferences hart, hart + nharts, ... of the blob's inputs; CONV_2D and
 * FULLY_CONNECTED accumulate in int32 on a tile (taken from the resource manager, so harts share the
 * tiles) and are requantized there by the vector engine (VEC REQUANT); everything else (depthwise
 * convolution, pooling, ADD, SOFTMAX, onnxruntime's float requantization) runs on the hart in
 * integer C that mirrors LiteRT's reference kernels bit for bit (deploy/reference.py). */
#include <limits.h>

#include "pyard.h"
#include "pyard_rm.h"

#if !PYARD_DTYPE_INT8 || !PYARD_ACC_INT32
#error "pyard deploy runs int8 models: build for an int8 tile with int32 accumulators (e.g. --config 4x4-int8)"
#endif

enum { DP_CONV = 1, DP_DWCONV, DP_FC, DP_MAXPOOL, DP_AVGPOOL, DP_ADD, DP_SOFTMAX };
#define DP_MAGIC 0x50445950u /* "PYDP" */

typedef struct { /* the blob's header (deploy/firmware.py HEADER) */
  uint32_t magic, total_bytes, n_layers, layers, n_infer, in_bytes, out_bytes, in_off, out_off;
  uint32_t arena_bytes, arenas, inputs, outputs, infer_cycles, layer_cycles, tile_cycles, tile_takes, status;
} dp_header_t;

typedef struct { /* one layer (deploy/firmware.py RECORD): activation offsets are arena-relative */
  int32_t op, in, in2, out, h, w, c, oh, ow, oc, kh, kw, sh, sw, pt, pl;
  int32_t in_zp, in2_zp, out_zp, act_min, act_max, weights, bias, mult, shift, pad_buf, acc_buf, ph, pw;
  int32_t extra[6]; /* ADD: m1 s1 m2 s2 mo so; SOFTMAX: multiplier, left shift, diff_min */
  int32_t float_rq;  /* onnxruntime's requantization: `mult` holds float32 scales (requant_float) */
} dp_layer_t;

extern char __mem_free_start[];

/* ---- TFLite's integer arithmetic (deploy/quant.py) ---- */
static int32_t srdhm(int32_t a, int32_t b) { /* SaturatingRoundingDoublingHighMul */
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  const int64_t v = (int64_t)a * b + (a * (int64_t)b >= 0 ? (1 << 30) : 1 - (1 << 30));
  return (int32_t)(v >= 0 ? v >> 31 : -((-v) >> 31)); /* the quotient truncates towards zero */
}
static int32_t rdbpot(int32_t x, int e) { /* RoundingDivideByPOT */
  const int32_t mask = (int32_t)((1u << e) - 1u), threshold = (mask >> 1) + (x < 0);
  return (x >> e) + ((x & mask) > threshold);
}
static int32_t mbqm_double(int32_t x, int32_t m, int32_t shift) { /* conv, depthwise, ADD, SOFTMAX */
  return rdbpot(srdhm((int32_t)((uint32_t)x << (shift > 0 ? shift : 0)), m), shift > 0 ? 0 : -shift);
}
/* onnxruntime's MlasRequantizeOutput: float(acc) · scale (float32, soft float on the harts), clamped
 * to the int8 range less the zero point, rounded half to even, plus the zero point. */
static int32_t requant_float(int32_t acc, int32_t scale_bits, int32_t zp) {
  union {
    int32_t i;
    float f;
  } scale = {scale_bits};
  float v = (float)acc * scale.f;
  const float lo = (float)(-128 - zp), hi = (float)(127 - zp);
  v = v < lo ? lo : v > hi ? hi : v;
  v = (v + 12582912.0f) - 12582912.0f; /* 1.5 · 2^23: rounds |v| < 2^22 to an integer, ties to even */
  return (int32_t)v + zp;
}
static int8_t clamp8(int32_t v, const dp_layer_t *l) {
  return (int8_t)(v < l->act_min ? l->act_min : v > l->act_max ? l->act_max : v);
}

/* ---- gemmlowp fixed point for SOFTMAX ---- */
static int32_t sat_shl(int32_t x, int e) {
  const int32_t threshold = (int32_t)((1u << (31 - e)) - 1u);
  return x > threshold ? INT32_MAX : x < -threshold ? INT32_MIN : (int32_t)((uint32_t)x << e);
}
static int32_t exp_quarter(int32_t a) {
  const int32_t x = (int32_t)((uint32_t)a + (1u << 28)), x2 = srdhm(x, x), x3 = srdhm(x2, x), x4 = srdhm(x2, x2);
  const int32_t poly = rdbpot((int32_t)((uint32_t)srdhm((int32_t)((uint32_t)rdbpot(x4, 2) + (uint32_t)x3), 715827883) +
                                        (uint32_t)x2), 1);
  return (int32_t)(1895147668u + (uint32_t)srdhm(1895147668, (int32_t)((uint32_t)x + (uint32_t)poly)));
}
static int32_t exp_on_negative_values(int32_t a) { /* F5 (26 fractional bits) -> F0 */
  static const int32_t mult[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
  const int32_t a_mod = (int32_t)((uint32_t)(a & ((1 << 24) - 1)) - (1u << 24));
  int32_t result = exp_quarter(sat_shl(a_mod, 5));
  const int32_t remainder = (int32_t)((uint32_t)a_mod - (uint32_t)a);
  for (int k = 0; k < 7; k++)
    if (remainder & (1 << (24 + k))) result = srdhm(result, mult[k]);
  return a == 0 ? INT32_MAX : result;
}
static int32_t reciprocal(int32_t x, int *bits_over_unit) { /* GetReciprocal of an F12 sum */
  const int headroom = __builtin_clz((uint32_t)x);
  *bits_over_unit = 12 - headroom;
  const int32_t a = (int32_t)(((uint32_t)x << headroom) - (1u << 31));
  int64_t s = (int64_t)a + INT32_MAX; /* RoundingHalfSum(a, One) */
  s += s >= 0 ? 1 : -1;
  const int32_t half = (int32_t)(s >= 0 ? s / 2 : -((-s) / 2));
  int32_t r = (int32_t)(1515870810u + (uint32_t)srdhm(half, -1010580540));
  for (int i = 0; i < 3; i++) {
    const int32_t one_minus = (int32_t)((1u << 29) - (uint32_t)srdhm(half, r));
    r = (int32_t)((uint32_t)r + (uint32_t)sat_shl(srdhm(r, one_minus), 2));
  }
  return sat_shl(r, 1);
}

/* ---- layers ---- */
/* Main memory is uncached (one access costs the memory latency): each layer's record is copied to
 * the stack, its per-channel constants into the hart's data RAM (const_cache), and the activations
 * the hart works on are staged in the data RAM too (stage): read in and written back a word at a
 * time instead of a byte. What does not fit is used in place. Both scale with the data RAM. */
#define DP_CACHE_WORDS (PYARD_DRAM_SIZE / 64 / PYARD_NHARTS_ACTIVE)
#define DP_STAGE_WORDS (PYARD_DRAM_SIZE / 16 / PYARD_NHARTS_ACTIVE)
static uint32_t const_cache[PYARD_NHARTS_ACTIVE][DP_CACHE_WORDS];
static uint32_t stage[PYARD_NHARTS_ACTIVE][DP_STAGE_WORDS];

typedef struct {
  const dp_header_t *hd;
  char *arena;
  uint32_t *cache, *stage;
  unsigned cache_used, stage_used; /* words taken by the current layer */
  uint64_t tile_time;  /* cycles inside the driver's blocking tile calls (waiting for a tile included) */
} dp_ctx_t;

#define CONST(ctx, off, type) ((const type *)((const char *)(ctx)->hd + (off)))
#define CACHED(ctx, off, bytes, type) ((const type *)cached((ctx), (off), (bytes)))

/* The constant at blob offset `off`, from the hart's data RAM when it fits there. */
static const void *cached(dp_ctx_t *ctx, int32_t off, uint32_t bytes) {
  const uint32_t *src = (const uint32_t *)((const char *)ctx->hd + off);
  const unsigned words = (bytes + 3) / 4;
  if (ctx->cache_used + words > DP_CACHE_WORDS) return src;
  uint32_t *dst = ctx->cache + ctx->cache_used;
  for (unsigned i = 0; i < words; i++) dst[i] = src[i];
  ctx->cache_used += words;
  return dst;
}
#define ACT(ctx, off, type) ((type *)((ctx)->arena + (off)))

static void copy_words(void *dst, const void *src, uint32_t bytes) { /* arena buffers are 64-byte aligned */
  for (uint32_t i = 0; i < (bytes + 3) / 4; i++) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
}
/* Room for `bytes` in the hart's stage, or NULL. */
static void *stage_take(dp_ctx_t *ctx, uint32_t bytes) {
  const unsigned words = (bytes + 3) / 4;
  if (ctx->stage_used + words > DP_STAGE_WORDS) return NULL;
  ctx->stage_used += words;
  return ctx->stage + ctx->stage_used - words;
}
/* An input activation: its staged copy, or itself. */
static const int8_t *stage_in(dp_ctx_t *ctx, int32_t off, uint32_t bytes) {
  int8_t *p = stage_take(ctx, bytes);
  if (!p) return ACT(ctx, off, int8_t);
  copy_words(p, ACT(ctx, off, int8_t), bytes);
  return p;
}
/* Where to write an output activation: the stage (flushed by stage_out_done), or in place. */
static int8_t *stage_out(dp_ctx_t *ctx, uint32_t bytes) { return stage_take(ctx, bytes); }
static int8_t *out_ptr(dp_ctx_t *ctx, int8_t *staged, int32_t off) { return staged ? staged : ACT(ctx, off, int8_t); }
static void stage_out_done(dp_ctx_t *ctx, int8_t *staged, int32_t off, uint32_t bytes) {
  if (staged) copy_words(ACT(ctx, off, int8_t), staged, bytes);
}

/* A tile for one command: through the resource manager when the SoC has several (or several harts). */
static uint32_t takes[PYARD_NTILES]; /* layers run on each tile, by every hart (the host reads them) */
static int tile_take(void) {
  const int tile = PYARD_NTILES > 1 || PYARD_NHARTS_ACTIVE > 1 ? pyard_rm_acquire(PYARD_WORK_GEMM) : 0;
  if (tile >= 0) __atomic_fetch_add(&takes[tile], 1u, __ATOMIC_RELAXED);
  return tile;
}
static void tile_give(int tile) {
  if (PYARD_NTILES > 1 || PYARD_NHARTS_ACTIVE > 1) pyard_rm_release((unsigned)tile);
}

/* int32 accumulators -> int8, per output channel (the last dimension), on the hart: onnxruntime's
 * float requantization (TFLite's fixed-point one runs on the tile, on_tile). */
static void requant(dp_ctx_t *ctx, const dp_layer_t *l, const int32_t *acc, unsigned n) {
  const int32_t *m = CACHED(ctx, l->mult, 4u * l->oc, int32_t);
  int8_t *staged = stage_out(ctx, n), *out = out_ptr(ctx, staged, l->out);
  const unsigned oc = (unsigned)l->oc;
  for (unsigned i = 0; i < n; i += oc) /* one pixel's channels a pass: no channel wrap test per element */
    for (unsigned ch = 0; ch < oc; ch++) {
      const int32_t a = acc[i + ch];
      out[i + ch] = clamp8(requant_float(a, m[ch], l->out_zp), l);
    }
  stage_out_done(ctx, staged, l->out, n);
}

/* The input with its padding filled with the zero point (the tile pads with 0; TFLite with the zero point). */
static const int8_t *padded(dp_ctx_t *ctx, const dp_layer_t *l) {
  if (l->pad_buf < 0) return ACT(ctx, l->in, int8_t);
  const int row = l->pw * l->c;
  const uint32_t bytes = (uint32_t)(l->ph * row), in_bytes = (uint32_t)(l->h * l->w * l->c);
  const int8_t *x = stage_in(ctx, l->in, in_bytes);
  int8_t *staged = stage_out(ctx, bytes), *p = out_ptr(ctx, staged, l->pad_buf); /* built in the stage */
  for (uint32_t i = 0; i < bytes; i++) p[i] = (int8_t)l->in_zp;
  for (int y = 0; y < l->h; y++)
    for (int i = 0; i < l->w * l->c; i++) p[(y + l->pt) * row + l->pl * l->c + i] = x[y * l->w * l->c + i];
  stage_out_done(ctx, staged, l->pad_buf, bytes);
  ctx->stage_used = 0; /* the tile reads the padded input from main memory */
  return ACT(ctx, l->pad_buf, int8_t);
}

/* The tile's part of a CONV_2D or FULLY_CONNECTED layer: the int32 accumulation (`run`), then, for
 * TFLite's fixed-point requantization, VEC REQUANT on the same tile (rows × oc int32 -> int8 at
 * l->out). onnxruntime's float requantization stays on the hart (requant). */
static int on_tile(dp_ctx_t *ctx, const dp_layer_t *l, int (*run)(unsigned, const void *), const void *cmd,
                   unsigned rows, bool dbl) {
  const pyard_requant_t rq = {.rows = rows, .cols = (size_t)l->oc, .acc = ACT(ctx, l->acc_buf, int32_t),
                              .mult = CONST(ctx, l->mult, int32_t), .shift = CONST(ctx, l->shift, int32_t),
                              .out = ACT(ctx, l->out, int8_t), .stride_acc = (size_t)l->oc,
                              .stride_out = (size_t)l->oc, .zero_point = l->out_zp, .act_min = l->act_min,
                              .act_max = l->act_max, .double_round = dbl};
  const uint64_t t0 = pyard_cycles();
  const int tile = tile_take();
  int err = tile < 0 ? PYARD_ENODEV : run((unsigned)tile, cmd);
  if (!err && !l->float_rq) err = pyard_tile_requant((unsigned)tile, &rq);
  if (tile >= 0) tile_give(tile);
  ctx->tile_time += pyard_cycles() - t0;
  if (!err && l->float_rq) requant(ctx, l, ACT(ctx, l->acc_buf, int32_t), rows * (unsigned)l->oc);
  return err;
}
static int run_conv(unsigned tile, const void *c) { return pyard_tile_conv2d(tile, c); }
static int run_gemm(unsigned tile, const void *g) { return pyard_tile_gemm(tile, g); }

static int conv(dp_ctx_t *ctx, const dp_layer_t *l) {
  const pyard_conv2d_t c = {.batch = 1, .in_ch = (unsigned)l->c, .in_h = (unsigned)l->ph, .in_w = (unsigned)l->pw,
                            .out_ch = (unsigned)l->oc, .k_h = (unsigned)l->kh, .k_w = (unsigned)l->kw,
                            .stride = (unsigned)l->sh, .pad = 0, .input = padded(ctx, l),
                            .weights = CONST(ctx, l->weights, int8_t), .bias = CONST(ctx, l->bias, int32_t),
                            .output = ACT(ctx, l->acc_buf, int32_t), .scale = PYARD_SCALE_ONE,
                            .act = PYARD_ACT_NONE, .full_out = true};
  return on_tile(ctx, l, run_conv, &c, (unsigned)(l->oh * l->ow), true);
}

static int fc(dp_ctx_t *ctx, const dp_layer_t *l) {
  const pyard_gemm_t g = {.M = 1, .K = (size_t)l->c, .N = (size_t)l->oc, .A = ACT(ctx, l->in, int8_t),
                          .B = CONST(ctx, l->weights, int8_t), .D = CONST(ctx, l->bias, int32_t),
                          .C = ACT(ctx, l->acc_buf, int32_t), .stride_a = (size_t)l->c, .stride_b = (size_t)l->oc,
                          .stride_d = (size_t)l->oc, .stride_c = (size_t)l->oc, .scale = PYARD_SCALE_ONE,
                          .act = PYARD_ACT_NONE, .bias = PYARD_BIAS_ROW, .full_c = true};
  return on_tile(ctx, l, run_gemm, &g, 1, false);
}

/* The taps of output pixel (oy, ox) inside the input map: rows ky0..ky1-1, columns kx0..kx1-1 of the
 * kernel, whose (0, 0) tap reads input (y0, x0). Taps in the padding are skipped: a convolution's
 * padding is the zero point (it adds nothing) and a pool counts only the taps in the map. */
typedef struct {
  int y0, x0, ky0, ky1, kx0, kx1;
} dp_window_t;
static dp_window_t window(const dp_layer_t *l, int oy, int ox) {
  dp_window_t t = {oy * l->sh - l->pt, ox * l->sw - l->pl, 0, l->kh, 0, l->kw};
  if (t.y0 < 0) t.ky0 = -t.y0;
  if (t.x0 < 0) t.kx0 = -t.x0;
  if (l->h - t.y0 < t.ky1) t.ky1 = l->h - t.y0;
  if (l->w - t.x0 < t.kx1) t.kx1 = l->w - t.x0;
  return t;
}

static int dwconv(dp_ctx_t *ctx, const dp_layer_t *l) { /* reference_integer_ops::DepthwiseConvPerChannel */
  const int8_t *w = CACHED(ctx, l->weights, (uint32_t)(l->kh * l->kw * l->c), int8_t);
  const int8_t *x = stage_in(ctx, l->in, (uint32_t)(l->h * l->w * l->c));
  const int32_t *b = CACHED(ctx, l->bias, 4u * l->c, int32_t), *m = CACHED(ctx, l->mult, 4u * l->c, int32_t);
  const int32_t *s = CACHED(ctx, l->shift, 4u * l->c, int32_t);
  const uint32_t n = (uint32_t)(l->oh * l->ow * l->c);
  int8_t *staged = stage_out(ctx, n), *out = out_ptr(ctx, staged, l->out);
  const int c = l->c;
  for (int oy = 0; oy < l->oh; oy++)
    for (int ox = 0; ox < l->ow; ox++) {
      const dp_window_t t = window(l, oy, ox);
      int8_t *o = out + (oy * l->ow + ox) * c;
      for (int ch = 0; ch < c; ch++) {
        int32_t acc = b[ch];
        for (int ky = t.ky0; ky < t.ky1; ky++) {
          const int8_t *xp = x + ((t.y0 + ky) * l->w + t.x0 + t.kx0) * c + ch;
          const int8_t *wp = w + (ky * l->kw + t.kx0) * c + ch;
          for (int kx = t.kx0; kx < t.kx1; kx++, xp += c, wp += c) acc += (*xp - l->in_zp) * *wp;
        }
        o[ch] = clamp8(mbqm_double(acc, m[ch], s[ch]) + l->out_zp, l);
      }
    }
  stage_out_done(ctx, staged, l->out, n);
  return 0;
}

static int pool(dp_ctx_t *ctx, const dp_layer_t *l) { /* MAX_POOL_2D, AVERAGE_POOL_2D (only taps in the map count) */
  const int8_t *x = stage_in(ctx, l->in, (uint32_t)(l->h * l->w * l->c));
  const uint32_t n = (uint32_t)(l->oh * l->ow * l->c);
  int8_t *staged = stage_out(ctx, n), *out = out_ptr(ctx, staged, l->out);
  const int c = l->c;
  const bool is_max = l->op == DP_MAXPOOL;
  for (int oy = 0; oy < l->oh; oy++)
    for (int ox = 0; ox < l->ow; ox++) {
      const dp_window_t t = window(l, oy, ox);
      const int32_t count = (t.ky1 - t.ky0) * (t.kx1 - t.kx0);
      int8_t *o = out + (oy * l->ow + ox) * c;
      for (int ch = 0; ch < c; ch++) {
        int32_t acc = is_max ? -128 : 0;
        for (int ky = t.ky0; ky < t.ky1; ky++) {
          const int8_t *xp = x + ((t.y0 + ky) * l->w + t.x0 + t.kx0) * c + ch;
          for (int kx = t.kx0; kx < t.kx1; kx++, xp += c) acc = is_max ? (*xp > acc ? *xp : acc) : acc + *xp;
        }
        if (!is_max) acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
        o[ch] = clamp8(acc, l);
      }
    }
  stage_out_done(ctx, staged, l->out, n);
  return 0;
}

static int add(dp_ctx_t *ctx, const dp_layer_t *l) { /* reference_integer_ops::Add, left shift 20 */
  const uint32_t n = (uint32_t)(l->oh * l->ow * l->oc);
  const int8_t *a = stage_in(ctx, l->in, n), *b = stage_in(ctx, l->in2, n);
  int8_t *staged = stage_out(ctx, n), *out = out_ptr(ctx, staged, l->out);
  const int32_t *e = l->extra;
  for (uint32_t i = 0; i < n; i++) {
    const int32_t sa = mbqm_double((a[i] - l->in_zp) * (1 << 20), e[0], e[1]);
    const int32_t sb = mbqm_double((b[i] - l->in2_zp) * (1 << 20), e[2], e[3]);
    out[i] = clamp8(mbqm_double(sa + sb, e[4], e[5]) + l->out_zp, l);
  }
  stage_out_done(ctx, staged, l->out, n);
  return 0;
}

static int softmax(dp_ctx_t *ctx, const dp_layer_t *l) { /* reference_ops::Softmax, int8 -> int8 */
  const int8_t *x = ACT(ctx, l->in, int8_t);
  int8_t *out = ACT(ctx, l->out, int8_t);
  int32_t *exps = ACT(ctx, l->acc_buf, int32_t);
  const int n = l->oc;
  for (int r = 0; r < l->oh * l->ow; r++, x += n, out += n) {
    int32_t top = -128, sum = 0;
    for (int i = 0; i < n; i++) top = x[i] > top ? x[i] : top;
    for (int i = 0; i < n; i++) {
      const int32_t diff = x[i] - top;
      exps[i] = diff >= l->extra[2] ? exp_on_negative_values(mbqm_double(diff, l->extra[0], l->extra[1])) : 0;
      if (diff >= l->extra[2]) sum += rdbpot(exps[i], 12);
    }
    int bits;
    const int32_t scale = reciprocal(sum, &bits);
    for (int i = 0; i < n; i++) {
      const int32_t v = x[i] - top >= l->extra[2] ? rdbpot(srdhm(scale, exps[i]), bits + 31 - 8) - 128 : -128;
      out[i] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
  }
  return 0;
}

static int run_layer(dp_ctx_t *ctx, const dp_layer_t *record) {
  const dp_layer_t layer = *record, *l = &layer;
  ctx->cache_used = ctx->stage_used = 0;
  switch (l->op) {
  case DP_CONV: return conv(ctx, l);
  case DP_DWCONV: return dwconv(ctx, l);
  case DP_FC: return fc(ctx, l);
  case DP_MAXPOOL:
  case DP_AVGPOOL: return pool(ctx, l);
  case DP_ADD: return add(ctx, l);
  case DP_SOFTMAX: return softmax(ctx, l);
  default: return PYARD_EINVAL;
  }
}

int hart_main(unsigned hart, unsigned nharts) {
  dp_header_t *hd = (dp_header_t *)__mem_free_start;
  if (hart == 0) {
    int err = hd->magic == DP_MAGIC && pyard_alloc(hd->total_bytes, 64) == hd ? 0 : PYARD_EINVAL;
    for (unsigned t = 0; t < PYARD_NTILES && !err; t++) err = pyard_tile_init(t);
    hd->status = (uint32_t)err;
    if (err) pyard_perror("deploy: init", err);
  }
  pyard_barrier();
  if (hd->status) return hart == 0 ? 1 : 0;
  dp_ctx_t ctx = {hd, (char *)hd + hd->arenas + hart * hd->arena_bytes, const_cache[hart], stage[hart], 0, 0, 0};
  const dp_layer_t *layers = CONST(&ctx, hd->layers, dp_layer_t);
  uint32_t *layer_cycles = (uint32_t *)((char *)hd + hd->layer_cycles);
  uint32_t *tile_cycles = (uint32_t *)((char *)hd + hd->tile_cycles);
  int failed = 0;
  for (unsigned n = hart; n < hd->n_infer && !failed; n += nharts) {
    memcpy(ctx.arena + hd->in_off, (const char *)hd + hd->inputs + n * hd->in_bytes, hd->in_bytes);
    const uint64_t t0 = pyard_cycles();
    uint64_t t = t0;
    for (unsigned i = 0; i < hd->n_layers && !failed; i++) {
      ctx.tile_time = 0;
      const int err = run_layer(&ctx, &layers[i]);
      if (err) {
        printf("deploy: layer %u: ", i);
        pyard_perror("driver", err);
        failed = 1;
      }
      const uint64_t now = pyard_cycles();
      if (hart == 0) { /* hart 0's inferences only */
        layer_cycles[i] += (uint32_t)(now - t);
        tile_cycles[i] += (uint32_t)ctx.tile_time;
      }
      t = now;
    }
    ((uint32_t *)((char *)hd + hd->infer_cycles))[n] = (uint32_t)(t - t0);
    memcpy((char *)hd + hd->outputs + n * hd->out_bytes, ctx.arena + hd->out_off, hd->out_bytes);
  }
  if (failed) hd->status = 2;
  pyard_barrier();
  if (hart == 0) memcpy((char *)hd + hd->tile_takes, takes, sizeof takes);
  if (hart == 0) printf("deploy: %u inferences on %u harts, %u tiles: %s\n", (unsigned)hd->n_infer, nharts,
                        (unsigned)PYARD_NTILES, hd->status ? "FAILED" : "done");
  return hart == 0 && hd->status ? 1 : 0;
}

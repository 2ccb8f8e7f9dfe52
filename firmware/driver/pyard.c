/* Driver for the pyard accelerator tile: command push, completion, errors, GEMM and Conv2D. */
#include "pyard.h"

/* Per tile: the last error it reported. Per hart: the tile it drove last and what a driver-side
 * (PYARD_E*) error was about. Only the hart that owns a tile writes its entry, so no atomics. */
static pyard_error_t last_error[PYARD_NTILES];
static unsigned last_tile[PYARD_NHARTS];
static char detail[PYARD_NHARTS][96];

static char *hart_detail(void) { return detail[pyard_hart_id()]; }

/* Checks `tile`: 0 or PYARD_EINVAL. Nothing is stored when it is valid: every command push runs this,
 * and a tile number known at compile time (tile 0 of the single-tile calls) folds it away. The hart's
 * last tile is recorded where an error is (take_error), which is all pyard_perror needs. */
static inline int use_tile(unsigned tile) {
  if (tile < PYARD_NTILES) return 0;
  snprintf(hart_detail(), sizeof detail[0], "tile = %u is invalid: allowed 0 to %u", tile, PYARD_NTILES - 1);
  return PYARD_EINVAL;
}

pyard_error_t pyard_tile_last_error(unsigned tile) {
  return tile < PYARD_NTILES ? last_error[tile] : (pyard_error_t){0, 0, 0};
}
pyard_error_t pyard_last_error(void) { return last_error[0]; }

const char *pyard_error_name(unsigned code) {
  static const char *const names[] = {"OK",         "BAD_OPCODE", "ZERO_DIM", "TOO_LARGE",  "SP_RANGE",
                                      "ACC_RANGE",  "MISALIGNED", "AXI_SLVERR", "AXI_DECERR", "BAD_DEPS",
                                      "QUEUE_FULL", "BAD_SHAPE",  "DEADLOCK",   "BAD_FIELD"};
  return code < sizeof names / sizeof names[0] ? names[code] : "UNKNOWN";
}

const char *pyard_unit_name(unsigned unit) {
  static const char *const names[] = {"no", "decode", "load", "exec", "store", "queue"};
  return unit < sizeof names / sizeof names[0] ? names[unit] : "unknown";
}

void pyard_perror(const char *what, int err) {
  const pyard_error_t e = last_error[last_tile[pyard_hart_id()]];
  if (err == 0) {
    printf("%s: ok\n", what);
  } else if (err <= PYARD_EINVAL && err >= PYARD_ENODEV) {
    printf("%s: %s\n", what, hart_detail());
  } else {
    printf("%s: %s unit reported %s (0x%02x) on command #%u\n", what, pyard_unit_name(e.unit),
           pyard_error_name(e.code), e.code, e.seq);
  }
}

int pyard_tile_init(unsigned tile) {
  int err = use_tile(tile);
  if (err) return err;
  uint32_t id = pyard_tile_read(tile, PYARD_REG_ID);
  if (id != PYARD_ID_VALUE) {
    snprintf(hart_detail(), sizeof detail[0], "no accelerator at %p (ID reads 0x%08x)",
             (void *)PYARD_ACCEL_TILE_BASE(tile), (unsigned)id);
    return PYARD_ENODEV;
  }
  pyard_tile_write(tile, PYARD_REG_IRQ_ENABLE, 0);
  pyard_tile_write(tile, PYARD_REG_CONTROL,
                   PYARD_CONTROL_CLEAR_DONE | PYARD_CONTROL_CLEAR_ERROR | PYARD_CONTROL_ZERO_COUNTERS);
  last_error[tile] = (pyard_error_t){0, 0, 0};
  return 0;
}

/* Records the error in `status`, clears it (which discards queued commands and releases units
 * waiting for tokens) and waits until the units still running have finished. */
static int take_error(unsigned tile, uint32_t status) {
  pyard_error_t *e = &last_error[tile];
  last_tile[pyard_hart_id()] = tile;
  e->unit = PYARD_STATUS_UNIT(status);
  e->code = PYARD_STATUS_CODE(status);
  e->seq = pyard_tile_read(tile, PYARD_REG_ERROR_SEQ);
  pyard_tile_write(tile, PYARD_REG_CONTROL, PYARD_CONTROL_CLEAR_ERROR);
  while (pyard_tile_read(tile, PYARD_REG_STATUS) & PYARD_STATUS_BUSY) {
  }
  return -(int)e->code;
}

/* Inlined into each caller, so that pushes to tile 0 (the FPTT firmware's command stream) address
 * its registers as constants, as before there were several tiles. */
static inline __attribute__((always_inline)) int push_on(unsigned tile, const uint32_t *words, unsigned n) {
  int err = use_tile(tile);
  if (err) return err;
  uint32_t status;
  while (PYARD_STATUS_FREE(status = pyard_tile_read(tile, PYARD_REG_STATUS)) == 0 || (status & PYARD_STATUS_ERROR)) {
    if (status & PYARD_STATUS_ERROR) return take_error(tile, status);
  }
  for (unsigned k = 0; k < n && k < 16; k++) pyard_tile_write(tile, PYARD_REG_CMD(k), words[k]);
  pyard_tile_write(tile, PYARD_REG_CMD_PUSH, 1);
  return 0;
}

int pyard_tile_push(unsigned tile, const uint32_t *words, unsigned n) { return push_on(tile, words, n); }

int pyard_tile_fence(unsigned tile) {
  const uint32_t fence = PYARD_OP_FENCE;
  return push_on(tile, &fence, 1);
}

int pyard_tile_wait(unsigned tile) {
  int err = use_tile(tile);
  if (err) return err;
  uint32_t status;
  do {
    status = pyard_tile_read(tile, PYARD_REG_STATUS);
    if (status & PYARD_STATUS_ERROR) return take_error(tile, status);
  } while (status & PYARD_STATUS_BUSY);
  return 0;
}

/* Per tile: its interrupt was taken. Per hart: the tile it sleeps on, plus one (0: none). */
static volatile uint32_t irq_seen[PYARD_NTILES];
static volatile uint32_t irq_waiting[PYARD_NHARTS];

/* The tiles' lines are ORed into one level interrupt: a hart masks only the tile it waits on (the
 * others' waiters mask theirs), so no hart can lower a line another hart is about to sleep on. */
static void on_accel_irq(void) {
  const uint32_t waiting = irq_waiting[pyard_hart_id()];
  if (waiting == 0) return;
  pyard_tile_write(waiting - 1, PYARD_REG_IRQ_ENABLE, 0);
  irq_seen[waiting - 1] = 1;
}

int pyard_tile_wait_irq(unsigned tile) {
  int err = use_tile(tile);
  if (err) return err;
  irq_seen[tile] = 0;
  irq_waiting[pyard_hart_id()] = tile + 1;
  /* Every hart stores the same pointer: the store is atomic (one word), the value never differs. */
  __atomic_store_n(&pyard_external_irq_hook, on_accel_irq, __ATOMIC_RELEASE);
  pyard_tile_write(tile, PYARD_REG_IRQ_ENABLE, 3);
  __asm__ volatile("csrs mie, %0" ::"r"(1u << 11));
  __asm__ volatile("csrsi mstatus, 8");
  while (!irq_seen[tile]) __asm__ volatile("wfi");
  __asm__ volatile("csrci mstatus, 8");
  __asm__ volatile("csrc mie, %0" ::"r"(1u << 11));
  irq_waiting[pyard_hart_id()] = 0;
  return pyard_tile_wait(tile);
}

int pyard_init(void) { return pyard_tile_init(0); }
int pyard_push(const uint32_t *words, unsigned n) { return push_on(0, words, n); }
int pyard_fence(void) {
  const uint32_t fence = PYARD_OP_FENCE;
  return push_on(0, &fence, 1);
}
int pyard_wait(void) { return pyard_tile_wait(0); }
int pyard_wait_irq(void) { return pyard_tile_wait_irq(0); }

/* Checks that `rows` rows of `cols` elements, `stride` elements apart, lie in main memory. */
static int in_main_memory(const char *name, const void *p, size_t rows, size_t cols, size_t stride, size_t esize) {
  uintptr_t base = (uintptr_t)p;
  uint64_t last = (uint64_t)base + ((uint64_t)(rows ? rows - 1 : 0) * stride + cols) * esize;
  if (base < PYARD_MEM_BASE || last > (uint64_t)PYARD_MEM_BASE + PYARD_MEM_SIZE) {
    snprintf(hart_detail(), sizeof detail[0], "%s at %p is not in main memory [0x%08x, +0x%x): the DMA cannot reach it", name,
             p, (unsigned)PYARD_MEM_BASE, (unsigned)PYARD_MEM_SIZE);
    return PYARD_ENOTMEM;
  }
  return 0;
}

static int invalid(const char *field, unsigned value, const char *allowed) {
  snprintf(hart_detail(), sizeof detail[0], "%s = %u is invalid: allowed %s", field, value, allowed);
  return PYARD_EINVAL;
}

static int check_gemm(const pyard_gemm_t *g) {
  if (g->M > 65535) return invalid("M", g->M, "1 to 65535");
  if (g->K > 65535) return invalid("K", g->K, "1 to 65535");
  if (g->N > 65535) return invalid("N", g->N, "1 to 65535");
  if ((unsigned)g->act > 3) return invalid("act", (unsigned)g->act, "PYARD_ACT_NONE or PYARD_ACT_RELU");
  if ((unsigned)g->bias > 3) return invalid("bias", (unsigned)g->bias, "PYARD_BIAS_NONE, _FULL or _ROW");
  const size_t c_bytes = g->full_c ? PYARD_ACC_BYTES : PYARD_IN_BYTES;
  int err = g->transpose_a ? in_main_memory("A", g->A, g->K, g->M, g->stride_a, PYARD_IN_BYTES)
                           : in_main_memory("A", g->A, g->M, g->K, g->stride_a, PYARD_IN_BYTES);
  if (!err && g->b_in_sp && g->transpose_b) err = invalid("transpose_b", 1, "false with b_in_sp");
  if (!err && !g->b_in_sp) { /* a resident B's rows are checked by the tile (SP_RANGE) */
    err = g->transpose_b ? in_main_memory("B", g->B, g->N, g->K, g->stride_b, PYARD_IN_BYTES)
                         : in_main_memory("B", g->B, g->K, g->N, g->stride_b, PYARD_IN_BYTES);
  }
  if (!err) err = in_main_memory("C", g->C, g->M, g->N, g->stride_c, c_bytes);
  if (!err && g->bias && !g->accumulate) {
    err = in_main_memory("D", g->D, g->bias == PYARD_BIAS_ROW ? 1 : g->M, g->N, g->stride_d, PYARD_ACC_BYTES);
  }
  return err;
}

int pyard_tile_gemm_push(unsigned tile, const pyard_gemm_t *g) {
  int err = use_tile(tile);
  if (!err) err = check_gemm(g);
  if (err) return err;
  const size_t c_bytes = g->full_c ? PYARD_ACC_BYTES : PYARD_IN_BYTES;
  const uint32_t flags = (uint32_t)g->transpose_a << 12 | (uint32_t)g->transpose_b << 13 |
                         (uint32_t)(g->accumulate ? 0 : g->bias) << 14 | (uint32_t)g->accumulate << 16 |
                         (uint32_t)g->act << 17 | (uint32_t)g->full_c << 19 | (uint32_t)g->b_in_sp << 21;
  const uint32_t words[13] = {
      PYARD_OP_GEMM | flags,
      (uint32_t)g->M,
      (uint32_t)g->K,
      (uint32_t)g->N,
      (uint32_t)(uintptr_t)g->A,
      (uint32_t)(g->stride_a * PYARD_IN_BYTES),
      g->b_in_sp ? g->b_row : (uint32_t)(uintptr_t)g->B,
      (uint32_t)(g->b_in_sp ? g->stride_b : g->stride_b * PYARD_IN_BYTES),
      (uint32_t)(uintptr_t)g->C,
      (uint32_t)(g->stride_c * c_bytes),
      (uint32_t)(uintptr_t)g->D,
      (uint32_t)(g->bias == PYARD_BIAS_ROW ? 0 : g->stride_d * PYARD_ACC_BYTES),
      g->scale,
  };
  return pyard_tile_push(tile, words, 13);
}

/* Ends a blocking operation: a fence, then the wait. */
static int run_blocking(unsigned tile, int err) {
  if (!err) err = pyard_tile_fence(tile);
  return err ? err : pyard_tile_wait(tile);
}

int pyard_tile_gemm(unsigned tile, const pyard_gemm_t *g) {
  int err = use_tile(tile);
  if (err) return err;
  /* `done` is cleared so that it (and the interrupt) mean this batch. */
  pyard_tile_write(tile, PYARD_REG_CONTROL, PYARD_CONTROL_CLEAR_DONE);
  return run_blocking(tile, pyard_tile_gemm_push(tile, g));
}

int pyard_gemm_push(const pyard_gemm_t *g) { return pyard_tile_gemm_push(0, g); }
int pyard_gemm(const pyard_gemm_t *g) { return pyard_tile_gemm(0, g); }

int pyard_matmul(size_t M, size_t K, size_t N, const void *A, const void *B, const void *D, void *C, size_t stride_a,
                 size_t stride_b, size_t stride_d, size_t stride_c, uint32_t scale, int act, int bias, bool accumulate,
                 bool transpose_a, bool transpose_b, bool full_c) {
  const pyard_gemm_t g = {M, K, N, A, B, D, C, stride_a, stride_b, stride_d, stride_c,
                          scale, act, bias, accumulate, transpose_a, transpose_b, full_c, false, 0};
  return pyard_gemm(&g);
}

unsigned pyard_conv2d_out_dim(unsigned in, unsigned k, unsigned stride, unsigned pad) {
  if (stride == 0 || in + 2 * pad < k) return 0;
  return (in + 2 * pad - k) / stride + 1;
}

static int check_conv2d(const pyard_conv2d_t *c) {
  const struct {
    const char *name;
    unsigned value, max;
  } fields[] = {
      {"batch", c->batch, 65535}, {"in_ch", c->in_ch, 65535}, {"in_h", c->in_h, 65535}, {"in_w", c->in_w, 65535},
      {"out_ch", c->out_ch, 65535}, {"k_h", c->k_h, 255},     {"k_w", c->k_w, 255},     {"stride", c->stride, 255},
      {"pad", c->pad, 255},         {"act", (unsigned)c->act, 3},
  };
  for (unsigned i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    if (fields[i].value > fields[i].max) {
      snprintf(hart_detail(), sizeof detail[0], "%s = %u is invalid: allowed 0 to %u", fields[i].name, fields[i].value,
               fields[i].max);
      return PYARD_EINVAL;
    }
  }
  const unsigned oh = pyard_conv2d_out_dim(c->in_h, c->k_h, c->stride, c->pad);
  const unsigned ow = pyard_conv2d_out_dim(c->in_w, c->k_w, c->stride, c->pad);
  const size_t out_bytes = c->full_out ? PYARD_ACC_BYTES : PYARD_IN_BYTES;
  int err = in_main_memory("input", c->input, (size_t)c->batch * c->in_h * c->in_w, c->in_ch, c->in_ch, PYARD_IN_BYTES);
  if (!err && !c->weights_in_sp) { /* resident weights' rows are checked by the tile (SP_RANGE) */
    err = in_main_memory("weights", c->weights, (size_t)c->k_h * c->k_w * c->in_ch, c->out_ch, c->out_ch,
                         PYARD_IN_BYTES);
  }
  if (!err) err = in_main_memory("output", c->output, (size_t)c->batch * oh * ow, c->out_ch, c->out_ch, out_bytes);
  if (!err && c->bias) err = in_main_memory("bias", c->bias, 1, c->out_ch, c->out_ch, PYARD_ACC_BYTES);
  return err;
}

int pyard_tile_conv2d(unsigned tile, const pyard_conv2d_t *c) {
  int err = use_tile(tile);
  if (!err) err = check_conv2d(c);
  if (err) return err;
  const uint32_t flags = (uint32_t)(c->bias ? PYARD_BIAS_ROW : 0) << 14 | (uint32_t)c->act << 17 |
                         (uint32_t)c->full_out << 19 | (uint32_t)c->weights_in_sp << 21;
  const uint32_t words[11] = {
      PYARD_OP_CONV2D | flags,
      c->batch | c->in_ch << 16,
      c->in_h | c->in_w << 16,
      c->out_ch | c->k_h << 16 | c->k_w << 24,
      c->stride | c->pad << 8,
      (uint32_t)(uintptr_t)c->input,
      c->weights_in_sp ? c->w_row : (uint32_t)(uintptr_t)c->weights,
      (uint32_t)(uintptr_t)c->output,
      (uint32_t)(uintptr_t)c->bias,
      c->scale,
      c->weights_in_sp ? c->w_stride : 0,
  };
  pyard_tile_write(tile, PYARD_REG_CONTROL, PYARD_CONTROL_CLEAR_DONE);
  return run_blocking(tile, pyard_tile_push(tile, words, c->weights_in_sp ? 11 : 10));
}

int pyard_conv2d(const pyard_conv2d_t *c) { return pyard_tile_conv2d(0, c); }

#if PYARD_DTYPE_INT8 && PYARD_ACC_INT32
/* Rows of each local memory the requantization may use (a whole number per bank, as the tile
 * counts them; docs/tile.md). */
#define RQ_ACC_ROWS (PYARD_ACC_KIB * 1024u / (PYARD_COLS * 4u) / PYARD_ACC_BANKS * PYARD_ACC_BANKS)
#define RQ_DIM (PYARD_ROWS > PYARD_COLS ? PYARD_ROWS : PYARD_COLS)
#define RQ_SP_ROWS (PYARD_SP_KIB * 1024u / RQ_DIM / PYARD_SP_BANKS * PYARD_SP_BANKS)
#define RQ_MIN(a, b) ((a) < (b) ? (a) : (b))

static int check_requant(const pyard_requant_t *r) {
  if (r->rows == 0 || r->rows > 0x7fffffffu) return invalid("rows", (unsigned)r->rows, "1 to 2^31 - 1");
  if (r->cols == 0 || r->cols > 65535) return invalid("cols", (unsigned)r->cols, "1 to 65535");
  if (r->zero_point < -128 || r->zero_point > 127) return invalid("zero_point", (unsigned)r->zero_point, "-128 to 127");
  if (r->act_min < -128 || r->act_min > r->act_max || r->act_max > 127) {
    return invalid("act_min", (unsigned)r->act_min, "-128 <= act_min <= act_max <= 127");
  }
  int err = in_main_memory("acc", r->acc, r->rows, r->cols, r->stride_acc, 4);
  if (!err) err = in_main_memory("mult", r->mult, 1, r->cols, r->cols, 4);
  if (!err) err = in_main_memory("shift", r->shift, 1, r->cols, r->cols, 4);
  if (!err) err = in_main_memory("out", r->out, r->rows, r->cols, r->stride_out, 1);
  return err;
}

/* LOAD rows × elems int32 from `src` (row stride in bytes) into accumulator rows from `first`. */
static int load_acc(unsigned tile, const int32_t *src, uint32_t stride, uint32_t rows, uint32_t elems, uint32_t first) {
  const uint32_t words[5] = {PYARD_OP_LOAD | 1u << 12, (uint32_t)(uintptr_t)src, stride, rows | elems << 16, first};
  return pyard_tile_push(tile, words, 5);
}

/* One pass over `n` rows from r0 of the column blocks g0 … g0 + nb − 1: every block's LOAD, one
 * FENCE, every block's VEC, one FENCE, every block's STORE, so the DMA overlaps the blocks. Block
 * j's parameters are accumulator rows 2j, 2j + 1 (loaded with the pass's first rows), its int32
 * rows follow all parameters (2·nb + j·n), its int8 rows are scratchpad rows j·n. The next pass's
 * LOADs overwrite only rows whose VECs have finished (before the second FENCE), and its VECs wait
 * for these STOREs at its first FENCE. */
static int requant_pass(unsigned tile, const pyard_requant_t *r, size_t g0, uint32_t nb, size_t r0, uint32_t n,
                        uint32_t scalar) {
  const uint32_t fence = PYARD_OP_FENCE;
  int err = 0;
  for (uint32_t j = 0; j < nb && !err; j++) {
    const size_t c0 = (g0 + j) * PYARD_COLS;
    const uint32_t w = (uint32_t)RQ_MIN(r->cols - c0, (size_t)PYARD_COLS);
    if (r0 == 0) err = load_acc(tile, r->mult + c0, 4, 1, w, 2 * j);
    if (!err && r0 == 0) err = load_acc(tile, r->shift + c0, 4, 1, w, 2 * j + 1);
    if (!err) err = load_acc(tile, r->acc + r0 * r->stride_acc + c0, (uint32_t)(r->stride_acc * 4), n, w, 2 * nb + j * n);
  }
  if (!err) err = pyard_tile_push(tile, &fence, 1);
  for (uint32_t j = 0; j < nb && !err; j++) {
    const uint32_t w = (uint32_t)RQ_MIN(r->cols - (g0 + j) * PYARD_COLS, (size_t)PYARD_COLS);
    const uint32_t vec[5] = {PYARD_OP_VEC | PYARD_VEC_A_ACC | PYARD_VEC_B_ACC | PYARD_VEC_OP(PYARD_VEC_REQUANT), scalar,
                             n | w << 16, (2 * nb + j * n) | (2 * j) << 16, j * n};
    err = pyard_tile_push(tile, vec, 5);
  }
  if (!err) err = pyard_tile_push(tile, &fence, 1);
  for (uint32_t j = 0; j < nb && !err; j++) {
    const size_t c0 = (g0 + j) * PYARD_COLS;
    const uint32_t w = (uint32_t)RQ_MIN(r->cols - c0, (size_t)PYARD_COLS);
    const uint32_t store[6] = {PYARD_OP_STORE | 1u << 12, (uint32_t)(uintptr_t)(r->out + r0 * r->stride_out + c0),
                               (uint32_t)r->stride_out, n | w << 16, j * n, 0};
    err = pyard_tile_push(tile, store, 6);
  }
  return err;
}

int pyard_tile_requant_push(unsigned tile, const pyard_requant_t *r) {
  int err = use_tile(tile);
  if (!err) err = check_requant(r);
  const uint32_t scalar = (uint32_t)(r->zero_point & 0xff) | (uint32_t)(r->act_min & 0xff) << 8 |
                          (uint32_t)(r->act_max & 0xff) << 16 | (uint32_t)r->double_round << 24;
  const size_t blocks = (r->cols + PYARD_COLS - 1) / PYARD_COLS;
  /* Blocks per group: each needs at least its two parameter rows and one row of results. */
  const size_t group = RQ_MIN(blocks, (size_t)RQ_MIN(RQ_ACC_ROWS / 3u, RQ_SP_ROWS));
  for (size_t g0 = 0; g0 < blocks && !err; g0 += group) {
    const uint32_t nb = (uint32_t)RQ_MIN(group, blocks - g0);
    const size_t per = RQ_MIN(RQ_MIN((size_t)(RQ_ACC_ROWS / nb - 2), (size_t)(RQ_SP_ROWS / nb)), (size_t)65535);
    for (size_t r0 = 0; r0 < r->rows && !err; r0 += per) {
      err = requant_pass(tile, r, g0, nb, r0, (uint32_t)RQ_MIN(per, r->rows - r0), scalar);
    }
  }
  return err;
}

int pyard_tile_requant(unsigned tile, const pyard_requant_t *r) {
  int err = use_tile(tile);
  if (err) return err;
  pyard_tile_write(tile, PYARD_REG_CONTROL, PYARD_CONTROL_CLEAR_DONE);
  return run_blocking(tile, pyard_tile_requant_push(tile, r));
}
#endif

pyard_counters_t pyard_read_counters(void) { return pyard_tile_read_counters(0); }

pyard_counters_t pyard_tile_read_counters(unsigned tile) {
  pyard_counters_t c = {0};
  if (use_tile(tile)) return c;
  uint32_t hi, lo;
  do {  // MACS is 64 bits read as two words: retry if the high word moved
    hi = pyard_tile_read(tile, PYARD_REG_MACS_HI);
    lo = pyard_tile_read(tile, PYARD_REG_MACS_LO);
  } while (hi != pyard_tile_read(tile, PYARD_REG_MACS_HI));
  c.macs = (uint64_t)hi << 32 | lo;
  c.cycles_busy = pyard_tile_read(tile, PYARD_REG_CYCLES_BUSY);
  c.dma_rd_bytes = pyard_tile_read(tile, PYARD_REG_DMA_RD_BYTES);
  c.dma_wr_bytes = pyard_tile_read(tile, PYARD_REG_DMA_WR_BYTES);
  c.stall_exec_on_load = pyard_tile_read(tile, PYARD_REG_STALL_EXEC_ON_LOAD);
  c.stall_exec_on_store = pyard_tile_read(tile, PYARD_REG_STALL_EXEC_ON_STORE);
  c.stall_dma_read = pyard_tile_read(tile, PYARD_REG_STALL_DMA_READ);
  c.stall_dma_write = pyard_tile_read(tile, PYARD_REG_STALL_DMA_WRITE);
  c.stall_queue = pyard_tile_read(tile, PYARD_REG_STALL_QUEUE);
  return c;
}

void pyard_print_counters(const pyard_counters_t *c) {
  printf("accelerator: busy %u cycles, %llu MACs, DMA read %u B, written %u B\n", (unsigned)c->cycles_busy,
         (unsigned long long)c->macs, (unsigned)c->dma_rd_bytes, (unsigned)c->dma_wr_bytes);
  printf("stalls: exec on load %u, exec on store %u, DMA read %u, DMA write %u, queue %u\n",
         (unsigned)c->stall_exec_on_load, (unsigned)c->stall_exec_on_store, (unsigned)c->stall_dma_read,
         (unsigned)c->stall_dma_write, (unsigned)c->stall_queue);
}

/* A model split into segments, run as a pipeline: one hart and one tile per stage (the multi-TPU
 * paper's segmentation and pipelining on pyard; docs/segment.md).
 *
 * The plan comes from a generated header, segment_plan.h (segment/firmware.py): the layer table
 * (seg_layers: fc GEMMs or 3x3 CONV2Ds, int8 weights at seg_w + w_off, the read-out shift) and a
 * list of runs (seg_runs). A run has 1 to 4 stages; stage s runs layers [bounds[s], bounds[s+1])
 * on hart s and tile s. A layer with res_row >= 0 has its weights LOADed into tile s's scratchpad
 * once, before the run's inferences (resident: GEMM and CONV2D flag [21]); the others are read from main
 * memory by every inference (streamed). Runs with `check` read seg_in and write seg_out (the batch
 * the host compares with the NumPy reference); the others (profiling runs of one segment) read and
 * write scratch buffers: the cycles of an int8 layer do not depend on the data.
 *
 * Between stages: a ring of SEG_DEPTH activation slots in main memory (the tiles read and write
 * them by DMA) per queue, with two counters in the data RAM, produced and consumed, advanced with
 * atomic adds (release) and read with acquire loads: one producer and one consumer per queue.
 *
 * Prints per run "seg run R cycles C batch B" and per stage "seg run R stage S layers A B busy X
 * wait Y load L rd D" (cycles in layer calls, cycles waiting on the queues, cycles loading the
 * resident weights, DMA bytes read during the inferences). */
#include "pyard.h"
#include "segment_plan.h"

#if !PYARD_DTYPE_INT8 || !PYARD_ACC_INT32
#error "segment.c is written for int8 tiles with int32 accumulators"
#endif
#define SEG_DEPTH 2

PYARD_MEM int8_t seg_w[SEG_W_BYTES];
PYARD_MEM int8_t seg_in[SEG_BATCH][SEG_IN_BYTES];
PYARD_MEM int8_t seg_out[SEG_BATCH][SEG_OUT_BYTES];
PYARD_MEM int8_t seg_scratch_in[SEG_ACT_MAX], seg_scratch_out[SEG_ACT_MAX];
PYARD_MEM int8_t seg_tmp[SEG_MAX_STAGES][2][SEG_ACT_MAX];
PYARD_MEM int8_t seg_q[SEG_MAX_STAGES][SEG_DEPTH][SEG_ACT_MAX];

volatile uint32_t q_produced[SEG_MAX_STAGES], q_consumed[SEG_MAX_STAGES];
volatile uint32_t stage_busy[SEG_MAX_STAGES], stage_wait[SEG_MAX_STAGES], stage_load[SEG_MAX_STAGES];
volatile uint32_t stage_rd[SEG_MAX_STAGES];
volatile int32_t seg_err[SEG_MAX_STAGES];
volatile uint32_t seg_abort; /* a stage failed: the others stop waiting on the queues */

/* K of a layer's GEMM, the rows of its B: a convolution's HWIO weights are its im2col GEMM's
 * (kernel² · C_in) × C_out B. */
static unsigned b_rows(const seg_layer_t *L) { return L->conv ? (unsigned)L->kernel * L->kernel * L->k : L->k; }

/* Puts every resident layer of [a, b) into the tile's scratchpad: per N tile one LOAD of K rows. */
static int load_resident(unsigned tile, const seg_run_t *r, unsigned a, unsigned b) {
  int err = 0;
  for (unsigned l = a; l < b && !err; l++) {
    const seg_layer_t *L = &seg_layers[l];
    if (r->res_row[l] < 0) continue;
    const unsigned k = b_rows(L);
    for (unsigned n0 = 0, j = 0; n0 < L->n && !err; n0 += PYARD_COLS, j++) {
      const unsigned cols = L->n - n0 < PYARD_COLS ? L->n - n0 : PYARD_COLS;
      const uint32_t words[5] = {PYARD_OP_LOAD, (uint32_t)(uintptr_t)(seg_w + L->w_off + n0), L->n,
                                 k | (uint32_t)cols << 16, (uint32_t)r->res_row[l] + j * k};
      err = pyard_tile_push(tile, words, 5);
    }
  }
  if (!err) err = pyard_tile_fence(tile);
  return err ? err : pyard_tile_wait(tile);
}

static int run_layer(unsigned tile, unsigned l, int32_t res_row, const int8_t *in, int8_t *out) {
  const seg_layer_t *L = &seg_layers[l];
  const bool resident = res_row >= 0;
  if (L->conv) {
    const pyard_conv2d_t c = {.batch = 1, .in_ch = L->k, .in_h = L->hw, .in_w = L->hw, .out_ch = L->n,
                              .k_h = L->kernel, .k_w = L->kernel, .stride = 1, .pad = L->kernel / 2,
                              .input = in, .weights = resident ? NULL : seg_w + L->w_off, .bias = NULL,
                              .output = out, .scale = L->shift, .act = PYARD_ACT_RELU, .full_out = false,
                              .weights_in_sp = resident, .w_row = resident ? (unsigned)res_row : 0,
                              .w_stride = b_rows(L)};
    return pyard_tile_conv2d(tile, &c);
  }
  const pyard_gemm_t g = {.M = L->rows, .K = L->k, .N = L->n, .A = in, .B = resident ? NULL : seg_w + L->w_off,
                          .D = NULL, .C = out, .stride_a = L->k, .stride_b = resident ? L->k : L->n,
                          .stride_d = 0, .stride_c = L->n, .scale = L->shift, .act = PYARD_ACT_RELU,
                          .bias = PYARD_BIAS_NONE, .b_in_sp = resident, .b_row = resident ? (unsigned)res_row : 0};
  return pyard_tile_gemm(tile, &g);
}

/* Waits (spinning on the data RAM) until the queue has an item (consumer) or a free slot; SEG_DEPTH
 * when another stage failed (its queue would never move again). */
static uint32_t wait_item(unsigned q, uint32_t consumed) {
  while (__atomic_load_n(&q_produced[q], __ATOMIC_ACQUIRE) == consumed)
    if (__atomic_load_n(&seg_abort, __ATOMIC_RELAXED)) return SEG_DEPTH;
  return consumed % SEG_DEPTH;
}
static uint32_t wait_slot(unsigned q, uint32_t produced) {
  while (produced - __atomic_load_n(&q_consumed[q], __ATOMIC_ACQUIRE) >= SEG_DEPTH)
    if (__atomic_load_n(&seg_abort, __ATOMIC_RELAXED)) return SEG_DEPTH;
  return produced % SEG_DEPTH;
}

/* Stage s of run r: its layers for every inference of the batch, between its queues. */
static int run_stage(const seg_run_t *r, unsigned s) {
  const unsigned a = r->bounds[s], b = r->bounds[s + 1], last = s + 1 == r->stages;
  uint32_t busy = 0, wait = 0;
  for (uint32_t i = 0; i < r->batch; i++) {
    uint64_t t = pyard_cycles();
    const uint32_t from = s > 0 ? wait_item(s - 1, i) : 0, to = last ? 0 : wait_slot(s, i);
    if (from == SEG_DEPTH || to == SEG_DEPTH) return PYARD_EINVAL; /* another stage failed */
    const int8_t *in = s > 0 ? seg_q[s - 1][from] : r->check ? seg_in[i] : seg_scratch_in;
    int8_t *final = last ? (r->check ? seg_out[i] : seg_scratch_out) : seg_q[s][to];
    wait += (uint32_t)(pyard_cycles() - t);
    for (unsigned l = a; l < b; l++) {
      int8_t *out = l + 1 == b ? final : seg_tmp[s][(l - a) & 1];
      t = pyard_cycles();
      const int err = run_layer(s, l, r->res_row[l], in, out);
      busy += (uint32_t)(pyard_cycles() - t);
      if (err) {
        __atomic_store_n(&seg_abort, 1, __ATOMIC_RELAXED);
        return err;
      }
      if (l == a && s > 0) __atomic_fetch_add(&q_consumed[s - 1], 1, __ATOMIC_RELEASE); /* input read */
      in = out;
    }
    if (!last) __atomic_fetch_add(&q_produced[s], 1, __ATOMIC_RELEASE);
  }
  stage_busy[s] = busy;
  stage_wait[s] = wait;
  return 0;
}

static void report(unsigned n, const seg_run_t *r, uint64_t cycles) {
  printf("seg run %u cycles %llu batch %u\n", n, (unsigned long long)cycles, (unsigned)r->batch);
  for (unsigned s = 0; s < r->stages; s++)
    printf("seg run %u stage %u layers %u %u busy %u wait %u load %u rd %u err %d\n", n, s, (unsigned)r->bounds[s],
           (unsigned)r->bounds[s + 1], (unsigned)stage_busy[s], (unsigned)stage_wait[s], (unsigned)stage_load[s],
           (unsigned)stage_rd[s], (int)seg_err[s]);
}

int hart_main(unsigned hart, unsigned nharts) {
  (void)nharts;
  int failed = 0;
  if (hart < PYARD_NTILES && pyard_tile_init(hart)) failed = 1;
  for (unsigned n = 0; n < SEG_NRUNS; n++) {
    const seg_run_t *r = &seg_runs[n];
    const int stage = hart < r->stages;
    if (hart == 0)
      for (unsigned q = 0; q < SEG_MAX_STAGES; q++) q_produced[q] = q_consumed[q] = 0;
    int err = 0;
    if (stage) {
      const uint64_t t = pyard_cycles();
      err = load_resident(hart, r, r->bounds[hart], r->bounds[hart + 1]);
      stage_load[hart] = (uint32_t)(pyard_cycles() - t);
      if (err) __atomic_store_n(&seg_abort, 1, __ATOMIC_RELAXED);
      pyard_tile_write(hart, PYARD_REG_CONTROL, PYARD_CONTROL_ZERO_COUNTERS);
    }
    pyard_barrier();
    const uint64_t start = pyard_cycles();
    if (stage && !err) err = run_stage(r, hart);
    if (stage) {
      stage_rd[hart] = pyard_tile_read(hart, PYARD_REG_DMA_RD_BYTES);
      seg_err[hart] = err;
    }
    pyard_barrier();
    if (hart == 0) {
      report(n, r, pyard_cycles() - start);
      for (unsigned s = 0; s < r->stages; s++) failed |= seg_err[s] != 0;
    }
    pyard_barrier();
  }
  return failed;
}

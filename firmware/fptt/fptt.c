/* FPTT-K LSTM training on the tile (docs/fptt.md, "On the SoC").
 *
 * One pass: for each part of the sequence, the forward over its steps, the output layer and
 * softmax at its last step, the backward (Algorithm 3) over the part's window, the gradient GEMMs
 * and the FPTT update of θ, θ̄, λ (eqs. 4.17, 4.19-4.21). Every GEMM runs on the tile's GEMM loop
 * and every element-wise step on its vector engine; the harts only issue commands.
 *
 * FPTT_CORES (the software-only mode, `--elementwise cores`): the GEMMs stay on the tile, without
 * the read-out's σ / tanh, and every element-wise step runs here in integer C on all active harts
 * (pyard_vector_lane.h: the lane's arithmetic, op for op as the engine's programs, so the same bits).
 *
 * What depends on the problem's sizes is in the generated fptt_layout.h (fptt_soc/layout.py): the
 * dimensions, the scratchpad regions and the vector programs as command words. The host
 * (fptt_soc/host.py) fills the buffers below before the run and reads them back after it.
 *
 * Main memory (bf16, row-major):
 *   theta, theta_bar, lam, grad   Params order: [w_gate; b_gate] as one (I+H+1) × 4H matrix, then
 *                                 [w_out; b_out] as one (H+1) × C matrix
 *   xc     (T+1) × B × (I+H+1)    each step's GEMM input [x_t, h_{t-1}, 1]; the host writes x and
 *                                 the ones, the firmware each h
 *   gates  T × B × 4H             each step's activations; the backward writes dz over them
 *   s_mem  (T+1) × B × H          s_mem[t] = the cell state step t starts from (s_mem[0] = 0)
 *   ts_mem T × B × H              tanh of the cell state step t ends with
 *   logits PARTS × C × B          each part's logits, transposed (class-major)
 */
#include "fptt_layout.h"
#include "pyard.h"
#if FPTT_CORES
#include "pyard_vector_lane.h"
#endif

#define XW (FPTT_I + FPTT_H + 1) /* a row of xc */
#define G4 (4 * FPTT_H)
#define HB (FPTT_H * 2)          /* bytes of an H-wide row */
#define ROW_BYTES (FPTT_W * 2)   /* bytes of a scratchpad row */
#define SCALE_ONE 0x3F800000u

PYARD_MEM uint16_t theta[FPTT_PARAMS], theta_bar[FPTT_PARAMS], lam[FPTT_PARAMS], grad[FPTT_PARAMS];
PYARD_MEM uint16_t xc[(FPTT_T + 1) * FPTT_B * XW];
PYARD_MEM uint16_t gates[FPTT_T * FPTT_B * G4];
PYARD_MEM uint16_t s_mem[(FPTT_T + 1) * FPTT_B * FPTT_H], ts_mem[FPTT_T * FPTT_B * FPTT_H];
PYARD_MEM uint16_t dh_mem[FPTT_B * FPTT_H], carry_mem[FPTT_B * FPTT_H];
PYARD_MEM uint16_t logits[FPTT_PARTS * FPTT_C * FPTT_B], dlogits[FPTT_C * FPTT_B];
PYARD_MEM uint16_t onehot[FPTT_C * FPTT_B];
/* Per part: its bounds [a, b) and the head's scale weight/B (fp32 bits of a bf16 value). */
PYARD_MEM uint32_t part_a[FPTT_PARTS], part_b[FPTT_PARTS], part_scale[FPTT_PARTS];
#if FPTT_SNAPSHOTS
PYARD_MEM uint16_t snapshots[FPTT_PARTS * 3 * FPTT_PARAMS];
#endif
/* Cycles spent in each phase (hart 0's mcycle between the points where it waits for the tile). */
/* T_SNAPSHOT: the copies --check asks for, which are not part of the pass. */
/* T_FWD_ACT: σ / tanh of the gates on the cores (FPTT_CORES; else the read-out's, in T_FWD_GEMM). */
enum { T_FWD_GEMM, T_FWD_CELL, T_SOFTMAX, T_BWD_CELL, T_BWD_DH, T_BWD_DW, T_UPDATE, T_FWD_ACT, T_SNAPSHOT, T_PHASES };
PYARD_MEM uint64_t phase_cycles[T_PHASES];
PYARD_MEM uint32_t fptt_status[2]; /* [0] 1 when the pass finished, [1] the failing error */

static int err;

static void push(const uint32_t *w, unsigned n) {
  if (!err) err = pyard_push(w, n);
}

/* `rows` memory rows of `elems` elements, `stride` bytes apart from `addr`, into (or out of) the
 * scratchpad from row `local`; rows longer than a scratchpad row fill consecutive scratchpad rows
 * (docs/isa.md, "Split transfers"). */
static void load_rows(const void *addr, size_t stride, unsigned rows, unsigned elems, unsigned local, uint32_t flags) {
  const uint32_t w[5] = {PYARD_OP_LOAD | flags, (uint32_t)(uintptr_t)addr, stride, rows | elems << 16, local};
  push(w, 5);
}

static void store_rows(void *addr, size_t stride, unsigned rows, unsigned elems, unsigned local, uint32_t flags) {
  const uint32_t w[6] = {PYARD_OP_STORE | 1u << 12 | flags, (uint32_t)(uintptr_t)addr, stride, rows | elems << 16,
                         local, 0};
  push(w, 6);
}

/* Memory rows of FPTT_W elements, one after another at `addr`, into scratchpad rows from `local`. */
static void load(const void *addr, unsigned rows, unsigned local, uint32_t flags) {
  load_rows(addr, ROW_BYTES, rows, FPTT_W, local, flags);
}

static void store(void *addr, unsigned rows, unsigned local, uint32_t flags) {
  store_rows(addr, ROW_BYTES, rows, FPTT_W, local, flags);
}

/* A (B, H) tensor whose rows are `row` elements apart in memory, into (or out of) its batch-major
 * scratchpad rows (sequence b's H elements in rows local + b·H/W on) in one split LOAD / STORE. */
static void load_bh(const uint16_t *base, size_t row, unsigned local, uint32_t flags) {
  load_rows(base, row * 2, FPTT_B, FPTT_H, local, flags);
}

static void store_bh(uint16_t *base, size_t row, unsigned local, uint32_t flags) {
  store_rows(base, row * 2, FPTT_B, FPTT_H, local, flags);
}

/* A contiguous (B, H) tensor. */
static void load_all(const uint16_t *base, unsigned local, uint32_t flags) { load_bh(base, FPTT_H, local, flags); }
static void store_all(uint16_t *base, unsigned local, uint32_t flags) { store_bh(base, FPTT_H, local, flags); }

/* The four gates of one step (B × 4H, row-major) into (out of) the gate layout at `local`. */
static void load_gates(const uint16_t *g, unsigned local, uint32_t last_flags) {
  for (unsigned k = 0; k < 4; k++) load_bh(g + k * FPTT_H, G4, local + k * FPTT_R, k == 3 ? last_flags : 0);
}

static void store_gates(uint16_t *g, unsigned local, uint32_t first_flags) {
  for (unsigned k = 0; k < 4; k++) store_bh(g + k * FPTT_H, G4, local + k * FPTT_R, k ? 0 : first_flags);
}

/* A program of VEC commands; the first waits for the LOADs before it, the last lets the STOREs go. */
static void program(const uint32_t (*p)[5], unsigned n, uint32_t rows, uint32_t scalar_last) {
  for (unsigned i = 0; i < n; i++) {
    uint32_t w[5] = {p[i][0], p[i][1], p[i][2], p[i][3], p[i][4]};
    if (i == 0) w[0] |= FPTT_VEC_WAIT_LOAD;
    if (i + 1 == n) w[0] |= PYARD_SIGNAL_NEXT;
    if (rows) w[2] = (w[2] & 0xffff0000u) | rows;
    if (scalar_last && i + 1 == n) w[1] = scalar_last;
    push(w, 5);
  }
}

static void gemm_push(const pyard_gemm_t *g) {
  if (!err) err = pyard_gemm_push(g);
  if (!err) err = pyard_fence(); /* later LOADs read C: wait for the loop's last STORE */
}

static void gemm(size_t M, size_t K, size_t N, const void *A, size_t sa, bool ta, const void *B, size_t sb, bool tb,
                 void *C, size_t sc, int act) {
  const pyard_gemm_t g = {M, K, N, A, B, NULL, C, sa, sb, 0, sc, SCALE_ONE, act, PYARD_BIAS_NONE,
                          false, ta, tb, false, false, 0};
  gemm_push(&g);
}

static uint64_t mark;
static void phase(int which) {
  if (!err) err = pyard_wait();
  const uint64_t now = pyard_cycles();
  phase_cycles[which] += now - mark;
  mark = now;
}

#define XC(t) (xc + (size_t)(t) * FPTT_B * XW)
#define GATES(j) (gates + (size_t)(j) * FPTT_B * G4)
#define S(j) (s_mem + (size_t)(j) * FPTT_B * FPTT_H)
#define TS(j) (ts_mem + (size_t)(j) * FPTT_B * FPTT_H)
#define W_OUT (theta + FPTT_GATE_PARAMS)

/* Gate weights resident in the scratchpad (FPTT_WGATE_RESIDENT: fptt_soc/layout.py decided that
 * they fit beside the loop's A rows and the forward cell's regions): every gate GEMM of a part
 * reads them there (GEMM flag [21]) instead of streaming 4H·(I+H+1) weights from memory each
 * step. They are loaded at the start of each part, the update having changed them; the part's
 * later phases (head, backward, update) may overwrite those rows. The dh GEMM reads W_hᵀ, which
 * the loop cannot take from this copy (docs/isa.md): it streams W_h from memory as before. */
#if FPTT_WGATE_RESIDENT
/* N tile j of [W; b] (columns j·W on) is its XW rows from FPTT_SP_WGATE + j·XW: one LOAD each. */
static void load_gate_weights(void) {
  for (unsigned j = 0; j < G4 / FPTT_W; j++) {
    load_rows(theta + j * FPTT_W, G4 * 2, XW, FPTT_W, FPTT_SP_WGATE + j * XW, 0);
  }
}
#else
static void load_gate_weights(void) {}
#endif

/* gates_t[:, n0 : n0+N] = act(xc_t · [W; b][:, n0 : n0+N]) (n0 a multiple of W). */
static void gate_gemm(unsigned t, unsigned n0, unsigned N, int act) {
#if FPTT_WGATE_RESIDENT
  const pyard_gemm_t g = {FPTT_B, XW, N, XC(t), NULL, NULL, GATES(t) + n0, XW, XW, 0, G4, SCALE_ONE, act,
                          PYARD_BIAS_NONE, false, false, false, false, true, FPTT_SP_WGATE + n0 / FPTT_W * XW};
  gemm_push(&g);
#else
  gemm(FPTT_B, XW, N, XC(t), XW, false, theta + n0, G4, false, GATES(t) + n0, G4, act);
#endif
}

#if FPTT_CORES
/* ---- the software-only mode: element-wise work on the harts -------------------------------------
 * Fork-join: hart 0 posts a job over the elements [0, n) and every active hart runs a contiguous
 * share of them between two barriers. Every element is computed alone, op for op as the engine's
 * program computes it (fptt_soc/layout.py names the programs), so no split changes a bit. */
#define BF16_ONE 0x3F80u
#define BF16_HALF 0x3F00u

typedef void (*job_fn)(unsigned lo, unsigned hi);
static job_fn volatile job;
static volatile unsigned job_n;
/* The job's arguments, set by hart 0 before the barrier that starts it. */
static volatile struct {
  unsigned t, p;
  bool inside, carry_in, carry_out;
} args;

static void share(job_fn fn, unsigned n, unsigned hart) {
  const unsigned harts = pyard_nharts();
  fn(n * hart / harts, n * (hart + 1) / harts);
}

static void parallel(job_fn fn, unsigned n) {
  if (err) return;
  job = fn;
  job_n = n;
  pyard_barrier();
  share(fn, n, 0);
  pyard_barrier();
}

/* Harts 1.. run jobs until hart 0 posts none. */
static int worker(unsigned hart) {
  for (;;) {
    pyard_barrier();
    const job_fn fn = job;
    if (!fn) return 0;
    share(fn, job_n, hart);
    pyard_barrier();
  }
}

/* SIGMOID of i, f, o and TANH of g, in place over the step's B × 4H pre-activations. */
static void act_job(unsigned lo, unsigned hi) {
  uint16_t *z = GATES(args.t);
  for (unsigned k = lo; k < hi; k++) z[k] = k % G4 < 3 * FPTT_H ? pyard_sigmoid_bf16(z[k]) : pyard_tanh_bf16(z[k]);
}

/* programs.lstm_forward after its activations: s = f·s_prev + i·g, ts = tanh(s), h = o·ts. */
static void cell_job(unsigned lo, unsigned hi) {
  const unsigned t = args.t;
  const uint16_t *gates_t = GATES(t), *s_prev = S(t);
  uint16_t *s = S(t + 1), *ts = TS(t), *h = XC(t + 1) + FPTT_I;
  for (unsigned e = lo; e < hi; e++) {
    const unsigned b = e / FPTT_H, j = e % FPTT_H;
    const uint16_t *g = gates_t + b * G4 + j;
    const uint16_t i = g[0], f = g[FPTT_H], o = g[2 * FPTT_H], gg = g[3 * FPTT_H];
    const uint16_t sv = pyard_bf16_add(pyard_bf16_mul(f, s_prev[e]), pyard_bf16_mul(i, gg));
    const uint16_t tv = pyard_tanh_bf16(sv);
    s[e] = sv;
    ts[e] = tv;
    h[b * XW + j] = pyard_bf16_mul(o, tv);
  }
}

/* Step t: z = xc_t · [W; b] as one GEMM without activation, then σ / tanh and the cell on the harts. */
static void forward_step(unsigned t) {
  gate_gemm(t, 0, G4, 0);
  phase(T_FWD_GEMM);
  args.t = t;
  parallel(act_job, FPTT_B * G4);
  phase(T_FWD_ACT);
  parallel(cell_job, FPTT_B * FPTT_H);
  phase(T_FWD_CELL);
}

/* A sum element of the accumulator (fp32 bits; a bf16 accumulator's in the top half): the first
 * term written in, each further one added by the accumulator's adder (programs._row_sum). */
static uint32_t acc_first(uint16_t e) {
#if FPTT_ACC_MANT == 7
  return (uint32_t)pyard_bf16_round((uint32_t)e << 16) << 16;
#else
  return (uint32_t)e << 16;
#endif
}

static uint32_t acc_add(uint32_t total, uint16_t e) {
#if FPTT_ACC_MANT == 7
  return pyard_fp_add(total, (uint32_t)e << 16, 7) << 16;
#else
  return pyard_fp_add(total, (uint32_t)e << 16, 23);
#endif
}

/* programs.softmax, then dlogits = (p − onehot)·scale, per sequence b of part p's (classes, batch)
 * logits: the max, bf16(z − max), EXP, Σ in class order in the accumulator, RECIP of Σ read out
 * and rounded to bf16, p = e·r. */
static void softmax_job(unsigned lo, unsigned hi) {
  const unsigned p = args.p;
  const uint16_t *lg = logits + (size_t)p * FPTT_C * FPTT_B;
  const uint16_t scale = (uint16_t)(part_scale[p] >> 16);
  for (unsigned b = lo; b < hi; b++) {
    uint16_t m = lg[b];
    for (unsigned c = 1; c < FPTT_C; c++) m = pyard_bf16_max(m, lg[c * FPTT_B + b]);
    uint32_t total = 0;
    for (unsigned c = 0; c < FPTT_C; c++) {
      const uint16_t e = pyard_exp_bf16(pyard_bf16_sub(lg[c * FPTT_B + b], m));
      dlogits[c * FPTT_B + b] = e;
      total = c ? acc_add(total, e) : acc_first(e);
    }
    const uint16_t r = pyard_recip_bf16(pyard_bf16_round(pyard_f32_ftz(total)));
    for (unsigned c = 0; c < FPTT_C; c++) {
      const uint16_t prob = pyard_bf16_mul(dlogits[c * FPTT_B + b], r);
      dlogits[c * FPTT_B + b] = pyard_bf16_mul(pyard_bf16_sub(prob, onehot[c * FPTT_B + b]), scale);
    }
  }
}

static void loss_gradient(unsigned p) {
  args.p = p;
  parallel(softmax_job, FPTT_B);
}

/* programs.lstm_backward for step args.t (the ds-from-h part inside the window, the carry in and
 * out as the flags say), dz written over the gates. */
static void bwd_job(unsigned lo, unsigned hi) {
  const unsigned r = args.t;
  const bool inside = args.inside, carry_in = args.carry_in, carry_out = args.carry_out;
  uint16_t *gates_r = GATES(r);
  const uint16_t *ts = TS(r), *s_prev = S(r);
  for (unsigned e = lo; e < hi; e++) {
    const unsigned b = e / FPTT_H, j = e % FPTT_H;
    uint16_t *g = gates_r + b * G4 + j;
    const uint16_t i = g[0], f = g[FPTT_H], o = g[2 * FPTT_H], gg = g[3 * FPTT_H];
    uint16_t ds, dz_o = 0; /* past the window: a zero o gradient (the engine's zero-fill LOAD) */
    if (inside) {
      const uint16_t dh = dh_mem[e], tv = ts[e];
      dz_o = pyard_bf16_mul(dh, tv);
      const uint16_t d_ts = pyard_bf16_mul(dh, o);
      ds = pyard_bf16_mul(d_ts, pyard_bf16_rsub(pyard_bf16_mul(tv, tv), BF16_ONE));
      if (carry_in) ds = pyard_bf16_add(ds, carry_mem[e]);
    } else {
      ds = pyard_bf16_round((uint32_t)carry_mem[e] << 16); /* COPY of the carry */
    }
    if (carry_out) carry_mem[e] = pyard_bf16_mul(ds, f);
    const uint16_t dz_i = pyard_bf16_mul(ds, gg), dz_f = pyard_bf16_mul(ds, s_prev[e]);
    g[0] = pyard_bf16_mul(dz_i, pyard_bf16_mul(i, pyard_bf16_rsub(i, BF16_ONE)));
    g[FPTT_H] = pyard_bf16_mul(dz_f, pyard_bf16_mul(f, pyard_bf16_rsub(f, BF16_ONE)));
    g[2 * FPTT_H] = pyard_bf16_mul(dz_o, pyard_bf16_mul(o, pyard_bf16_rsub(o, BF16_ONE)));
    const uint16_t d_g = pyard_bf16_mul(ds, i);
    g[3 * FPTT_H] = pyard_bf16_mul(d_g, pyard_bf16_rsub(pyard_bf16_mul(gg, gg), BF16_ONE));
  }
}

static void cell_backward(unsigned r, bool inside, bool carry_in, bool carry_out) {
  args.t = r;
  args.inside = inside;
  args.carry_in = carry_in;
  args.carry_out = carry_out;
  parallel(bwd_job, FPTT_B * FPTT_H);
}

/* update_model.update (the 13-command program) of one parameter. */
typedef struct {
  uint16_t th, tb, lm;
} fptt_param_t;

static inline fptt_param_t update_one(uint16_t th, uint16_t tb, uint16_t lm, uint16_t g) {
  const uint16_t reg = pyard_bf16_sub(pyard_bf16_mul(pyard_bf16_sub(th, tb), FPTT_ALPHA), lm); /* 4.17 */
  th = pyard_bf16_sub(th, pyard_bf16_mul(pyard_bf16_add(g, reg), FPTT_ETA));             /* 4.19 */
  lm = pyard_bf16_sub(lm, pyard_bf16_mul(pyard_bf16_sub(th, tb), FPTT_ALPHA));           /* 4.20 */
  const uint16_t half = pyard_bf16_mul(pyard_bf16_add(tb, th), BF16_HALF);               /* 4.21 */
  const fptt_param_t out = {th, pyard_bf16_sub(half, pyard_bf16_mul(lm, FPTT_KAPPA)), lm};
  return out;
}

/* The update of parameter pairs [lo, hi): one word access per two parameters, as main memory is
 * uncached and every access pays its latency; an odd last parameter alone (its word's upper half
 * belongs to the next array). */
typedef uint32_t __attribute__((may_alias)) word_t;
#define UPDATE_PAIRS ((FPTT_PARAMS + 1) / 2)

static void update_job(unsigned lo, unsigned hi) {
  word_t *th = (word_t *)theta, *tb = (word_t *)theta_bar, *lm = (word_t *)lam;
  const word_t *g = (const word_t *)grad;
  for (unsigned k = lo; k < hi; k++) {
    if (FPTT_PARAMS % 2 && k + 1 == UPDATE_PAIRS) {
      const unsigned i = 2 * k;
      const fptt_param_t p = update_one(theta[i], theta_bar[i], lam[i], grad[i]);
      theta[i] = p.th;
      theta_bar[i] = p.tb;
      lam[i] = p.lm;
      break;
    }
    const uint32_t wt = th[k], wb = tb[k], wl = lm[k], wg = g[k];
    const fptt_param_t p0 = update_one((uint16_t)wt, (uint16_t)wb, (uint16_t)wl, (uint16_t)wg);
    const fptt_param_t p1 = update_one((uint16_t)(wt >> 16), (uint16_t)(wb >> 16), (uint16_t)(wl >> 16), (uint16_t)(wg >> 16));
    th[k] = p0.th | (uint32_t)p1.th << 16;
    tb[k] = p0.tb | (uint32_t)p1.tb << 16;
    lm[k] = p0.lm | (uint32_t)p1.lm << 16;
  }
}

static void update(void) {
  parallel(update_job, UPDATE_PAIRS);
  phase(T_UPDATE);
}
#else
/* Step t: z = xc_t · [W; b], σ / tanh by the GEMM's read-out, then the cell (eqs. 4.2-4.8). */
static void forward_step(unsigned t) {
  gate_gemm(t, 0, 3 * FPTT_H, 2);
  gate_gemm(t, 3 * FPTT_H, FPTT_H, 3);
  phase(T_FWD_GEMM);
  load_gates(GATES(t), FPTT_SP_G, 0);
  load_all(S(t), FPTT_SP_SP, FPTT_LOAD_SIGNAL_VEC);
  program(fptt_forward_cell, FPTT_FORWARD_CELL_LEN, 0, 0);
  store_all(S(t + 1), FPTT_SP_S, PYARD_WAIT_VEC);
  store_all(TS(t), FPTT_SP_TS, 0);
  store_bh(XC(t + 1) + FPTT_I, XW, FPTT_SP_H, 0);
  phase(T_FWD_CELL);
}

/* The softmax program and dlogits = (p − onehot)·weight/B on the engine, part p's scale its last scalar. */
static void loss_gradient(unsigned p) {
  const uint16_t *lg = logits + (size_t)p * FPTT_C * FPTT_B;
  /* (classes, batch) tensors, transposed: one LOAD / STORE per block of FPTT_W sequences */
  for (unsigned k = 0; k < FPTT_HEAD_BLOCKS; k++) {
    const unsigned elems = FPTT_B - k * FPTT_W < FPTT_W ? FPTT_B - k * FPTT_W : FPTT_W;
    load_rows(lg + k * FPTT_W, FPTT_B * 2, FPTT_C, elems, FPTT_SP_L + k * FPTT_C, 0);
    load_rows(onehot + k * FPTT_W, FPTT_B * 2, FPTT_C, elems, FPTT_SP_OH + k * FPTT_C,
              k + 1 == FPTT_HEAD_BLOCKS ? FPTT_LOAD_SIGNAL_VEC : 0);
  }
  program(fptt_head, FPTT_HEAD_LEN, 0, part_scale[p]);
  for (unsigned k = 0; k < FPTT_HEAD_BLOCKS; k++) {
    const unsigned elems = FPTT_B - k * FPTT_W < FPTT_W ? FPTT_B - k * FPTT_W : FPTT_W;
    store_rows(dlogits + k * FPTT_W, FPTT_B * 2, FPTT_C, elems, FPTT_SP_DL + k * FPTT_C, k ? 0 : PYARD_WAIT_VEC);
  }
}

/* One backward step of the cell as the engine's program (fptt_backward_cell, by the flags). */
static void cell_backward(unsigned r, bool inside, bool carry_in, bool carry_out) {
  if (inside) {
    load_all(dh_mem, FPTT_SP_DH, 0);
    load_all(TS(r), FPTT_SP_TS, 0);
  } else { /* no h gradient: the o gradient is zero */
    const uint32_t zero[5] = {PYARD_OP_LOAD | 1u << 15, 0, 0, FPTT_R | FPTT_W << 16, FPTT_SP_DZ + 2 * FPTT_R};
    push(zero, 5);
  }
  load_gates(GATES(r), FPTT_SP_G, 0);
  if (carry_in) load_all(carry_mem, FPTT_SP_CARRY, 0);
  load_all(S(r), FPTT_SP_SP, FPTT_LOAD_SIGNAL_VEC);
  const unsigned v = inside ? (unsigned)carry_in << 1 | carry_out : 4u + carry_out;
  program(fptt_backward_cell[v], fptt_backward_cell_len[v], 0, 0);
  store_gates(GATES(r), FPTT_SP_DZ, PYARD_WAIT_VEC);
  if (carry_out) store_all(carry_mem, FPTT_SP_CARRY, 0);
}

/* θ, θ̄, λ ← eqs. 4.17, 4.19-4.21, chunk by chunk through the scratchpad. */
#if FPTT_FUSED_UPDATE
/* One VEC UPDATE per chunk, streamed (docs/vector.md, "Streaming the update"): chunk k's LOADs of
 * θ, θ̄, λ, g (the last gives VEC a token), its UPDATE, its STOREs of θ, θ̄, λ; four buffers, so an
 * UPDATE waits for the STOREs of two chunks back, and buffer b in the bank pair b mod 2 with θ and
 * λ in one bank, θ̄ and g in the other (the update unit reads θ with θ̄, then λ with g). The whole
 * scratchpad is free: no other phase's data lives across it. */
#define UPD_ROWS ((FPTT_PARAMS + FPTT_W - 1) / FPTT_W)
#define UPD_COUNT ((UPD_ROWS + FPTT_FUSED_CHUNK - 1) / FPTT_FUSED_CHUNK)

static unsigned upd_local(unsigned k, unsigned tensor) { /* tensor: 0 θ, 1 θ̄, 2 λ, 3 g */
  const unsigned b = k % 4, bank = 2 * (b % 2) + (tensor & 1), slot = (b / 2) * 2 * FPTT_FUSED_CHUNK;
  return bank * FPTT_SP_BANK_ROWS + slot + (tensor >> 1) * FPTT_FUSED_CHUNK;
}

static unsigned upd_size(unsigned k) {
  const unsigned start = k * FPTT_FUSED_CHUNK;
  return UPD_ROWS - start < FPTT_FUSED_CHUNK ? UPD_ROWS - start : FPTT_FUSED_CHUNK;
}

static uint16_t *const upd_tensor[4] = {theta, theta_bar, lam, grad};

static void upd_load(unsigned k, unsigned i) {
  const uint32_t flags = (k >= 2 && i == 0 ? FPTT_LOAD_WAIT_VEC : 0) | (i == 3 ? FPTT_LOAD_SIGNAL_VEC : 0);
  load(upd_tensor[i] + (size_t)k * FPTT_FUSED_CHUNK * FPTT_W, upd_size(k), upd_local(k, i), flags);
}

static void upd_store(unsigned k, unsigned i) {
  const uint32_t flags = (i == 0 ? PYARD_WAIT_VEC : 0) | (i == 2 && k + 2 < UPD_COUNT ? PYARD_SIGNAL_VEC : 0);
  store(upd_tensor[i] + (size_t)k * FPTT_FUSED_CHUNK * FPTT_W, upd_size(k), upd_local(k, i), flags);
}

static void upd_command(unsigned k) {
  uint32_t w[6];
  for (unsigned i = 0; i < 6; i++) w[i] = fptt_update_fused[i];
  w[0] |= FPTT_VEC_WAIT_LOAD | (k >= 2 ? PYARD_WAIT_NEXT : 0) | PYARD_SIGNAL_NEXT;
  if (k + 2 < UPD_COUNT) w[0] |= FPTT_VEC_SIGNAL_LOAD;
  w[2] = (w[2] & 0xffff0000u) | upd_size(k);
  w[3] = upd_local(k, 0) | upd_local(k, 1) << 16;
  w[4] = (w[4] & 0xffff0000u) | upd_local(k, 2);
  w[5] = (w[5] & 0xffff0000u) | upd_local(k, 3);
  push(w, 6);
}

static void update(void) {
  for (unsigned k = 0; k < 2 && k < UPD_COUNT; k++)
    for (unsigned i = 0; i < 4; i++) upd_load(k, i);
  upd_command(0);
  /* in the order the units start them: UPDATE k+1, then chunk k+2's LOADs beside chunk k's STOREs */
  for (unsigned k = 0; k < UPD_COUNT; k++) {
    if (k + 1 < UPD_COUNT) upd_command(k + 1);
    for (unsigned i = 0; i < 4; i++) {
      if (k + 2 < UPD_COUNT) upd_load(k + 2, i);
      if (i < 3) upd_store(k, i);
    }
  }
  phase(T_UPDATE);
}
#else
static void update(void) {
  const unsigned rows_total = (FPTT_PARAMS + FPTT_W - 1) / FPTT_W;
  uint16_t *const tensors[4] = {theta, theta_bar, lam, grad};
  for (unsigned r0 = 0; r0 < rows_total; r0 += FPTT_UPDATE_ROWS) {
    const unsigned rows = rows_total - r0 < FPTT_UPDATE_ROWS ? rows_total - r0 : FPTT_UPDATE_ROWS;
    for (unsigned k = 0; k < 4; k++)
      load(tensors[k] + (size_t)r0 * FPTT_W, rows, FPTT_SP_UPDATE + k * FPTT_UPDATE_ROWS,
           k == 3 ? FPTT_LOAD_SIGNAL_VEC : 0);
    program(fptt_update, FPTT_UPDATE_LEN, rows, 0);
    for (unsigned k = 0; k < 3; k++)
      store(tensors[k] + (size_t)r0 * FPTT_W, rows, FPTT_SP_UPDATE + k * FPTT_UPDATE_ROWS, k ? 0 : PYARD_WAIT_VEC);
    if (!err) err = pyard_fence(); /* the next chunk's LOADs reuse these rows */
  }
  phase(T_UPDATE);
}
#endif
#endif

/* Output layer at the part's last step, softmax and its gradient, then dW_out, db_out and dh. */
static void head(unsigned p, unsigned b) {
  const uint16_t *h_aug = XC(b) + FPTT_I; /* [h, 1], rows XW apart */
  uint16_t *lg = logits + (size_t)p * FPTT_C * FPTT_B;
  gemm(FPTT_C, FPTT_H + 1, FPTT_B, W_OUT, FPTT_C, true, h_aug, XW, true, lg, FPTT_B, 0);
  phase(T_FWD_GEMM);
  loss_gradient(p);
  phase(T_SOFTMAX);
  /* dW_out and db_out = [h, 1]ᵀ · dlogits; dh = dlogits · W_outᵀ */
  gemm(FPTT_H + 1, FPTT_B, FPTT_C, h_aug, XW, true, dlogits, FPTT_B, true, grad + FPTT_GATE_PARAMS, FPTT_C, 0);
  phase(T_BWD_DW);
  gemm(FPTT_B, FPTT_C, FPTT_H, dlogits, FPTT_B, true, W_OUT, FPTT_C, true, dh_mem, FPTT_H, 0);
  phase(T_BWD_DH);
}

/* Algorithm 3 from the part's last step b-1 down to s_lo (newest first): steps from h_lo on are
 * in the window (dh reaches them); older ones only by the cell-state carry (line 15). Then dW and
 * db over every step visited, in one GEMM. */
static void backward(unsigned s_lo, unsigned h_lo, unsigned b) {
  for (unsigned r = b; r-- > s_lo;) {
    const bool inside = r >= h_lo, carry_in = FPTT_CARRY && r + 1 < b, carry_out = FPTT_CARRY && r > s_lo;
    cell_backward(r, inside, carry_in, carry_out);
    phase(T_BWD_CELL);
    if (r > h_lo) {
      /* dh_{r-1} = dz_r · W_hᵀ: W_h, rows I..I+H-1 of the gate matrix, is stored N × K */
      gemm(FPTT_B, G4, FPTT_H, GATES(r), G4, false, theta + FPTT_I * G4, G4, true, dh_mem, FPTT_H, 0);
      phase(T_BWD_DH);
    }
  }
  /* [dW; db] = [x, h, 1]ᵀ · dz over the visited steps' (step, sequence) rows */
  gemm(XW, (size_t)(b - s_lo) * FPTT_B, G4, XC(s_lo), XW, true, GATES(s_lo), G4, false, grad, G4, 0);
  phase(T_BWD_DW);
}

static void snapshot(unsigned p) {
#if FPTT_SNAPSHOTS
  uint16_t *dst = snapshots + (size_t)p * 3 * FPTT_PARAMS;
  memcpy(dst, theta, sizeof theta);
  memcpy(dst + FPTT_PARAMS, theta_bar, sizeof theta_bar);
  memcpy(dst + 2 * FPTT_PARAMS, lam, sizeof lam);
  phase(T_SNAPSHOT);
#else
  (void)p;
#endif
}

/* The pass, on hart 0. */
static int pass(void) {
  err = pyard_init();
  mark = pyard_cycles();
  for (unsigned p = 0; p < FPTT_PARTS && !err; p++) {
    const unsigned a = part_a[p], b = part_b[p];
    load_gate_weights();
    for (unsigned t = a; t < b && !err; t++) forward_step(t);
    head(p, b);
    /* the window: the last trunc_h + 1 steps of the part (the whole part without trunc_h) */
    const unsigned h_lo = FPTT_TRUNC_H < 0 || b - a <= (unsigned)FPTT_TRUNC_H + 1 ? a : b - 1 - FPTT_TRUNC_H;
    backward(FPTT_S_PAST_WINDOW ? a : h_lo, h_lo, b);
    update();
    snapshot(p);
  }
  if (err) {
    pyard_perror("fptt", err);
    fptt_status[1] = (uint32_t)-err;
    return 1;
  }
  fptt_status[0] = 1;
  return 0;
}

#if FPTT_CORES
int hart_main(unsigned hart, unsigned nharts) {
  (void)nharts;
  if (hart) return worker(hart);
  const int code = pass();
  job = 0; /* no more jobs: the other harts return */
  pyard_barrier();
  return code;
}
#else
int main(void) { return pass(); } /* the other harts park: one tile, one command interface */
#endif

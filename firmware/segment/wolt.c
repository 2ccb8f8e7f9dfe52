/* WOLT's multi-application throughput (the WOLT paper's Fig. 8; docs/segment.md): APPS applications,
 * one per hart, each a loop of ITERS jobs of CPU work (CPU_ITERS rounds of register arithmetic)
 * followed by an int8 GEMM (GEMM_M x GEMM_K by GEMM_K x GEMM_N, int32 results) on a tile.
 *
 *   STATIC = 0: round robin, the resource manager (pyard_rm_acquire) hands out any idle tile;
 *   STATIC = 1: static binding, application h always uses tile h % TILES (behind its own ticket
 *               lock, first come first served as the resource manager's queue, so applications
 *               bound to one tile take turns while another tile may sit idle).
 *
 * Only TILES of the SoC's tiles are used: for round robin hart 0 takes the others from the resource
 * manager before the run and holds them to the end. Prints "wolt apps A tiles T static S jobs J
 * cycles C cpu P gemm G wait W": cycles from the first job to the last, and hart 0's cycles in CPU
 * work, in GEMMs and waiting for a tile; then "finish F0 F1 ...": when each application's last job
 * ended. Each application's C is checked on the host. */
#include "pyard.h"
#include "pyard_rm.h"

#if !PYARD_DTYPE_INT8 || !PYARD_ACC_INT32
#error "wolt.c is written for int8 tiles with int32 accumulators"
#endif
#define APPS PYARD_NHARTS_ACTIVE

PYARD_MEM int8_t app_a[APPS][GEMM_M][GEMM_K], app_b[APPS][GEMM_K][GEMM_N];
PYARD_MEM int32_t app_c[APPS][GEMM_M][GEMM_N];
/* Static binding: a ticket lock per tile (the next ticket, the one served). */
volatile uint32_t bound_next[PYARD_NTILES], bound_serving[PYARD_NTILES];
volatile uint32_t app_cpu[APPS], app_gemm[APPS], app_wait[APPS], app_sink[APPS], app_finish[APPS];
volatile int32_t app_err[APPS];

static void fill(int8_t *p, unsigned n, uint32_t seed) {
  for (unsigned i = 0; i < n / 4; i++) {
    seed = seed * 1664525u + 1013904223u;
    ((uint32_t *)p)[i] = seed ^ seed >> 16;
  }
}

/* The application's own computation between accelerator calls: work in registers only, so the
 * harts do not compete for the data RAM. */
static uint32_t cpu_work(uint32_t x) {
  for (unsigned i = 0; i < CPU_ITERS; i++) x = x * 1103515245u + 12345u;
  return x;
}

static int acquire(unsigned hart) {
  if (!STATIC) return pyard_rm_acquire(PYARD_WORK_GEMM);
  const unsigned t = hart % TILES;
  const uint32_t ticket = __atomic_fetch_add(&bound_next[t], 1, __ATOMIC_RELAXED);
  while (__atomic_load_n(&bound_serving[t], __ATOMIC_ACQUIRE) != ticket) {
  }
  return (int)t;
}

static void release(unsigned hart, unsigned t) {
  if (!STATIC) {
    pyard_rm_release(t);
    return;
  }
  (void)hart;
  __atomic_fetch_add(&bound_serving[t], 1, __ATOMIC_RELEASE);
}

int hart_main(unsigned hart, unsigned nharts) {
  (void)nharts;
  fill(&app_a[hart][0][0], GEMM_M * GEMM_K, 2 * hart + 1);
  fill(&app_b[hart][0][0], GEMM_K * GEMM_N, 2 * hart + 2);
  int err = 0;
  if (hart == 0) {
    for (unsigned t = 0; t < PYARD_NTILES && !err; t++) err = pyard_tile_init(t);
    /* Round robin over TILES tiles: hold the others (the search hands them out in order from 0). */
    for (unsigned t = 0; t < PYARD_NTILES && !STATIC && !err; t++)
      if (pyard_rm_acquire(PYARD_WORK_GEMM) < 0) err = PYARD_ENODEV;
    for (unsigned t = 0; t < TILES && !STATIC && !err; t++) pyard_rm_release(t);
  }
  pyard_barrier();
  const pyard_gemm_t g = {.M = GEMM_M, .K = GEMM_K, .N = GEMM_N, .A = app_a[hart], .B = app_b[hart],
                          .C = app_c[hart], .stride_a = GEMM_K, .stride_b = GEMM_N, .stride_c = GEMM_N,
                          .scale = PYARD_SCALE_ONE, .full_c = true};
  uint32_t cpu = 0, gemm = 0, wait = 0, x = hart;
  const uint64_t start = pyard_cycles();
  for (unsigned j = 0; j < ITERS && !err; j++) {
    uint64_t t0 = pyard_cycles();
    x = cpu_work(x);
    uint64_t t1 = pyard_cycles();
    const int tile = acquire(hart);
    uint64_t t2 = pyard_cycles();
    err = tile < 0 ? PYARD_ENODEV : pyard_tile_gemm((unsigned)tile, &g);
    if (tile >= 0) release(hart, (unsigned)tile);
    cpu += (uint32_t)(t1 - t0);
    wait += (uint32_t)(t2 - t1);
    gemm += (uint32_t)(pyard_cycles() - t2);
  }
  app_finish[hart] = (uint32_t)(pyard_cycles() - start);
  app_cpu[hart] = cpu, app_gemm[hart] = gemm, app_wait[hart] = wait, app_sink[hart] = x, app_err[hart] = err;
  pyard_barrier();
  if (hart != 0) return 0;
  const uint64_t cycles = pyard_cycles() - start;
  unsigned failed = 0;
  for (unsigned h = 0; h < APPS; h++) failed += app_err[h] != 0;
  printf("wolt apps %u tiles %u static %u jobs %u cycles %llu cpu %u gemm %u wait %u failed %u\n", (unsigned)APPS,
         (unsigned)TILES, (unsigned)STATIC, (unsigned)(APPS * ITERS), (unsigned long long)cycles, (unsigned)app_cpu[0],
         (unsigned)app_gemm[0], (unsigned)app_wait[0], failed);
  /* Each application's last job ends this many cycles after the start: a fair manager keeps them
   * within a few jobs of each other. */
  printf("finish");
  for (unsigned h = 0; h < APPS; h++) printf(" %u", (unsigned)app_finish[h]);
  printf("\n");
  return failed ? 1 : 0;
}

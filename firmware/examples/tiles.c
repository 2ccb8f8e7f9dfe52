/* Many harts share many tiles through the resource manager (WOLT, docs/tiles.md): every active hart
 * runs JOBS int8 GEMMs (GEMM_M×GEMM_K by GEMM_K×GEMM_N, int32 results), asking for "a tile that
 * does GEMM", never a particular one. Each job's operands come from a generator seeded by (hart,
 * job); the sizes must be multiples of 4 (the operands are filled a word at a time). Odd jobs sleep
 * on the tile's interrupt (pyard_tile_wait_irq), even ones poll its STATUS.
 *
 *   pyard run --config 4x4-int8 --cores 2 --tiles 2 firmware/examples/tiles.c
 *   pyard run --config 4x4-int8 --cores 2 --tiles 1 firmware/examples/tiles.c
 *
 * While it holds a tile, a hart counts itself in `holders[tile]` with amoadd and checks that it is
 * alone: `violations` counts any overlap, which the resource manager must make impossible. The
 * tile each job ran on is kept in `job_tile`; tests/test_soc_tiles.py checks every C against NumPy
 * and that both tiles were used. Prints the cycles from the first acquire to the last release. */
#include "pyard.h"
#include "pyard_rm.h"

#if !PYARD_DTYPE_INT8 || !PYARD_ACC_INT32
#error "tiles.c is written for int8 tiles with int32 accumulators (e.g. --config 4x4-int8)"
#endif
#ifndef JOBS
#define JOBS 4
#endif
#ifndef GEMM_M
#define GEMM_M 32
#endif
#ifndef GEMM_K
#define GEMM_K 64
#endif
#ifndef GEMM_N
#define GEMM_N 32
#endif
#define HARTS PYARD_NHARTS_ACTIVE

PYARD_MEM int8_t job_a[HARTS][JOBS][GEMM_M][GEMM_K], job_b[HARTS][JOBS][GEMM_K][GEMM_N];
PYARD_MEM int32_t job_c[HARTS][JOBS][GEMM_M][GEMM_N];
volatile uint32_t job_tile[HARTS][JOBS]; /* the tile each job ran on */
volatile int32_t job_err[HARTS][JOBS];   /* the driver's return value */
volatile uint32_t holders[PYARD_NTILES]; /* harts inside a GEMM on the tile: 0 or 1 */
volatile uint32_t violations;            /* times a hart found the tile it was granted held */

/* Four int8 values a word: main memory is uncached, so the harts fill it a word per store. */
static void fill(int8_t *p, unsigned n, uint32_t seed) {
  for (unsigned i = 0; i < n / 4; i++) {
    seed = seed * 1664525u + 1013904223u;
    ((uint32_t *)p)[i] = seed ^ seed >> 16;
  }
}

/* pyard_tile_gemm, but sleeping on the interrupt of `tile` until the GEMM is done. */
static int gemm_irq(unsigned tile, const pyard_gemm_t *g) {
  pyard_tile_write(tile, PYARD_REG_CONTROL, PYARD_CONTROL_CLEAR_DONE);
  int err = pyard_tile_gemm_push(tile, g);
  if (!err) err = pyard_tile_fence(tile);
  return err ? err : pyard_tile_wait_irq(tile);
}

static void run_job(unsigned hart, unsigned j) {
  const int tile = pyard_rm_acquire(PYARD_WORK_GEMM);
  if (tile < 0) {
    job_err[hart][j] = PYARD_ENODEV;
    return;
  }
  if (__atomic_fetch_add(&holders[tile], 1, __ATOMIC_ACQ_REL) != 0) __atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
  const pyard_gemm_t g = {GEMM_M,          GEMM_K,         GEMM_N,          job_a[hart][j], job_b[hart][j],
                          NULL,            job_c[hart][j], GEMM_K,          GEMM_N,         0,
                          GEMM_N,          PYARD_SCALE_ONE, PYARD_ACT_NONE, PYARD_BIAS_NONE, false,
                          false,           false,          true};
  job_err[hart][j] = j % 2 ? gemm_irq((unsigned)tile, &g) : pyard_tile_gemm((unsigned)tile, &g);
  job_tile[hart][j] = (uint32_t)tile;
  if (__atomic_fetch_sub(&holders[tile], 1, __ATOMIC_ACQ_REL) != 1) __atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
  if (pyard_rm_release((unsigned)tile) != 0) __atomic_fetch_add(&violations, 1, __ATOMIC_RELAXED);
}

int hart_main(unsigned hart, unsigned nharts) {
  for (unsigned j = 0; j < JOBS; j++) {
    fill(&job_a[hart][j][0][0], GEMM_M * GEMM_K, 1000u * hart + 2 * j + 1);
    fill(&job_b[hart][j][0][0], GEMM_K * GEMM_N, 1000u * hart + 2 * j + 2);
  }
  int err = 0;
  if (hart == 0) {
    for (unsigned t = 0; t < PYARD_NTILES && !err; t++) err = pyard_tile_init(t);
    if (err) pyard_perror("init", err);
  }
  pyard_barrier();
  const uint64_t start = pyard_cycles();
  for (unsigned j = 0; j < JOBS; j++) run_job(hart, j);
  pyard_barrier();
  if (hart != 0) return 0;
  const uint64_t cycles = pyard_cycles() - start;
  unsigned failed = 0;
  for (unsigned h = 0; h < nharts; h++)
    for (unsigned j = 0; j < JOBS; j++) failed += job_err[h][j] != 0;
  printf("tiles: %u harts x %d GEMMs %dx%dx%d on %u tiles: %llu cycles, grants", nharts, JOBS, GEMM_M, GEMM_K,
         GEMM_N, (unsigned)PYARD_NTILES, (unsigned long long)cycles);
  for (unsigned t = 0; t < PYARD_NTILES; t++) printf(" %u", (unsigned)pyard_rm_grants(t));
  printf(", violations %u, failed %u\n", (unsigned)violations, failed);
  return err || failed || violations ? 1 : 0;
}

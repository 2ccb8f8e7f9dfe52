/* Runs the GEMM cases of a generated gemm_cases.h (tests/test_soc_firmware.py) through
 * pyard_matmul. Inputs are copied from the data RAM image into main-memory buffers, each result is
 * left in its own main-memory buffer for the test to read back and compare with the NumPy model. */
#include "case_runner.h"

typedef struct {
  uint32_t m, k, n;
  buffer_t a, b, c, d;
  uint32_t stride_a, stride_b, stride_c, stride_d; /* elements */
  uint32_t scale;
  int act, bias, accumulate, transpose_a, transpose_b, full_c;
} gemm_case_t;

#include "gemm_cases.h" /* defines `cases` and NCASES */

static void fill_case(int i) {
  fill(&cases[i].a);
  fill(&cases[i].b);
  fill(&cases[i].c);
  fill(&cases[i].d);
}

static int run_case(int i) {
  const gemm_case_t *t = &cases[i];
  return pyard_matmul(t->m, t->k, t->n, t->a.dst, t->b.dst, t->d.dst, t->c.dst, t->stride_a, t->stride_b, t->stride_d,
                      t->stride_c, t->scale, t->act, t->bias, t->accumulate, t->transpose_a, t->transpose_b,
                      t->full_c);
}

int main(void) { return run_cases(NCASES, fill_case, run_case, "pyard_matmul"); }

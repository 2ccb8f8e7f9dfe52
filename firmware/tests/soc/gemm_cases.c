/* Runs the GEMM cases of a generated gemm_cases.h (tests/test_soc_firmware.py) through
 * pyard_matmul. Inputs are copied from the data RAM image into main-memory buffers, each result is
 * left in its own main-memory buffer for the test to read back and compare with the NumPy model. */
#include "pyard.h"

typedef struct {
  const void *src; /* initial contents (data RAM), or NULL */
  void *dst;       /* main-memory buffer */
  uint32_t bytes;
} buffer_t;

typedef struct {
  uint32_t m, k, n;
  buffer_t a, b, c, d;
  uint32_t stride_a, stride_b, stride_c, stride_d; /* elements */
  uint32_t scale;
  int act, bias, accumulate, transpose_a, transpose_b, full_c;
} gemm_case_t;

#include "gemm_cases.h" /* defines `cases` and NCASES */

static void fill(const buffer_t *buf) {
  if (buf->src) memcpy(buf->dst, buf->src, buf->bytes);
}

int main(void) {
  int err = pyard_init();
  if (err) {
    pyard_perror("pyard_init", err);
    return 1;
  }
  for (int i = 0; i < NCASES; i++) {
    const gemm_case_t *t = &cases[i];
    fill(&t->a);
    fill(&t->b);
    fill(&t->c);
    fill(&t->d);
    const uint64_t t0 = pyard_cycles();
    err = pyard_matmul(t->m, t->k, t->n, t->a.dst, t->b.dst, t->d.dst, t->c.dst, t->stride_a, t->stride_b, t->stride_d,
                       t->stride_c, t->scale, t->act, t->bias, t->accumulate, t->transpose_a, t->transpose_b,
                       t->full_c);
    const uint64_t t1 = pyard_cycles();
    if (err) {
      printf("case %d: ", i);
      pyard_perror("pyard_matmul", err);
      return 2;
    }
    printf("case %d: %ux%ux%u done in %llu cycles\n", i, (unsigned)t->m, (unsigned)t->k, (unsigned)t->n,
           (unsigned long long)(t1 - t0));
  }
  return 0;
}

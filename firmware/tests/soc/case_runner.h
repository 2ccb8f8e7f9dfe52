/* What the generated-case runners (gemm_cases.c, conv_cases.c) share: main-memory buffers filled
 * from their data RAM images, and the loop that runs every case and reports its cycles or error. */
#ifndef CASE_RUNNER_H
#define CASE_RUNNER_H
#include "pyard.h"

typedef struct {
  const void *src; /* initial contents (data RAM), or NULL */
  void *dst;       /* main-memory buffer */
  uint32_t bytes;
} buffer_t;

static void fill(const buffer_t *buf) {
  if (buf->src) memcpy(buf->dst, buf->src, buf->bytes);
}

/* Runs cases 0..n-1: `fill_case` copies a case's inputs into place, `run` makes the driver call
 * (0 or its error), timed alone; `call` names it in errors. Returns the program's exit code: 0, 1 if
 * the accelerator is missing, 2 on a driver error. */
static int run_cases(int n, void (*fill_case)(int), int (*run)(int), const char *call) {
  int err = pyard_init();
  if (err) {
    pyard_perror("pyard_init", err);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    fill_case(i);
    const uint64_t t0 = pyard_cycles();
    err = run(i);
    const uint64_t t1 = pyard_cycles();
    if (err) {
      printf("case %d: ", i);
      pyard_perror(call, err);
      return 2;
    }
    printf("case %d: done in %llu cycles\n", i, (unsigned long long)(t1 - t0));
  }
  return 0;
}
#endif

/* Multi-core element-wise kernels on the shared data RAM: c = a + b and d += a · b.
 *
 *   pyard run --config 4x4-int8 --cores 4 firmware/examples/vecadd.c
 *
 * Every active hart takes the elements i ≡ hart (mod harts): harts running in step touch
 * neighbouring words, which are in different banks of the word-interleaved data RAM. A barrier
 * separates set-up, the timed kernel and the check; hart 0 prints the kernel's cycles. */
#include "pyard.h"

#ifndef LEN
#define LEN 2048
#endif

int32_t va[LEN], vb[LEN], vc[LEN], vd[LEN];

/* Inputs as functions of the index, so the check (here and in the regressions) needs no copy. */
static inline int32_t a_of(int i) { return i * 7 - 3000; }
static inline int32_t b_of(int i) { return 11 - i * 5; }
static inline int32_t d_of(int i) { return i ^ 0x155; }

int hart_main(unsigned hart, unsigned nharts) {
  for (int i = (int)hart; i < LEN; i += (int)nharts) {
    va[i] = a_of(i);
    vb[i] = b_of(i);
    vd[i] = d_of(i);
  }
  pyard_barrier();
  const uint64_t t0 = pyard_cycles();
  for (int i = (int)hart; i < LEN; i += (int)nharts) {
    const int32_t x = va[i], y = vb[i];
    vc[i] = x + y;
    vd[i] += x * y;
  }
  pyard_barrier();
  const uint64_t t1 = pyard_cycles();
  if (hart != 0) return 0;
  int bad = 0;
  for (int i = 0; i < LEN; i++) {
    bad += vc[i] != a_of(i) + b_of(i);
    bad += vd[i] != d_of(i) + a_of(i) * b_of(i);
  }
  printf("vecadd: %u harts, %d elements, %s, kernel %llu cycles\n", nharts, LEN, bad ? "MISMATCH" : "ok",
         (unsigned long long)(t1 - t0));
  return bad ? 1 : 0;
}

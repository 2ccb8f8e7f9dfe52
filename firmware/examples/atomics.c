/* Atomics under contention: every active hart increments shared counters ITERS times with
 * amoadd.w, with an lr.w/sc.w retry loop, and under an amoswap spin lock (a plain load/add/store
 * inside). The totals must be exact.
 *
 *   pyard run --config 4x4-int8 --cores 4 firmware/examples/atomics.c */
#include "pyard.h"

#ifndef ITERS
#define ITERS 300
#endif

volatile uint32_t amo_counter, lrsc_counter, locked_counter, sc_failures;
pyard_lock_t counter_lock;

/* Adds 1 with lr/sc; returns how many times the sc failed (another hart wrote in between). */
static uint32_t lrsc_increment(volatile uint32_t *p) {
  uint32_t value, failed, retries = 0;
  for (;;) {
    __asm__ volatile("lr.w %0, (%1)" : "=r"(value) : "r"(p) : "memory");
    __asm__ volatile("sc.w %0, %2, (%1)" : "=r"(failed) : "r"(p), "r"(value + 1) : "memory");
    if (!failed) return retries;
    retries++;
  }
}

int hart_main(unsigned hart, unsigned nharts) {
  uint32_t retries = 0;
  pyard_barrier();
  for (int i = 0; i < ITERS; i++) {
    __atomic_fetch_add(&amo_counter, 1, __ATOMIC_RELAXED);
    retries += lrsc_increment(&lrsc_counter);
    pyard_lock(&counter_lock);
    locked_counter = locked_counter + 1;
    pyard_unlock(&counter_lock);
  }
  __atomic_fetch_add(&sc_failures, retries, __ATOMIC_RELAXED);
  pyard_barrier();
  if (hart != 0) return 0;
  const uint32_t want = nharts * ITERS;
  const int ok = amo_counter == want && lrsc_counter == want && locked_counter == want;
  printf("atomics: %u of %u harts x %d: amoadd %u, lr/sc %u (%u sc retries), locked %u, want %u: %s\n", nharts,
         pyard_soc_harts(), ITERS, (unsigned)amo_counter, (unsigned)lrsc_counter, (unsigned)sc_failures,
         (unsigned)locked_counter, (unsigned)want, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

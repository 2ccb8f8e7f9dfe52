/* Hart start, exit, barrier, locks, the main-memory allocator and the timer. */
#include "pyard_rt.h"

extern char __mem_free_start[], __mem_end[];

__attribute__((weak)) int main(void);
__attribute__((weak)) int hart_main(unsigned hart, unsigned nharts);

void pyard_exit(int code) {
  PYARD_REG32(PYARD_EXIT_ADDR) = (uint32_t)code;
  for (;;) __asm__ volatile("wfi");
}

/* Called by crt0 on every active hart once .data/.bss are ready. */
__attribute__((noreturn, used)) void _pyard_hart_start(unsigned hart) {
  int code;
  if (hart_main) {
    code = hart_main(hart, pyard_nharts());
  } else if (hart == 0 && main) {
    code = main();
  } else if (hart == 0) {
    puts("pyard: the program defines neither main nor hart_main");
    code = 1;
  } else {
    for (;;) __asm__ volatile("wfi");
  }
  if (hart == 0) pyard_exit(code);
  for (;;) __asm__ volatile("wfi");  // other harts finish quietly; hart 0 ends the run
}

/* Barrier state in .bss (zeroed by hart 0 before any hart runs). A hart reads the generation before
 * arriving; the last arrival resets the count and then bumps the generation, which releases the
 * others. Nobody can arrive at the next barrier before the count is reset, because nobody leaves
 * this one before the generation changes. */
static volatile uint32_t barrier_count, barrier_generation;

void pyard_barrier(void) {
  const uint32_t n = pyard_nharts();
  if (n == 1) return;
  const uint32_t gen = barrier_generation;
  if (__atomic_fetch_add(&barrier_count, 1, __ATOMIC_ACQ_REL) == n - 1) {
    barrier_count = 0;
    __atomic_fetch_add(&barrier_generation, 1, __ATOMIC_RELEASE);
  } else {
    while (barrier_generation == gen) {
    }
  }
}

void pyard_lock(pyard_lock_t *lock) {
  while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE)) {
    while (*lock) {
    }
  }
}

void pyard_unlock(pyard_lock_t *lock) { __atomic_store_n(lock, 0, __ATOMIC_RELEASE); }

/* The bump pointer lives in the data RAM (main memory has no atomics). */
static uintptr_t mem_next = (uintptr_t)__mem_free_start;

void *pyard_alloc(size_t bytes, size_t align) {
  if (align == 0) align = 64;
  if (align & (align - 1)) return NULL;
  uintptr_t old = __atomic_load_n(&mem_next, __ATOMIC_RELAXED), start, end;
  do {
    start = (old + align - 1) & ~(uintptr_t)(align - 1);
    end = start + bytes;
    if (end < start || end > (uintptr_t)__mem_end) return NULL;
  } while (!__atomic_compare_exchange_n(&mem_next, &old, end, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return (void *)start;
}

size_t pyard_mem_free(void) { return (uintptr_t)__mem_end - __atomic_load_n(&mem_next, __ATOMIC_RELAXED); }

uint64_t pyard_mtime(void) {
  uint32_t hi, lo;
  do {
    hi = PYARD_REG32(PYARD_MTIME_ADDR + 4);
    lo = PYARD_REG32(PYARD_MTIME_ADDR);
  } while (hi != PYARD_REG32(PYARD_MTIME_ADDR + 4));
  return (uint64_t)hi << 32 | lo;
}

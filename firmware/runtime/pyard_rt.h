/* The pyard C runtime: console output, a libc subset, harts, barrier, atomics helpers, a bump
 * allocator over main memory, counters and the trap handler. docs/firmware.md describes it. */
#ifndef PYARD_RT_H
#define PYARD_RT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "pyard_rt_config.h"

#define PYARD_REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* ---- program structure ------------------------------------------------------------------------
 * Single-core programs define `int main(void)`: hart 0 runs it and its return value is the exit code
 * (0 = success); the other harts park. Multi-core programs define
 * `int hart_main(unsigned hart, unsigned nharts)` instead: every active hart runs it, and the run
 * ends when hart 0 returns (so hart 0 calls pyard_barrier() before returning). */
int main(void);
int hart_main(unsigned hart, unsigned nharts);

/* Ends the run with `code` (0 = success); never returns. */
__attribute__((noreturn)) void pyard_exit(int code);

/* ---- console (printf is locked across harts, so lines of different harts do not interleave) ---- */
int putchar(int c);
int puts(const char *s);
int printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int vprintf(const char *fmt, va_list ap);
int snprintf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- libc subset ---- */
void *memcpy(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);

/* ---- harts ---- */
static inline unsigned pyard_hart_id(void) {
  unsigned id;
  __asm__ volatile("csrr %0, mhartid" : "=r"(id));
  return id;
}
/* Harts running the program (PYARD_NHARTS_ACTIVE, at most the SoC's PYARD_NHARTS). */
static inline unsigned pyard_nharts(void) { return PYARD_NHARTS_ACTIVE; }
/* Harts the SoC has (its NHARTS register), whether or not they run the program. */
static inline unsigned pyard_soc_harts(void) { return PYARD_REG32(PYARD_NHARTS_ADDR); }
/* Waits until every active hart has called it (sense-reversing, on amoadd.w). */
void pyard_barrier(void);

/* A spin lock on amoswap.w; the lock word must be in the data RAM (the atomics live there). */
typedef volatile uint32_t pyard_lock_t;
void pyard_lock(pyard_lock_t *lock);
void pyard_unlock(pyard_lock_t *lock);

/* ---- main-memory allocator (the `.mem` region, reachable by the accelerator's DMA) ----
 * Bump allocation, safe from several harts (lr/sc); `align` is a power of two (0 means 64). Returns
 * NULL when the region is exhausted. Place static buffers there with PYARD_MEM. */
#define PYARD_MEM __attribute__((section(".mem"), aligned(64)))
void *pyard_alloc(size_t bytes, size_t align);
/* Bytes left in the region. */
size_t pyard_mem_free(void);

/* ---- counters ---- */
static inline uint64_t pyard_cycles(void) {
  uint32_t hi, lo, hi2;
  do {
    __asm__ volatile("csrr %0, mcycleh" : "=r"(hi));
    __asm__ volatile("csrr %0, mcycle" : "=r"(lo));
    __asm__ volatile("csrr %0, mcycleh" : "=r"(hi2));
  } while (hi != hi2);
  return (uint64_t)hi << 32 | lo;
}
static inline uint64_t pyard_instret(void) {
  uint32_t hi, lo, hi2;
  do {
    __asm__ volatile("csrr %0, minstreth" : "=r"(hi));
    __asm__ volatile("csrr %0, minstret" : "=r"(lo));
    __asm__ volatile("csrr %0, minstreth" : "=r"(hi2));
  } while (hi != hi2);
  return (uint64_t)hi << 32 | lo;
}
/* The SoC timer (MTIME, counts cycles; shared by all harts). */
uint64_t pyard_mtime(void);

/* ---- traps ----
 * The default handler prints the hart, mcause (with its name), mepc and mtval, then exits with
 * 128 + cause (exceptions) or 192 + cause (interrupts). A program replaces it by defining
 * pyard_trap_handler; the value it returns is the pc to resume at (e.g. epc + 4 to skip). */
uintptr_t pyard_trap_handler(uint32_t mcause, uintptr_t mepc, uint32_t mtval);
/* Called for the machine external interrupt (the accelerator's irq) when set; the driver uses it. */
extern void (*volatile pyard_external_irq_hook)(void);
const char *pyard_cause_name(uint32_t mcause);

#endif

/* WOLT's resource manager: a lock per tile, round-robin search, waiting when all are busy, the
 * waiting harts served first come, first served. */
#include "pyard_rm.h"

/* In .bss, zeroed before any hart runs (main memory has no atomics; the data RAM has). owner[t] is
 * the lock: 0 idle, else the holder's hart + 1. */
static volatile uint32_t owner[PYARD_NTILES];
static volatile uint32_t grants[PYARD_NTILES];
static volatile uint32_t next_tile; /* where the next search starts: after the tile last handed out */
/* The queue of acquiring harts, as tickets: a hart takes queue_tail's and searches once queue_head
 * reaches it. Without it the waiting harts raced with lr/sc and the same ones won again and again
 * (3 applications on 1 tile: one starved until the other two were done; docs/segment.md). */
static volatile uint32_t queue_tail, queue_head;

uint32_t pyard_rm_kinds(unsigned tile) { return tile < PYARD_NTILES ? PYARD_WORK_GEMM | PYARD_WORK_CONV2D : 0; }

/* One lap over the tiles from `next_tile`: takes the first idle one able to do `kind`. */
static int search(pyard_work_t kind) {
  const uint32_t me = pyard_hart_id() + 1, start = __atomic_load_n(&next_tile, __ATOMIC_RELAXED);
  for (unsigned i = 0; i < PYARD_NTILES; i++) {
    const unsigned t = (start + i) % PYARD_NTILES;
    uint32_t idle = 0;
    /* Read first: a busy lock is only loaded, so the waiting harts do not flood the RAM with stores. */
    if (!(pyard_rm_kinds(t) & kind) || owner[t] != 0) continue;
    if (__atomic_compare_exchange_n(&owner[t], &idle, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      __atomic_store_n(&next_tile, (t + 1) % PYARD_NTILES, __ATOMIC_RELAXED);
      __atomic_fetch_add(&grants[t], 1, __ATOMIC_RELAXED);
      return (int)t;
    }
  }
  return -1;
}

/* Not past a queue: a hart that finds others waiting gets nothing, as if every tile were busy. */
int pyard_rm_try_acquire(pyard_work_t kind) {
  if (__atomic_load_n(&queue_head, __ATOMIC_ACQUIRE) != __atomic_load_n(&queue_tail, __ATOMIC_RELAXED)) return -1;
  return search(kind);
}

int pyard_rm_acquire(pyard_work_t kind) {
  unsigned able = 0;
  for (unsigned t = 0; t < PYARD_NTILES; t++) able += (pyard_rm_kinds(t) & kind) != 0;
  if (able == 0) return -1;
  /* Only the head of the queue searches, so a hart that releases a tile and asks again at once
   * goes behind the harts already waiting. */
  const uint32_t ticket = __atomic_fetch_add(&queue_tail, 1, __ATOMIC_RELAXED);
  while (__atomic_load_n(&queue_head, __ATOMIC_ACQUIRE) != ticket) {
  }
  int t;
  while ((t = search(kind)) < 0) {
  }
  __atomic_store_n(&queue_head, ticket + 1, __ATOMIC_RELEASE);
  return t;
}

int pyard_rm_release(unsigned tile) {
  uint32_t me = pyard_hart_id() + 1;
  if (tile >= PYARD_NTILES) return -1;
  /* Only the holder frees it: the release orders its driver calls before the next holder's. */
  return __atomic_compare_exchange_n(&owner[tile], &me, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED) ? 0 : -1;
}

uint32_t pyard_rm_owner(unsigned tile) { return tile < PYARD_NTILES ? owner[tile] : 0; }
uint32_t pyard_rm_grants(unsigned tile) { return tile < PYARD_NTILES ? grants[tile] : 0; }

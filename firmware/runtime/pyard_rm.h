/* WOLT's resource manager (Sec. III of the WOLT paper; docs/tiles.md): applications ask for a kind
 * of work, never for a tile. A lock per tile (a word in the data RAM, taken with lr/sc); the
 * search for an idle tile is round robin, starting after the tile last handed out, and waits while
 * every tile able to do the work is busy. A tile is held by at most one application at a time.
 * Harts that wait are served first come, first served (a ticket queue): the head of the queue takes
 * the next tile freed. The queue is one for every kind of work (every pyard tile does every kind,
 * so the head never blocks a hart that an idle tile could serve).
 *
 * An application is a hart here (its owner number is hart + 1); a hart may hold several tiles. */
#ifndef PYARD_RM_H
#define PYARD_RM_H

#include <stdint.h>

#include "pyard_rt.h"

/* Kinds of work, as bits: a tile advertises the set it can do (every pyard tile does both). */
typedef enum { PYARD_WORK_GEMM = 1u << 0, PYARD_WORK_CONV2D = 1u << 1 } pyard_work_t;

/* The kinds of work tile `tile` can do (0 for a tile the SoC does not have). */
uint32_t pyard_rm_kinds(unsigned tile);
/* Takes an idle tile able to do `kind`, waiting while all are busy; returns its number, or -1 when
 * no tile of the SoC can do `kind` (waiting would never end). */
int pyard_rm_acquire(pyard_work_t kind);
/* As pyard_rm_acquire, without waiting: -1 when every such tile is busy or other harts are waiting. */
int pyard_rm_try_acquire(pyard_work_t kind);
/* Gives the tile back. 0, or -1 (nothing released) when the calling hart does not hold it. */
int pyard_rm_release(unsigned tile);
/* Who holds the tile: hart + 1, or 0 when it is idle. */
uint32_t pyard_rm_owner(unsigned tile);
/* Times the tile was handed out since reset. */
uint32_t pyard_rm_grants(unsigned tile);

#endif

/* Compile-time parameters of the runtime, from the generated SoC header (pyard_soc.h).
 * Usable from assembly as well as C. */
#ifndef PYARD_RT_CONFIG_H
#define PYARD_RT_CONFIG_H

#include "pyard_soc.h"

/* Harts that run the program; the others park in crt0. Defaults to every hart of the SoC, so a
 * build for fewer cores is a compile flag (-DPYARD_NHARTS_ACTIVE=2), not a new SoC. */
#ifndef PYARD_NHARTS_ACTIVE
#define PYARD_NHARTS_ACTIVE PYARD_NHARTS
#endif

/* Exit code of a run ended by a trap inside the trap handler (crt0.S); other traps exit with
 * 128 + cause (exceptions) or 192 + cause (interrupts). */
#define PYARD_NESTED_TRAP_EXIT 255

#endif

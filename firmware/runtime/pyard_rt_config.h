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

#endif

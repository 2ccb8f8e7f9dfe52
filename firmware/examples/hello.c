/* The board bring-up program: prints a greeting on the console (a board's UART) and exits 0.
 *
 *   pyard run --config 4x4-int8 firmware/examples/hello.c
 *   pyard build --board ulx3s_85f --config 4x4-int8 --program hello -o build/ulx3s
 *
 * Only hart 0 prints, so the line is the same on any core count. */
#include "pyard.h"

int hart_main(unsigned hart, unsigned nharts) {
  if (hart == 0) printf("hello from pyard: %u hart(s), tile %ux%u\n", nharts, PYARD_ROWS, PYARD_COLS);
  return 0;
}

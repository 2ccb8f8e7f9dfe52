/* Trap regressions for the default handler (tests/test_soc_firmware.py). Built once per case with
 * -DTRAP_CASE=<name>; each faulting instruction sits at a global label, so the test checks mepc
 * against the ELF symbol. Every case but DIV must end in the default handler's report. */
#include "pyard.h"

#define UNMAPPED 0x30000000u /* between the MMIO and main memory: nothing decodes it */

#define CASE_DIV 0
#define CASE_LOAD 1
#define CASE_STORE 2
#define CASE_FETCH 3
#define CASE_ILLEGAL 4
#define CASE_ITCM_STORE 5
#define CASE_ECALL 6
#define CASE_BAD_SP 7 /* the stack pointer points nowhere: the handler still reports (own stack) */
#define CASE_NESTED 8 /* the trap handler itself faults: reported as a nested trap, the run ends */

#if TRAP_CASE == CASE_NESTED
uintptr_t pyard_trap_handler(uint32_t mcause, uintptr_t mepc, uint32_t mtval) {
  uint32_t value;
  (void)mcause, (void)mtval;
  __asm__ volatile(".globl fault_in_handler\nfault_in_handler: lw %0, 0(%1)" : "=r"(value) : "r"(UNMAPPED) : "memory");
  return mepc + 4 + value;
}
#endif

/* Division by zero and overflow: RISC-V defines the results, nothing traps. Printed for the test to
 * compare with the specification's values. */
static int division(void) {
  volatile int32_t zero = 0, seven = 7, minus7 = -7, most_negative = INT32_MIN, minus1 = -1;
  volatile uint32_t uzero = 0, useven = 7;
  printf("div %d %d rem %d %d divu %u remu %u ovf %d %d\n", seven / zero, minus7 / zero, seven % zero, minus7 % zero,
         useven / uzero, useven % uzero, most_negative / minus1, most_negative % minus1);
  return 0;
}

int main(void) {
  uint32_t value = 0;
  switch (TRAP_CASE) {
    case CASE_DIV:
      return division();
    case CASE_LOAD:
      __asm__ volatile(".globl fault_load\nfault_load: lw %0, 0(%1)" : "=r"(value) : "r"(UNMAPPED) : "memory");
      break;
    case CASE_STORE: /* the first word past the data RAM */
      __asm__ volatile(".globl fault_store\nfault_store: sw %0, 0(%1)" ::"r"(value), "r"(PYARD_DRAM_BASE + PYARD_DRAM_SIZE)
                       : "memory");
      break;
    case CASE_FETCH:
      ((void (*)(void))UNMAPPED)();
      break;
    case CASE_ILLEGAL: /* major opcode 0x7f is reserved (an instruction longer than 64 bits) */
      __asm__ volatile(".globl fault_illegal\nfault_illegal: .4byte 0xdead007f");
      break;
    case CASE_ITCM_STORE: /* the ITCM takes loads and stores from the data port, not AMOs */
      __asm__ volatile(".globl fault_itcm\nfault_itcm: amoswap.w %0, %0, (%1)" : "+r"(value) : "r"(PYARD_ITCM_BASE + 64)
                       : "memory");
      break;
    case CASE_ECALL:
    case CASE_NESTED:
      __asm__ volatile(".globl fault_ecall\nfault_ecall: ecall");
      break;
    case CASE_BAD_SP: /* sp lost: the push of the next call would fault the same way */
      __asm__ volatile("li sp, %0\n.globl fault_bad_sp\nfault_bad_sp: sw zero, -4(sp)" ::"i"(UNMAPPED) : "memory");
      break;
  }
  printf("no trap (value %u)\n", (unsigned)value);
  return 0;
}

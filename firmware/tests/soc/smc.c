/* Self-modifying code on the pyard SoC (tests/test_soc_firmware.py): a hart writes instructions
 * into its ITCM through the data port, and fence.i makes fetch see them. */
#include "pyard.h"

#define ADDI_A0(value) (0x00000513u | ((uint32_t)(value) << 20)) /* addi a0, zero, value */
#define RET 0x00008067u                                            /* jalr zero, 0(ra) */

/* A function in the ITCM whose body the program rewrites (written in assembly, so the compiler
 * knows nothing about what it returns). */
int patched(void);
__asm__(".text\n .align 4\n .globl patched\npatched:\n li a0, 1\n ret\n nop\n nop\n");

/* The instruction right after fence.i has already been fetched (fetch reads ahead): after the
 * store and fence.i the new instruction must run, not the one fetched before the store. */
static int patch_the_next_instruction(uint32_t value) {
  int result;
  __asm__ volatile(
      "la t0, 1f\n"
      "sw %1, 0(t0)\n"
      "fence.i\n"
      "1: addi a0, zero, 7\n"
      "mv %0, a0\n"
      : "=r"(result)
      : "r"(ADDI_A0(value))
      : "t0", "a0", "memory");
  return result;
}

int main(void) {
  volatile uint32_t *code = (volatile uint32_t *)(uintptr_t)patched;
  int before = patched();
  code[0] = ADDI_A0(42);
  code[1] = RET;
  __asm__ volatile("fence.i" ::: "memory");
  int after = patched();
  /* Bytes and halfwords reach the ITCM too, and read back through the data port. */
  volatile uint8_t *bytes = (volatile uint8_t *)(uintptr_t)patched;
  bytes[2] = 0x50; /* addi a0, zero, 42 -> imm 0x005 (bits 20..27 from byte 2, bits 28..31 from byte 3) */
  bytes[3] = 0x00;
  __asm__ volatile("fence.i" ::: "memory");
  int after_bytes = patched();
  int next1 = patch_the_next_instruction(11);
  int next2 = patch_the_next_instruction(12);
  printf("smc %d %d %d %d %d %08x\n", before, after, after_bytes, next1, next2, (unsigned)code[0]);
  return 0;
}

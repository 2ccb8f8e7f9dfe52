#include "macros.h"
/* Machine interrupts: software, timer, external; masking by mstatus.MIE and mie; priority;
 * vectored mtvec; an interrupt while the divider is busy. The handler (macros.h) checks mcause,
 * checks mtval == 0, drops all IRQ lines, counts the interrupt in s7 and returns to mepc. */
#define RAISE(bits) li t0, IRQ_ADDR; li t1, bits; sw t1, 0(t0)
TEST_START
  /* Software interrupt. */
  li s10, 0x80000003; li x1, 0x8; csrw mie, x1; csrsi mstatus, 8
  RAISE(1)
  WAIT_IRQS(1, 1)
  TEST_CASE(2, 0x1888, csrr RESULT, mstatus)                 /* MIE back on after mret */
  TEST_CASE(3, 0x80000003, csrr RESULT, mcause)
  /* Timer interrupt, raised asynchronously 20 cycles after arming. */
  li s10, 0x80000007; li x1, 0x80; csrw mie, x1
  li t0, TIMER_ADDR; li t1, 20; sw t1, 0(t0)
  WAIT_IRQS(4, 2)
  /* External interrupt. */
  li s10, 0x8000000b; li x1, 0x800; csrw mie, x1
  RAISE(4)
  WAIT_IRQS(5, 3)
  /* mstatus.MIE = 0 masks a pending, enabled interrupt; mip shows it; setting MIE takes it. */
  csrci mstatus, 8; li x1, 0x8; csrw mie, x1; li s10, 0x80000003
  RAISE(1)
  nop; nop; nop; nop; nop; nop; nop; nop
  TEST_CASE(6, 3, mv RESULT, s7)
  TEST_CASE(7, 0x8, csrr RESULT, mip)
  csrsi mstatus, 8
  WAIT_IRQS(8, 4)
  /* mie = 0 masks everything; all three lines show in mip. */
  csrw mie, zero; li s10, -1
  RAISE(7)
  nop; nop; nop; nop; nop; nop; nop; nop
  TEST_CASE(9, 0x888, csrr RESULT, mip)
  TEST_CASE(10, 4, mv RESULT, s7)
  /* Priority with all three pending and enabled: external first (the handler drops all lines). */
  li s10, 0x8000000b; li x1, 0x888; csrw mie, x1
  WAIT_IRQS(11, 5)
  TEST_CASE(12, 0, csrr RESULT, mip)
  /* Priority software over timer. */
  csrci mstatus, 8; li s10, 0x80000003
  RAISE(3)
  csrsi mstatus, 8
  WAIT_IRQS(13, 6)
  /* Vectored mode: an interrupt jumps to base + 4 * cause. */
  la x1, vectors; ori x1, x1, 1; csrw mtvec, x1; li s5, 0; li s10, 0x80000003
  RAISE(1)
  WAIT_IRQS(14, 7)
  TEST_CASE(15, 1, mv RESULT, s5)
  li s11, 0; TEST_TRAP(16, 11, ecall)                        /* exceptions still use the base */
  la x1, trap_entry; csrw mtvec, x1
  /* An interrupt while a divide is in flight: the divide still completes into its register. */
  li x1, 1000; li x2, 7; li s10, 0x80000007; li x4, 0x80; csrw mie, x4
  li t0, TIMER_ADDR; li t1, 3; sw t1, 0(t0)
  div x13, x1, x2; addi x17, x0, 1
  WAIT_IRQS(17, 8)
  TEST_CASE(18, 142, mv RESULT, x13)
  /* wfi is a no-op: execution continues with nothing pending. */
  TEST_CASE(19, 2, li RESULT, 1; wfi; addi RESULT, RESULT, 1)
  TEST_PASS
TEST_END
  .balign 64
vectors:
  j trap_entry                                               /* exceptions */
  j unexpected; j unexpected
  j 1f                                                       /* 3: machine software */
  j unexpected; j unexpected; j unexpected
  j unexpected                                               /* 7: machine timer */
  j unexpected; j unexpected; j unexpected
  j unexpected                                               /* 11: machine external */
1: addi s5, s5, 1; j trap_entry

#include "macros.h"
/* Every synchronous exception cause with its mcause, mtval and mepc, and mstatus on trap/mret. */
#define UNMAPPED 0x20000000
TEST_START
  la x10, data
  li s11, 0; TEST_TRAP(1, 11, ecall)
  TVAL_PC; TEST_TRAP(2, 3, ebreak)
  /* Illegal instructions report their bits in mtval. */
  TVAL_INSN; TEST_TRAP(3, 2, .word 0xffffffff)
  TVAL_INSN; TEST_TRAP(4, 2, .word 0x00000000)
  TVAL_INSN; TEST_TRAP(5, 2, .word 0x40006033)               /* OP funct7=0100000 with funct3=or */
  TVAL_INSN; TEST_TRAP(6, 2, .word 0x02009093)               /* slli with shamt[5] set */
  TVAL_INSN; TEST_TRAP(7, 2, .word 0x00003067)              /* jalr with funct3 = 011 */
  TVAL_INSN; TEST_TRAP(8, 2, .word 0x0000b02f)              /* amoadd with funct3 = 011 (.d) */
  TVAL_INSN; TEST_TRAP(9, 2, .word 0xf800a02f)               /* AMO funct5 11111 */
  TVAL_INSN; TEST_TRAP(10, 2, .word 0x1010202f)             /* lr.w with rs2 != 0 */
  TVAL_INSN; TEST_TRAP(11, 2, .word 0x10200073)             /* sret: no S-mode */
  TVAL_INSN; TEST_TRAP(12, 2, .word 0x00004073)              /* SYSTEM funct3 = 100 */
  TVAL_INSN; TEST_TRAP(13, 2, .word 0x0000b003)              /* load funct3 = 011 (ld) */
  TVAL_INSN; TEST_TRAP(14, 2, .word 0x00003023)              /* store funct3 = 011 (sd) */
  TVAL_INSN; TEST_TRAP(15, 2, .word 0x00002063)              /* branch funct3 = 010 */
  TVAL_INSN; TEST_TRAP(16, 2, .word 0x00000010)             /* bits[1:0] != 11 (compressed) */
  /* Misaligned loads and stores report the address. */
  addi s11, x10, 1; TEST_TRAP(17, 4, lw x1, 1(x10))
  addi s11, x10, 3; TEST_TRAP(18, 4, lh x1, 3(x10))
  addi s11, x10, 1; TEST_TRAP(19, 4, lhu x1, 1(x10))
  addi s11, x10, 2; TEST_TRAP(20, 6, sw x1, 2(x10))
  addi s11, x10, 1; TEST_TRAP(21, 6, sh x1, 1(x10))
  addi s11, x10, 2; addi x11, x10, 2; TEST_TRAP(22, 6, amoadd.w x1, x1, (x11))
  addi s11, x10, 2; TEST_TRAP(23, 4, lr.w x1, (x11))
  addi s11, x10, 2; TEST_TRAP(24, 6, sc.w x1, x1, (x11))
  TEST_CASE(25, 0xffffffa5, li x1, 0xa5; sb x1, 1(x10); lb RESULT, 1(x10))   /* bytes are never misaligned */
  /* Access faults: the bus answers with an error; mtval is the full byte address. */
  li x11, UNMAPPED
  li s11, UNMAPPED; TEST_TRAP(26, 5, lw x1, 0(x11))
  li s11, UNMAPPED + 3; TEST_TRAP(27, 5, lb x1, 3(x11))
  li s11, UNMAPPED + 4; TEST_TRAP(28, 7, sw x1, 4(x11))
  li s11, UNMAPPED; TEST_TRAP(29, 5, lr.w x1, (x11))
  li s11, UNMAPPED; TEST_TRAP(30, 7, amoswap.w x1, x1, (x11))
  li x12, EXIT_ADDR; li s11, EXIT_ADDR; TEST_TRAP(31, 7, amoor.w x1, x1, (x12)) /* no atomics on MMIO */
  /* The instruction behind a faulting load has no effect (precise trap), nor does the load. */
  li x1, 0x1234; sw x1, 0(x10); li x5, 0x99; li x2, 0x55
  li s11, UNMAPPED; TEST_TRAP(32, 5, lw x2, 0(x11); sw x5, 0(x10); li x2, 7)
  TEST_CASE(33, 0x1234, lw RESULT, 0(x10))
  TEST_CASE(34, 0x55, mv RESULT, x2)
  /* Misaligned jump target: reported on the jump (mepc), mtval = target. */
  la x1, 1f; addi s11, x1, 2; la s8, 2f; li x5, 0
  TEST_TRAP_AT(35, 0, 2: jalr x5, 2(x1); 1: nop)
  TEST_CASE(36, 0, mv RESULT, x5)                            /* link register not written */
  /* Fetch access fault: mepc and mtval are the unmapped target. */
  li s8, UNMAPPED; li s11, UNMAPPED
  TEST_TRAP_AT(37, 1, li x1, UNMAPPED; jr x1)
  /* Trap entry saves MIE in MPIE and clears MIE; mret restores it and sets MPIE. */
  csrsi mstatus, 8; li s11, 0
  TEST_TRAP(38, 11, ecall)
  TEST_CASE(39, 0x1880, mv RESULT, s6)                       /* in the handler: MPIE=1, MIE=0 */
  TEST_CASE(40, 0x1888, csrr RESULT, mstatus)                /* after mret: MIE=1, MPIE=1 */
  csrci mstatus, 8
  TEST_TRAP(41, 11, ecall)
  TEST_CASE(42, 0x1800, mv RESULT, s6)
  TEST_CASE(43, 0x1880, csrr RESULT, mstatus)
  /* mepc/mcause/mtval keep the last trap. */
  TEST_CASE(44, 11, csrr RESULT, mcause)
  TEST_CASE(45, 0, csrr RESULT, mtval)
  /* fence, fence.i and wfi are no-ops. */
  TEST_CASE(46, 3, li RESULT, 1; fence; addi RESULT, RESULT, 1; fence.i; wfi; addi RESULT, RESULT, 1)
  TEST_PASS
TEST_END
  .data
  .balign 4
data:
  .word 0, 0, 0, 0

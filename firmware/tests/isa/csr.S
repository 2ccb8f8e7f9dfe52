#include "macros.h"
/* Zicsr instructions and the machine-mode CSRs: values, write masks, counters, illegal accesses. */
#ifndef HART_ID
#define HART_ID 0
#endif
#define ILLEGAL_CSR(num, insn...) TVAL_INSN; TEST_TRAP(num, 2, insn)
TEST_START
  TEST_CASE(1, 0x40001101, csrr RESULT, misa)                 /* RV32 + A + I + M */
  TEST_CASE(2, HART_ID, csrr RESULT, mhartid)
  TEST_CASE(3, 0, csrr RESULT, mvendorid)
  TEST_CASE(4, 0, csrr RESULT, marchid)
  TEST_CASE(5, 0, csrr RESULT, mimpid)
  TEST_CASE(6, 0x1800, csrr RESULT, mstatus)                  /* MPP = M, MIE = MPIE = 0 */
  TEST_CASE(7, 0x1808, csrsi mstatus, 8; csrr RESULT, mstatus)
  TEST_CASE(8, 0x1800, csrci mstatus, 8; csrr RESULT, mstatus)
  TEST_CASE(9, 0, csrr RESULT, mstatush)
  /* csrrw/csrrs/csrrc return the old value and write rs1 / old|rs1 / old&~rs1. */
  TEST_CASE(10, 0, li x1, 0x0f0f; csrrw RESULT, mscratch, x1)
  TEST_CASE(11, 0x0f0f, li x1, 0xf000; csrrs RESULT, mscratch, x1)
  TEST_CASE(12, 0xff0f, li x1, 0x0f00; csrrc RESULT, mscratch, x1)
  TEST_CASE(13, 0xf00f, csrr RESULT, mscratch)
  TEST_CASE(14, 0xf00f, csrrwi RESULT, mscratch, 0x15)
  TEST_CASE(15, 0x15, csrrsi RESULT, mscratch, 0x0a)
  TEST_CASE(16, 0x1f, csrrci RESULT, mscratch, 0x03)
  TEST_CASE(17, 0x1c, csrr RESULT, mscratch)
  /* The CSR source forwarded from the instruction right before. */
  TEST_CASE(18, 0x55, li x1, 0x50; addi x1, x1, 5; csrw mscratch, x1; csrr RESULT, mscratch)
  /* WARL fields: mepc[1:0], mtvec[1], mie outside MSIE/MTIE/MEIE, misa and mip ignore writes. */
  TEST_CASE(19, 0x1000, li x1, 0x1003; csrw mepc, x1; csrr RESULT, mepc)
  TEST_CASE(20, 0x1001, csrr x5, mtvec; li x1, 0x1003; csrw mtvec, x1; csrr RESULT, mtvec; csrw mtvec, x5)
  TEST_CASE(21, 0x888, li x1, -1; csrw mie, x1; csrr RESULT, mie; csrw mie, zero)
  TEST_CASE(22, 0x40001101, csrw misa, zero; csrr RESULT, misa)
  TEST_CASE(23, 0, li x1, -1; csrw mip, x1; csrr RESULT, mip)
  TEST_CASE(24, 0x12345678, li x1, 0x12345678; csrw mcause, x1; csrr RESULT, mcause)
  TEST_CASE(25, 0x9abcdef0, li x1, 0x9abcdef0; csrw mtval, x1; csrr RESULT, mtval)
  /* minstret counts exactly the instructions retired in between; instret is the same counter. */
  TEST_CASE(26, 6, csrr x1, minstret; nop; nop; nop; nop; nop; csrr x2, minstret; sub RESULT, x2, x1)
  TEST_CASE(27, 1, csrr x1, minstret; csrr x2, instret; sub RESULT, x2, x1)
  /* mcycle advances every cycle: writable, carries into mcycleh; cycle/time read the same counter. */
  TEST_CASE(28, 1, csrr x1, mcycle; csrr x2, cycle; sub x2, x2, x1; sltu RESULT, x2, 1; xori RESULT, RESULT, 1)
  TEST_CASE(29, 1, csrr x1, mcycle; csrr x2, time; sub x2, x2, x1; sltiu RESULT, x2, 64)
  TEST_CASE(30, 1, li x1, 0x100; csrw mcycle, x1; csrr x2, mcycle; sub x2, x2, x1; sltiu RESULT, x2, 64)
  TEST_CASE(31, 1, csrw mcycleh, zero; li x1, -1; csrw mcycle, x1; nop; nop; csrr RESULT, mcycleh)
  TEST_CASE(32, 1, csrr x1, mcycleh; csrr RESULT, cycleh; sub RESULT, RESULT, x1; addi RESULT, RESULT, 1)
  TEST_CASE(33, 7, li x1, 7; csrw minstreth, x1; csrr RESULT, instreth)
  TEST_CASE(34, 0, csrr x1, timeh; csrr x2, mcycleh; sub RESULT, x2, x1)
  /* A CSR write takes effect after the writing instruction completes: the next read sees it. */
  TEST_CASE(35, 100, li x1, 100; csrw minstret, x1; csrr RESULT, minstret)
  /* Reading a read-only CSR without writing is legal (csrrs/csrrc with x0, csrrsi with 0). */
  TEST_CASE(36, HART_ID, csrrs RESULT, mhartid, x0)
  TEST_CASE(37, HART_ID, csrrci RESULT, mhartid, 0)
  /* Writing a read-only CSR and touching a CSR that does not exist are illegal instructions. */
  ILLEGAL_CSR(38, csrw mhartid, x1)
  ILLEGAL_CSR(39, csrrsi x1, mvendorid, 1)
  ILLEGAL_CSR(40, csrw cycle, x0)
  ILLEGAL_CSR(41, csrr x1, 0x7c0)
  ILLEGAL_CSR(42, csrw 0x3a0, x1)                              /* pmpcfg0: not implemented */
  ILLEGAL_CSR(43, csrr x1, 0x100)                              /* sstatus: no S-mode */
  /* The illegal CSR write had no effect on the destination register. */
  li x1, 0x77; ILLEGAL_CSR(44, csrrw x1, 0x7c0, x0)
  TEST_CASE(45, 0x77, mv RESULT, x1)
  /* A write to either half of minstret replaces the writing instruction's increment of the whole
   * 64-bit counter (privileged spec, Hardware Performance Monitor): no carry out of a written low
   * half, no increment of the low half when the high half is written; later instructions count. */
  TEST_CASE(46, 5, li x1, 5; csrw minstreth, x1; li x1, -1; csrw minstret, x1; csrr RESULT, minstreth)
  TEST_CASE(47, 6, li x1, 5; csrw minstreth, x1; li x1, -1; csrw minstret, x1; nop; csrr RESULT, minstreth)
  TEST_CASE(48, 0, li x1, -1; csrw minstret, x1; li x1, 9; csrw minstreth, x1; csrr RESULT, minstret)
  TEST_CASE(49, 9, li x1, -1; csrw minstret, x1; li x1, 9; csrw minstreth, x1; csrr RESULT, minstreth)
  TEST_CASE(50, 2, li x1, -2; csrw minstret, x1; li x1, 8; csrw minstreth, x1; nop; nop; nop; csrr RESULT, minstret)
  TEST_CASE(51, 9, li x1, -3; li x2, 8; csrw minstreth, x2; csrw minstret, x1; nop; nop; nop; csrr RESULT, minstreth)
  TEST_PASS
TEST_END

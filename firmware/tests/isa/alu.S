#include "macros.h"
/* RV32I register and immediate arithmetic, lui/auipc, writes to x0 and forwarding chains.
 * Expected values are worked out from the ISA spec by hand. */
TEST_START
  TEST_RR(1, add, 0x00000000, 0xffffffff, 1)
  TEST_RR(2, add, 0x80000000, 0x7fffffff, 1)
  TEST_RR(3, sub, 0xffffffff, 0, 1)
  TEST_RR(4, sub, 0x7fffffff, 0x80000000, 1)
  TEST_RR(5, and, 0x0f000f00, 0xff00ff00, 0x0f0f0f0f)
  TEST_RR(6, or, 0xff0fff0f, 0xff00ff00, 0x0f0f0f0f)
  TEST_RR(7, xor, 0xf00ff00f, 0xff00ff00, 0x0f0f0f0f)
  TEST_RR(8, sll, 0x80000000, 1, 31)
  TEST_RR(9, sll, 0x00000002, 1, 33)          /* only rs2[4:0] counts */
  TEST_RR(10, srl, 0x00000001, 0x80000000, 31)
  TEST_RR(11, srl, 0x7fffffff, 0xffffffff, 0xffffffe1)
  TEST_RR(12, sra, 0xffffffff, 0x80000000, 31)
  TEST_RR(13, sra, 0xf8000000, 0x80000000, 4)
  TEST_RR(14, sra, 0x07ffffff, 0x7fffffff, 4)
  TEST_RR(15, slt, 1, 0x80000000, 0)
  TEST_RR(16, slt, 0, 0, 0x80000000)
  TEST_RR(17, slt, 0, 5, 5)
  TEST_RR(18, sltu, 0, 0x80000000, 0)
  TEST_RR(19, sltu, 1, 0, 0x80000000)
  TEST_RI(20, addi, 0xfffff800, 0, -2048)
  TEST_RI(21, addi, 0x800007fe, 0x7fffffff, 2047)
  TEST_RI(22, andi, 0xff00ff00, 0xff00ff00, -1)
  TEST_RI(23, andi, 0x00000700, 0xff00ff00, 0x70f)
  TEST_RI(24, ori, 0xfffff80f, 0x0000000f, -2048)
  TEST_RI(25, xori, 0xff00f00f, 0x00ff0ff0, -1)
  TEST_RI(26, slli, 0x80000000, 1, 31)
  TEST_RI(27, srli, 0x00000001, 0x80000000, 31)
  TEST_RI(28, srai, 0xffffffff, 0x80000000, 31)
  TEST_RI(29, srai, 0x00000003, 7, 1)
  TEST_RI(30, slti, 1, 0xffffffff, 0)
  TEST_RI(31, slti, 0, 0, -1)
  TEST_RI(32, sltiu, 1, 0, -1)               /* -1 is 0xffffffff unsigned */
  TEST_RI(33, sltiu, 0, 0xffffffff, 1)
  TEST_CASE(34, 0x12345000, lui RESULT, 0x12345)
  TEST_CASE(35, 0x80000000, lui RESULT, 0x80000)
  TEST_CASE(36, 8, 1: auipc x1, 0; auipc x2, 0; sub RESULT, x2, x1; addi RESULT, RESULT, 4)
  TEST_CASE(37, 0x2000, 37: auipc x1, 2; la x2, 37b; sub RESULT, x1, x2)
  /* x0 ignores writes and always reads zero. */
  TEST_CASE(38, 0, li x1, 5; add x0, x1, x1; addi x0, x0, 7; lui x0, 1; mv RESULT, x0)
  /* Back-to-back dependences through the forwarding paths. */
  TEST_CASE(39, 14, li x1, 1; addi x1, x1, 1; add x2, x1, x1; add x13, x2, x1; slli x4, x13, 1; sub x5, x4, x1; addi RESULT, x5, 4)
  TEST_CASE(40, 3, li x1, 1; li x2, 2; nop; add RESULT, x1, x2)
  TEST_CASE(41, 3, li x1, 1; li x2, 2; nop; nop; add RESULT, x2, x1)
  TEST_PASS
TEST_END

#include "macros.h"
/* M extension: all products and quotients, division by zero and overflow (no trap), and the
 * divider running beside independent instructions. Values computed from the spec definitions. */
TEST_START
  TEST_RR(1, mul, 0x242d2080, 0x12345678, 0x9abcdef0)
  TEST_RR(2, mulh, 0xf8cc93d6, 0x12345678, 0x9abcdef0)
  TEST_RR(3, mulhsu, 0x0b00ea4e, 0x12345678, 0x9abcdef0)
  TEST_RR(4, mulhu, 0x0b00ea4e, 0x12345678, 0x9abcdef0)
  TEST_RR(5, mul, 0x00000000, 0x80000000, 0x80000000)
  TEST_RR(6, mulh, 0x40000000, 0x80000000, 0x80000000)
  TEST_RR(7, mulhsu, 0xc0000000, 0x80000000, 0x80000000)
  TEST_RR(8, mulhu, 0x40000000, 0x80000000, 0x80000000)
  TEST_RR(9, mulh, 0x00000000, 0xffffffff, 0xffffffff)
  TEST_RR(10, mulhsu, 0xffffffff, 0xffffffff, 0xffffffff)
  TEST_RR(11, mulhu, 0xfffffffe, 0xffffffff, 0xffffffff)
  TEST_RR(12, mul, 0xffffffeb, 7, 0xfffffffd)
  TEST_RR(13, mulhsu, 0x00000006, 7, 0xfffffffd)
  TEST_RR(14, div, 0xfffffffd, 0xffffffec, 6)
  TEST_RR(15, rem, 0xfffffffe, 0xffffffec, 6)
  TEST_RR(16, divu, 0x2aaaaaa7, 0xffffffec, 6)
  TEST_RR(17, remu, 0x00000002, 0xffffffec, 6)
  TEST_RR(18, div, 0xfffffffd, 20, 0xfffffffa)
  TEST_RR(19, rem, 0x00000002, 20, 0xfffffffa)
  TEST_RR(20, div, 0x00000003, 0xffffffec, 0xfffffffa)
  TEST_RR(21, rem, 0xfffffffe, 0xffffffec, 0xfffffffa)
  TEST_RR(22, remu, 0xffffffec, 0xffffffec, 0xfffffffa)
  /* Overflow: the most negative number divided by -1. */
  TEST_RR(23, div, 0x80000000, 0x80000000, 0xffffffff)
  TEST_RR(24, rem, 0x00000000, 0x80000000, 0xffffffff)
  /* Division by zero: quotient all ones, remainder the dividend. */
  TEST_RR(25, div, 0xffffffff, 0xfffffffb, 0)
  TEST_RR(26, rem, 0xfffffffb, 0xfffffffb, 0)
  TEST_RR(27, divu, 0xffffffff, 5, 0)
  TEST_RR(28, remu, 0x00000005, 5, 0)
  TEST_RR(29, divu, 0x24924922, 0xfffffff0, 7)
  /* Independent instructions run while the divider works; the dependent one waits for it. */
  TEST_CASE(30, 0x2a, li x1, 100; li x2, 7; div x13, x1, x2; li x4, 3; addi x4, x4, 25; add RESULT, x13, x4)
  /* Back-to-back divides, the second using the first's result. */
  TEST_CASE(31, 5, li x1, 1000; li x2, 10; divu x13, x1, x2; divu RESULT, x13, x2; addi RESULT, RESULT, -5)
  /* Writing the divide's destination from another instruction before it finishes (WAW). */
  TEST_CASE(32, 9, li x1, 1000; li x2, 10; div RESULT, x1, x2; li RESULT, 9)
  /* A multiply result used immediately, and a chain of multiplies. */
  TEST_CASE(33, 0x1b0, li x1, 6; mul x2, x1, x1; mul x13, x2, x1; add RESULT, x13, x13)
  /* Divide into x0 has no effect. */
  TEST_CASE(34, 0, li x1, 9; li x2, 3; div x0, x1, x2; mv RESULT, x0)
  TEST_PASS
TEST_END

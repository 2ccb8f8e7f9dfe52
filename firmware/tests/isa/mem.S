#include "macros.h"
/* Loads and stores of every width, sign/zero extension, byte lanes, load-use and store-load order. */
TEST_START
  la x10, data
  TEST_CASE(1, 0xffffff80, lb RESULT, 0(x10))
  TEST_CASE(2, 0x00000080, lbu RESULT, 0(x10))
  TEST_CASE(3, 0x00000001, lb RESULT, 1(x10))
  TEST_CASE(4, 0xfffffff2, lb RESULT, 2(x10))
  TEST_CASE(5, 0x0000007f, lbu RESULT, 3(x10))
  TEST_CASE(6, 0x00000180, lh RESULT, 0(x10))
  TEST_CASE(7, 0x00007ff2, lhu RESULT, 2(x10))
  TEST_CASE(8, 0xffff8001, lh RESULT, 4(x10))
  TEST_CASE(9, 0x00008001, lhu RESULT, 4(x10))
  TEST_CASE(10, 0x7ff20180, lw RESULT, 0(x10))
  TEST_CASE(11, 0xdead8001, lw RESULT, 4(x10))
  TEST_CASE(12, 0x7ff20180, addi x11, x10, 8; lw RESULT, -8(x11))
  /* Stores write only their byte lanes. */
  TEST_CASE(13, 0x11223344, li x1, 0x11223344; sw x1, 8(x10); lw RESULT, 8(x10))
  TEST_CASE(14, 0x1122aa44, li x1, 0xaa; sb x1, 9(x10); lw RESULT, 8(x10))
  TEST_CASE(15, 0xbbbbaa44, li x1, 0x1234bbbb; sh x1, 10(x10); lw RESULT, 8(x10))
  TEST_CASE(16, 0xbbbbaacc, li x1, 0xffffffcc; sb x1, 8(x10); lw RESULT, 8(x10))
  TEST_CASE(17, 0xddeeaacc, li x1, 0xddee; sh x1, 10(x10); lw RESULT, 8(x10))
  TEST_CASE(18, 0xffffffdd, lb RESULT, 11(x10))
  /* Load-use: the loaded value feeds the next instruction directly. */
  TEST_CASE(19, 0x7ff20181, lw x1, 0(x10); addi RESULT, x1, 1)
  TEST_CASE(20, 0x7ff20180, lw x1, 0(x10); sw x1, 12(x10); lw RESULT, 12(x10))
  /* Store data forwarded from the instruction right before the store. */
  TEST_CASE(21, 43, li x1, 42; addi x1, x1, 1; sw x1, 16(x10); lw RESULT, 16(x10))
  /* Address register produced by the previous load. */
  TEST_CASE(22, 0x7ff20180, sw x10, 20(x10); lw x2, 20(x10); lw RESULT, 0(x2))
  /* Load into x0 is discarded. */
  TEST_CASE(23, 0, lw x0, 0(x10); mv RESULT, x0)
  TEST_PASS
TEST_END
  .data
  .balign 4
data:
  .word 0x7ff20180
  .word 0xdead8001
  .word 0, 0, 0, 0, 0, 0

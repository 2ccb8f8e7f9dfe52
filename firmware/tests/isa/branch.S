#include "macros.h"
/* Conditional branches (taken and not taken, signed vs unsigned), jal and jalr. */
TEST_START
  TEST_BR_TAKEN(1, beq, 5, 5)
  TEST_BR_NOT(2, beq, 5, 6)
  TEST_BR_TAKEN(3, bne, 0, 0x80000000)
  TEST_BR_NOT(4, bne, 7, 7)
  TEST_BR_TAKEN(5, blt, 0xffffffff, 0)
  TEST_BR_NOT(6, blt, 0, 0xffffffff)
  TEST_BR_NOT(7, blt, 3, 3)
  TEST_BR_TAKEN(8, bge, 3, 3)
  TEST_BR_TAKEN(9, bge, 0, 0x80000000)
  TEST_BR_NOT(10, bge, 0x80000000, 0x7fffffff)
  TEST_BR_TAKEN(11, bltu, 0, 0xffffffff)
  TEST_BR_NOT(12, bltu, 0xffffffff, 0)
  TEST_BR_TAKEN(13, bgeu, 0x80000000, 0x7fffffff)
  TEST_BR_NOT(14, bgeu, 1, 2)
  TEST_BR_TAKEN(15, bgeu, 9, 9)
  /* A backward branch loop: 10 iterations. */
  TEST_CASE(16, 10, li RESULT, 0; li x1, 10; 1: addi RESULT, RESULT, 1; bne RESULT, x1, 1b)
  /* jal links pc+4 and skips the instruction after it. */
  TEST_CASE(17, 0, li RESULT, 0; la x2, 2f; jal x1, 1f; 2: li RESULT, 99; 1: sub RESULT, x1, x2; add RESULT, RESULT, RESULT)
  TEST_CASE(18, 4, 1: jal x1, 2f; 2: la x2, 1b; sub RESULT, x1, x2)
  /* jalr adds the immediate and clears bit 0 of the target. */
  TEST_CASE(19, 1, li RESULT, 0; la x1, 1f; jalr x5, 1(x1); li RESULT, 99; 1: addi RESULT, RESULT, 1)
  TEST_CASE(20, 7, li RESULT, 7; la x1, 1f; addi x1, x1, -8; jalr x0, 8(x1); li RESULT, 99; 1:)
  /* jalr with rd == rs1 uses the old value of rs1. */
  TEST_CASE(21, 8, la x1, 1f; jalr x1, 0(x1); 1: la x2, 1b; sub RESULT, x1, x2; addi RESULT, RESULT, 8)
  /* Instructions behind a taken branch must not execute. */
  TEST_CASE(22, 1, li RESULT, 1; j 1f; li RESULT, 2; li RESULT, 3; li RESULT, 4; 1:)
  /* A branch right after the instruction that computes its operand. */
  TEST_CASE(23, 5, li RESULT, 5; li x1, 4; addi x1, x1, 1; beq x1, RESULT, 1f; li RESULT, 0; 1:)
  TEST_PASS
TEST_END

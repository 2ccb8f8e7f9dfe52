#include "macros.h"
/* A extension: every amo*.w returns the old word and stores op(old, rs2); lr/sc reservations. */
#define TEST_AMO(num, inst, old, src, ret_expect, mem_expect)            \
  TEST_CASE(num, ret_expect, li x1, old; sw x1, 0(x10); li x2, src;     \
            inst RESULT, x2, (x10));                                     \
  TEST_CASE(num, mem_expect, lw RESULT, 0(x10))
TEST_START
  la x10, word
  TEST_AMO(1, amoswap.w, 0x11111111, 0x22222222, 0x11111111, 0x22222222)
  TEST_AMO(2, amoadd.w, 0xffffffff, 0x00000002, 0xffffffff, 0x00000001)
  TEST_AMO(3, amoxor.w, 0xff00ff00, 0x0ff00ff0, 0xff00ff00, 0xf0f0f0f0)
  TEST_AMO(4, amoand.w, 0xff00ff00, 0x0ff00ff0, 0xff00ff00, 0x0f000f00)
  TEST_AMO(5, amoor.w, 0xff00ff00, 0x0ff00ff0, 0xff00ff00, 0xfff0fff0)
  TEST_AMO(6, amomin.w, 0x80000001, 0x00000005, 0x80000001, 0x80000001)
  TEST_AMO(7, amomin.w, 0x00000007, 0xfffffffe, 0x00000007, 0xfffffffe)
  TEST_AMO(8, amomax.w, 0x80000001, 0x00000005, 0x80000001, 0x00000005)
  TEST_AMO(9, amomax.w, 0x00000007, 0x00000003, 0x00000007, 0x00000007)
  TEST_AMO(10, amominu.w, 0x80000001, 0x00000005, 0x80000001, 0x00000005)
  TEST_AMO(11, amominu.w, 0x00000003, 0xfffffffe, 0x00000003, 0x00000003)
  TEST_AMO(12, amomaxu.w, 0x80000001, 0x00000005, 0x80000001, 0x80000001)
  TEST_AMO(13, amomaxu.w, 0x00000003, 0xfffffffe, 0x00000003, 0xfffffffe)
  /* aq/rl bits decode to the same operations. */
  TEST_AMO(14, amoadd.w.aqrl, 40, 2, 40, 42)
  /* lr/sc: success writes and returns 0 ... */
  TEST_CASE(15, 0, li x1, 123; sw x1, 0(x10); lr.w x13, (x10); addi x13, x13, 1; sc.w RESULT, x13, (x10))
  TEST_CASE(16, 124, lw RESULT, 0(x10))
  TEST_CASE(17, 123, li x1, 123; sw x1, 0(x10); lr.w RESULT, (x10))
  /* ... a second sc without a new lr fails (1) and does not write. */
  TEST_CASE(18, 1, li x13, 77; sc.w x15, x13, (x10); addi x13, x13, 1; sc.w RESULT, x13, (x10))
  TEST_CASE(19, 77, lw RESULT, 0(x10))
  /* A store to the reserved word breaks the reservation. */
  TEST_CASE(20, 1, lr.w x13, (x10); li x4, 5; sw x4, 0(x10); sc.w RESULT, x13, (x10))
  TEST_CASE(21, 5, lw RESULT, 0(x10))
  /* sc to a different address than the lr fails. */
  TEST_CASE(22, 1, addi x11, x10, 4; lr.w x13, (x10); sc.w RESULT, x13, (x11))
  TEST_CASE(23, 0, lr.w x13, (x11); sc.w RESULT, x13, (x11))
  TEST_CASE(24, 1, lr.w x13, (x10); sc.w x13, x13, (x11); mv RESULT, x13)
  /* An amo result used right away (late result, like a load). */
  TEST_CASE(25, 11, li x1, 10; sw x1, 0(x10); li x2, 1; amoadd.w x13, x2, (x10); addi RESULT, x13, 1)
  TEST_PASS
TEST_END
  .data
  .balign 4
word:
  .word 0, 0

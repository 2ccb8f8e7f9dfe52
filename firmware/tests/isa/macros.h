/* Self-checking test framework for the core ISA tests (in the style of riscv-tests, written anew).
 *
 * gp holds the number of the running test case. The program ends by writing to EXIT:
 *   1                         all cases passed
 *   (gp << 1) | 1             case gp produced a wrong value
 *   0x80000000 | (cause bits) a trap the test did not expect, see trap_entry below
 * Registers t5/t6 belong to the trap handler; s6-s11 hold the armed trap expectation and what the
 * handler saw (s6 = mstatus at trap entry, s7 = interrupts taken).
 */
#define EXIT_ADDR 0x10000000
#define IRQ_ADDR 0x10000004
#define TIMER_ADDR 0x10000008

#define RESULT x14
#define EXPECT x7

#define TEST_START                                  \
  .section .text.init; .globl _start; _start:       \
  la t0, trap_entry; csrw mtvec, t0;                \
  li s10, -1; li s7, 0; li gp, 0;

#define TEST_CHECK(num, expected) li EXPECT, expected; bne RESULT, EXPECT, fail

/* A register-register op with the result in x14. */
#define TEST_RR(num, inst, expected, v1, v2) \
  li gp, num; li x1, v1; li x2, v2; inst RESULT, x1, x2; TEST_CHECK(num, expected)
/* A register-immediate op. */
#define TEST_RI(num, inst, expected, v1, imm) \
  li gp, num; li x1, v1; inst RESULT, x1, imm; TEST_CHECK(num, expected)
/* Free-form: code leaves its result in x14. */
#define TEST_CASE(num, expected, code...) li gp, num; code; TEST_CHECK(num, expected)
/* Branch taken / not taken. */
#define TEST_BR_TAKEN(num, inst, v1, v2) \
  li gp, num; li x1, v1; li x2, v2; inst x1, x2, 1f; j fail; 1:
#define TEST_BR_NOT(num, inst, v1, v2) \
  li gp, num; li x1, v1; li x2, v2; inst x1, x2, fail

/* Expect `insn` (at label 77) to trap with mcause `cause` and mtval == s11, which the case sets
 * up first with one of the TVAL_* lines; the handler checks mcause, mtval and mepc (s8), then
 * resumes after the case. */
#define TVAL_INSN la s11, 77f; lw s11, 0(s11)   /* the instruction bits, as stored in memory */
#define TVAL_PC la s11, 77f
#define TEST_TRAP(num, cause, insn...)                      \
  li gp, num; li s10, cause; la s8, 77f; la s9, 88f;        \
77: insn; j fail;                                           \
88: li t6, -1; bne s10, t6, fail;
/* Same, but the trap is reported at a pc other than the faulting instruction: s8 set up first. */
#define TEST_TRAP_AT(num, cause, insn...)                   \
  li gp, num; li s10, cause; la s9, 88f;                    \
  insn; j fail;                                             \
88: li t6, -1; bne s10, t6, fail;

/* Spin until the handler has counted `n` interrupts in s7 (bounded), then check the count. */
#define WAIT_IRQS(num, n)                                              \
  li gp, num; li x15, 200; li x16, n;                                  \
1: beq s7, x16, 2f; addi x15, x15, -1; bnez x15, 1b; 2: mv RESULT, s7; TEST_CHECK(num, n)

#define TEST_PASS                                   \
  li t0, EXIT_ADDR; li t1, 1; sw t1, 0(t0); 1: j 1b;

/* Failure path, trap handler and data section shared by all tests. */
#define TEST_END                                                   \
fail: li t0, EXIT_ADDR; slli t1, gp, 1; ori t1, t1, 1; sw t1, 0(t0); 2: j 2b; \
  .balign 4;                                                       \
trap_entry:                                                        \
  csrr s6, mstatus;                                                \
  csrr t5, mcause; bne t5, s10, unexpected;                        \
  bltz t5, 3f;                                                     \
  csrr t6, mtval; bne t6, s11, unexpected;                         \
  csrr t6, mepc; bne t6, s8, unexpected;                           \
  li s10, -1; csrw mepc, s9; mret;                                 \
3: csrr t6, mtval; bnez t6, unexpected;                            \
  li t6, IRQ_ADDR; sw zero, 0(t6);                                 \
  li s10, -1; addi s7, s7, 1; mret;                                \
unexpected:                                                        \
  csrr t5, mcause; srli t6, t5, 31; slli t6, t6, 7;                \
  andi t5, t5, 0x7f; or t5, t5, t6; slli t5, t5, 16;               \
  slli t6, gp, 1; or t5, t5, t6; ori t5, t5, 1;                    \
  li t6, 0x80000000; or t5, t5, t6;                                \
  li t6, EXIT_ADDR; sw t5, 0(t6); 4: j 4b;

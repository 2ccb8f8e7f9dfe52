/* Minimal start-up for C test programs on the core test harness: zero .bss, set the stack,
 * call main and write its return value to the EXIT register. */
  .section .text.init
  .globl _start
_start:
  la sp, _stack_top
  la t0, __bss_start
  la t1, _end
1: bgeu t0, t1, 2f
  sw zero, 0(t0)
  addi t0, t0, 4
  j 1b
2: call main
  li t0, 0x10000000
  sw a0, 0(t0)
3: j 3b

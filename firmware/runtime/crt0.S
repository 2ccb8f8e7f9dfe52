/* Start-up for every hart of the pyard SoC.
 *
 * Each hart sets its trap vector and its own stack (__stack_size bytes per hart id below
 * __stack_top, link.ld). Harts at or above PYARD_NHARTS_ACTIVE park at once, so one SoC build can run a program
 * on fewer cores. Hart 0 copies .data from its load address (when the linker script gives it one
 * distinct from its run address) and zeroes .bss, then raises a boot flag in the data RAM; the other
 * harts spin on that flag, so no hart sees uninitialised globals. Then every active hart calls
 * _pyard_hart_start(hart) in C (runtime.c), which never returns. */
#include "pyard_rt_config.h"

#define BOOT_MAGIC 0x600db007

  /* A linker script that loads .data in place need not define these: they then read as 0. */
  .weak __data_start, __data_end, __data_load

  .section .text.init, "ax"
  .globl _start
_start:
  la t0, _pyard_trap_entry
  csrw mtvec, t0
  csrr a0, mhartid
  la t1, __stack_size  /* link.ld symbol: the header's PYARD_STACK_SIZE has a C suffix */
  mul t1, t1, a0
  la sp, __stack_top
  sub sp, sp, t1
  /* mscratch holds this hart's trap-stack top while no trap is being handled (see below). */
  la t1, __trap_stack_size
  mul t1, t1, a0
  la t0, __trap_stack_top
  sub t0, t0, t1
  csrw mscratch, t0
  li t2, PYARD_NHARTS_ACTIVE
  bgeu a0, t2, .Lpark
  bnez a0, .Lwait

  /* Hart 0: .data from its load image (if separate), then .bss. */
  la t0, __data_start
  la t1, __data_end
  la t2, __data_load
  beqz t2, .Lzero  /* no load address: the loader put .data in place */
  beq t0, t2, .Lzero
1: bgeu t0, t1, .Lzero
  lw t3, 0(t2)
  sw t3, 0(t0)
  addi t0, t0, 4
  addi t2, t2, 4
  j 1b
.Lzero:
  la t0, __bss_start
  la t1, __bss_end
2: bgeu t0, t1, .Lrelease
  sw zero, 0(t0)
  addi t0, t0, 4
  j 2b
.Lrelease:
  li t0, BOOT_MAGIC
  la t1, _pyard_boot_flag
  sw t0, 0(t1)
  j .Lgo

.Lwait:
  li t0, BOOT_MAGIC
  la t1, _pyard_boot_flag
3: lw t2, 0(t1)
  bne t2, t0, 3b
.Lgo:
  call _pyard_hart_start
.Lpark:
  wfi
  j .Lpark

/* Trap entry. The handler runs on this hart's own trap stack, whose top mscratch holds while no
 * trap is being handled: swapping sp with mscratch needs no register and no memory, so a bad sp in
 * the program cannot make the handler fault. mscratch is 0 while the handler runs, so a trap taken
 * inside it (sp comes back 0) is a nested trap: it is reported and the run ends, instead of the
 * handler faulting on itself forever. Saves the caller-saved registers and the interrupted sp, lets
 * C decide (trap.c), resumes at the pc it returns. Callee-saved registers are preserved by C. */
  .align 2
  .globl _pyard_trap_entry
_pyard_trap_entry:
  csrrw sp, mscratch, sp
  beqz sp, .Lnested
  addi sp, sp, -80
  sw ra, 0(sp)
  sw t0, 4(sp)
  sw t1, 8(sp)
  sw t2, 12(sp)
  sw a0, 16(sp)
  sw a1, 20(sp)
  sw a2, 24(sp)
  sw a3, 28(sp)
  sw a4, 32(sp)
  sw a5, 36(sp)
  sw a6, 40(sp)
  sw a7, 44(sp)
  sw t3, 48(sp)
  sw t4, 52(sp)
  sw t5, 56(sp)
  sw t6, 60(sp)
  csrrw t0, mscratch, zero  /* the interrupted sp; mscratch = 0: in the handler */
  sw t0, 64(sp)
  csrr a0, mcause
  csrr a1, mepc
  csrr a2, mtval
  call _pyard_trap_dispatch
  csrw mepc, a0
  addi t0, sp, 80
  csrw mscratch, t0         /* the trap stack's top again: the handler is done */
  lw ra, 0(sp)
  lw t0, 4(sp)
  lw t1, 8(sp)
  lw t2, 12(sp)
  lw a0, 16(sp)
  lw a1, 20(sp)
  lw a2, 24(sp)
  lw a3, 28(sp)
  lw a4, 32(sp)
  lw a5, 36(sp)
  lw a6, 40(sp)
  lw a7, 44(sp)
  lw t3, 48(sp)
  lw t4, 52(sp)
  lw t5, 56(sp)
  lw t6, 60(sp)
  lw sp, 64(sp)
  mret

/* A trap inside the handler: the run ends, so every register is free. The report runs on the top
 * of the trap stack again; a trap while reporting ends the run at once with the same exit code. */
.Lnested:
  csrr a0, mhartid
  la t1, __trap_stack_size
  mul t1, t1, a0
  la sp, __trap_stack_top
  sub sp, sp, t1
  la t0, _pyard_nested_reporting
  lw t1, 0(t0)
  bnez t1, .Lnested_exit
  li t1, 1
  sw t1, 0(t0)
  csrr a0, mcause
  csrr a1, mepc
  csrr a2, mtval
  call _pyard_nested_trap
.Lnested_exit:
  li a0, PYARD_NESTED_TRAP_EXIT
  call pyard_exit  /* writes EXIT: needs no stack */

/* The boot flag lives in .data: the loader writes it as 0, hart 0 sets it after initialising. */
  .section .data
  .align 2
  .globl _pyard_boot_flag
_pyard_boot_flag:
  .word 0
_pyard_nested_reporting:
  .word 0

/* Trap dispatch and the default handler: report mcause/mepc/mtval and exit non-zero. */
#include "pyard_rt.h"

void _pyard_printf_unlocked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void (*volatile pyard_external_irq_hook)(void);

const char *pyard_cause_name(uint32_t mcause) {
  static const char *const exceptions[] = {
      "instruction address misaligned", "instruction access fault", "illegal instruction", "breakpoint",
      "load address misaligned", "load access fault", "store/AMO address misaligned", "store/AMO access fault",
      "environment call from U-mode", "environment call from S-mode", "reserved", "environment call from M-mode",
  };
  static const char *const interrupts[] = {
      "reserved", "supervisor software interrupt", "reserved", "machine software interrupt",
      "reserved", "supervisor timer interrupt", "reserved", "machine timer interrupt",
      "reserved", "supervisor external interrupt", "reserved", "machine external interrupt",
  };
  uint32_t code = mcause & 0x7fffffffu;
  if (code >= 12) return "reserved";
  return (mcause >> 31) ? interrupts[code] : exceptions[code];
}

__attribute__((weak)) uintptr_t pyard_trap_handler(uint32_t mcause, uintptr_t mepc, uint32_t mtval) {
  _pyard_printf_unlocked("\n*** trap on hart %u: mcause=0x%08x (%s) mepc=0x%08x mtval=0x%08x\n", pyard_hart_id(),
                         (unsigned)mcause, pyard_cause_name(mcause), (unsigned)mepc, (unsigned)mtval);
  pyard_exit((mcause >> 31 ? 192 : 128) + (int)(mcause & 0x3f));
}

/* A trap taken inside the trap handler (crt0.S): report it and end the run. */
__attribute__((used, noreturn)) void _pyard_nested_trap(uint32_t mcause, uintptr_t mepc, uint32_t mtval) {
  _pyard_printf_unlocked(
      "\n*** nested trap on hart %u (a trap inside the trap handler): mcause=0x%08x (%s) mepc=0x%08x "
      "mtval=0x%08x\n",
      pyard_hart_id(), (unsigned)mcause, pyard_cause_name(mcause), (unsigned)mepc, (unsigned)mtval);
  pyard_exit(PYARD_NESTED_TRAP_EXIT);
}

/* Called by the assembly entry in crt0.S; returns the pc to resume at. */
__attribute__((used)) uintptr_t _pyard_trap_dispatch(uint32_t mcause, uintptr_t mepc, uint32_t mtval) {
  void (*hook)(void) = pyard_external_irq_hook;
  if (mcause == 0x8000000bu && hook) {
    hook();
    return mepc;
  }
  return pyard_trap_handler(mcause, mepc, mtval);
}

/* Driver error reporting (tests/test_soc_firmware.py): errors the tile raises come back as -code
 * with the unit and command number in readable text, driver-side checks refuse bad arguments
 * before pushing, nothing hangs, and the tile works again afterwards. */
#include "pyard.h"

static PYARD_MEM pyard_in_t a[4][4], b[4][4];
static PYARD_MEM pyard_acc_t c[4][4];
static pyard_in_t not_dma_reachable[16]; /* data RAM: the DMA cannot reach it */

static int report(const char *what, int err) {
  pyard_perror(what, err);
  printf("%s returned %d\n", what, err);
  return err;
}

int main(void) {
  if (report("init", pyard_init())) return 1;
  const uint32_t bad_opcode[1] = {0x7e};
  int err = pyard_push(bad_opcode, 1);
  if (!err) err = pyard_fence();
  if (!err) err = pyard_wait();
  report("opcode 0x7e", err);
  report("zero M", pyard_matmul(0, 4, 4, a, b, NULL, c, 4, 4, 0, 4, PYARD_SCALE_ONE, 0, 0, false, false, false, true));
  report("accumulate into narrow C",
         pyard_matmul(4, 4, 4, a, b, NULL, c, 4, 4, 0, 4, PYARD_SCALE_ONE, 0, 0, true, false, false, false));
  report("A in data RAM", pyard_matmul(4, 4, 4, not_dma_reachable, b, NULL, c, 4, 4, 0, 4, PYARD_SCALE_ONE, 0, 0, false,
                                       false, false, true));
  report("M too large", pyard_matmul(70000, 4, 4, a, b, NULL, c, 4, 4, 0, 4, PYARD_SCALE_ONE, 0, 0, false, false,
                                     false, true));
  /* A resident B (GEMM flag [21]) at row 0, below the loop's A rows: the tile refuses it. */
  pyard_gemm_t resident = {.M = 4, .K = 4, .N = 4, .A = a, .C = c, .stride_a = 4, .stride_b = 4, .stride_c = 4,
                           .scale = PYARD_SCALE_ONE, .full_c = true, .b_in_sp = true, .b_row = 0};
  report("resident B at row 0", pyard_gemm(&resident));
  resident.transpose_b = true;
  report("resident B transposed", pyard_gemm(&resident));
  /* After the errors: a 4x4 identity product must come out right, waited for by interrupt. */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      a[i][j] = (pyard_in_t)(PYARD_DTYPE_INT8 ? i * 4 + j : 0x3f80 + 0x80 * ((i * 4 + j) % 3)); /* 1, 2, 4 */
      b[i][j] = (pyard_in_t)(i == j ? (PYARD_DTYPE_INT8 ? 1 : 0x3f80) : 0);
    }
  const pyard_gemm_t g = {.M = 4, .K = 4, .N = 4, .A = a, .B = b, .C = c, .stride_a = 4, .stride_b = 4,
                          .stride_c = 4, .scale = PYARD_SCALE_ONE, .full_c = true};
  pyard_write(PYARD_REG_CONTROL, PYARD_CONTROL_CLEAR_DONE);
  err = pyard_gemm_push(&g);
  if (!err) err = pyard_fence();
  if (!err) err = pyard_wait_irq();
  report("identity GEMM", err);
  int bad = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      const uint32_t want = PYARD_ACC_INT32 ? (uint32_t)(i * 4 + j) : (uint32_t)((0x3f80 + 0x80 * ((i * 4 + j) % 3)) << 16);
      bad += (uint32_t)c[i][j] != want;
    }
  printf("identity GEMM result %s\n", bad ? "MISMATCH" : "ok");
  return err || bad;
}

/* Integer matrix multiply used to measure the core's CPI. The kernel is timed with mcycle and
 * minstret; the test compares C against NumPy and reads the counters from the globals below. */
#include <stdint.h>

#define N 8

int32_t A[N][N], B[N][N], C[N][N];
volatile uint32_t kernel_cycles, kernel_instret;

static inline uint32_t read_mcycle(void) {
  uint32_t v;
  __asm__ volatile("csrr %0, mcycle" : "=r"(v));
  return v;
}

static inline uint32_t read_minstret(void) {
  uint32_t v;
  __asm__ volatile("csrr %0, minstret" : "=r"(v));
  return v;
}

static void matmul(void) {
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++) {
      int32_t acc = 0;
      for (int k = 0; k < N; k++) acc += A[i][k] * B[k][j];
      C[i][j] = acc;
    }
  }
}

int main(void) {
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++) {
      A[i][j] = ((i * 7 + j * 3) & 31) - 16;  /* the test rebuilds these in NumPy */
      B[i][j] = ((i * 5 + j * 11) & 15) - 9;
    }
  }
  uint32_t c0 = read_mcycle(), i0 = read_minstret();
  matmul();
  uint32_t c1 = read_mcycle(), i1 = read_minstret();
  kernel_cycles = c1 - c0;
  kernel_instret = i1 - i0;
  return 1;
}

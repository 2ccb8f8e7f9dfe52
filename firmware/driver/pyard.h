/* Driver for the pyard accelerator tiles (registers and commands of docs/isa.md).
 *
 * Many tiles, many harts (docs/tiles.md): every pyard_tile_* call names its tile (0 to
 * PYARD_NTILES - 1); the calls without a tile drive tile 0, so single-tile programs are unchanged.
 * A tile is driven by one hart at a time (a command is written word by word into the tile's staging
 * registers): the caller must own it, e.g. through the resource manager (pyard_rm_acquire,
 * firmware/runtime/pyard_rm.h). Different harts may drive different tiles at once: the driver's
 * state is per tile (errors, interrupt flags) or per hart (the last error's text). Blocking calls
 * (pyard_matmul, pyard_conv2d, pyard_wait) return 0 or a negative error: -code for an error the
 * tile reported (PYARD_ERR_*), or a PYARD_E* driver error for bad arguments. The failing unit,
 * code and command sequence number are kept for pyard_perror(). */
#ifndef PYARD_H
#define PYARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyard_rt.h"

/* ---- registers (byte offsets from PYARD_ACCEL_BASE) ---- */
#define PYARD_REG_ID 0x000
#define PYARD_REG_HWCFG 0x004
#define PYARD_REG_STATUS 0x008
#define PYARD_REG_CONTROL 0x00C
#define PYARD_REG_IRQ_ENABLE 0x010
#define PYARD_REG_ERROR_SEQ 0x014
#define PYARD_REG_SP_ROWS 0x018
#define PYARD_REG_ACC_ROWS 0x01C
#define PYARD_REG_CMD(k) (0x040 + 4 * (k))
#define PYARD_REG_CMD_PUSH 0x080
#define PYARD_REG_CYCLES_BUSY 0x100
#define PYARD_REG_MACS_LO 0x104
#define PYARD_REG_MACS_HI 0x108
#define PYARD_REG_DMA_RD_BYTES 0x10C
#define PYARD_REG_DMA_WR_BYTES 0x110
#define PYARD_REG_STALL_EXEC_ON_LOAD 0x114
#define PYARD_REG_STALL_EXEC_ON_STORE 0x118
#define PYARD_REG_STALL_DMA_READ 0x11C
#define PYARD_REG_STALL_DMA_WRITE 0x120
#define PYARD_REG_STALL_QUEUE 0x124
#define PYARD_REG_VEC_ELEMS 0x128
#define PYARD_REG_VEC_CYCLES 0x12C

#define PYARD_ID_VALUE 0x50594144u

#define PYARD_STATUS_BUSY (1u << 0)
#define PYARD_STATUS_DONE (1u << 1)
#define PYARD_STATUS_ERROR (1u << 2)
#define PYARD_STATUS_UNIT(s) (((s) >> 4) & 7u)
#define PYARD_STATUS_CODE(s) (((s) >> 8) & 0xffu)
#define PYARD_STATUS_FREE(s) (((s) >> 16) & 0xffu)

#define PYARD_CONTROL_CLEAR_DONE 1u
#define PYARD_CONTROL_CLEAR_ERROR 2u
#define PYARD_CONTROL_ZERO_COUNTERS 4u

/* ---- commands ---- */
enum { PYARD_OP_LOAD = 0x01, PYARD_OP_STORE = 0x02, PYARD_OP_EXEC = 0x03, PYARD_OP_FENCE = 0x04,
       PYARD_OP_VEC = 0x05, PYARD_OP_GEMM = 0x10, PYARD_OP_CONV2D = 0x11 };
#define PYARD_WAIT_PREV (1u << 8)
#define PYARD_WAIT_NEXT (1u << 9)
#define PYARD_SIGNAL_PREV (1u << 10)
#define PYARD_SIGNAL_NEXT (1u << 11)
/* EXEC's and STORE's tokens with the vector unit (whose previous unit is EXEC and next is STORE). */
#define PYARD_WAIT_VEC (1u << 28)
#define PYARD_SIGNAL_VEC (1u << 29)

/* VEC (docs/isa.md): word 0 flags, then scalar, rows | elems << 16, a | b << 16, d | shift << 16. */
#define PYARD_VEC_A_ACC (1u << 12)
#define PYARD_VEC_B_ACC (1u << 13)
#define PYARD_VEC_D_ACC (1u << 14)
#define PYARD_VEC_B_ONE (1u << 15)
#define PYARD_VEC_D_ONE (1u << 16)
#define PYARD_VEC_ACCUMULATE (1u << 17)
#define PYARD_VEC_OP(op) ((uint32_t)(op) << 18)
#define PYARD_VEC_REDUCE (1u << 23)     /* fold each result row into its element 0: a row sum */
#define PYARD_VEC_REDUCE_MAX (1u << 24) /* ... or, with PYARD_VEC_REDUCE, a row max */
enum { PYARD_VEC_COPY = 0, PYARD_VEC_ADD, PYARD_VEC_SUB, PYARD_VEC_MUL, PYARD_VEC_MADDS, PYARD_VEC_MULS,
       PYARD_VEC_ADDS, PYARD_VEC_RSUBS, PYARD_VEC_NEG, PYARD_VEC_MAX, PYARD_VEC_MIN, PYARD_VEC_RELU,
       PYARD_VEC_SIGMOID, PYARD_VEC_TANH, PYARD_VEC_EXP, PYARD_VEC_RECIP, PYARD_VEC_UPDATE, PYARD_VEC_REQUANT };
/* PYARD_VEC_UPDATE, the FPTT update (docs/isa.md): theta at A, theta_bar at B, lambda at D; word 1
   eta | alpha << 16, word 5 G | kappa << 16 (bf16 scalars); bf16 tiles with the update unit only. */

/* Error codes the tile reports (STATUS[15:8]). */
enum { PYARD_ERR_BAD_OPCODE = 0x01, PYARD_ERR_ZERO_DIM, PYARD_ERR_TOO_LARGE, PYARD_ERR_SP_RANGE, PYARD_ERR_ACC_RANGE,
       PYARD_ERR_MISALIGNED, PYARD_ERR_AXI_SLVERR, PYARD_ERR_AXI_DECERR, PYARD_ERR_BAD_DEPS, PYARD_ERR_QUEUE_FULL,
       PYARD_ERR_BAD_SHAPE, PYARD_ERR_DEADLOCK, PYARD_ERR_BAD_FIELD };
/* Errors found by the driver before anything is pushed. */
#define PYARD_EINVAL (-100)  /* an argument out of its field's range */
#define PYARD_ENOTMEM (-101) /* a matrix pointer outside main memory (the DMA reaches only main memory) */
#define PYARD_ENODEV (-102)  /* no tile answers at PYARD_ACCEL_BASE */

/* ---- element types of this configuration ---- */
#if PYARD_DTYPE_INT8
typedef int8_t pyard_in_t; /* int8 */
#else
typedef uint16_t pyard_in_t; /* bf16 bit pattern */
#endif
#if PYARD_ACC_INT32
typedef int32_t pyard_acc_t;
#elif PYARD_ACC_FP32
typedef uint32_t pyard_acc_t; /* fp32 bit pattern */
#else
typedef uint16_t pyard_acc_t; /* bf16 bit pattern */
#endif
#define PYARD_IN_BYTES (PYARD_IN_BITS / 8)
#define PYARD_ACC_BYTES (PYARD_ACC_BITS / 8)
/* fp32 bit pattern of v · 2^-exp, exact whenever |v| < 2^24: exact float operands and expected
   results for programs without a floating-point library (the firmware has none). */
static inline uint32_t pyard_f32_bits(int64_t v, int exp) {
  if (v == 0) return 0;
  uint32_t sign = v < 0 ? 0x80000000u : 0;
  uint64_t mag = v < 0 ? (uint64_t)-v : (uint64_t)v;
  int e = (mag >> 32) ? 63 : 31; /* the highest set bit, searched from the top of its half */
  while (!(mag >> e)) e--;
  uint32_t mant = (uint32_t)(e >= 23 ? mag >> (e - 23) : mag << (23 - e)) & 0x7fffffu;
  return sign | (uint32_t)(127 + e - exp) << 23 | mant;
}
/* The identity read-out scale: a shift of 0 (int32 accumulators) or 1.0f (float accumulators). */
#define PYARD_SCALE_ONE (PYARD_ACC_INT32 ? 0u : 0x3F800000u)

enum { PYARD_ACT_NONE = 0, PYARD_ACT_RELU = 1 };
enum { PYARD_BIAS_NONE = 0, PYARD_BIAS_FULL = 1, PYARD_BIAS_ROW = 2 };

/* ---- the tiles ---- */
static inline uint32_t pyard_tile_read(unsigned tile, uint32_t offset) {
  return PYARD_REG32(PYARD_ACCEL_TILE_BASE(tile) + offset);
}
static inline void pyard_tile_write(unsigned tile, uint32_t offset, uint32_t value) {
  PYARD_REG32(PYARD_ACCEL_TILE_BASE(tile) + offset) = value;
}
static inline uint32_t pyard_read(uint32_t offset) { return pyard_tile_read(0, offset); }
static inline void pyard_write(uint32_t offset, uint32_t value) { pyard_tile_write(0, offset, value); }

/* Checks the ID register, clears done/error and the counters. 0, PYARD_ENODEV, or PYARD_EINVAL for a
 * tile number the SoC does not have (every pyard_tile_* call checks it). */
int pyard_tile_init(unsigned tile);
/* Pushes one command of `n` words (n <= 16), first waiting for a free queue slot. Returns 0, or the
 * error already raised by the tile (nothing is pushed then). */
int pyard_tile_push(unsigned tile, const uint32_t *words, unsigned n);
/* Pushes a FENCE (waits for every earlier command). */
int pyard_tile_fence(unsigned tile);
/* Polls STATUS until the tile is idle or reports an error. 0 or -code. An error is recorded
 * (pyard_tile_last_error), cleared, and the tile left idle and ready for new commands. */
int pyard_tile_wait(unsigned tile);
/* As pyard_tile_wait, but sleeps on the tile's interrupt (the machine external interrupt, which
 * all tiles share: a hart's handler masks only the tile that hart waits on). */
int pyard_tile_wait_irq(unsigned tile);
/* The same on tile 0. */
int pyard_init(void);
int pyard_push(const uint32_t *words, unsigned n);
int pyard_fence(void);
int pyard_wait(void);
int pyard_wait_irq(void);

typedef struct {
  unsigned unit; /* 1 decode, 2 load, 3 exec, 4 store, 5 queue */
  unsigned code; /* PYARD_ERR_* */
  unsigned seq;  /* sequence number of the failing command (numbered from 0 as pushed) */
} pyard_error_t;
/* The last error pyard_tile_wait saw on the tile (all zero when none); pyard_last_error: tile 0's. */
pyard_error_t pyard_tile_last_error(unsigned tile);
pyard_error_t pyard_last_error(void);
const char *pyard_error_name(unsigned code);
const char *pyard_unit_name(unsigned unit);
/* Prints "<what>: <unit> unit reported <NAME> (0x..) on command #<seq>" for a return value `err` of
 * the calling hart's last driver call (on whichever tile it drove). */
void pyard_perror(const char *what, int err);

/* ---- GEMM: C = act(scale · (A·B + D)), the whole tiled loop in one command ----
 * Dimensions M×K times K×N. Strides are in elements: A and B in pyard_in_t, D in pyard_acc_t, C in
 * pyard_acc_t when full_c, else pyard_in_t. With transpose_a, A is stored K×M; with transpose_b, B
 * is stored N×K. bias: PYARD_BIAS_NONE, _FULL (D is M×N) or _ROW (one row of N, repeated).
 * accumulate: C (full width) is read as D and overwritten. scale: a right shift (int32
 * accumulators) or an fp32 bit pattern (float accumulators); PYARD_SCALE_ONE for none. A, B, C and
 * D must be in main memory (PYARD_MEM buffers or pyard_alloc). Blocks until the result is in memory. */
int pyard_matmul(size_t M, size_t K, size_t N, const void *A, const void *B, const void *D, void *C, size_t stride_a,
                 size_t stride_b, size_t stride_d, size_t stride_c, uint32_t scale, int act, int bias, bool accumulate,
                 bool transpose_a, bool transpose_b, bool full_c);

/* The same as one descriptor; pyard_gemm_push only queues it (follow with pyard_fence + pyard_wait).
 * b_in_sp: B is resident in the scratchpad (docs/isa.md, GEMM flag [21]), put there by earlier
 * LOADs: N tile j (columns j·PYARD_COLS on) is K rows from scratchpad row b_row + j·stride_b
 * (stride_b in rows; B is not read); not with transpose_b. */
typedef struct {
  size_t M, K, N;
  const void *A, *B, *D;
  void *C;
  size_t stride_a, stride_b, stride_d, stride_c;
  uint32_t scale;
  int act, bias;
  bool accumulate, transpose_a, transpose_b, full_c, b_in_sp;
  unsigned b_row;
} pyard_gemm_t;
int pyard_gemm_push(const pyard_gemm_t *g);
int pyard_gemm(const pyard_gemm_t *g);
int pyard_tile_gemm_push(unsigned tile, const pyard_gemm_t *g);
int pyard_tile_gemm(unsigned tile, const pyard_gemm_t *g);

/* ---- Conv2D: implicit-im2col convolution (docs/isa.md CONV2D) ----
 * input NHWC (pyard_in_t), weights HWIO (kh × kw × C_in × C_out, pyard_in_t), output NHWC
 * (pyard_in_t, or pyard_acc_t with full_out), bias C_out pyard_acc_t values or NULL. Output size
 * OH = (H + 2·pad − kh) / stride + 1, OW likewise. Blocks until the result is in memory.
 * weights_in_sp: the weights are resident in the scratchpad (CONV2D flag [21]), put there by
 * earlier LOADs as the (kh·kw·C_in) × C_out matrix, like a GEMM's resident B: N tile j (output
 * channels j·PYARD_COLS on) is kh·kw·C_in rows from scratchpad row w_row + j·w_stride (w_stride
 * in rows; weights is not read). */
typedef struct {
  unsigned batch, in_ch, in_h, in_w, out_ch, k_h, k_w, stride, pad;
  const void *input, *weights, *bias;
  void *output;
  uint32_t scale;
  int act;
  bool full_out, weights_in_sp;
  unsigned w_row, w_stride;
} pyard_conv2d_t;
int pyard_conv2d(const pyard_conv2d_t *c);
int pyard_tile_conv2d(unsigned tile, const pyard_conv2d_t *c);
/* Output height/width of a convolution (0 when the kernel does not fit). */
unsigned pyard_conv2d_out_dim(unsigned in, unsigned k, unsigned stride, unsigned pad);

/* ---- TFLite int8 requantization on the vector engine (docs/isa.md VEC REQUANT; int8 tiles) ----
 * out[r][c] = clamp(MultiplyByQuantizedMultiplier(acc[r][c], mult[c], shift[c]) + zero_point,
 * act_min, act_max) for a rows × cols int32 matrix (channels along a row): two roundings
 * (CONV_2D, DEPTHWISE_CONV_2D) with double_round, else one (FULLY_CONNECTED). Per column block of
 * PYARD_COLS channels: the multipliers and shifts are loaded into two accumulator rows, then chunks
 * of rows into the accumulator, one VEC REQUANT each into the scratchpad and a STORE; it uses the
 * tile's accumulator and scratchpad rows from 0 (nothing resident survives it). Strides are in
 * elements. pyard_tile_requant blocks until the result is in memory. */
typedef struct {
  size_t rows, cols;
  const int32_t *acc, *mult, *shift;
  int8_t *out;
  size_t stride_acc, stride_out;
  int zero_point, act_min, act_max;
  bool double_round;
} pyard_requant_t;
int pyard_tile_requant_push(unsigned tile, const pyard_requant_t *r);
int pyard_tile_requant(unsigned tile, const pyard_requant_t *r);

/* ---- counters ---- */
typedef struct {
  uint32_t cycles_busy;
  uint64_t macs;
  uint32_t dma_rd_bytes, dma_wr_bytes;
  uint32_t stall_exec_on_load, stall_exec_on_store, stall_dma_read, stall_dma_write, stall_queue;
} pyard_counters_t;
pyard_counters_t pyard_read_counters(void);
pyard_counters_t pyard_tile_read_counters(unsigned tile);
void pyard_print_counters(const pyard_counters_t *c);

#endif

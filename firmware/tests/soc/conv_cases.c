/* Runs the Conv2D cases of a generated conv_cases.h (tests/test_soc_conv2d.py) through
 * pyard_conv2d: inputs copied from the data RAM image into main memory, outputs left in main memory
 * for the test to compare with the NumPy model. */
#include "pyard.h"

typedef struct {
  const void *src;
  void *dst;
  uint32_t bytes;
} buffer_t;

typedef struct {
  pyard_conv2d_t conv; /* pointers filled from the buffers below */
  buffer_t input, weights, bias, output;
} conv_case_t;

#include "conv_cases.h" /* defines `cases` and NCASES */

static void fill(const buffer_t *buf) {
  if (buf->src) memcpy(buf->dst, buf->src, buf->bytes);
}

int main(void) {
  int err = pyard_init();
  if (err) {
    pyard_perror("pyard_init", err);
    return 1;
  }
  for (int i = 0; i < NCASES; i++) {
    const conv_case_t *t = &cases[i];
    fill(&t->input);
    fill(&t->weights);
    fill(&t->bias);
    pyard_conv2d_t conv = t->conv;
    conv.input = t->input.dst;
    conv.weights = t->weights.dst;
    conv.bias = t->bias.dst;
    conv.output = t->output.dst;
    const uint64_t t0 = pyard_cycles();
    err = pyard_conv2d(&conv);
    const uint64_t t1 = pyard_cycles();
    if (err) {
      printf("case %d: ", i);
      pyard_perror("pyard_conv2d", err);
      return 2;
    }
    printf("case %d: done in %llu cycles\n", i, (unsigned long long)(t1 - t0));
  }
  return 0;
}

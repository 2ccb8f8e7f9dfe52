/* Runs the Conv2D cases of a generated conv_cases.h (tests/test_soc_conv2d.py) through
 * pyard_conv2d: inputs copied from the data RAM image into main memory, outputs left in main memory
 * for the test to compare with the NumPy model. */
#include "case_runner.h"

typedef struct {
  pyard_conv2d_t conv; /* pointers filled from the buffers below */
  buffer_t input, weights, bias, output;
} conv_case_t;

#include "conv_cases.h" /* defines `cases` and NCASES */

static void fill_case(int i) {
  fill(&cases[i].input);
  fill(&cases[i].weights);
  fill(&cases[i].bias);
}

static int run_case(int i) {
  const conv_case_t *t = &cases[i];
  pyard_conv2d_t conv = t->conv;
  conv.input = t->input.dst;
  conv.weights = t->weights.dst;
  conv.bias = t->bias.dst;
  conv.output = t->output.dst;
  return pyard_conv2d(&conv);
}

int main(void) { return run_cases(NCASES, fill_case, run_case, "pyard_conv2d"); }

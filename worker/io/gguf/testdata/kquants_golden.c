// Writes testdata/kquants_golden.txt: the blocks ggml's reference K-quant
// quantizers make of 512 pseudo-random floats (xorshift32 in [-1, 1), every
// 97th scaled by 8). It is built against a ggml checkout, outside the
// project's build, from the checkout's root:
//   gcc -O2 -std=c11 -Iinclude -Isrc -c src/ggml-quants.c
//   gcc -O2 -Iinclude -Isrc kquants_golden.c ggml-quants.o -lm -o kquants_golden
//   ./kquants_golden
// ggml-quants.o refers to four functions of ggml.c that the reference
// quantizers never call; they are defined at the end of this file so that
// ggml.c need not be built.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <math.h>
#include "ggml.h"
#include "ggml-quants.h"
#include "ggml-common.h"
int main(void) {
  enum { K = 512 };
  static float x[K];
  uint32_t s = 12345u;
  for (int i = 0; i < K; ++i) {  // xorshift32 -> [-1, 1), with some outliers
    s ^= s << 13; s ^= s >> 17; s ^= s << 5;
    float v = (float)((double)s / 4294967296.0 * 2.0 - 1.0);
    if (i % 97 == 0) v *= 8.0f;
    x[i] = v;
  }
  static block_q4_K q4[K / 256]; static block_q5_K q5[K / 256]; static block_q6_K q6[K / 256];
  quantize_row_q4_K_ref(x, q4, K); quantize_row_q5_K_ref(x, q5, K); quantize_row_q6_K_ref(x, q6, K);
  const char* names[3] = {"q4_K", "q5_K", "q6_K"};
  const unsigned char* ptr[3] = {(const unsigned char*)q4, (const unsigned char*)q5, (const unsigned char*)q6};
  size_t sz[3] = {sizeof(q4), sizeof(q5), sizeof(q6)};
  for (int t = 0; t < 3; ++t) {
    printf("%s ", names[t]);
    for (size_t i = 0; i < sz[t]; ++i) printf("%02x", ptr[t][i]);
    printf("\n");
  }
  return 0;
}

// ggml.c's, for the linker only: the K-quant reference quantizers call none.
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  (void)fmt;
  fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
  abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void)type; (void)ne; abort(); }
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }
const char* ggml_type_name(enum ggml_type type) { (void)type; abort(); }

// Writes testdata/kquants_golden.txt: the blocks ggml's reference K-quant
// quantizers make of 512 pseudo-random floats (and the Q2_K / Q3_K blocks'
// dequantization) (xorshift32 in [-1, 1), every
// 97th scaled by 8). It is built against a ggml checkout, outside the
// project's build, from the checkout's root:
//   gcc -O2 -std=c11 -Iinclude -Isrc -c src/ggml-quants.c
//   gcc -O2 -Iinclude -Isrc kquants_golden.c ggml-quants.o -lm -o kquants_golden
//   ./kquants_golden
// ggml-quants.o refers to four functions of ggml.c; they are defined at the
// end of this file (ggml_row_size for the types used, the others abort) so
// that ggml.c need not be built.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <math.h>
#include "ggml.h"
#include "ggml-quants.h"
#include "ggml-common.h"
static void Hex(const char* name, const void* p, size_t n) {
  printf("%s ", name);
  for (size_t i = 0; i < n; ++i) printf("%02x", ((const unsigned char*)p)[i]);
  printf("\n");
}

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
  static block_q5_0 q50[K / 32]; static block_q5_1 q51[K / 32];
  quantize_row_q5_0_ref(x, q50, K); quantize_row_q5_1_ref(x, q51, K);
  Hex("q5_0", q50, sizeof(q50)); Hex("q5_1", q51, sizeof(q51));
  static block_q2_K q2[K / 256]; static block_q3_K q3[K / 256];
  quantize_row_q2_K_ref(x, q2, K); quantize_row_q3_K_ref(x, q3, K);
  Hex("q2_K", q2, sizeof(q2)); Hex("q3_K", q3, sizeof(q3));
  // Their dequantization (float32 bytes, little-endian).
  static float back[K];
  dequantize_row_q2_K(q2, back, K); Hex("dq_q2_K", back, sizeof(back));
  dequantize_row_q3_K(q3, back, K); Hex("dq_q3_K", back, sizeof(back));
  // The importance-weighted quantizers (an imatrix's per-column weights) on
  // two rows of 256: importance j of a row is 0.25 + (j * 37 % 17) / 8.
  static float imatrix[K / 2];
  for (int j = 0; j < K / 2; ++j) imatrix[j] = 0.25f + (float)(j * 37 % 17) / 8.0f;
  static unsigned char buf[K * 2];
  const struct { const char* name; enum ggml_type type; } weighted[] = {
      {"w_q4_0", GGML_TYPE_Q4_0}, {"w_q4_1", GGML_TYPE_Q4_1}, {"w_q5_0", GGML_TYPE_Q5_0},
      {"w_q5_1", GGML_TYPE_Q5_1}, {"w_q4_K", GGML_TYPE_Q4_K}, {"w_q5_K", GGML_TYPE_Q5_K},
      {"w_q6_K", GGML_TYPE_Q6_K}, {"w_q2_K", GGML_TYPE_Q2_K}, {"w_q3_K", GGML_TYPE_Q3_K}};
  for (int t = 0; t < 9; ++t) {
    size_t n = 0;
    switch (weighted[t].type) {
      case GGML_TYPE_Q4_0: n = quantize_q4_0(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q4_1: n = quantize_q4_1(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q5_0: n = quantize_q5_0(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q5_1: n = quantize_q5_1(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q4_K: n = quantize_q4_K(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q5_K: n = quantize_q5_K(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q2_K: n = quantize_q2_K(x, buf, 2, K / 2, imatrix); break;
      case GGML_TYPE_Q3_K: n = quantize_q3_K(x, buf, 2, K / 2, imatrix); break;
      default: n = quantize_q6_K(x, buf, 2, K / 2, imatrix); break;
    }
    Hex(weighted[t].name, buf, n);
  }
  return 0;
}

// ggml.c's, for the linker: the quantizers call only ggml_row_size.
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  (void)fmt;
  fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
  abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) {
  switch (type) {  // the types quantize_q*_* above ask for
    case GGML_TYPE_Q4_0: return ne / 32 * 18;
    case GGML_TYPE_Q4_1: return ne / 32 * 20;
    case GGML_TYPE_Q5_0: return ne / 32 * 22;
    case GGML_TYPE_Q5_1: return ne / 32 * 24;
    case GGML_TYPE_Q4_K: return ne / 256 * 144;
    case GGML_TYPE_Q5_K: return ne / 256 * 176;
    case GGML_TYPE_Q6_K: return ne / 256 * 210;
    case GGML_TYPE_Q2_K: return ne / 256 * 84;
    case GGML_TYPE_Q3_K: return ne / 256 * 110;
    default: abort();
  }
}
size_t ggml_type_size(enum ggml_type type) { (void)type; abort(); }
const char* ggml_type_name(enum ggml_type type) { (void)type; abort(); }

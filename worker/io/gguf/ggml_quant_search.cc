// The searches ggml's quantizers share (ggml-quants.c make_qkx2_quants /
// make_qkx3_quants, make_qx_quants, make_qp_quants), with ggml's float
// operations in ggml's order; compiled with -ffp-contract=off like the
// quantizers that call them.
#include "worker/io/gguf/ggml_quant_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace quantd::gguf::search {

// ggml's nearest_int: round half to even through the float mantissa.
int NearestInt(float f) {
  float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// ggml's make_qkx2_quants: codes in [0, nmax] with a scale and a (negated)
// min fitted by weighted least squares over nstep + 1 trial scales.
float FitScaleAndMin(int n, int nmax, const float* x, const float* weights, uint8_t* codes,
                     float* neg_min, uint8_t* trial, float rmin, float rdelta, int nstep,
                     bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(codes, codes + n, 0);
    *neg_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    codes[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    const float diff = scale * codes[i] + min - x[i];
    best_error += weights[i] * (use_mad ? std::fabs(diff) : diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, NearestInt(iscale * (x[i] - min))));
      trial[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * trial[i] + this_min - x[i];
        error += weights[i] * (use_mad ? std::fabs(diff) : diff * diff);
      }
      if (error < best_error) {
        std::memcpy(codes, trial, static_cast<size_t>(n));
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// ggml's make_qx_quants with rmse_type 1: signed codes in [-nmax, nmax - 1]
// stored + nmax, and the scale the best of 19 trial scales gives, weighting
// each element by qw (x^2 when qw is null).
float LargestMagnitude(int n, const float* x, float* amax) {
  float max = 0;
  *amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

float FitSymmetricScale(int n, int nmax, const float* x, const float* qw, int8_t* codes) {
  float amax = 0;
  const float max = LargestMagnitude(n, x, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(codes, codes + n, 0);
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(iscale * x[i])));
    codes[i] = static_cast<int8_t>(l + nmax);
    const float w = qw ? qw[i] : x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-nmax, std::min(nmax - 1, NearestInt(iscale * x[i])));
      const float w = qw ? qw[i] : x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        codes[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float FitPositiveScale(int n, int nmax, const float* x, uint8_t* codes, const float* qw) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::fill(codes, codes + n, 0);
    return 0.f;
  }
  float iscale = nmax / max;
  for (int i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(NearestInt(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * codes[i];
    best_mse += qw[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * is + nmax) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, NearestInt(iscale_is * x[i]));
      const float diff = x[i] - scale_is * l;
      mse += qw[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, NearestInt(iscale * x[i]));
    codes[i] = static_cast<uint8_t>(l);
    sumlx += qw[i] * x[i] * l;
    suml2 += qw[i] * l * l;
  }
  // Move single codes while that raises sumlx^2 / suml2 (five passes at most).
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = qw[i];
      float slx = sumlx - w * x[i] * codes[i];
      float sl2 = suml2 - w * codes[i] * codes[i];
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, NearestInt(x[i] * sl2 / slx));
        if (new_l != codes[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            codes[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace quantd::gguf::search

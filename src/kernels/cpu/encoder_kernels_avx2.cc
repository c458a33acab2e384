// AVX2 encoder row kernels (src/kernels/cpu/encoder_kernels.h): the AVX-512 file's add_bias, bias_gelu
// and residual_layer_norm with 8 lanes and a masked tail, for CPUs without AVX-512, where they ran the
// scalar oracle (bias + GELU through libm's erff: a tenth of MiniLM's 16-token latency). erf is
// avx2::erf_ps (vec_avx2.h: a division where the AVX-512 file takes a refined reciprocal estimate, so
// the last bits may differ from the AVX-512 kernel's). Row sums accumulate in 8 fp32 lanes; held to double by
// tests/kernels/encoder_kernels_test.cc like the AVX-512 versions. Only intrinsics, vec_avx2.h and this
// file's anonymous namespace are used here (no weak symbols: see scripts/check-isa-objects.sh).
#include <immintrin.h>
#include <math.h>

#include <cstdint>

#include "kernels/cpu/encoder_kernels.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {

using avx2::erf_ps;
using avx2::hsum;
using avx2::lanes;
using avx2::load_n;
using avx2::store_n;

}  // namespace

void add_bias_avx2(float* x, const float* bias, int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; c += 8) {
      float* p = x + r * C + c;
      store_n(p, C - c, _mm256_add_ps(load_n(p, C - c), load_n(bias + c, C - c)));
    }
}

void bias_gelu_avx2(float* x, const float* bias, int64_t rows, int64_t C) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; c += 8) {
      float* p = x + r * C + c;
      __m256 u = load_n(p, C - c);
      if (bias) u = _mm256_add_ps(u, load_n(bias + c, C - c));
      const __m256 g =
          _mm256_mul_ps(_mm256_mul_ps(half, u), _mm256_add_ps(one, erf_ps(_mm256_mul_ps(u, inv_sqrt2))));
      store_n(p, C - c, g);
    }
}

void residual_layer_norm_avx2(float* h, const float* y, const float* bias, const float* w, const float* b,
                              int64_t rows, int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * C;
    const float* yr = y ? y + r * C : nullptr;
    __m256 s = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      __m256 v = load_n(hr + c, C - c);  // lanes past C are 0
      if (yr) v = _mm256_add_ps(v, load_n(yr + c, C - c));
      if (bias) v = _mm256_add_ps(v, load_n(bias + c, C - c));
      store_n(hr + c, C - c, v);
      s = _mm256_add_ps(s, v);
    }
    const float mean = hsum(s) / static_cast<float>(C);
    const __m256 m = _mm256_set1_ps(mean);
    __m256 q = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 valid = _mm256_castsi256_ps(lanes(C - c));
      const __m256 d = _mm256_and_ps(valid, _mm256_sub_ps(load_n(hr + c, C - c), m));
      q = _mm256_fmadd_ps(d, d, q);
    }
    const float rstd = 1.0f / sqrtf(hsum(q) / static_cast<float>(C) + eps);
    const __m256 rs = _mm256_set1_ps(rstd);
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 d = _mm256_mul_ps(_mm256_sub_ps(load_n(hr + c, C - c), m), rs);
      store_n(hr + c, C - c, _mm256_fmadd_ps(d, load_n(w + c, C - c), load_n(b + c, C - c)));
    }
  }
}

}  // namespace attn::kernels::cpu::detail

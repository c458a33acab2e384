// AVX2 column sums (src/kernels/cpu/column_sums.h): the AVX-512 file's double accumulation with 4 double
// lanes per register, so a block of 64 columns is summed as two halves of 32 (8 accumulators each, the
// rows read once per half); masked loads and stores for a short block. Each column's sum is the scalar
// loop's (same order, double adds, rounded to float once).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/column_sums.h"

namespace attn::kernels::cpu {
namespace {

// Lanes [0, n) of 4 as a mask for the 128-bit masked loads and stores (n <= 0: none, n >= 4: all).
inline __m128i lanes4(int64_t n) {
  const int k = n >= 4 ? 4 : n <= 0 ? 0 : static_cast<int>(n);
  return _mm_cmpgt_epi32(_mm_set1_epi32(k), _mm_setr_epi32(0, 1, 2, 3));
}

// out[0, w) = the column sums of x[:, 0, w), w <= 32; kFull: w == 32, no masks.
template <bool kFull>
void half_block(const float* x, int64_t R, int64_t ldx, int64_t w, float* out) {
  __m128i mask[8];
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) mask[g] = lanes4(w - 4 * g);
  __m256d acc[8];
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) acc[g] = _mm256_setzero_pd();
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * ldx;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m128 v = kFull ? _mm_loadu_ps(xr + 4 * g) : _mm_maskload_ps(xr + 4 * g, mask[g]);
      acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(v));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    const __m128 s = _mm256_cvtpd_ps(acc[g]);
    if (kFull)
      _mm_storeu_ps(out + 4 * g, s);
    else
      _mm_maskstore_ps(out + 4 * g, mask[g], s);
  }
}

}  // namespace

void column_sums_block_avx2(const float* x, int64_t R, int64_t ldx, int64_t n, float* out) {
  for (int64_t c0 = 0; c0 < n; c0 += 32) {
    const int64_t w = n - c0 < 32 ? n - c0 : 32;
    if (w == 32)
      half_block<true>(x + c0, R, ldx, w, out + c0);
    else
      half_block<false>(x + c0, R, ldx, w, out + c0);
  }
}

}  // namespace attn::kernels::cpu

// AVX-512 column sums (src/kernels/cpu/column_sums.h): 64 double accumulators
// in 8 registers, one row at a time, masked loads for a short block. Each
// column's sum is the scalar loop's (same order, double adds).
#include <immintrin.h>

#include "kernels/cpu/column_sums.h"

namespace attn::kernels::cpu {
namespace {
// The zero-masking forms with every lane selected: the unmasked ones start from
// _mm512_undefined_*, which GCC 12 flags as maybe-uninitialized.
constexpr __mmask8 kAll8 = 0xff;

// A full block of 64 columns: the 8 accumulators stay in registers.
void full_block(const float* x, int64_t R, int64_t ldx, float* out) {
  // x: [R, ldx], out: [64]
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * ldx;
    a0 = _mm512_add_pd(a0, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr)));
    a1 = _mm512_add_pd(a1, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 8)));
    a2 = _mm512_add_pd(a2, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 16)));
    a3 = _mm512_add_pd(a3, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 24)));
    a4 = _mm512_add_pd(a4, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 32)));
    a5 = _mm512_add_pd(a5, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 40)));
    a6 = _mm512_add_pd(a6, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 48)));
    a7 = _mm512_add_pd(a7, _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(xr + 56)));
  }
  const __m512d acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(out + 8 * k, _mm512_maskz_cvtpd_ps(kAll8, acc[k]));
}

}  // namespace

void column_sums_block_avx512(const float* x, int64_t R, int64_t ldx, int64_t n, float* out) {
  // x: [R, ldx], out: [n]; 8 groups of 8 columns, group k masked to the columns < n
  if (n == 64) {
    full_block(x, R, ldx, out);
    return;
  }
  __m512d acc[8];
  __mmask8 mask[8];
  int groups = 0;
  for (int k = 0; k < 8; ++k) {
    const int64_t left = n - 8 * k;
    if (left <= 0) break;
    mask[k] = left >= 8 ? kAll8 : static_cast<__mmask8>((1u << static_cast<unsigned>(left)) - 1u);
    acc[k] = _mm512_setzero_pd();
    groups = k + 1;
  }
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * ldx;
    for (int k = 0; k < groups; ++k) {
      const __m256 v = _mm256_maskz_loadu_ps(mask[k], xr + 8 * k);
      acc[k] = _mm512_add_pd(acc[k], _mm512_maskz_cvtps_pd(kAll8, v));
    }
  }
  for (int k = 0; k < groups; ++k)
    _mm256_mask_storeu_ps(out + 8 * k, mask[k], _mm512_maskz_cvtpd_ps(kAll8, acc[k]));
}

}  // namespace attn::kernels::cpu

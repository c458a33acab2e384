// AVX-512 helpers shared by the fused CPU kernels. Include only from files
// compiled with AVX-512 enabled (names ending in _avx512.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace attn::kernels::cpu::avx512 {

// The first min(max(n, 0), 16) lanes: the mask of a row's last, partial block of 16.
inline __mmask16 tail_mask(int64_t n) {
  return n >= 16  ? static_cast<__mmask16>(0xffff)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
}

// In place (always inlined: no out-of-line copy compiled for this ISA): r[i] lane j becomes r[j] lane i (a 16
// × 16 transpose of 32-bit elements).
inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
  __m512 a[16], b[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // b[4g + s], 128-bit lane L: rows 4g..4g+3 at column 4L + s.
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) {
    const __m512d a0 = _mm512_castps_pd(a[g]), a1 = _mm512_castps_pd(a[g + 1]);
    const __m512d a2 = _mm512_castps_pd(a[g + 2]), a3 = _mm512_castps_pd(a[g + 3]);
    b[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    b[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    b[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    b[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  // A 4 × 4 transpose of 128-bit lanes for each s.
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s) {
    const __m512 c0 = _mm512_shuffle_f32x4(b[s], b[4 + s], 0x44),
                 c1 = _mm512_shuffle_f32x4(b[s], b[4 + s], 0xee);
    const __m512 c2 = _mm512_shuffle_f32x4(b[8 + s], b[12 + s], 0x44);
    const __m512 c3 = _mm512_shuffle_f32x4(b[8 + s], b[12 + s], 0xee);
    r[s] = _mm512_shuffle_f32x4(c0, c2, 0x88);
    r[4 + s] = _mm512_shuffle_f32x4(c0, c2, 0xdd);
    r[8 + s] = _mm512_shuffle_f32x4(c1, c3, 0x88);
    r[12 + s] = _mm512_shuffle_f32x4(c1, c3, 0xdd);
  }
}

// The same transpose of 32-bit integers (bf16 pairs): the float shuffles move bits unchanged.
inline __attribute__((always_inline)) void transpose16(__m512i r[16]) {
  __m512 f[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) f[i] = _mm512_castsi512_ps(r[i]);
  transpose16(f);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(f[i]);
}

// exp(x) for 16 floats, relative error ~2 ulp on [-87, 88]; exp(-inf) = 0,
// inputs below -87.3 flush to 0, above 88.7 saturate to +inf, NaN stays NaN
// (max/min return their second operand when either is NaN, so x goes second).
// Range reduction x = n·ln2 + r with |r| <= ln2/2, then a degree-6 polynomial.
inline __m512 exp_ps(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  const __m512 lo = _mm512_set1_ps(-87.3365478515625f);
  const __m512 hi = _mm512_set1_ps(88.72283935546875f);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // scale by 2^n (scalef handles the exponent range, including n = 128 -> inf)
  const __m512 y = _mm512_scalef_ps(p, n);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), y);
}

inline float hmax(__m512 v) { return _mm512_reduce_max_ps(v); }
inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

}  // namespace attn::kernels::cpu::avx512

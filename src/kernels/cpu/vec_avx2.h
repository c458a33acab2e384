// AVX2 helpers shared by the fused CPU kernels. Include only from files compiled with AVX2 and FMA
// enabled (names ending in _avx2.cc). Every function is always inlined, so no out-of-line copy
// compiled for this ISA reaches the linker (scripts/check-isa-objects.sh).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace attn::kernels::cpu::avx2 {

#define ATTN_AVX2_INLINE inline __attribute__((always_inline))

// In place: r[i] lane j becomes r[j] lane i (an 8 × 8 transpose of 32-bit elements).
ATTN_AVX2_INLINE void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Byte i = 0xff when bit i of m is set, else 0 (byte i takes byte i / 8 of m, then tests bit i % 8).
ATTN_AVX2_INLINE __m256i expand_bits(uint32_t m) {
  const __m256i v = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int32_t>(m)),
      _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Lanes [0, n) of 8 as an all-ones mask (n <= 0: none, n >= 8: all).
ATTN_AVX2_INLINE __m256i lanes(int64_t n) {
  const int k = n >= 8 ? 8 : n <= 0 ? 0 : static_cast<int>(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first min(n, 8) floats of p (lanes past them 0, not read), and the store of as many.
ATTN_AVX2_INLINE __m256 load_n(const float* p, int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(n));
}
ATTN_AVX2_INLINE void store_n(float* p, int64_t n, __m256 v) {
  if (n >= 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, lanes(n), v);
}

// The first min(n, 8) floats of p, lanes past them `fill` (not read).
ATTN_AVX2_INLINE __m256 load_or(const float* p, int64_t n, float fill) {
  if (n >= 8) return _mm256_loadu_ps(p);
  const __m256i k = lanes(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
}

// The sum and the maximum of the 8 lanes.
ATTN_AVX2_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}
ATTN_AVX2_INLINE float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// 2^k for integers k in [-126, 127], as floats.
ATTN_AVX2_INLINE __m256 pow2i(__m256i k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

// exp(x) for 8 floats: avx512::exp_ps's clamp, range reduction and degree-6 polynomial (relative error
// ~2 ulp on [-87, 88]), and its scaling p · 2^n (n in [-126, 128]) as p · 2^(n - n/2) · 2^(n/2): the
// first product is exact, the second rounds once, as scalef does, so the lanes have exp_ps's bits.
// exp(-inf) = 0, below -87.3 flushes to 0, NaN stays NaN.
ATTN_AVX2_INLINE __m256 exp_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365478515625f);
  const __m256 hi = _mm256_set1_ps(88.72283935546875f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, pow2i(_mm256_sub_epi32(ni, half))), pow2i(half));
  return _mm256_andnot_ps(underflow, y);
}

// erf(x) by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7 absolute): for a = |x|, t = 1 / (1 + p·a),
// erf(a) = 1 - t·poly(t)·exp(-a²), x's sign restored; row_kernels_avx512.cc's erf, the same operations
// (a division for t), so the same bits. ±1 for |x| = inf; above ~3.9 it rounds to ±1 anyway.
ATTN_AVX2_INLINE __m256 erf_ps(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f), sign_bit = _mm256_set1_ps(-0.f);
  const __m256 a = _mm256_andnot_ps(sign_bit, x);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  const __m256 e = exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a));
  const __m256 r = _mm256_fnmadd_ps(p, e, one);
  return _mm256_or_ps(r, _mm256_and_ps(x, sign_bit));
}

// The low 64 bits of a · c per 64-bit lane for a constant c (AVX2 has no 64-bit multiply):
// lo(a) lo(c) + (lo(a) hi(c) + hi(a) lo(c)) · 2^32.
ATTN_AVX2_INLINE __m256i mullo64(__m256i a, uint64_t c) {
  const __m256i c_lo = _mm256_set1_epi64x(static_cast<long long>(c & 0xffffffffull));
  const __m256i c_hi = _mm256_set1_epi64x(static_cast<long long>(c >> 32));
  const __m256i cross =
      _mm256_add_epi64(_mm256_mul_epu32(a, c_hi), _mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo));
  return _mm256_add_epi64(_mm256_mul_epu32(a, c_lo), _mm256_slli_epi64(cross, 32));
}

// The splitmix64 finaliser (mix64 of kernels/attention_args.h and the dropout keep decision of
// nn_kernels.h) on 4 lanes, bit for bit.
ATTN_AVX2_INLINE __m256i mix64(__m256i z) {
  z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xbf58476d1ce4e5b9ull);
  z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94d049bb133111ebull);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

#undef ATTN_AVX2_INLINE

}  // namespace attn::kernels::cpu::avx2

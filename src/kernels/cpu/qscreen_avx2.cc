// kernels/cpu/qscreen.h on AVX2: a pair of blocks per step in two 256-bit halves (low and high
// nibbles), vpmaddubsw (a pair of 5-bit quants times activations stays below 2·31·127 = 7874, no int16
// saturation) then vpmaddwd with ones; the scales per block in scalar code.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/qscreen.h"

namespace attn::kernels::cpu::detail {
namespace {
__m256i expand_bits(uint32_t m) {  // byte i = 0xff when bit i of m is set
  const __m256i v = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int32_t>(m)),
      _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}
__m256i dot(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
}  // namespace

void qscreen_rows_avx2(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound) {
  const int64_t nb = x.K / 32, rb = qscreen_row_bytes(x.K);
  const __m256i lo4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(0x10);
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* row = screen + n * rb;
    const std::byte* bits = row + 16 * nb;
    const std::byte* sc = row + 20 * nb;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    float extra[2] = {0, 0}, bnd[2] = {0, 0};
    for (int64_t p = 0; p < nb / 2; ++p) {
      uint16_t h0, h1;
      std::memcpy(&h0, sc + 4 * p, 2);
      std::memcpy(&h1, sc + 4 * p + 2, 2);
      const float s0 = _cvtsh_ss(h0), s1 = _cvtsh_ss(h1);
      const int64_t b = 2 * p;
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * p));
      uint32_t qh[2];
      std::memcpy(qh, bits + 8 * p, 8);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, lo4), _mm256_and_si256(expand_bits(qh[0]), b16));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), lo4),
                                         _mm256_and_si256(expand_bits(qh[1]), b16));
      const __m256i* xp = reinterpret_cast<const __m256i*>(x.xq + 64 * p);
      const __m256i is =
          _mm256_add_epi32(dot(lo, _mm256_loadu_si256(xp)), dot(hi, _mm256_loadu_si256(xp + 1)));
      const __m256 sv = _mm256_set_m128(_mm_set1_ps(s1 * x.d[b + 1]), _mm_set1_ps(s0 * x.d[b]));
      acc[p & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), sv, acc[p & 1]);
      extra[p & 1] += s0 * x.g[b] + s1 * x.g[b + 1];
      bnd[p & 1] += s0 * x.hb[b] + s1 * x.hb[b + 1];
    }
    const std::byte* corr = row + 22 * nb;
    uint16_t th;
    std::memcpy(&th, corr + kScreenOutliers, 2);
    const float tc = _cvtsh_ss(th);
    const __m256 tv = _mm256_set1_ps(tc);
    for (int j = 0; j < kScreenOutliers; j += 8) {
      const __m256 cj = _mm256_cvtepi32_ps(
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(corr + j))));
      acc[0] = _mm256_fmadd_ps(cj, _mm256_mul_ps(tv, _mm256_loadu_ps(x.xo + j)), acc[0]);
    }
    const __m256 a = _mm256_add_ps(acc[0], acc[1]);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    value[n] = _mm_cvtss_f32(t) + (extra[0] + extra[1]);
    bound[n] = (bnd[0] + bnd[1]) + tc * x.ho;
  }
}
}  // namespace attn::kernels::cpu::detail

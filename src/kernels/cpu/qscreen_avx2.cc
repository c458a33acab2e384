// kernels/cpu/qscreen.h on AVX2: a panel in two halves of 8 rows (one lane per row), per 8 k the nibbles
// of a half unpacked into two registers, vpmaddubsw (a pair of 5-bit quants times activations stays below
// 2·31·127 = 7874, no int16 saturation) then vpmaddwd with ones against 4 broadcast activation bytes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/qscreen.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {
__m256i dot(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
}  // namespace

void qscreen_rows_avx2(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound) {
  if (n0 >= n1) return;
  const int64_t nb = x.K / 32, pbytes = qscreen_panel_bytes(x.K);
  const __m256i lo4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(0x10);
  const auto* xq = reinterpret_cast<const int32_t*>(x.xq);
  for (int64_t p = n0 / kScreenPanel; p * kScreenPanel < n1; ++p) {
    const std::byte* panel = screen + p * pbytes;
    const std::byte* corr = panel + 352 * nb;
    alignas(32) float vout[16], bout[16];
    for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7: bytes 32h .. 32h + 31 of each nibble vector
      __m256 val = _mm256_setzero_ps(), bnd = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        __m256i is = _mm256_setzero_si256();
        for (int s = 0; s < 4; ++s) {
          const __m256i z =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + qscreen_nib(b, s) + 32 * h));
          uint32_t mlo, mhi;
          std::memcpy(&mlo, panel + qscreen_bits(b, s) + 4 * h, 4);
          std::memcpy(&mhi, panel + qscreen_bits(b, s) + 8 + 4 * h, 4);
          const __m256i lo =
              _mm256_or_si256(_mm256_and_si256(z, lo4), _mm256_and_si256(avx2::expand_bits(mlo), b16));
          const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(z, 4), lo4),
                                             _mm256_and_si256(avx2::expand_bits(mhi), b16));
          is = _mm256_add_epi32(is, _mm256_add_epi32(dot(lo, _mm256_set1_epi32(xq[8 * b + 2 * s])),
                                                     dot(hi, _mm256_set1_epi32(xq[8 * b + 2 * s + 1]))));
        }
        const __m256 sv = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + qscreen_scales(b) + 16 * h)));
        const __m256 f =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(x.d[b]), _mm256_set1_ps(x.g[b]));
        val = _mm256_fmadd_ps(sv, f, val);
        bnd = _mm256_fmadd_ps(sv, _mm256_set1_ps(x.hb[b]), bnd);
      }
      __m256 ca = _mm256_setzero_ps();
      for (int j = 0; j < kScreenOutliers; ++j)
        ca = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(corr + 16 * j + 8 * h)))),
                             _mm256_set1_ps(x.xo[j]), ca);
      const __m256 t =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(corr + 256 + 16 * h)));
      _mm256_store_ps(vout + 8 * h, _mm256_fmadd_ps(t, ca, val));
      _mm256_store_ps(bout + 8 * h, _mm256_fmadd_ps(t, _mm256_set1_ps(x.ho), bnd));
    }
    const int64_t r0 = p * kScreenPanel;
    for (int64_t n = std::max(n0, r0); n < std::min(n1, r0 + kScreenPanel); ++n)
      value[n] = vout[n - r0], bound[n] = bout[n - r0];
  }
}
}  // namespace attn::kernels::cpu::detail

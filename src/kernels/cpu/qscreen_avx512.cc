// kernels/cpu/qscreen.h with AVX-512 VNNI: a pair of blocks (64 weights) per 512-bit step: the nibbles
// unpacked in one register, the fifth bits added as 16 under a byte mask, one vpdpbusd against the
// reordered activations, the pair's two scales spread to their lanes by one permute.
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/qscreen.h"

namespace attn::kernels::cpu::detail {

void qscreen_rows_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound) {
  const int64_t nb = x.K / 32, rb = qscreen_row_bytes(x.K);
  const __m512i lo4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(0x10);
  // lanes of pair pp (blocks 2pp, 2pp+1 of a chunk of 16): [2pp x4, 2pp+1 x4, 2pp x4, 2pp+1 x4]
  __m512i idx[8];
  for (int pp = 0; pp < 8; ++pp) {
    const int a = 2 * pp, b = 2 * pp + 1;
    idx[pp] = _mm512_setr_epi32(a, a, a, a, b, b, b, b, a, a, a, a, b, b, b, b);
  }
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* row = screen + n * rb;
    const std::byte* bits = row + 16 * nb;
    const std::byte* sc = row + 20 * nb;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), vb = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < nb; c0 += 16) {
      const int m = static_cast<int>(nb - c0 < 16 ? nb - c0 : 16);
      const __mmask16 mk = static_cast<__mmask16>((1u << m) - 1);
      const __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, sc + 2 * c0));
      const __m512 c = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(mk, x.d + c0));
      acc1 = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(mk, x.g + c0), acc1);
      vb = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(mk, x.hb + c0), vb);
      for (int pp = 0; pp < m / 2; ++pp) {
        const int64_t p = c0 / 2 + pp;
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * p));
        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
        z = _mm512_and_si512(z, lo4);
        uint64_t qh;
        std::memcpy(&qh, bits + 8 * p, 8);
        z = _mm512_mask_add_epi8(z, _cvtu64_mask64(qh), z, b16);
        const __m512i is = _mm512_dpbusd_epi32(
            _mm512_setzero_si512(), z, _mm512_loadu_si512(reinterpret_cast<const void*>(x.xq + 64 * p)));
        const __m512 sv = _mm512_permutexvar_ps(idx[pp], c);
        if (pp & 1)
          acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), sv, acc1);
        else
          acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), sv, acc0);
      }
    }
    const std::byte* corr = row + 22 * nb;
    uint16_t th;
    std::memcpy(&th, corr + kScreenOutliers, 2);
    const float t = _cvtsh_ss(th);
    const __m512 cj =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(corr))));
    acc0 = _mm512_fmadd_ps(cj, _mm512_mul_ps(_mm512_set1_ps(t), _mm512_loadu_ps(x.xo)), acc0);
    value[n] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    bound[n] = _mm512_reduce_add_ps(vb) + t * x.ho;
  }
}
}  // namespace attn::kernels::cpu::detail
#pragma GCC pop_options

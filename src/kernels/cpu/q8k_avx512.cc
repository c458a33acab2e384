// kernels/cpu/q8k.h with AVX-512 VNNI: vpdpbusd on 256-bit lanes (AVX512VL), scales by vpmulld, the
// 5th bits of Q5_0 from a mask register (the body is q8k_body.h).
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (_mm512_undefined_ps
// self-initialises; GCC bug 105593, fixed in 13) in the quantizer's max / reduce / narrowing: a
// false positive.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#include <attn/core/f16.h>

#include "kernels/cpu/q8k_body.h"

namespace attn::kernels::cpu::detail {
namespace {
struct DotVnni {
  static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
  static __m256i dot_scaled(__m256i u, __m256i s, int a, int b) {
    return _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s),
                              _mm256_setr_epi32(a, a, a, a, b, b, b, b));
  }
  static __m256i expand_bits(uint32_t m) { return _mm256_movm_epi8(static_cast<__mmask32>(m)); }
};
}  // namespace

void q8k_row_vnni(KFormat f, const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, int R,
                  float* out) {
  Q8Body<DotVnni>::row(f, row, K, x, m0, R, out);
}
void q8k_row_list_vnni(KFormat f, const std::byte* w, int64_t rb, const int64_t* rows, int64_t count,
                       int64_t K, const Q8KRows& x, float* y) {
  Q8Body<DotVnni>::row_list(f, w, rb, rows, count, K, x, y);
}
void q8k_rows_m1_vnni(KFormat f, const std::byte* w, int64_t rb, int64_t n0, int64_t n1, int64_t K,
                      const Q8KRows& x, float* y, bool accumulate) {
  Q8Body<DotVnni>::rows_m1(f, w, rb, n0, n1, K, x, y, accumulate);
}

bool q8k_quantize_avx512(Q8Kind kind, const float* x, int64_t M, int64_t K, int64_t ldx, int8_t* q, float* d,
                         int32_t* bsum) {
  const int64_t B = q8k_block(kind), nb = K / B;
  const __mmask16 all = 0xffff;
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), lim = _mm512_set1_ps(127.0f);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    int8_t* qr = q + m * K;
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = xr + b * B;
      __m512 mx = _mm512_setzero_ps();
      for (int64_t i = 0; i < B; i += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(xb + i)));
      const float amax = _mm512_reduce_max_ps(mx);
      if (!(amax <= 3.4028235e38f)) return false;  // inf or nan (max_ps drops a nan in the first operand)
      for (int64_t i = 0; i < B; ++i)
        if (xb[i] != xb[i]) return false;
      float db = amax / 127.0f;
      const float id = db > 0 ? 1.0f / db : 0.0f;
      if (kind == Q8Kind::q8_0) db = round_to_f16(db);
      d[m * nb + b] = db;
      const __m512 vid = _mm512_set1_ps(id);
      for (int64_t i = 0; i < B; i += 16) {
        // std::round (half away from zero): the truncation, plus the sign where |v - trunc(v)| >= 0.5
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xb + i), vid);
        const __m512 t = _mm512_maskz_roundscale_ps(all, v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), half, _CMP_GE_OQ);
        const __m512 sgn = _mm512_or_ps(one, _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
        __m512 r = _mm512_mask_add_ps(t, up, t, sgn);
        r = _mm512_min_ps(_mm512_max_ps(r, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
        const __m512i qi = _mm512_maskz_cvttps_epi32(all, r);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qr + b * B + i), _mm512_cvtepi32_epi8(qi));
        bsum[m * (K / 16) + (b * B + i) / 16] = _mm512_reduce_add_epi32(qi);
      }
    }
  }
  return true;
}
}  // namespace attn::kernels::cpu::detail
#pragma GCC pop_options

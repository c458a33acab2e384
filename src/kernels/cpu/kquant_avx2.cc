// kernels/cpu/kquant.h on AVX2: 8 lanes (the body is kquant_body.h).
#include <immintrin.h>

#include "kernels/cpu/kquant_body.h"

namespace attn::kernels::cpu::detail {
namespace {
struct V256 {
  using I = __m256i;
  using F = __m256;
  static constexpr int N = 8;
  static I u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I i8(const int8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I set1i(int32_t v) { return _mm256_set1_epi32(v); }
  static I iota(int s) {
    return _mm256_add_epi32(_mm256_set1_epi32(s), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static I srl(I a, int s) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(s)); }
  static I srlv(I a, I s) { return _mm256_srlv_epi32(a, s); }
  static I sll(I a, int s) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(s)); }
  static I and_(I a, int m) { return _mm256_and_si256(a, _mm256_set1_epi32(m)); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I sub(I a, int v) { return _mm256_sub_epi32(a, _mm256_set1_epi32(v)); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F zero() { return _mm256_setzero_ps(); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static float sum(F v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
  }
};
}  // namespace

bool kquant_unpack_row_avx2(KFormat f, const std::byte* row, int64_t K, float* out) {
  return KBody<V256>::unpack_row(f, row, K, out);
}
void kquant_dots_avx2(const float* wrow, int64_t K, const float* x, int64_t M, int64_t ldx, float* y,
                      int64_t ldy, bool accumulate) {
  KBody<V256>::dots(wrow, K, x, M, ldx, y, ldy, accumulate);
}
}  // namespace attn::kernels::cpu::detail

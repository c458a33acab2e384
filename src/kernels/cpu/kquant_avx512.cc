// kernels/cpu/kquant.h on AVX-512: 16 lanes (the body is kquant_body.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/kquant_body.h"

namespace attn::kernels::cpu::detail {
namespace {
struct V512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int N = 16;
  static I u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I i8(const int8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I set1i(int32_t v) { return _mm512_set1_epi32(v); }
  static I iota(int s) {
    return _mm512_add_epi32(_mm512_set1_epi32(s),
                            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  }
  static I srl(I a, int s) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(s)); }
  static I srlv(I a, I s) { return _mm512_srlv_epi32(a, s); }
  static I sll(I a, int s) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(s)); }
  static I and_(I a, int m) { return _mm512_and_si512(a, _mm512_set1_epi32(m)); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I sub(I a, int v) { return _mm512_sub_epi32(a, _mm512_set1_epi32(v)); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F zero() { return _mm512_setzero_ps(); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static float sum(F v) { return _mm512_reduce_add_ps(v); }
};
}  // namespace

bool kquant_unpack_row_avx512(KFormat f, const std::byte* row, int64_t K, float* out) {
  return KBody<V512>::unpack_row(f, row, K, out);
}
void kquant_dots_avx512(const float* wrow, int64_t K, const float* x, int64_t M, int64_t ldx, float* y,
                        int64_t ldy, bool accumulate) {
  KBody<V512>::dots(wrow, K, x, M, ldx, y, ldy, accumulate);
}
}  // namespace attn::kernels::cpu::detail
#pragma GCC diagnostic pop

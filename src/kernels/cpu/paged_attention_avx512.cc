// kernels/cpu/paged_attention.h on AVX-512: 16 lanes (the body is paged_attention_body.h).
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/paged_attention_body.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {
struct V512 {
  using F = __m512;
  static constexpr int N = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(avx512::tail_mask(n), p); }
  static F load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F load_n(const uint16_t* p, int64_t n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(avx512::tail_mask(n), p));
  }
  static F load(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F load_n(const int8_t* p, int64_t n) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(avx512::tail_mask(n), p)));
  }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static float reduce_sum(F a) { return _mm512_reduce_add_ps(a); }
  static float reduce_max(F a) { return _mm512_reduce_max_ps(a); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F exp(F x) { return avx512::exp_ps(x); }
  // tanh(x) = 1 − 2 / (exp(2x) + 1): ±1 where exp saturates, absolute error ~1e-7 near 0.
  static F tanh(F x) {
    const F one = _mm512_set1_ps(1.0f);
    const F e = avx512::exp_ps(_mm512_add_ps(x, x));
    return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  }
  static void transpose(F* a) { avx512::transpose16(a); }
};
}  // namespace

void paged_item_avx512(const PagedAttnArgs& a, const PagedItem& it, float* scratch) {
  paged_item<V512>(a, it, scratch);
}
}  // namespace attn::kernels::cpu::detail

#pragma GCC diagnostic pop

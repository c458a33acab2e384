// kernels/cpu/paged_attention.h on AVX2 + FMA + F16C: 8 lanes (the body is paged_attention_body.h).
#include <immintrin.h>

#include "kernels/cpu/paged_attention_body.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {
struct V256 {
  using F = __m256;
  static constexpr int N = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load_n(const float* p, int64_t n) { return avx2::load_n(p, n); }
  static F load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F load_n(const uint16_t* p, int64_t n) {
    alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n && i < 8; ++i) tmp[i] = p[i];
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
  }
  static F load(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F load_n(const int8_t* p, int64_t n) {
    alignas(16) int8_t tmp[16] = {};
    for (int64_t i = 0; i < n && i < 8; ++i) tmp[i] = p[i];
    return load(tmp);
  }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static float reduce_sum(F a) { return avx2::hsum(a); }
  static float reduce_max(F a) { return avx2::hmax(a); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F exp(F x) { return avx2::exp_ps(x); }
  // tanh(x) = 1 − 2 / (exp(2x) + 1): ±1 where exp saturates, absolute error ~1e-7 near 0.
  static F tanh(F x) {
    const F one = _mm256_set1_ps(1.0f);
    const F e = avx2::exp_ps(_mm256_add_ps(x, x));
    return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  }
  static void transpose(F* a) { avx2::transpose8(a); }
};
}  // namespace

void paged_item_avx2(const PagedAttnArgs& a, const PagedItem& it, float* scratch) {
  paged_item<V256>(a, it, scratch);
}
}  // namespace attn::kernels::cpu::detail

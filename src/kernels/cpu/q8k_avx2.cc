// kernels/cpu/q8k.h on AVX2: u8 x s8 pairs with vpmaddubsw (int16: every quant here keeps a pair
// below 32767), then vpmaddwd with ones or the block scales (the body is q8k_body.h).
#include "kernels/cpu/q8k_body.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {
struct DotAvx2 {
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static __m256i dot_scaled(__m256i u, __m256i s, int a, int b) {
    const __m256i sc =
        _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)), _mm_set1_epi16(static_cast<int16_t>(a)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc);
  }
  static __m256i expand_bits(uint32_t m) { return avx2::expand_bits(m); }
};
}  // namespace

void q8k_row_avx2(KFormat f, const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, int R,
                  float* out) {
  Q8Body<DotAvx2>::row(f, row, K, x, m0, R, out);
}
void q8k_row_list_avx2(KFormat f, const std::byte* w, int64_t rb, const int64_t* rows, int64_t count,
                       int64_t K, const Q8KRows& x, float* y) {
  Q8Body<DotAvx2>::row_list(f, w, rb, rows, count, K, x, y);
}
void q8k_rows_m1_avx2(KFormat f, const std::byte* w, int64_t rb, int64_t n0, int64_t n1, int64_t K,
                      const Q8KRows& x, float* y, bool accumulate) {
  Q8Body<DotAvx2>::rows_m1(f, w, rb, n0, n1, K, x, y, accumulate);
}
}  // namespace attn::kernels::cpu::detail

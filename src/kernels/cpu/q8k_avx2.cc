// kernels/cpu/q8k.h on AVX2: u8 x s8 pairs with vpmaddubsw (int16: every quant here keeps a pair
// below 32767), then vpmaddwd with ones or the block scales (the body is q8k_body.h).
#include "kernels/cpu/q8k_body.h"

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
  static __m256i expand_bits(uint32_t m) {
    // byte i <- byte i / 8 of m, then test bit i % 8
    const __m256i v = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int32_t>(m)),
        _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  }
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

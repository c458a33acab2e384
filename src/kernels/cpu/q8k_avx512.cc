// kernels/cpu/q8k.h with AVX-512 VNNI: vpdpbusd on 256-bit lanes (AVX512VL), scales by vpmulld, the
// 5th bits of Q5_0 from a mask register (the body is q8k_body.h).
#pragma GCC push_options
#pragma GCC target("avx512vnni")
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
void q8k_rows_m1_vnni(KFormat f, const std::byte* w, int64_t rb, int64_t n0, int64_t n1, int64_t K,
                      const Q8KRows& x, float* y, bool accumulate) {
  Q8Body<DotVnni>::rows_m1(f, w, rb, n0, n1, K, x, y, accumulate);
}
}  // namespace attn::kernels::cpu::detail
#pragma GCC pop_options

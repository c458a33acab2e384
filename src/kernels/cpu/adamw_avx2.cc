// AVX2 optimizer kernels (src/kernels/cpu/adamw.h): the scalar operation order, 8 lanes at a time, the
// last n mod 8 elements by the scalar kernel. GCC writes _mm256_add_ps and friends as plain vector
// arithmetic, which it contracts into FMA under -mfma, and AVX2 has no explicit-rounding forms (the
// AVX-512 kernel's way out): every product passes through an empty asm statement, which the compiler
// cannot fuse across, so every operation rounds once, exactly as in the scalar kernel.
#include <immintrin.h>

#include "kernels/cpu/adamw.h"

namespace attn::kernels::cpu {
namespace {

inline __m256 mul(__m256 a, __m256 b) {
  __m256 r = _mm256_mul_ps(a, b);
  __asm__("" : "+x"(r));  // rounded here: not contracted into a following add
  return r;
}

}  // namespace

void adamw_update_avx2(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  const __m256 decay = _mm256_set1_ps(s.decay), w1 = _mm256_set1_ps(s.w1), b2 = _mm256_set1_ps(s.b2),
               w2 = _mm256_set1_ps(s.w2), bc2 = _mm256_set1_ps(s.bc2_sqrt), eps = _mm256_set1_ps(s.eps),
               step = _mm256_set1_ps(s.neg_step);
  const int64_t n8 = n / 8 * 8;
  for (int64_t j = 0; j < n8; j += 8) {
    const __m256 gj = _mm256_loadu_ps(g + j);
    __m256 pj = _mm256_loadu_ps(p + j);
    const __m256 m0 = _mm256_loadu_ps(m + j), v0 = _mm256_loadu_ps(v + j);
    if (s.do_decay) pj = mul(pj, decay);
    const __m256 mj = _mm256_add_ps(m0, mul(w1, _mm256_sub_ps(gj, m0)));
    const __m256 vj = _mm256_add_ps(mul(v0, b2), mul(mul(w2, gj), gj));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vj), bc2), eps);
    const __m256 pn = _mm256_add_ps(pj, _mm256_div_ps(mul(step, mj), denom));
    _mm256_storeu_ps(m + j, mj);
    _mm256_storeu_ps(v + j, vj);
    _mm256_storeu_ps(p + j, pn);
  }
  if (n8 < n) adamw_update_scalar(p + n8, g + n8, m + n8, v + n8, n - n8, s);
}

}  // namespace attn::kernels::cpu

// AVX-512 optimizer kernels (src/kernels/cpu/adamw.h): the scalar operation
// order, 16 lanes at a time, a masked tail. GCC implements _mm512_add_ps and
// friends as plain vector arithmetic, which it may contract into FMA under
// -mfma; the explicit-rounding forms are opaque builtins that it never fuses,
// so every operation rounds once, exactly as in the scalar kernel.
#include <immintrin.h>

#include "kernels/cpu/adamw.h"

namespace attn::kernels::cpu {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
// The zero-masking forms with every lane selected (the unmasked forms start
// from _mm512_undefined_ps, which GCC 12 flags as maybe-uninitialized).
constexpr __mmask16 kAll = 0xffff;
inline __m512 add(__m512 a, __m512 b) { return _mm512_maskz_add_round_ps(kAll, a, b, kRound); }
inline __m512 sub(__m512 a, __m512 b) { return _mm512_maskz_sub_round_ps(kAll, a, b, kRound); }
inline __m512 mul(__m512 a, __m512 b) { return _mm512_maskz_mul_round_ps(kAll, a, b, kRound); }
inline __m512 div(__m512 a, __m512 b) { return _mm512_maskz_div_round_ps(kAll, a, b, kRound); }
inline __m512 sqrt(__m512 a) { return _mm512_maskz_sqrt_round_ps(kAll, a, kRound); }

}  // namespace

void adamw_update_avx512(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s) {
  const __m512 decay = _mm512_set1_ps(s.decay), w1 = _mm512_set1_ps(s.w1), b2 = _mm512_set1_ps(s.b2),
               w2 = _mm512_set1_ps(s.w2), bc2 = _mm512_set1_ps(s.bc2_sqrt), eps = _mm512_set1_ps(s.eps),
               step = _mm512_set1_ps(s.neg_step);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? static_cast<__mmask16>(0xffff)
                                    : static_cast<__mmask16>((1u << static_cast<unsigned>(n - j)) - 1u);
    const __m512 gj = _mm512_maskz_loadu_ps(k, g + j);
    __m512 pj = _mm512_maskz_loadu_ps(k, p + j);
    const __m512 m0 = _mm512_maskz_loadu_ps(k, m + j), v0 = _mm512_maskz_loadu_ps(k, v + j);
    if (s.do_decay) pj = mul(pj, decay);
    const __m512 mj = add(m0, mul(w1, sub(gj, m0)));
    const __m512 vj = add(mul(v0, b2), mul(mul(w2, gj), gj));
    const __m512 denom = add(div(sqrt(vj), bc2), eps);
    const __m512 pn = add(pj, div(mul(step, mj), denom));
    _mm512_mask_storeu_ps(m + j, k, mj);
    _mm512_mask_storeu_ps(v + j, k, vj);
    _mm512_mask_storeu_ps(p + j, k, pn);
  }
}

}  // namespace attn::kernels::cpu

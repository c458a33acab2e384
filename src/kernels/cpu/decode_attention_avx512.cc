// Decode-step attention, AVX-512 (D a multiple of 16, at most 256): q·k with D/16 FMAs and one
// horizontal sum per key, the exponentials 16 keys at a time, P·V with the output row in registers.
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

template <int ND>  // D / 16
void group(const float* q, int64_t G, const float* k, const float* v, int64_t ldk, int64_t Lk, float scale,
           float* scratch, float* out) {
  for (int64_t g = 0; g < G; ++g) {
    float* s = scratch + g * Lk;
    __m512 qv[ND];
    for (int c = 0; c < ND; ++c)
      qv[c] = _mm512_mul_ps(_mm512_loadu_ps(q + g * ND * 16 + c * 16), _mm512_set1_ps(scale));
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 4 <= Lk; j += 4) {  // four keys at a time: independent FMA chains
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      const float* kj = k + j * ldk;
      for (int c = 0; c < ND; ++c) {
        a0 = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kj + c * 16), a0);
        a1 = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kj + ldk + c * 16), a1);
        a2 = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kj + 2 * ldk + c * 16), a2);
        a3 = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kj + 3 * ldk + c * 16), a3);
      }
      s[j] = _mm512_reduce_add_ps(a0);
      s[j + 1] = _mm512_reduce_add_ps(a1);
      s[j + 2] = _mm512_reduce_add_ps(a2);
      s[j + 3] = _mm512_reduce_add_ps(a3);
    }
    for (; j < Lk; ++j) {
      __m512 a = _mm512_setzero_ps();
      for (int c = 0; c < ND; ++c) a = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(k + j * ldk + c * 16), a);
      s[j] = _mm512_reduce_add_ps(a);
    }
    for (j = 0; j < Lk; j += 16) {
      const __mmask16 m = Lk - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (Lk - j)) - 1u);
      mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, s + j));
    }
    const __m512 mxv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j < Lk; j += 16) {
      const __mmask16 m = Lk - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (Lk - j)) - 1u);
      const __m512 e =
          _mm512_maskz_mov_ps(m, avx512::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), mxv)));
      _mm512_mask_storeu_ps(s + j, m, e);
      sum = _mm512_add_ps(sum, e);
    }
    __m512 o[ND];
    for (int c = 0; c < ND; ++c) o[c] = _mm512_setzero_ps();
    for (j = 0; j < Lk; ++j) {
      const __m512 p = _mm512_set1_ps(s[j]);
      for (int c = 0; c < ND; ++c) o[c] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + j * ldk + c * 16), o[c]);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int c = 0; c < ND; ++c) _mm512_storeu_ps(out + g * ND * 16 + c * 16, _mm512_mul_ps(o[c], inv));
  }
}

}  // namespace

void decode_attention_avx512(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                             int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  switch (D / 16) {
#define ATTN_DECODE_CASE(n) \
  case n:                   \
    return group<n>(q, G, k, v, ldk, Lk, scale, scratch, out);
    ATTN_DECODE_CASE(1)
    ATTN_DECODE_CASE(2)
    ATTN_DECODE_CASE(3)
    ATTN_DECODE_CASE(4)
    ATTN_DECODE_CASE(5)
    ATTN_DECODE_CASE(6)
    ATTN_DECODE_CASE(7)
    ATTN_DECODE_CASE(8)
    ATTN_DECODE_CASE(9)
    ATTN_DECODE_CASE(10)
    ATTN_DECODE_CASE(11)
    ATTN_DECODE_CASE(12)
    ATTN_DECODE_CASE(13)
    ATTN_DECODE_CASE(14)
    ATTN_DECODE_CASE(15)
    ATTN_DECODE_CASE(16)
#undef ATTN_DECODE_CASE
    default:
      return decode_attention_scalar(q, G, k, v, ldk, Lk, D, scale, scratch, out);
  }
}

}  // namespace attn::kernels::cpu::detail

#pragma GCC diagnostic pop

// Decode-step attention, AVX-512 (D a multiple of 16, at most 256): q·k with D/16 FMAs per key and the
// horizontal sums of 16 keys in one tree, the exponentials 16 keys at a time, P·V with the output row
// in registers.
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/group_decode_attention.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

// Four vectors a, b, c, d → one whose 128-bit block L holds (Σ a[L], Σ b[L], Σ c[L], Σ d[L]), each sum
// over the four floats of block L.
inline __m512 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  return _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
}

// The horizontal sums of 16 vectors as one vector: lane i = Σ a[i] (a transpose-and-add tree, 37
// shuffles and adds instead of 16 separate reductions).
inline __m512 sum16(const __m512* a) {
  const __m512 w0 = sum4(a[0], a[1], a[2], a[3]), w1 = sum4(a[4], a[5], a[6], a[7]);
  const __m512 w2 = sum4(a[8], a[9], a[10], a[11]), w3 = sum4(a[12], a[13], a[14], a[15]);
  const __m512 y01 = _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 y23 = _mm512_add_ps(_mm512_shuffle_f32x4(w2, w3, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(w2, w3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y01, y23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(y01, y23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// 16 cache values as floats: f32, or IEEE half bits (the f16 cache).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int ND, typename T>  // D / 16, cache element type
void group(const float* q, int64_t G, const T* k, const T* v, int64_t ldk, int64_t Lk, float scale,
           float* scratch, float* out) {
  for (int64_t g = 0; g < G; ++g) {
    float* s = scratch + g * Lk;
    __m512 qv[ND];
    for (int c = 0; c < ND; ++c)
      qv[c] = _mm512_mul_ps(_mm512_loadu_ps(q + g * ND * 16 + c * 16), _mm512_set1_ps(scale));
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= Lk; j += 16) {  // 16 keys: 16 independent FMA chains, one reduction tree
      __m512 a[16];
      for (int i = 0; i < 16; ++i) {
        const T* ki = k + (j + i) * ldk;
        a[i] = _mm512_mul_ps(qv[0], load16(ki));
        for (int c = 1; c < ND; ++c) a[i] = _mm512_fmadd_ps(qv[c], load16(ki + c * 16), a[i]);
      }
      _mm512_storeu_ps(s + j, sum16(a));
    }
    for (; j < Lk; ++j) {
      __m512 a = _mm512_setzero_ps();
      for (int c = 0; c < ND; ++c) a = _mm512_fmadd_ps(qv[c], load16(k + j * ldk + c * 16), a);
      s[j] = _mm512_reduce_add_ps(a);
    }
    for (j = 0; j < Lk; j += 16) {
      const __mmask16 m = avx512::tail_mask(Lk - j);
      mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, s + j));
    }
    const __m512 mxv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j < Lk; j += 16) {
      const __mmask16 m = avx512::tail_mask(Lk - j);
      const __m512 e =
          _mm512_maskz_mov_ps(m, avx512::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), mxv)));
      _mm512_mask_storeu_ps(s + j, m, e);
      sum = _mm512_add_ps(sum, e);
    }
    __m512 o[ND], o2[ND];  // two sets of accumulators: twice the independent FMA chains
    for (int c = 0; c < ND; ++c) o[c] = o2[c] = _mm512_setzero_ps();
    for (j = 0; j + 2 <= Lk; j += 2) {
      const __m512 p = _mm512_set1_ps(s[j]), p2 = _mm512_set1_ps(s[j + 1]);
      for (int c = 0; c < ND; ++c) {
        o[c] = _mm512_fmadd_ps(p, load16(v + j * ldk + c * 16), o[c]);
        o2[c] = _mm512_fmadd_ps(p2, load16(v + (j + 1) * ldk + c * 16), o2[c]);
      }
    }
    if (j < Lk) {
      const __m512 p = _mm512_set1_ps(s[j]);
      for (int c = 0; c < ND; ++c) o[c] = _mm512_fmadd_ps(p, load16(v + j * ldk + c * 16), o[c]);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int c = 0; c < ND; ++c)
      _mm512_storeu_ps(out + g * ND * 16 + c * 16, _mm512_mul_ps(_mm512_add_ps(o[c], o2[c]), inv));
  }
}

template <typename T>
void dispatch(const float* q, int64_t G, const T* k, const T* v, int64_t ldk, int64_t Lk, int64_t D,
              float scale, float* scratch, float* out) {
  switch (D / 16) {
#define ATTN_DECODE_CASE(n) \
  case n:                   \
    return group<n, T>(q, G, k, v, ldk, Lk, scale, scratch, out);
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
      return;  // the dispatcher only sends D % 16 == 0, D <= 256
  }
}

}  // namespace

void group_decode_attention_avx512(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                                   int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  dispatch(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}

void group_decode_attention_f16_avx512(const float* q, int64_t G, const uint16_t* k, const uint16_t* v,
                                       int64_t ldk, int64_t Lk, int64_t D, float scale, float* scratch,
                                       float* out) {
  dispatch(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}

void f32_to_f16_avx512(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (i < n) {
    const __mmask16 m = avx512::tail_mask(n - i);
    _mm256_mask_storeu_epi16(
        out + i, m,
        _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

}  // namespace attn::kernels::cpu::detail

#pragma GCC diagnostic pop

// AVX-512 body of the one-query decode attention (src/kernels/cpu/decode_attention.h).
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (the
// _mm512_undefined_ps() pass-through of the unmasked forms), as in encoder_kernels_avx512.cc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

using avx512::tail_mask;

// The four lane sums of a0..a3, as the first four floats of the result.
inline __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  // Fold the upper 256 bits onto the lower: blocks (a0: 0+2, 1+3 | a1: 0+2, 1+3).
  const __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xEE));
  const __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xEE));
  // One 128-bit block per input: block i holds four partial sums of a_i.
  __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, 0x88), _mm512_shuffle_f32x4(x01, x23, 0xDD));
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));  // pairs
  t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));  // halves: every float of block i = sum of a_i
  return _mm512_castps512_ps128(_mm512_maskz_compress_ps(0x1111, t));
}

// Scores of keys [0, len) against q (D <= 16 * kMaxDv floats held in registers).
// Lines of rows [j, j + n) of a [len, D] block with row stride ld (the next block to be read), into L1.
template <int DV>
inline void prefetch_rows(const float* p, int64_t ld, int64_t j, int64_t n, int64_t len) {
  if (p == nullptr) return;
  for (int64_t e = std::min(j + n, len); j < e; ++j)
#pragma GCC unroll 8
    for (int i = 0; i < DV; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(p + j * ld + 16 * i), _MM_HINT_T0);
}

// pf, pfs, pf_len: the block read next (prefetched alongside, one row per key), or null.
template <int DV>
void scores_row(const float* q, const float* k, int64_t skl, int64_t len, int64_t D, float scale, float* s,
                const float* pf, int64_t pfs, int64_t pf_len) {
  const __mmask16 last = tail_mask(D - 16 * (DV - 1));
  __m512 qv[DV];
#pragma GCC unroll 8
  for (int i = 0; i < DV; ++i) qv[i] = _mm512_maskz_loadu_ps(i + 1 < DV ? 0xffff : last, q + 16 * i);
  const __m128 sc = _mm_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= len; j += 8) {  // 8 independent dot products per pass
    prefetch_rows<DV>(pf, pfs, j, 8, pf_len);
    __m512 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const float* kj = k + (j + c) * skl;
      acc[c] = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(DV > 1 ? 0xffff : last, kj));
#pragma GCC unroll 8
      for (int i = 1; i < DV; ++i)
        acc[c] =
            _mm512_fmadd_ps(qv[i], _mm512_maskz_loadu_ps(i + 1 < DV ? 0xffff : last, kj + 16 * i), acc[c]);
    }
    _mm_storeu_ps(s + j, _mm_mul_ps(sum4(acc[0], acc[1], acc[2], acc[3]), sc));
    _mm_storeu_ps(s + j + 4, _mm_mul_ps(sum4(acc[4], acc[5], acc[6], acc[7]), sc));
  }
  prefetch_rows<DV>(pf, pfs, j, pf_len - j, pf_len);
  for (; j + 4 <= len; j += 4) {
    __m512 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const float* kj = k + (j + c) * skl;
      acc[c] = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(DV > 1 ? 0xffff : last, kj));
#pragma GCC unroll 8
      for (int i = 1; i < DV; ++i)
        acc[c] =
            _mm512_fmadd_ps(qv[i], _mm512_maskz_loadu_ps(i + 1 < DV ? 0xffff : last, kj + 16 * i), acc[c]);
    }
    _mm_storeu_ps(s + j, _mm_mul_ps(sum4(acc[0], acc[1], acc[2], acc[3]), sc));
  }
  for (; j < len; ++j) {
    const float* kj = k + j * skl;
    __m512 acc = _mm512_mul_ps(qv[0], _mm512_maskz_loadu_ps(DV > 1 ? 0xffff : last, kj));
#pragma GCC unroll 8
    for (int i = 1; i < DV; ++i)
      acc = _mm512_fmadd_ps(qv[i], _mm512_maskz_loadu_ps(i + 1 < DV ? 0xffff : last, kj + 16 * i), acc);
    s[j] = _mm512_reduce_add_ps(acc) * scale;
  }
}

// s[0, len) <- exp(s - max); returns the sum.
float softmax_unnormalised(float* s, int64_t len) {
  namespace v = kernels::cpu::avx512;
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m = neg_inf;
  for (int64_t j = 0; j < len; j += 16)
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(neg_inf, tail_mask(len - j), s + j));
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < len; j += 16) {
    const __mmask16 km = tail_mask(len - j);
    const __m512 e = _mm512_maskz_mov_ps(km, v::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(km, s + j), mx)));
    _mm512_mask_storeu_ps(s + j, km, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// o = (Σ_j p_j v_j) / total.
template <int DV>
void pv_row(const float* p, const float* v, int64_t svl, int64_t len, int64_t D, float inv, float* o,
            const float* pf, int64_t pfs, int64_t pf_len) {
  const __mmask16 last = tail_mask(D - 16 * (DV - 1));
  // U independent accumulator sets (keys j, j+1, ... in turn) hide the FMA latency.
  constexpr int U = DV <= 2 ? 4 : 2;
  __m512 acc[U][DV];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int i = 0; i < DV; ++i) acc[u][i] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + U <= len; j += U) {
    prefetch_rows<DV>(pf, pfs, j, U, pf_len);
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const __m512 pj = _mm512_set1_ps(p[j + u]);
      const float* vj = v + (j + u) * svl;
#pragma GCC unroll 8
      for (int i = 0; i < DV; ++i)
        acc[u][i] =
            _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(i + 1 < DV ? 0xffff : last, vj + 16 * i), acc[u][i]);
    }
  }
  prefetch_rows<DV>(pf, pfs, j, pf_len - j, pf_len);
  for (; j < len; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const float* vj = v + j * svl;
#pragma GCC unroll 8
    for (int i = 0; i < DV; ++i)
      acc[0][i] =
          _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(i + 1 < DV ? 0xffff : last, vj + 16 * i), acc[0][i]);
  }
#pragma GCC unroll 4
  for (int u = 1; u < U; ++u)
#pragma GCC unroll 8
    for (int i = 0; i < DV; ++i) acc[0][i] = _mm512_add_ps(acc[0][i], acc[u][i]);
  const __m512 sc = _mm512_set1_ps(inv);
#pragma GCC unroll 8
  for (int i = 0; i < DV; ++i)
    _mm512_mask_storeu_ps(o + 16 * i, i + 1 < DV ? 0xffff : last, _mm512_mul_ps(acc[0][i], sc));
}

template <int DV>
void rows(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* s) {
  const int64_t group = a.H / a.Hkv;
  auto len_of = [&](int64_t b) { return a.lengths ? a.lengths[b] : a.L; };
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.H, h = r % a.H, g = h / group;
    const int64_t len = len_of(b);
    const float* k = a.k + b * a.skb + g * a.skh;
    const float* v = a.v + b * a.svb + g * a.svh;
    float* o = a.o + b * a.sob + h * a.soh;
    // The V rows are fetched while the scores run, the next row's K rows while P·V runs.
    const int64_t rn = r + 1, bn = rn / a.H;
    const float* k_next = rn < r1 ? a.k + bn * a.skb + (rn % a.H) / group * a.skh : nullptr;
    scores_row<DV>(a.q + b * a.sqb + h * a.sqh, k, a.skl, len, a.D, a.scale, s, v, a.svl, len);
    const float total = len > 0 ? softmax_unnormalised(s, len) : 0.0f;
    pv_row<DV>(s, v, a.svl, len, a.D, len > 0 ? 1.0f / total : 0.0f, o, k_next, a.skl,
               rn < r1 ? len_of(bn) : 0);
  }
}

}  // namespace

void decode_attention_avx512(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* scores) {
  switch ((a.D + 15) / 16) {
    case 1:
      return rows<1>(a, r0, r1, scores);
    case 2:
      return rows<2>(a, r0, r1, scores);
    case 3:
      return rows<3>(a, r0, r1, scores);
    case 4:
      return rows<4>(a, r0, r1, scores);
    case 5:
      return rows<5>(a, r0, r1, scores);
    case 6:
      return rows<6>(a, r0, r1, scores);
    case 7:
      return rows<7>(a, r0, r1, scores);
    case 8:
      return rows<8>(a, r0, r1, scores);
    default:
      return decode_attention_scalar(a, r0, r1, scores);  // D > 128: the plain loops
  }
}

}  // namespace attn::kernels::cpu::detail

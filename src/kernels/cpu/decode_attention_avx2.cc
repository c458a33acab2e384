// AVX2 body of the one-query decode attention (src/kernels/cpu/decode_attention.h), for CPUs without
// AVX-512, where the scalar body (an exp in double per key) was a quarter of a batch-32 decoding step.
// decode_attention_avx512.cc's three passes with 8-float vectors: scores 4 keys at a time (q read from
// L1, K streamed), exp(s - max) in place, then P·V in blocks of up to 8 vectors of D. D up to 128; longer
// heads take the scalar body. Only intrinsics, vec_avx2.h and this file's anonymous namespace are used
// here (no weak symbols: see scripts/check-isa-objects.sh).
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {

// Vector i of a row of D floats: the last one masked to the row's end (lanes past D read 0).
template <int DV>
inline __m256 load_vec(const float* row, int i, __m256i last) {
  return i + 1 < DV ? _mm256_loadu_ps(row + 8 * i) : _mm256_maskload_ps(row + 8 * i, last);
}

// The four lane sums of a0..a3.
inline __m128 sum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <int DV>
void scores_row(const float* q, const float* k, int64_t skl, int64_t len, float scale, float* s,
                __m256i last) {
  const __m128 sc = _mm_set1_ps(scale);
  int64_t j = 0;
  for (; j + 4 <= len; j += 4) {  // 4 independent dot products per pass
    __m256 acc[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const float* kj = k + (j + c) * skl;
      acc[c] = _mm256_mul_ps(load_vec<DV>(q, 0, last), load_vec<DV>(kj, 0, last));
#pragma GCC unroll 16
      for (int i = 1; i < DV; ++i)
        acc[c] = _mm256_fmadd_ps(load_vec<DV>(q, i, last), load_vec<DV>(kj, i, last), acc[c]);
    }
    _mm_storeu_ps(s + j, _mm_mul_ps(sum4(acc[0], acc[1], acc[2], acc[3]), sc));
  }
  for (; j < len; ++j) {
    const float* kj = k + j * skl;
    __m256 acc = _mm256_mul_ps(load_vec<DV>(q, 0, last), load_vec<DV>(kj, 0, last));
#pragma GCC unroll 16
    for (int i = 1; i < DV; ++i)
      acc = _mm256_fmadd_ps(load_vec<DV>(q, i, last), load_vec<DV>(kj, i, last), acc);
    const __m128 t = sum4(acc, _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
    s[j] = _mm_cvtss_f32(t) * scale;
  }
}

// s[0, len) <- exp(s - max); returns the sum.
float softmax_unnormalised(float* s, int64_t len) {
  const float ninf = -__builtin_inff();
  __m256 m = _mm256_set1_ps(ninf);
  for (int64_t j = 0; j < len; j += 8) m = _mm256_max_ps(m, avx2::load_or(s + j, len - j, ninf));
  const __m256 mv = _mm256_set1_ps(avx2::hmax(m));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < len; j += 8) {  // lanes past len read -inf: exp(-inf) = 0
    const __m256 e = avx2::exp_ps(_mm256_sub_ps(avx2::load_or(s + j, len - j, ninf), mv));
    avx2::store_n(s + j, len - j, e);
    sum = _mm256_add_ps(sum, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float l : lanes) total += l;
  return total;
}

// o[8 c0, 8 (c0 + NV)) = inv · Σ_j p_j v_j over vectors c0 .. c0 + NV - 1 of the DV in a row; U sets of
// accumulators (keys j, j + 1, ... in turn) hide the FMA latency when NV is small.
template <int DV, int NV>
void pv_block(const float* p, const float* v, int64_t svl, int64_t len, float inv, float* o, int c0,
              __m256i last) {
  constexpr int U = NV <= 2 ? 4 : NV <= 4 ? 2 : 1;
  __m256 acc[U][NV];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) acc[u][i] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + U <= len; j += U)
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const __m256 pj = _mm256_broadcast_ss(p + j + u);
      const float* vj = v + (j + u) * svl;
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) acc[u][i] = _mm256_fmadd_ps(pj, load_vec<DV>(vj, c0 + i, last), acc[u][i]);
    }
  for (; j < len; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
    const float* vj = v + j * svl;
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) acc[0][i] = _mm256_fmadd_ps(pj, load_vec<DV>(vj, c0 + i, last), acc[0][i]);
  }
#pragma GCC unroll 4
  for (int u = 1; u < U; ++u)
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) acc[0][i] = _mm256_add_ps(acc[0][i], acc[u][i]);
  const __m256 sc = _mm256_set1_ps(inv);
#pragma GCC unroll 8
  for (int i = 0; i < NV; ++i) {
    const __m256 r = _mm256_mul_ps(acc[0][i], sc);
    if (c0 + i + 1 < DV)
      _mm256_storeu_ps(o + 8 * (c0 + i), r);
    else
      _mm256_maskstore_ps(o + 8 * (c0 + i), last, r);
  }
}

template <int DV>
void rows(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* s) {
  const int64_t group = a.H / a.Hkv;
  const __m256i last = avx2::lanes(a.D - 8 * (DV - 1));
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.H, h = r % a.H, g = h / group;
    const int64_t len = a.lengths ? a.lengths[b] : a.L;
    const float* k = a.k + b * a.skb + g * a.skh;
    const float* v = a.v + b * a.svb + g * a.svh;
    float* o = a.o + b * a.sob + h * a.soh;
    scores_row<DV>(a.q + b * a.sqb + h * a.sqh, k, a.skl, len, a.scale, s, last);
    const float total = len > 0 ? softmax_unnormalised(s, len) : 0.0f;
    const float inv = len > 0 ? 1.0f / total : 0.0f;
    constexpr int full = DV / 8 * 8;
    for (int c0 = 0; c0 < full; c0 += 8) pv_block<DV, 8>(s, v, a.svl, len, inv, o, c0, last);
    if constexpr (DV % 8 != 0) pv_block<DV, DV % 8>(s, v, a.svl, len, inv, o, full, last);
  }
}

template <int... Is>
void dispatch(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* s, int dv) {
  bool done = false;
  ((dv == Is + 1 ? (rows<Is + 1>(a, r0, r1, s), done = true) : false), ...);
  if (!done) decode_attention_scalar(a, r0, r1, s);  // D > 128: the plain loops
}

template <int... Is>
void dispatch_seq(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* s, int dv,
                  std::integer_sequence<int, Is...>) {
  dispatch<Is...>(a, r0, r1, s, dv);
}

}  // namespace

void decode_attention_avx2(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* scores) {
  dispatch_seq(a, r0, r1, scores, static_cast<int>((a.D + 7) / 8), std::make_integer_sequence<int, 16>{});
}

}  // namespace attn::kernels::cpu::detail

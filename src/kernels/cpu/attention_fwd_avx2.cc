// AVX2 + FMA kernels of the fused attention forward: the same microkernels as
// attention_fwd_avx512.cc (see there and attention_fwd_kernels.h) with 8-lane
// vectors and blocks sized for 16 ymm registers.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/attention_fwd_kernels.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::fwd {
namespace {

// exp: avx2::exp_ps (vec_avx2.h). The kernels take it of shifted logits x = s − m <= 0, where it has the
// bits of the exponent-field scaling this file used before (and of the AVX-512 kernels' exp).
using avx2::exp_ps;

// ---- scores: KB keys × RV (<= 2) vectors of 8 rows -----------------------------

// pf, j0: the prefetch streams (may be null) and this block's first key in them (BlockPrefetch).
template <int KB, int RV>
void scores_block(const float* qt, int ldq, const float* k, int64_t skr, int D, float scale_f, float* st,
                  const RowStream* pf, int j0) {
  const BlockPrefetch<KB> fetch(pf, j0);
  const __m256 scale = _mm256_set1_ps(scale_f);
  __m256 acc[KB][RV];
#pragma GCC unroll 8
  for (int j = 0; j < KB; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < RV; ++v) acc[j][v] = _mm256_setzero_ps();
  const float* kp[KB];
#pragma GCC unroll 8
  for (int j = 0; j < KB; ++j) kp[j] = k + j * skr;
  for (int d = 0; d < D; ++d) {
    if ((d & 15) == 0) fetch.fetch(d);
    __m256 q[RV];
#pragma GCC unroll 2
    for (int v = 0; v < RV; ++v) q[v] = _mm256_load_ps(qt + static_cast<int64_t>(d) * ldq + 8 * v);
#pragma GCC unroll 8
    for (int j = 0; j < KB; ++j) {
      const __m256 kb = _mm256_broadcast_ss(kp[j] + d);
#pragma GCC unroll 2
      for (int v = 0; v < RV; ++v) acc[j][v] = _mm256_fmadd_ps(q[v], kb, acc[j][v]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < KB; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < RV; ++v)
      _mm256_store_ps(st + static_cast<int64_t>(j) * ldq + 8 * v, _mm256_mul_ps(acc[j][v], scale));
}

using ScoresFn = void (*)(const float*, int, const float*, int64_t, int, float, float*, const RowStream*,
                          int);
constexpr int kKB = 6;

template <std::size_t... I>
constexpr auto scores_table(std::index_sequence<I...>) {
  return std::array<ScoresFn, sizeof...(I)>{&scores_block<static_cast<int>(I) + 1, 2>...};
}
constexpr auto kScoresTail = scores_table(std::make_index_sequence<kKB>());

void scores(const float* qt, int ldq, const float* k, int64_t skr, int nk_all, int D, float scale, float* st,
            const int* lim, const RowStream* pf) {
  for (int r0 = 0; r0 < ldq; r0 += 16) {  // ldq is a multiple of 16: two ymm per chunk
    const int nk = lim ? lim[r0 / 16] : nk_all;
    const RowStream* f = r0 == 0 ? pf : nullptr;  // the first chunk reads the keys first: it prefetches
    int j = 0;
    for (; j + kKB <= nk; j += kKB)
      scores_block<kKB, 2>(qt + r0, ldq, k + j * skr, skr, D, scale, st + static_cast<int64_t>(j) * ldq + r0,
                           f, j);
    if (j < nk)
      kScoresTail[nk - j - 1](qt + r0, ldq, k + j * skr, skr, D, scale,
                              st + static_cast<int64_t>(j) * ldq + r0, f, j);
  }
}

// ---- online softmax ----------------------------------------------------------------

void softmax(float* st, int ldq, int nk, float* m, float* l, float* alpha) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  for (int v = 0; v < ldq / 8; ++v) {
    float* s = st + 8 * v;
    __m256 mx = neg_inf;
    for (int j = 0; j < nk; ++j) mx = _mm256_max_ps(mx, _mm256_load_ps(s + static_cast<int64_t>(j) * ldq));
    const __m256 mold = _mm256_load_ps(m + 8 * v);
    const __m256 mnew = _mm256_max_ps(mold, mx);
    const __m256 dead = _mm256_cmp_ps(mnew, neg_inf, _CMP_EQ_OQ);
    const __m256 msafe = _mm256_andnot_ps(dead, mnew);  // 0 where no key is allowed yet
    const __m256 a = exp_ps(_mm256_sub_ps(mold, msafe));
    __m256 sum = _mm256_setzero_ps();
    for (int j = 0; j < nk; ++j) {
      float* pj = s + static_cast<int64_t>(j) * ldq;
      const __m256 e = exp_ps(_mm256_sub_ps(_mm256_load_ps(pj), msafe));
      _mm256_store_ps(pj, e);
      sum = _mm256_add_ps(sum, e);
    }
    _mm256_store_ps(l + 8 * v, _mm256_fmadd_ps(_mm256_load_ps(l + 8 * v), a, sum));
    _mm256_store_ps(m + 8 * v, mnew);
    _mm256_store_ps(alpha + 8 * v, a);
  }
}

// ---- O = alpha·O + P·V: RB rows × DV vectors of 8 columns -------------------------

template <int RB, int DV>
void pv_block(const float* p, int ldq, const float* v, int64_t svr, int nk, float* o, int ldo,
              const float* alpha, int tail) {
  const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 acc[RB][DV];
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m256 a = _mm256_broadcast_ss(alpha + r);
#pragma GCC unroll 2
    for (int d = 0; d < DV; ++d)
      acc[r][d] = _mm256_mul_ps(_mm256_load_ps(o + static_cast<int64_t>(r) * ldo + 8 * d), a);
  }
  for (int j = 0; j < nk; ++j) {
    const float* vr = v + j * svr;
    __m256 vv[DV];
#pragma GCC unroll 2
    for (int d = 0; d < DV; ++d)
      vv[d] = d == DV - 1 ? _mm256_maskload_ps(vr + 8 * d, last) : _mm256_loadu_ps(vr + 8 * d);
    const float* pj = p + static_cast<int64_t>(j) * ldq;
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const __m256 pb = _mm256_broadcast_ss(pj + r);
#pragma GCC unroll 2
      for (int d = 0; d < DV; ++d) acc[r][d] = _mm256_fmadd_ps(pb, vv[d], acc[r][d]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 2
    for (int d = 0; d < DV; ++d) _mm256_store_ps(o + static_cast<int64_t>(r) * ldo + 8 * d, acc[r][d]);
}

using PvFn = void (*)(const float*, int, const float*, int64_t, int, float*, int, const float*, int);
constexpr int kRB = 6;

template <int DV, std::size_t... I>
constexpr auto pv_row_table(std::index_sequence<I...>) {
  return std::array<PvFn, sizeof...(I)>{&pv_block<static_cast<int>(I) + 1, DV>...};
}
constexpr std::array<std::array<PvFn, kRB>, 2> kPvTable{pv_row_table<1>(std::make_index_sequence<kRB>()),
                                                        pv_row_table<2>(std::make_index_sequence<kRB>())};

void pv(const float* p, int ldq, const float* v, int64_t svr, int nk_all, int n, int D, float* o, int ldo,
        const float* alpha, const int* lim) {
  const int nvec = (D + 7) / 8;
  for (int d0 = 0; d0 < nvec; d0 += 2) {
    const int dv = std::min(2, nvec - d0);
    const int tail = std::min(D, 8 * (d0 + dv)) - 8 * (d0 + dv - 1);  // valid lanes of the last vector
    for (int r0 = 0; r0 < n; r0 += kRB) {
      const int rb = std::min(kRB, n - r0);
      int nk = lim ? 0 : nk_all;  // keys up to the block's largest limit
      if (lim)
        for (int r = r0; r < r0 + rb; ++r) nk = std::max(nk, lim[r]);
      kPvTable[dv - 1][rb - 1](p + r0, ldq, v + 8 * d0, svr, nk, o + static_cast<int64_t>(r0) * ldo + 8 * d0,
                               ldo, alpha + r0, tail);
    }
  }
}

// ---- soft-capping: cap · tanh(x / cap) via exp, as in the AVX-512 kernel ------------------

void softcap(float* st, int ldq, int nk, float cap) {
  const __m256 k = _mm256_set1_ps(-2.f / cap), c = _mm256_set1_ps(cap), one = _mm256_set1_ps(1.f);
  const __m256 sign = _mm256_set1_ps(-0.f);
  const int64_t n = static_cast<int64_t>(nk) * ldq;  // multiple of 16
  for (int64_t x = 0; x < n; x += 8) {
    const __m256 s = _mm256_load_ps(st + x);
    const __m256 e = exp_ps(_mm256_mul_ps(_mm256_andnot_ps(sign, s), k));
    const __m256 y = _mm256_mul_ps(c, _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e)));
    _mm256_store_ps(st + x, _mm256_or_ps(y, _mm256_and_ps(s, sign)));
  }
}

// ---- bias: one gather of 8 rows per key ---------------------------------------------------

void add_rows(float* st, int ldq, int nk, const float* base, const int32_t* off, int64_t c) {
  for (int v = 0; v < ldq / 8; ++v) {
    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off + 8 * v));
    float* s = st + 8 * v;
    for (int j = 0; j < nk; ++j) {
      const __m256 b = _mm256_i32gather_ps(base + j * c, idx, 4);
      float* p = s + static_cast<int64_t>(j) * ldq;
      _mm256_store_ps(p, _mm256_add_ps(_mm256_load_ps(p), b));
    }
  }
}

}  // namespace

const Kernels& kernels_avx2() {
  // No row path yet: every tile takes the column path.
  static const Kernels k{
      "avx2",  64,      64,      scores,  softmax,          pv,      softcap, add_rows, dropout_portable, 0,
      nullptr, nullptr, nullptr, nullptr, pack_qt_portable, nullptr, nullptr, nullptr,  nullptr};
  return k;
}

}  // namespace attn::kernels::cpu::fwd

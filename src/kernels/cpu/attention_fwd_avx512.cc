// AVX-512 kernels of the fused attention forward (see attention_fwd_kernels.h
// for the layouts). Both products are register-blocked broadcast-FMA
// microkernels over operands already in the right orientation, so nothing is
// transposed inside the key loop:
//  * scores: S^T[j, r] = sum_d K[j, d] · Qt[d, r]; KB keys × RV vectors of 16
//    query rows are accumulated in zmm registers, K[j, d] is a broadcast
//    straight from the key row, Qt[d, r..r+15] one aligned load.
//  * softmax: S^T holds 16 query rows per vector, so row maxima and sums are
//    vertical max/add over keys, no horizontal reductions.
//  * pv: O[r, d] += P^T[j, r] · V[j, d]; RB rows × DV vectors of 16 output
//    columns stay in registers across the whole key tile, V[j, d..d+15] is a
//    load from the value row, P^T[j, r] a broadcast.
//  * row path (few query rows): 16 keys' dot products along D in 16
//    accumulators, then one transposing add tree puts key j in lane j.
//  * bf16: the same microkernels with vdpbf16ps on pairs (along D for Q·Kᵀ,
//    along keys for P·V); P is paired with vcvtne2ps2bf16 + vpermw.
//  * softmax: exp_shifted, a shorter exp for x <= 0 (no overflow handling); for bf16 P (softmax_pairs) a
//    degree-4 one, with P written straight as pv_bf16's pairs.
//  * scores fetches the driver's prefetch streams (the next key tile's keys, this tile's values) a line
//    per row every 16 columns of D while it first reads the keys.
//  * pack_qt: Q tile transposed with 16x16 register transposes, scaled.
#include "kernels/cpu/attention_fwd_kernels.h"

// GCC 12 reports a false "may be used uninitialized" inside the AVX-512 intrinsic headers (the
// _mm512_undefined_ps() pass-through operand of unmasked max/min/roundscale/scalef) once exp_ps is
// inlined (-Wuninitialized where it is inlined into the scores microkernel); the operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <algorithm>
#include <array>
#include <utility>

#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::fwd {
namespace {

using avx512::exp_ps;

// ---- exp for the shifted logits (the softmax and the scores' fused epilogue) -------------

// The range reduction both exps share: t = max(x·log2(e), −160) = n + f, n = round(t), |f| <= 1/2.
inline void exp2_split(__m512 x, __m512& n, __m512& f) {
  const __m512 t =
      _mm512_max_ps(_mm512_set1_ps(-160.f), _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)));
  n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  f = _mm512_sub_ps(t, n);
}

// exp(x) for the softmax's shifted logits x = s − m' (x <= 0 up to rounding, −inf for a masked key, NaN
// stays NaN): fewer operations than exp_ps, which also handles overflow. 2^t with t = x·log2(e):
// t = n + f, n = round(t), |f| <= 1/2, 2^f by a degree-6 polynomial (relative error <= 8e-8 in fp32
// evaluation, against ~2 ulp for exp_ps), scaled by 2^n with scalef. The clamp at −160 (max keeps NaN:
// it returns its second operand when either is NaN) sends −inf, and everything below 2^−150, to 0.
// t's rounding adds a relative error of |x|·2^−24 to the result, below 2^−25 in absolute terms for any x.
inline __m512 exp_shifted(__m512 x) {
  __m512 n, f;
  exp2_split(x, n, f);
  __m512 p = _mm512_set1_ps(1.5346636064e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3400255702e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6184881404e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5503278971e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022646248e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718246e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// ---- scores ------------------------------------------------------------------

// The first step of the D loop initialises the accumulators with a product (no zeroing), and the
// multiply by `scale` at the end is compiled out when the driver has folded it into Q (SCALED false).
// pf, j0: the prefetch streams (may be null) and this block's first key in them; one line per row every
// 16 columns of D, spread over the block's FMAs.
// The scores' fused softmax epilogue (scores_exp): the running maxima m of the block's rows (the rows of
// its first vector), the sums of P to add to, and whether some x = s − m passed `tau` or was NaN.
// seed: m is all −inf (no key seen yet): the first block sets each row's maximum to the largest of its own
// logits, then clears seed.
struct ExpEpilogue {
  float* m;
  float* sum;
  float tau;
  __mmask16 bad;
  uint32_t* pb = nullptr;  // bf16 (scores_exp_pairs): P's pairs of the tile's first key pair, this vector
  bool seed = false;
};

// The rows' maxima for an EXP epilogue: loaded from ep->m, or, when seeding, the largest of the block's
// KB logits per row (x = logit − m is then <= 0 for the block; a NaN or +inf logit makes some x NaN and
// sets bad), stored to ep->m.
template <int KB, int RV, class Logit>
inline void epilogue_maxima(ExpEpilogue* ep, __m512 (&m)[RV], Logit logit) {
  if (!ep->seed) {
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) m[v] = _mm512_load_ps(ep->m + 16 * v);
    return;
  }
#pragma GCC unroll 4
  for (int v = 0; v < RV; ++v) {
    m[v] = logit(0, v);
#pragma GCC unroll 16
    for (int j = 1; j < KB; ++j) m[v] = _mm512_max_ps(m[v], logit(j, v));
    _mm512_store_ps(ep->m + 16 * v, m[v]);
  }
  ep->seed = false;
}

// MODE 0: st = the products; 1: st = scale · the products (SCALED); 2 (EXP): st = P = exp(products − m)
// with the row sums of P added to ep->sum (Q pre-scaled), and ep->bad set where x = products − m > tau or
// NaN (the caller then discards P).
enum ScoresMode { kRaw = 0, kScaled = 1, kExp = 2 };

template <int KB, int RV, int MODE>
void scores_block(const float* qt, int ldq, const float* k, int64_t skr, int D, float scale_f, float* st,
                  const RowStream* pf, int j0, ExpEpilogue* ep) {
  __m512 acc[KB][RV];
  const float* kp[KB];
#pragma GCC unroll 16
  for (int j = 0; j < KB; ++j) kp[j] = k + j * skr;
  const BlockPrefetch<KB> fetch(pf, j0);
  {
    __m512 q[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) q[v] = _mm512_load_ps(qt + 16 * v);
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j) {
      const __m512 kb = _mm512_set1_ps(kp[j][0]);
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[j][v] = _mm512_mul_ps(q[v], kb);
    }
  }
  for (int d = 1; d < D; ++d) {
    if ((d & 15) == 1) fetch.fetch(d - 1);
    __m512 q[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) q[v] = _mm512_load_ps(qt + static_cast<int64_t>(d) * ldq + 16 * v);
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j) {
      const __m512 kb = _mm512_set1_ps(kp[j][d]);
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[j][v] = _mm512_fmadd_ps(q[v], kb, acc[j][v]);
    }
  }
  if constexpr (MODE == kExp) {
    // P straight from the accumulators: no store and reload of S, no separate max and exp passes.
    const __m512 tau = _mm512_set1_ps(ep->tau);
    __m512 m[RV], sum[RV];
    __mmask16 bad = 0;
    epilogue_maxima<KB, RV>(ep, m, [&](int j, int v) { return acc[j][v]; });
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) sum[v] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) {
        const __m512 x = _mm512_sub_ps(acc[j][v], m[v]);
        bad |= _mm512_cmp_ps_mask(x, tau, _CMP_NLE_UQ);
        const __m512 e = exp_shifted(x);
        sum[v] = _mm512_add_ps(sum[v], e);
        _mm512_store_ps(st + static_cast<int64_t>(j) * ldq + 16 * v, e);
      }
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v)
      _mm512_store_ps(ep->sum + 16 * v, _mm512_add_ps(_mm512_load_ps(ep->sum + 16 * v), sum[v]));
    ep->bad |= bad;
  } else {
    const __m512 scale = _mm512_set1_ps(scale_f);
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v)
        _mm512_store_ps(st + static_cast<int64_t>(j) * ldq + 16 * v,
                        MODE == kScaled ? _mm512_mul_ps(acc[j][v], scale) : acc[j][v]);
  }
}

using ScoresFn = void (*)(const float*, int, const float*, int64_t, int, float, float*, const RowStream*, int,
                          ExpEpilogue*);

// Keys per block for RV row vectors: about 24 accumulators.
constexpr int kb_for(int rv) { return rv == 4 ? 6 : 8; }

template <int RV, int MODE, std::size_t... I>
constexpr auto scores_table(std::index_sequence<I...>) {
  return std::array<ScoresFn, sizeof...(I)>{&scores_block<static_cast<int>(I) + 1, RV, MODE>...};
}

// pf, j0: as in scores_block, for the first key of this run.
template <int RV, int MODE>
void scores_rv(const float* qt, int ldq, const float* k, int64_t skr, int nk, int D, float scale, float* st,
               const RowStream* pf, int j0, ExpEpilogue* ep) {
  constexpr int KB = kb_for(RV);
  static constexpr auto table = scores_table<RV, MODE>(std::make_index_sequence<KB>());
  int j = 0;
  for (; j + KB <= nk; j += KB)
    scores_block<KB, RV, MODE>(qt, ldq, k + j * skr, skr, D, scale, st + static_cast<int64_t>(j) * ldq, pf,
                               j0 + j, ep);
  if (j < nk)
    table[nk - j - 1](qt, ldq, k + j * skr, skr, D, scale, st + static_cast<int64_t>(j) * ldq, pf, j0 + j,
                      ep);
}

template <int MODE>
void scores_vecs_t(int nv, const float* q, int ldq, const float* k, int64_t skr, int nk, int D, float scale,
                   float* s, const RowStream* pf, int j0, ExpEpilogue* ep) {
  switch (nv) {
    case 1:
      scores_rv<1, MODE>(q, ldq, k, skr, nk, D, scale, s, pf, j0, ep);
      break;
    case 2:
      scores_rv<2, MODE>(q, ldq, k, skr, nk, D, scale, s, pf, j0, ep);
      break;
    case 3:
      scores_rv<3, MODE>(q, ldq, k, skr, nk, D, scale, s, pf, j0, ep);
      break;
    default:
      scores_rv<4, MODE>(q, ldq, k, skr, nk, D, scale, s, pf, j0, ep);
      break;
  }
}

// nv (1..4) vectors of 16 rows against nk keys; scale == 1 (Q pre-scaled by the driver) skips the multiply.
void scores_vecs(int nv, const float* q, int ldq, const float* k, int64_t skr, int nk, int D, float scale,
                 float* s, const RowStream* pf, int j0) {
  if (scale == 1.f)
    scores_vecs_t<kRaw>(nv, q, ldq, k, skr, nk, D, scale, s, pf, j0, nullptr);
  else
    scores_vecs_t<kScaled>(nv, q, ldq, k, skr, nk, D, scale, s, pf, j0, nullptr);
}

void scores(const float* qt, int ldq, const float* k, int64_t skr, int nk, int D, float scale, float* st,
            const int* lim, const RowStream* pf) {
  // Row vectors in chunks of at most 4 (64 rows). The first chunk reads the keys first: it issues the
  // prefetches (later chunks find the keys in cache).
  for (int v0 = 0; v0 < ldq / 16; v0 += 4) {
    const int rv = std::min(4, ldq / 16 - v0);
    const RowStream* f = v0 == 0 ? pf : nullptr;
    bool rising = lim != nullptr;
    for (int i = 1; rising && i < rv; ++i) rising = lim[v0 + i - 1] <= lim[v0 + i];
    if (!rising) {
      int n = nk;
      if (lim) {
        n = 0;
        for (int i = 0; i < rv; ++i) n = std::max(n, lim[v0 + i]);
      }
      scores_vecs(rv, qt + 16 * v0, ldq, k, skr, n, D, scale, st + 16 * v0, f, 0);
      continue;
    }
    // Limits rising with the row (the causal diagonal): keys [lim[v-1], lim[v]) for vectors v..end,
    // so the block above the diagonal is never computed.
    int start = 0;
    for (int i = 0; i < rv; ++i) {
      const int end = lim[v0 + i];
      if (end > start)
        scores_vecs(rv - i, qt + 16 * (v0 + i), ldq, k + start * skr, skr, end - start, D, scale,
                    st + static_cast<int64_t>(start) * ldq + 16 * (v0 + i), f, start);
      start = std::max(start, end);
    }
  }
}

// After a tile exponentiated in the scores epilogue (no rescale: the maxima did not move): l += the tile's
// row sums, alpha = 1.
void add_exp_sums(int ldq, const float* sum, float* l, float* alpha) {
  const __m512 one = _mm512_set1_ps(1.f);
  for (int r = 0; r < ldq; r += 16) {
    _mm512_store_ps(l + r, _mm512_add_ps(_mm512_load_ps(l + r), _mm512_load_ps(sum + r)));
    _mm512_store_ps(alpha + r, one);
  }
}

// The end of scores_exp and scores_exp_pairs: on success l += the tile's row sums and alpha = 1; when some
// x passed tau or was NaN, false, with seeded maxima set back to −inf (m, l and alpha as on entry).
bool finish_exp(__mmask16 bad, bool seed, int ldq, const float* sum, float* m, float* l, float* alpha) {
  if (bad) {
    if (seed)
      for (int r = 0; r < ldq; r += 16) _mm512_store_ps(m + r, _mm512_set1_ps(-__builtin_inff()));
    return false;
  }
  add_exp_sums(ldq, sum, l, alpha);
  return true;
}

// Kernels::scores_exp: the scores of the whole tile (no limits) with the softmax update fused into the
// microkernel's epilogue against the running maxima m (see attention_fwd_kernels.h).
bool scores_exp(const float* qt, int ldq, const float* k, int64_t skr, int nk, int D, float* st,
                const RowStream* pf, float* m, float* l, float* alpha, float tau) {
  alignas(64) float sum[kMaxRows];
  for (int r = 0; r < ldq; r += 16) _mm512_store_ps(sum + r, _mm512_setzero_ps());
  const bool seed = m[0] == -__builtin_inff();
  __mmask16 bad = 0;
  for (int v0 = 0; v0 < ldq / 16; v0 += 4) {
    ExpEpilogue ep{m + 16 * v0, sum + 16 * v0, tau, 0, nullptr, seed};
    scores_vecs_t<kExp>(std::min(4, ldq / 16 - v0), qt + 16 * v0, ldq, k, skr, nk, D, 1.f, st + 16 * v0,
                        v0 == 0 ? pf : nullptr, 0, &ep);
    bad |= ep.bad;
  }
  return finish_exp(bad, seed, ldq, sum, m, l, alpha);
}

// ---- online softmax ------------------------------------------------------------

// vpermw indices that interleave the 16-bit halves [a0..a15, b0..b15] of a vcvtne2ps2bf16 result into pairs
// (a_i, b_i).
inline __m512i pair_interleave() {
  return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                          20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

// bf16 pairs (lo_i, hi_i) of two fp32 vectors, rounded to nearest even (denormals to 0).
inline __m512i bf16_pairs(__m512 lo, __m512 hi, __m512i interleave) {
  return _mm512_permutexvar_epi16(interleave, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

// exp_shifted with a degree-4 polynomial for 2^f (near-minimax in relative error: <= 2.7e-6 in fp32
// evaluation, 1/1400 of the bf16 rounding that P gets for P·V): two FMAs fewer, for softmax_pairs.
inline __m512 exp_shifted_bf16(__m512 x) {
  __m512 n, f;
  exp2_split(x, n, f);
  __m512 p = _mm512_set1_ps(9.570101276040077e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.591785907745361e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.40247443318367e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931217908859253e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999992847442627e-1f));
  return _mm512_scalef_ps(p, n);
}

// PAIRS false: `softmax`, P in st. PAIRS true: `softmax_pairs`, P as bf16 pairs along keys in pb (st only
// read).
template <bool PAIRS>
void softmax_t(float* st, int ldq, int nk, float* m, float* l, float* alpha, uint32_t* pb) {
  const auto exp_p = [](__m512 x) { return PAIRS ? exp_shifted_bf16(x) : exp_shifted(x); };
  const __m512i interleave = pair_interleave();
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  for (int v = 0; v < ldq / 16; ++v) {
    float* s = st + 16 * v;
    __m512 mx0 = neg_inf, mx1 = neg_inf;
    int j = 0;
    for (; j + 2 <= nk; j += 2) {
      mx0 = _mm512_max_ps(mx0, _mm512_load_ps(s + static_cast<int64_t>(j) * ldq));
      mx1 = _mm512_max_ps(mx1, _mm512_load_ps(s + static_cast<int64_t>(j + 1) * ldq));
    }
    if (j < nk) mx0 = _mm512_max_ps(mx0, _mm512_load_ps(s + static_cast<int64_t>(j) * ldq));
    const __m512 mold = _mm512_load_ps(m + 16 * v);
    const __m512 mnew = _mm512_max_ps(mold, _mm512_max_ps(mx0, mx1));
    // Rows with no allowed key so far subtract 0 instead of −inf: P = exp(−inf) = 0, never NaN.
    const __mmask16 dead = _mm512_cmp_ps_mask(mnew, neg_inf, _CMP_EQ_OQ);
    const __m512 msafe = _mm512_mask_mov_ps(mnew, dead, _mm512_setzero_ps());
    const __m512 a = exp_ps(_mm512_sub_ps(mold, msafe));
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    j = 0;
    for (; j + 2 <= nk; j += 2) {
      float* p0 = s + static_cast<int64_t>(j) * ldq;
      float* p1 = p0 + ldq;
      const __m512 e0 = exp_p(_mm512_sub_ps(_mm512_load_ps(p0), msafe));
      const __m512 e1 = exp_p(_mm512_sub_ps(_mm512_load_ps(p1), msafe));
      if (PAIRS) {
        _mm512_store_si512(pb + static_cast<int64_t>(j / 2) * ldq + 16 * v, bf16_pairs(e0, e1, interleave));
      } else {
        _mm512_store_ps(p0, e0);
        _mm512_store_ps(p1, e1);
      }
      sum0 = _mm512_add_ps(sum0, e0);
      sum1 = _mm512_add_ps(sum1, e1);
    }
    if (j < nk) {
      float* p0 = s + static_cast<int64_t>(j) * ldq;
      const __m512 e0 = exp_p(_mm512_sub_ps(_mm512_load_ps(p0), msafe));
      if (PAIRS)
        _mm512_store_si512(pb + static_cast<int64_t>(j / 2) * ldq + 16 * v,
                           bf16_pairs(e0, _mm512_setzero_ps(), interleave));
      else
        _mm512_store_ps(p0, e0);
      sum0 = _mm512_add_ps(sum0, e0);
    }
    const __m512 lold = _mm512_load_ps(l + 16 * v);
    _mm512_store_ps(l + 16 * v, _mm512_fmadd_ps(lold, a, _mm512_add_ps(sum0, sum1)));
    _mm512_store_ps(m + 16 * v, mnew);
    _mm512_store_ps(alpha + 16 * v, a);
  }
}

void softmax(float* st, int ldq, int nk, float* m, float* l, float* alpha) {
  softmax_t<false>(st, ldq, nk, m, l, alpha, nullptr);
}

void softmax_pairs(const float* st, int ldq, int nk, float* m, float* l, float* alpha, uint32_t* pb) {
  softmax_t<true>(const_cast<float*>(st), ldq, nk, m, l, alpha, pb);  // PAIRS: st is only read
}

// ---- O = alpha·O + P·V -------------------------------------------------------------

template <int RB, int DV>
void pv_block(const float* p, int ldq, const float* v, int64_t svr, int nk, float* o, int ldo,
              const float* alpha, __mmask16 last) {
  __m512 acc[RB][DV];
  // Most key tiles leave every row maximum unchanged (alpha = 1): then O needs no rescaling.
  bool rescale = false;
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) rescale |= alpha[r] != 1.f;
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
    for (int d = 0; d < DV; ++d) {
      const __m512 x = _mm512_load_ps(o + static_cast<int64_t>(r) * ldo + 16 * d);
      acc[r][d] = rescale ? _mm512_mul_ps(x, a) : x;
    }
  }
  for (int j = 0; j < nk; ++j) {
    const float* vr = v + j * svr;
    // One row (the row path: decode) streams long value runs from memory: fetch 32 rows ahead, as
    // scores_rows16 does for the keys.
    if (RB == 1)
#pragma GCC unroll 4
      for (int d = 0; d < DV; ++d)
        _mm_prefetch(reinterpret_cast<const char*>(vr + 32 * svr + 16 * d), _MM_HINT_T0);
    __m512 vv[DV];
#pragma GCC unroll 4
    for (int d = 0; d < DV; ++d)
      vv[d] = d == DV - 1 ? _mm512_maskz_loadu_ps(last, vr + 16 * d) : _mm512_loadu_ps(vr + 16 * d);
    const float* pj = p + static_cast<int64_t>(j) * ldq;
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const __m512 pb = _mm512_set1_ps(pj[r]);
#pragma GCC unroll 4
      for (int d = 0; d < DV; ++d) acc[r][d] = _mm512_fmadd_ps(pb, vv[d], acc[r][d]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
    for (int d = 0; d < DV; ++d) _mm512_store_ps(o + static_cast<int64_t>(r) * ldo + 16 * d, acc[r][d]);
}

using PvFn = void (*)(const float*, int, const float*, int64_t, int, float*, int, const float*, __mmask16);

constexpr int kRB = 6;  // rows per block
constexpr int kDV = 4;  // 16-float vectors of D per block

template <int DV, std::size_t... I>
constexpr auto pv_row_table(std::index_sequence<I...>) {
  return std::array<PvFn, sizeof...(I)>{&pv_block<static_cast<int>(I) + 1, DV>...};
}
template <std::size_t... I>
constexpr auto pv_table(std::index_sequence<I...>) {
  return std::array<std::array<PvFn, kRB>, sizeof...(I)>{
      pv_row_table<static_cast<int>(I) + 1>(std::make_index_sequence<kRB>())...};
}
constexpr auto kPvTable = pv_table(std::make_index_sequence<kDV>());

void pv(const float* p, int ldq, const float* v, int64_t svr, int nk_all, int n, int D, float* o, int ldo,
        const float* alpha, const int* lim) {
  const int nvec = (D + 15) / 16;
  // Split D into blocks of at most kDV vectors, as even as possible (D = 80: 3 + 2).
  const int nblk = (nvec + kDV - 1) / kDV;
  int d0 = 0;
  for (int b = 0; b < nblk; ++b) {
    const int dv = (nvec - d0 + (nblk - b) - 1) / (nblk - b);
    const int dend = std::min(D, 16 * (d0 + dv));
    const int tail = dend - 16 * (d0 + dv - 1);  // valid lanes of the last vector
    const __mmask16 last = static_cast<__mmask16>((1u << tail) - 1u);
    for (int r0 = 0; r0 < n; r0 += kRB) {
      const int rb = std::min(kRB, n - r0);
      int nk = lim ? 0 : nk_all;  // keys up to the block's largest limit
      if (lim)
        for (int r = r0; r < r0 + rb; ++r) nk = std::max(nk, lim[r]);
      kPvTable[dv - 1][rb - 1](p + r0, ldq, v + 16 * d0, svr, nk,
                               o + static_cast<int64_t>(r0) * ldo + 16 * d0, ldo, alpha + r0, last);
    }
    d0 += dv;
  }
}

// ---- soft-capping -------------------------------------------------------------------

// cap · tanh(x / cap) = sign(x) · cap · (1 − e) / (1 + e) with e = exp(−2|x| / cap). Absolute error
// about cap · 1e-7 (the cancellation in 1 − e near 0), far below the logits' own rounding.
void softcap(float* st, int ldq, int nk, float cap) {
  const __m512 k = _mm512_set1_ps(-2.f / cap), c = _mm512_set1_ps(cap), one = _mm512_set1_ps(1.f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const int64_t n = static_cast<int64_t>(nk) * ldq;  // multiple of 16
  for (int64_t x = 0; x < n; x += 16) {
    const __m512 s = _mm512_load_ps(st + x);
    const __m512 e = exp_ps(_mm512_mul_ps(_mm512_abs_ps(s), k));
    const __m512 y = _mm512_mul_ps(c, _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e)));
    const __m512i sgn = _mm512_and_si512(_mm512_castps_si512(s), sign);
    _mm512_store_ps(st + x, _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sgn)));
  }
}

// ---- bias: one gather of 16 rows per key ------------------------------------------------

void add_rows(float* st, int ldq, int nk, const float* base, const int32_t* off, int64_t c) {
  for (int v = 0; v < ldq / 16; ++v) {
    const __m512i idx = _mm512_loadu_si512(off + 16 * v);
    float* s = st + 16 * v;
    for (int j = 0; j < nk; ++j) {
      const __m512 b = _mm512_i32gather_ps(idx, base + j * c, 4);
      float* p = s + static_cast<int64_t>(j) * ldq;
      _mm512_store_ps(p, _mm512_add_ps(_mm512_load_ps(p), b));
    }
  }
}

// ---- dropout: the mix64 keep rule on 8 u64 lanes (AVX512DQ vpmullq) ----------------------

inline __m512i mix64_epi64(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ull)));
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebull)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

void dropout(float* p, int ldq, int nk, const uint64_t* row_key, int64_t j0, uint32_t threshold,
             float inv_keep) {
  const __m512i thr = _mm512_set1_epi64(threshold);
  const __m512 inv = _mm512_set1_ps(inv_keep);
  for (int v = 0; v < ldq / 16; ++v) {
    const __m512i k0 = _mm512_loadu_si512(row_key + 16 * v), k1 = _mm512_loadu_si512(row_key + 16 * v + 8);
    float* s = p + 16 * v;
    for (int j = 0; j < nk; ++j) {
      const __m512i jv = _mm512_set1_epi64(j0 + j);
      const __m512i h0 = _mm512_srli_epi64(mix64_epi64(_mm512_xor_si512(k0, jv)), 32);
      const __m512i h1 = _mm512_srli_epi64(mix64_epi64(_mm512_xor_si512(k1, jv)), 32);
      const __mmask16 keep = static_cast<__mmask16>(
          _mm512_cmpge_epu64_mask(h0, thr) | (static_cast<unsigned>(_mm512_cmpge_epu64_mask(h1, thr)) << 8));
      float* pj = s + static_cast<int64_t>(j) * ldq;
      _mm512_store_ps(pj, _mm512_maskz_mul_ps(keep, _mm512_load_ps(pj), inv));
    }
  }
}

// ---- row path: keys in lanes (few query rows, e.g. decode) ------------------------------------

// Lane j of the result = the sum of the 16 lanes of a[j]: a transposing tree of adds (45 shuffles and
// adds for 16 dot products instead of 16 full reductions).
inline __m512 reduce16(__m512 a[16]) {
  __m512 b[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)  // per 128-bit block: [x0+x2, y0+y2, x1+x3, y1+y3]
    b[i] =
        _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  __m512 c[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // per 128-bit block: keys 4i..4i+3, partial over that block
    const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
    c[i] =
        _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  // Sum the four 128-bit blocks; block q of the result holds keys 4q..4q+3.
  const __m512 e0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
  const __m512 e1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x88), _mm512_shuffle_f32x4(c[2], c[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(e0, e1, 0x88), _mm512_shuffle_f32x4(e0, e1, 0xdd));
}

// 16 keys (rows j >= nk repeat the last key; their lanes are not stored) against each query row.
void scores_rows16(const float* qr, int ldo, int n, const float* k, int64_t skr, int nk, int D, float scale,
                   float* sr, int lds) {
  const float* kp[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) kp[j] = k + std::min(j, nk - 1) * skr;
  const int dfull = D & ~15;
  const __mmask16 tail = static_cast<__mmask16>((1u << (D - dfull)) - 1u);
  const __mmask16 store = static_cast<__mmask16>(nk >= 16 ? 0xffffu : (1u << nk) - 1u);
  for (int r = 0; r < n; ++r) {
    const float* q = qr + static_cast<int64_t>(r) * ldo;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
    for (int d = 0; d < dfull; d += 16) {
      const __m512 qv = _mm512_load_ps(q + d);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        // Long keys stream from memory: fetch the same line of the key 32 rows ahead (first query row).
        if (r == 0) _mm_prefetch(reinterpret_cast<const char*>(kp[j] + 32 * skr + d), _MM_HINT_T0);
        acc[j] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kp[j] + d), acc[j]);
      }
    }
    if (tail) {
      const __m512 qv = _mm512_load_ps(q + dfull);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        acc[j] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(tail, kp[j] + dfull), acc[j]);
    }
    _mm512_mask_storeu_ps(sr + static_cast<int64_t>(r) * lds, store,
                          _mm512_mul_ps(reduce16(acc), _mm512_set1_ps(scale)));
  }
}

void scores_rows(const float* qr, int ldo, int n, const float* k, int64_t skr, int nk, int D, float scale,
                 float* sr, int lds) {
  for (int j = 0; j < nk; j += 16)
    scores_rows16(qr, ldo, n, k + j * skr, skr, std::min(16, nk - j), D, scale, sr + j, lds);
}

void softmax_rows(float* sr, int lds, int n, int nk, float* m, float* l, float* alpha) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const int nfull = nk & ~15;
  const __mmask16 tail = static_cast<__mmask16>((1u << (nk - nfull)) - 1u);
  for (int r = 0; r < n; ++r) {
    float* s = sr + static_cast<int64_t>(r) * lds;
    __m512 mx = neg_inf;
    for (int j = 0; j < nfull; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + j));
    if (tail) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(neg_inf, tail, s + nfull));
    const float mnew = std::max(m[r], _mm512_reduce_max_ps(mx));
    // A row with no allowed key so far subtracts 0 instead of −inf: P = exp(−inf) = 0, never NaN.
    const float msafe_f = mnew == -__builtin_inff() ? 0.f : mnew;
    const __m512 msafe = _mm512_set1_ps(msafe_f);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < nfull; j += 16) {
      const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(s + j), msafe));
      _mm512_storeu_ps(s + j, e);
      sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
      const __m512 e = exp_ps(_mm512_sub_ps(_mm512_mask_loadu_ps(neg_inf, tail, s + nfull), msafe));
      _mm512_mask_storeu_ps(s + nfull, tail, e);
      sum = _mm512_add_ps(sum, e);
    }
    const float a = _mm512_cvtss_f32(exp_ps(_mm512_set1_ps(m[r] - msafe_f)));
    l[r] = l[r] * a + _mm512_reduce_add_ps(sum);
    m[r] = mnew;
    alpha[r] = a;
  }
}

// ---- bf16 operands: vdpbf16ps (two products per fp32 lane) ----------------------------------
// Note: vdpbf16ps treats denormal inputs as zero and flushes denormal results (it ignores MXCSR).

inline __m512 dot2(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// EXP false: st = scale · the products. EXP true (scores_exp_pairs): P = exp(scale · products − m) written
// as pv_bf16's pairs to ep->pb from key pair jrel / 2 on (jrel even; an odd last key pairs with 0), row sums
// added to ep->sum, ep->bad as in scores_block; st is not written.
template <int KB, int RV, bool EXP = false>
void scores_block_bf16(const uint32_t* qt2, int ldq, const uint16_t* k, int64_t skr, int D, float scale_f,
                       float* st, ExpEpilogue* ep = nullptr, int jrel = 0) {
  __m512 acc[KB][RV];
#pragma GCC unroll 16
  for (int j = 0; j < KB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) acc[j][v] = _mm512_setzero_ps();
  const int np = D / 2;  // full pairs
  for (int p = 0; p < np; ++p) {
    __m512i q[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) q[v] = _mm512_load_si512(qt2 + static_cast<int64_t>(p) * ldq + 16 * v);
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j) {
      uint32_t x;
      __builtin_memcpy(&x, k + j * skr + 2 * p, 4);
      const __m512i kb = _mm512_set1_epi32(static_cast<int32_t>(x));
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[j][v] = dot2(acc[j][v], q[v], kb);
    }
  }
  if (D & 1) {  // the last element pairs with 0 (qt2 is 0 there too)
    __m512i q[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) q[v] = _mm512_load_si512(qt2 + static_cast<int64_t>(np) * ldq + 16 * v);
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j) {
      const __m512i kb = _mm512_set1_epi32(k[j * skr + 2 * np]);
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[j][v] = dot2(acc[j][v], q[v], kb);
    }
  }
  const __m512 scale = _mm512_set1_ps(scale_f);
  if constexpr (EXP) {
    const __m512 tau = _mm512_set1_ps(ep->tau);
    const __m512i interleave = pair_interleave();
    __m512 m[RV], sum[RV];
    __mmask16 bad = 0;
    epilogue_maxima<KB, RV>(ep, m, [&](int j, int v) { return _mm512_mul_ps(acc[j][v], scale); });
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) sum[v] = _mm512_setzero_ps();
    uint32_t* pb = ep->pb + static_cast<int64_t>(jrel / 2) * ldq;
#pragma GCC unroll 8
    for (int j = 0; j < KB; j += 2)
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) {
        const __m512 x0 = _mm512_fmsub_ps(acc[j][v], scale, m[v]);
        bad |= _mm512_cmp_ps_mask(x0, tau, _CMP_NLE_UQ);
        const __m512 e0 = exp_shifted_bf16(x0);
        __m512 e1 = _mm512_setzero_ps();
        if (j + 1 < KB) {
          const __m512 x1 = _mm512_fmsub_ps(acc[j + 1][v], scale, m[v]);
          bad |= _mm512_cmp_ps_mask(x1, tau, _CMP_NLE_UQ);
          e1 = exp_shifted_bf16(x1);
        }
        sum[v] = _mm512_add_ps(sum[v], _mm512_add_ps(e0, e1));
        _mm512_store_si512(pb + static_cast<int64_t>(j / 2) * ldq + 16 * v, bf16_pairs(e0, e1, interleave));
      }
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v)
      _mm512_store_ps(ep->sum + 16 * v, _mm512_add_ps(_mm512_load_ps(ep->sum + 16 * v), sum[v]));
    ep->bad |= bad;
  } else {
#pragma GCC unroll 16
    for (int j = 0; j < KB; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v)
        _mm512_store_ps(st + static_cast<int64_t>(j) * ldq + 16 * v, _mm512_mul_ps(acc[j][v], scale));
  }
}

using ScoresBf16Fn = void (*)(const uint32_t*, int, const uint16_t*, int64_t, int, float, float*,
                              ExpEpilogue*, int);

template <int RV, bool EXP, std::size_t... I>
constexpr auto scores_bf16_table(std::index_sequence<I...>) {
  return std::array<ScoresBf16Fn, sizeof...(I)>{&scores_block_bf16<static_cast<int>(I) + 1, RV, EXP>...};
}

template <int RV, bool EXP>
void scores_bf16_rv(const uint32_t* qt2, int ldq, const uint16_t* k, int64_t skr, int nk, int D, float scale,
                    float* st, ExpEpilogue* ep) {
  constexpr int KB = kb_for(RV);
  static_assert(KB % 2 == 0, "scores_exp_pairs: blocks start on even keys");
  static constexpr auto table = scores_bf16_table<RV, EXP>(std::make_index_sequence<KB>());
  int j = 0;
  for (; j + KB <= nk; j += KB)
    scores_block_bf16<KB, RV, EXP>(qt2, ldq, k + j * skr, skr, D, scale, st + static_cast<int64_t>(j) * ldq,
                                   ep, j);
  if (j < nk)
    table[nk - j - 1](qt2, ldq, k + j * skr, skr, D, scale, st + static_cast<int64_t>(j) * ldq, ep, j);
}

template <bool EXP = false>
void scores_bf16_vecs(int nv, const uint32_t* q, int ldq, const uint16_t* k, int64_t skr, int nk, int D,
                      float scale, float* s, ExpEpilogue* ep = nullptr) {
  switch (nv) {
    case 1:
      scores_bf16_rv<1, EXP>(q, ldq, k, skr, nk, D, scale, s, ep);
      break;
    case 2:
      scores_bf16_rv<2, EXP>(q, ldq, k, skr, nk, D, scale, s, ep);
      break;
    case 3:
      scores_bf16_rv<3, EXP>(q, ldq, k, skr, nk, D, scale, s, ep);
      break;
    default:
      scores_bf16_rv<4, EXP>(q, ldq, k, skr, nk, D, scale, s, ep);
      break;
  }
}

// Kernels::scores_exp_pairs: scores_bf16 of the whole tile with the softmax fused into the epilogue, P
// written as pv_bf16's pairs (see attention_fwd_kernels.h).
bool scores_exp_pairs(const uint32_t* qt2, int ldq, const uint16_t* k, int64_t skr, int nk, int D,
                      float scale, float* m, float* l, float* alpha, float tau, uint32_t* pb) {
  alignas(64) float sum[kMaxRows];
  for (int r = 0; r < ldq; r += 16) _mm512_store_ps(sum + r, _mm512_setzero_ps());
  const bool seed = m[0] == -__builtin_inff();
  __mmask16 bad = 0;
  for (int v0 = 0; v0 < ldq / 16; v0 += 4) {
    ExpEpilogue ep{m + 16 * v0, sum + 16 * v0, tau, 0, pb + 16 * v0, seed};
    scores_bf16_vecs<true>(std::min(4, ldq / 16 - v0), qt2 + 16 * v0, ldq, k, skr, nk, D, scale, nullptr,
                           &ep);
    bad |= ep.bad;
  }
  return finish_exp(bad, seed, ldq, sum, m, l, alpha);
}

// Same blocking and causal-diagonal skipping as `scores`.
void scores_bf16(const uint32_t* qt2, int ldq, const uint16_t* k, int64_t skr, int nk, int D, float scale,
                 float* st, const int* lim) {
  for (int v0 = 0; v0 < ldq / 16; v0 += 4) {
    const int rv = std::min(4, ldq / 16 - v0);
    bool rising = lim != nullptr;
    for (int i = 1; rising && i < rv; ++i) rising = lim[v0 + i - 1] <= lim[v0 + i];
    if (!rising) {
      int n = nk;
      if (lim) {
        n = 0;
        for (int i = 0; i < rv; ++i) n = std::max(n, lim[v0 + i]);
      }
      scores_bf16_vecs(rv, qt2 + 16 * v0, ldq, k, skr, n, D, scale, st + 16 * v0);
      continue;
    }
    int start = 0;
    for (int i = 0; i < rv; ++i) {
      const int end = lim[v0 + i];
      if (end > start)
        scores_bf16_vecs(rv - i, qt2 + 16 * (v0 + i), ldq, k + start * skr, skr, end - start, D, scale,
                         st + static_cast<int64_t>(start) * ldq + 16 * (v0 + i));
      start = std::max(start, end);
    }
  }
}

template <int RB, int DV>
void pv_block_bf16(const uint32_t* pb, int ldq, const uint32_t* vp, int ldo, int npairs, float* o,
                   const float* alpha) {
  __m512 acc[RB][DV];
  // Most key tiles leave every row maximum unchanged (alpha = 1): then O needs no rescaling.
  bool rescale = false;
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) rescale |= alpha[r] != 1.f;
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
    for (int d = 0; d < DV; ++d) {
      const __m512 x = _mm512_load_ps(o + static_cast<int64_t>(r) * ldo + 16 * d);
      acc[r][d] = rescale ? _mm512_mul_ps(x, a) : x;
    }
  }
  for (int jp = 0; jp < npairs; ++jp) {
    __m512i vv[DV];
#pragma GCC unroll 4
    for (int d = 0; d < DV; ++d) vv[d] = _mm512_load_si512(vp + static_cast<int64_t>(jp) * ldo + 16 * d);
    const uint32_t* pj = pb + static_cast<int64_t>(jp) * ldq;
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const __m512i pp = _mm512_set1_epi32(static_cast<int32_t>(pj[r]));
#pragma GCC unroll 4
      for (int d = 0; d < DV; ++d) acc[r][d] = dot2(acc[r][d], pp, vv[d]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
    for (int d = 0; d < DV; ++d) _mm512_store_ps(o + static_cast<int64_t>(r) * ldo + 16 * d, acc[r][d]);
}

using PvBf16Fn = void (*)(const uint32_t*, int, const uint32_t*, int, int, float*, const float*);

template <int DV, std::size_t... I>
constexpr auto pv_bf16_row_table(std::index_sequence<I...>) {
  return std::array<PvBf16Fn, sizeof...(I)>{&pv_block_bf16<static_cast<int>(I) + 1, DV>...};
}
template <std::size_t... I>
constexpr auto pv_bf16_table(std::index_sequence<I...>) {
  return std::array<std::array<PvBf16Fn, kRB>, sizeof...(I)>{
      pv_bf16_row_table<static_cast<int>(I) + 1>(std::make_index_sequence<kRB>())...};
}
constexpr auto kPvBf16Table = pv_bf16_table(std::make_index_sequence<kDV>());

void pv_bf16(const float* p, int ldq, const uint32_t* vp, int nk, int n, int D, float* o, int ldo,
             const float* alpha, const int* lim, uint32_t* pb) {
  // P in pairs along keys: pb[jp * ldq + r] = (bf16 P[2jp, r], bf16 P[2jp + 1, r]), 0 past nk. vcvtne2ps2bf16
  // rounds two vectors to nearest even (denormals to 0) into [P[2jp, 0..15], P[2jp + 1, 0..15]] as 16-bit
  // halves; one vpermw interleaves them into pairs. p null: softmax_pairs has written them already.
  const __m512i interleave = pair_interleave();
  const int npairs = (nk + 1) / 2;
  for (int jp = 0; p && jp < npairs; ++jp) {
    const float* p0 = p + static_cast<int64_t>(2 * jp) * ldq;
    const bool has1 = 2 * jp + 1 < nk;
    for (int v = 0; v < ldq / 16; ++v) {
      const __m512 lo = _mm512_load_ps(p0 + 16 * v);
      const __m512 hi = has1 ? _mm512_load_ps(p0 + ldq + 16 * v) : _mm512_setzero_ps();
      _mm512_store_si512(pb + static_cast<int64_t>(jp) * ldq + 16 * v, bf16_pairs(lo, hi, interleave));
    }
  }
  const int nvec = (D + 15) / 16;
  const int nblk = (nvec + kDV - 1) / kDV;
  int d0 = 0;
  for (int b = 0; b < nblk; ++b) {
    const int dv = (nvec - d0 + (nblk - b) - 1) / (nblk - b);
    for (int r0 = 0; r0 < n; r0 += kRB) {
      const int rb = std::min(kRB, n - r0);
      int nkb = lim ? 0 : nk;  // keys up to the block's largest limit
      if (lim)
        for (int r = r0; r < r0 + rb; ++r) nkb = std::max(nkb, lim[r]);
      kPvBf16Table[dv - 1][rb - 1](pb + r0, ldq, vp + 16 * d0, ldo, (nkb + 1) / 2,
                                   o + static_cast<int64_t>(r0) * ldo + 16 * d0, alpha + r0);
    }
    d0 += dv;
  }
}

// ---- bf16 values in pairs along keys ------------------------------------------------------------

void pack_v_bf16(const uint16_t* v, int64_t svr, int nk, int D, int ldo, uint32_t* vp) {
  for (int jp = 0; jp < (nk + 1) / 2; ++jp) {
    const uint16_t* v0 = v + 2 * jp * svr;
    const uint16_t* v1 = v0 + svr;
    const bool has1 = 2 * jp + 1 < nk;
    uint32_t* dst = vp + static_cast<int64_t>(jp) * ldo;
    for (int d = 0; d < ldo; d += 16) {
      const int nd = std::clamp(D - d, 0, 16);
      const __mmask16 m = static_cast<__mmask16>((1u << nd) - 1u);
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, v0 + d));
      const __m512i hi =
          has1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, v1 + d)) : _mm512_setzero_si512();
      _mm512_store_si512(dst + d, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

// ---- Q tile: transpose and scale ------------------------------------------------------------

void pack_qt(const float* const* rows, int n, int D, float scale_f, float* qt, int ldq) {
  const __m512 scale = _mm512_set1_ps(scale_f);
  for (int r0 = 0; r0 < ldq; r0 += 16) {
    for (int d0 = 0; d0 < D; d0 += 16) {
      const int nd = std::min(16, D - d0);
      const __mmask16 mask = static_cast<__mmask16>((1u << nd) - 1u);
      __m512 x[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        x[i] = r0 + i < n ? _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, rows[r0 + i] + d0), scale)
                          : _mm512_setzero_ps();
      avx512::transpose16(x);  // x[i]: column i
      for (int i = 0; i < nd; ++i) _mm512_store_ps(qt + static_cast<int64_t>(d0 + i) * ldq + r0, x[i]);
    }
  }
}

}  // namespace

const Kernels& kernels_avx512() {
  static const Kernels k{"avx512",        64,       96,      scores,      softmax,       pv,
                         softcap,         add_rows, dropout, 8,           scores_rows,   softmax_rows,
                         scores_bf16,     pv_bf16,  pack_qt, pack_v_bf16, softmax_pairs, scores_exp,
                         scores_exp_pairs};
  return k;
}

}  // namespace attn::kernels::cpu::fwd

#pragma GCC diagnostic pop

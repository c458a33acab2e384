// AVX-512 tile of the fused attention backward (see attention_bwd_tile.h for
// the contract and attention_bwd.cc for the driver).
//
// All five tile products are one register-blocked microkernel
//   C[m, 0:16·NV] (+)= Σ_t A(m, t) · X[t, 0:16·NV],   A(m, t) = a[m·am + t·at],
// with MB rows × NV vectors of accumulators held in registers, one broadcast
// of A and NV loads of X per step t:
//   S  = Q·Kᵀ     m = query, t = d,     X = Kᵀ (packed [D, Bc])
//   dP = dO·Vᵀ    m = query, t = d,     X = Vᵀ (packed [D, Bc])
//   dV += P'ᵀ dO  m = key,   t = query, X = dO (packed [Br, Dp]); A read transposed
//   dK += dSᵀ Q   m = key,   t = query, X = Q  (packed [Br, Dp]); A read transposed
//   dQ  = dS·K    m = query, t = key,   X = K  (packed [Bc, Dp])
// Everything in this file lives in an anonymous namespace except the two
// entry points (bwd_tile_avx512, bwd_pack_kv_avx512), so no AVX-512 code can leak into generic translation
// units. GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_ps self-initialises; GCC bug 105593, fixed in 13) once
// exp_ps is inlined here. The diagnostic is a false positive.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_bwd_tile.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu {
namespace {

constexpr int kMB = 6;  // rows of accumulators per microkernel call
constexpr int kNV = 4;  // vectors of accumulators per row

template <int MB, int NV, bool kInit>
void microkernel(int64_t T, const float* a, int64_t am, int64_t at, const float* x, int64_t xs, float* c,
                 int64_t cs) {
  __m512 acc[MB][NV];
  for (int m = 0; m < MB; ++m)
    for (int v = 0; v < NV; ++v)
      acc[m][v] = kInit ? _mm512_setzero_ps() : _mm512_loadu_ps(c + m * cs + 16 * v);
  for (int64_t t = 0; t < T; ++t) {
    __m512 xv[NV];
    for (int v = 0; v < NV; ++v) xv[v] = _mm512_loadu_ps(x + t * xs + 16 * v);
    for (int m = 0; m < MB; ++m) {
      const __m512 av = _mm512_set1_ps(a[m * am + t * at]);
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_fmadd_ps(av, xv[v], acc[m][v]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + m * cs + 16 * v, acc[m][v]);
}

using MicroFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t);

// The microkernel for a block of mb ≤ kMB rows and nv ≤ kNV vectors.
template <bool kInit, int MB = kMB>
MicroFn pick(int64_t mb, int64_t nv) {
  if (mb == MB) {
    static_assert(kNV == 4, "pick() lists NV = 1..4");
    switch (nv) {
      case 1:
        return &microkernel<MB, 1, kInit>;
      case 2:
        return &microkernel<MB, 2, kInit>;
      case 3:
        return &microkernel<MB, 3, kInit>;
      default:
        return &microkernel<MB, 4, kInit>;
    }
  }
  if constexpr (MB > 1) return pick<kInit, MB - 1>(mb, nv);
  return nullptr;
}

// The mixing step of dropout_hash (kernels/attention_args.h: mix64), 8 lanes.
inline __m512i mix64_x8(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ull)));
  x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
  x = _mm512_mullo_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebull)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// Lanes j0 .. j0+15 of row `row_key` that survive dropout.
inline __mmask16 keep_mask(uint64_t row_key, int64_t j0, uint32_t threshold) {
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i key = _mm512_set1_epi64(static_cast<int64_t>(row_key));
  const __m512i thr = _mm512_set1_epi64(threshold);
  const __m512i jlo = _mm512_add_epi64(_mm512_set1_epi64(j0), lane);
  const __m512i jhi = _mm512_add_epi64(_mm512_set1_epi64(j0 + 8), lane);
  const __m512i hlo = _mm512_srli_epi64(mix64_x8(_mm512_xor_si512(key, jlo)), 32);
  const __m512i hhi = _mm512_srli_epi64(mix64_x8(_mm512_xor_si512(key, jhi)), 32);
  const __mmask8 klo = _mm512_cmpge_epu64_mask(hlo, thr);
  const __mmask8 khi = _mm512_cmpge_epu64_mask(hhi, thr);
  return static_cast<__mmask16>(klo | (static_cast<unsigned>(khi) << 8));
}

// tanh(x) = 1 − 2 / (exp(2x) + 1): absolute error ~1e-7, saturates to ±1.
inline __m512 tanh_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 e = avx512::exp_ps(_mm512_add_ps(x, x));
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.f), _mm512_add_ps(e, one)));
}

// Turns row r of S into P' and row r of dP into dS, in place.
void softmax_grad_row(const BwdTile& t, int64_t r, int64_t nvk) {
  float* srow = t.s + r * kBwdBc;
  float* dprow = t.dp + r * kBwdBc;
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lo = _mm512_set1_epi32(t.lo[r]), hi = _mm512_set1_epi32(t.hi[r]);
  const __m512 lse = _mm512_set1_ps(t.lse[r]), di = _mm512_set1_ps(t.di[r]);
  const __m512 scale = _mm512_set1_ps(t.scale);
  const bool cap = t.softcap > 0;
  const __m512 cval = _mm512_set1_ps(t.softcap), cinv = _mm512_set1_ps(cap ? 1.f / t.softcap : 0.f);
  const __m512 one = _mm512_set1_ps(1.f);
  const uint8_t* allow = t.allow ? t.allow + r * t.allow_r : nullptr;
  const float* bias = t.bias ? t.bias + r * t.bias_r : nullptr;
  for (int64_t v = 0; v < nvk; ++v) {
    const int64_t j0 = 16 * v;
    const __m512i j = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int32_t>(j0)));
    __mmask16 valid = _mm512_cmpge_epi32_mask(j, lo) & _mm512_cmplt_epi32_mask(j, hi);
    if (allow && valid) {
      if (t.allow_c == 1) {
        const __m128i bytes = _mm_maskz_loadu_epi8(valid, allow + j0);
        valid &= _mm_test_epi8_mask(bytes, bytes);
      } else if (t.allow_c == 0) {
        if (!allow[0]) valid = 0;
      } else {
        __mmask16 m = 0;
        for (int l = 0; l < 16; ++l)
          if (((valid >> l) & 1) && allow[(j0 + l) * t.allow_c]) m |= static_cast<__mmask16>(1u << l);
        valid = m;
      }
    }
    const __m512 sacc = _mm512_loadu_ps(srow + j0);
    const __m512 dpacc = _mm512_loadu_ps(dprow + j0);
    if (!valid) {
      _mm512_storeu_ps(srow + j0, _mm512_setzero_ps());
      _mm512_storeu_ps(dprow + j0, _mm512_setzero_ps());
      continue;
    }
    const __m512 pre = _mm512_mul_ps(sacc, scale);
    __m512 x = pre, th = _mm512_setzero_ps();
    if (cap) {
      th = tanh_ps(_mm512_mul_ps(pre, cinv));
      x = _mm512_mul_ps(cval, th);
    }
    if (bias) {
      __m512 bv;
      if (t.bias_c == 1) {
        bv = _mm512_maskz_loadu_ps(valid, bias + j0);
      } else if (t.bias_c == 0) {
        bv = _mm512_set1_ps(bias[0]);
      } else {
        alignas(64) float tmp[16];
        for (int l = 0; l < 16; ++l) tmp[l] = ((valid >> l) & 1) ? bias[(j0 + l) * t.bias_c] : 0.f;
        bv = _mm512_load_ps(tmp);
      }
      x = _mm512_add_ps(x, bv);
    }
    // exp(−inf) = 0 covers −inf bias and fully masked rows (lse = +inf).
    const __m512 p = _mm512_maskz_mov_ps(valid, avx512::exp_ps(_mm512_sub_ps(x, lse)));
    __m512 pk = p, dpk = dpacc;
    if (t.dropout) {
      const __mmask16 keep = keep_mask(t.drop_row[r], t.k0 + j0, t.drop_threshold);
      const __m512 ks = _mm512_maskz_mov_ps(keep, _mm512_set1_ps(t.drop_scale));
      pk = _mm512_mul_ps(p, ks);
      dpk = _mm512_mul_ps(dpacc, ks);
    }
    __m512 ds = _mm512_mul_ps(p, _mm512_sub_ps(dpk, di));
    if (cap) ds = _mm512_mul_ps(ds, _mm512_fnmadd_ps(th, th, one));
    ds = _mm512_mul_ps(ds, scale);
    _mm512_storeu_ps(srow + j0, pk);
    _mm512_storeu_ps(dprow + j0, _mm512_maskz_mov_ps(valid, ds));
  }
}

}  // namespace

void bwd_pack_kv_avx512(const float* k, int64_t k_rs, const float* v, int64_t v_rs, int64_t nk, int64_t D,
                        float* kt, float* vt) {
  const float* src[2] = {k, v};
  const int64_t rs[2] = {k_rs, v_rs};
  float* dst[2] = {kt, vt};
  for (int s = 0; s < 2; ++s)
    for (int64_t j0 = 0; j0 < nk; j0 += 16) {
      const __mmask16 keys = avx512::tail_mask(nk - j0);
      for (int64_t d0 = 0; d0 < D; d0 += 16) {
        const __mmask16 cols = avx512::tail_mask(D - d0);
        __m512 x[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          x[i] =
              j0 + i < nk ? _mm512_maskz_loadu_ps(cols, src[s] + (j0 + i) * rs[s] + d0) : _mm512_setzero_ps();
        avx512::transpose16(x);  // x[i]: column d0 + i of keys j0 .. j0 + 15
        const int64_t nd = D - d0 < 16 ? D - d0 : 16;
        for (int64_t i = 0; i < nd; ++i) _mm512_mask_store_ps(dst[s] + (d0 + i) * kBwdBc + j0, keys, x[i]);
      }
    }
}

// Each block of kMB rows computes only the key vectors its rows can see, and the products over queries
// or keys run only over the range whose P' and dS can be nonzero: on the causal diagonal, in windows and
// past key lengths that skips whole vectors; where every row sees every key the ranges are the whole
// tile. The skipped terms are exact zeros (P' and dS are 0 outside [lo, hi)), so the sums are those of
// the full tile without its + 0 terms. lo and hi are nondecreasing in the row (MaskArgs::range), which
// the query range of a block of keys relies on.
void bwd_tile_avx512(const BwdTile& t) {
  const int64_t nr = t.nr, nk = t.nk, Dp = t.Dp, D = t.D;
  const int64_t nvk = (nk + 15) / 16, nvd = Dp / 16;
  // S = Q·Kᵀ, dP = dO·Vᵀ over the key vectors [v0, v1) that some row of the block sees; the others are
  // left unwritten and softmax_grad_row zeroes every lane outside a row's [lo, hi).
  for (int64_t m0 = 0; m0 < nr; m0 += kMB) {
    const int64_t mb = nr - m0 < kMB ? nr - m0 : kMB;
    const int64_t lo = t.lo[m0], hi = t.hi[m0 + mb - 1];
    const int64_t v0 = lo / 16, v1 = hi > lo ? (hi + 15) / 16 : v0;
    for (int64_t v = v0; v < v1; v += kNV) {
      const int64_t vb = v1 - v < kNV ? v1 - v : kNV;
      pick<true>(mb, vb)(D, t.q + m0 * t.q_rs, t.q_rs, 1, t.kt + 16 * v, kBwdBc, t.s + m0 * kBwdBc + 16 * v,
                         kBwdBc);
      pick<true>(mb, vb)(D, t.dout + m0 * t.dout_rs, t.dout_rs, 1, t.vt + 16 * v, kBwdBc,
                         t.dp + m0 * kBwdBc + 16 * v, kBwdBc);
    }
  }
  for (int64_t r = 0; r < nr; ++r) softmax_grad_row(t, r, nvk);
  // dV += P'ᵀ dO, dK += dSᵀ Q for keys [j0, j0 + jb): over the queries r0 .. r1 - 1 whose [lo, hi) meets
  // them.
  int64_t r0 = 0, r1 = 0;
  for (int64_t j0 = 0; j0 < nk; j0 += kMB) {
    const int64_t jb = nk - j0 < kMB ? nk - j0 : kMB;
    while (r0 < nr && t.hi[r0] <= j0) ++r0;  // rows before r0 see no key >= j0
    if (r1 < r0) r1 = r0;
    while (r1 < nr && t.lo[r1] < j0 + jb) ++r1;  // rows from r1 on see no key < j0 + jb
    const int64_t T = r1 > r0 ? r1 - r0 : 0;
    for (int64_t v = 0; v < nvd; v += kNV) {
      const int64_t vb = nvd - v < kNV ? nvd - v : kNV;
      pick<false>(jb, vb)(T, t.s + r0 * kBwdBc + j0, 1, kBwdBc, t.dout + r0 * t.dout_rs + 16 * v, t.dout_rs,
                          t.dv + j0 * Dp + 16 * v, Dp);
      pick<false>(jb, vb)(T, t.dp + r0 * kBwdBc + j0, 1, kBwdBc, t.q + r0 * t.q_rs + 16 * v, t.q_rs,
                          t.dk + j0 * Dp + 16 * v, Dp);
    }
  }
  // dQ (+)= dS·K over the keys [lo, hi) of the block's rows.
  for (int64_t m0 = 0; m0 < nr; m0 += kMB) {
    const int64_t mb = nr - m0 < kMB ? nr - m0 : kMB;
    const int64_t lo = t.lo[m0], hi = t.hi[m0 + mb - 1];
    const int64_t T = hi > lo ? hi - lo : 0;
    for (int64_t v = 0; v < nvd; v += kNV) {
      const int64_t vb = nvd - v < kNV ? nvd - v : kNV;
      const float* a = t.dp + m0 * kBwdBc + (T > 0 ? lo : 0);
      const float* x = t.kp + (T > 0 ? lo : 0) * Dp + 16 * v;
      float* c = t.dq + m0 * t.dq_rs + 16 * v;
      if (t.dq_add)
        pick<false>(mb, vb)(T, a, kBwdBc, 1, x, Dp, c, t.dq_rs);
      else
        pick<true>(mb, vb)(T, a, kBwdBc, 1, x, Dp, c, t.dq_rs);
    }
  }
}

}  // namespace attn::kernels::cpu

// AVX2 tile of the fused attention backward (see attention_bwd_tile.h for the contract and
// attention_bwd.cc for the driver): bwd_tile_avx512's structure with 8-float vectors. A CPU without
// AVX-512 ran the scalar tile before, about 9x slower (attention_bench --backward 1, N 1024: 9-11
// against 80-90 GFLOP/s on AVX-512).
//
// The five tile products are one register-blocked microkernel
//   C[m, 0:16] (+)= Σ_t A(m, t) · X[t, 0:16],   A(m, t) = a[m·am + t·at],
// MB ≤ 6 rows × 2 vectors of 8 accumulators (12 of the 16 ymm registers), one broadcast of A and two loads
// of X per step t, over one 16-float column block at a time (the tile's vectors are 16 floats wide, as
// on AVX-512, so both tiles skip the same blocks):
//   S  = Q·Kᵀ, dP = dO·Vᵀ (m = query, t = d), dV += P'ᵀ dO, dK += dSᵀ Q (m = key, t = query),
//   dQ = dS·K (m = query, t = key).
// Only intrinsics, vec_avx2.h and this file's anonymous namespace are used here (no weak symbols: see
// scripts/check-isa-objects.sh).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_bwd_tile.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu {
namespace {

constexpr int kMB = 6;  // rows of accumulators per microkernel call

template <int MB, bool kInit>
void microkernel(int64_t T, const float* a, int64_t am, int64_t at, const float* x, int64_t xs, float* c,
                 int64_t cs) {
  __m256 acc[MB][2];
#pragma GCC unroll 6
  for (int m = 0; m < MB; ++m)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) acc[m][v] = kInit ? _mm256_setzero_ps() : _mm256_loadu_ps(c + m * cs + 8 * v);
  for (int64_t t = 0; t < T; ++t) {
    const __m256 x0 = _mm256_loadu_ps(x + t * xs), x1 = _mm256_loadu_ps(x + t * xs + 8);
#pragma GCC unroll 6
    for (int m = 0; m < MB; ++m) {
      const __m256 av = _mm256_broadcast_ss(a + m * am + t * at);
      acc[m][0] = _mm256_fmadd_ps(av, x0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(av, x1, acc[m][1]);
    }
  }
#pragma GCC unroll 6
  for (int m = 0; m < MB; ++m)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) _mm256_storeu_ps(c + m * cs + 8 * v, acc[m][v]);
}

using MicroFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t);

// The microkernel for a block of mb ≤ kMB rows.
template <bool kInit, int MB = kMB>
MicroFn pick(int64_t mb) {
  if (mb == MB) return &microkernel<MB, kInit>;
  if constexpr (MB > 1) return pick<kInit, MB - 1>(mb);
  return nullptr;
}

// Keys j0 .. j0+7 of row `row_key` that survive dropout, as an 8-lane mask: the 32-bit hash
// mix64(row_key ^ j) >> 32 >= threshold (the scalar tile's test).
inline __m256 keep_mask(uint64_t row_key, int64_t j0, uint32_t threshold) {
  const __m256i key = _mm256_set1_epi64x(static_cast<long long>(row_key));
  const __m256i jlo = _mm256_add_epi64(_mm256_set1_epi64x(j0), _mm256_setr_epi64x(0, 1, 2, 3));
  const __m256i jhi = _mm256_add_epi64(_mm256_set1_epi64x(j0 + 4), _mm256_setr_epi64x(0, 1, 2, 3));
  // The high 32 bits of each hash (below 2^32, so a signed 64-bit compare serves)
  const __m256i hlo = _mm256_srli_epi64(avx2::mix64(_mm256_xor_si256(key, jlo)), 32);
  const __m256i hhi = _mm256_srli_epi64(avx2::mix64(_mm256_xor_si256(key, jhi)), 32);
  const __m256i thr = _mm256_set1_epi64x(static_cast<long long>(threshold) - 1);
  const __m256i klo = _mm256_cmpgt_epi64(hlo, thr), khi = _mm256_cmpgt_epi64(hhi, thr);
  // The low 32 bits of each 64-bit lane mask, lanes 0-3 from klo and 4-7 from khi
  const __m256i pick_lo = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i lo32 = _mm256_permutevar8x32_epi32(klo, pick_lo),
                hi32 = _mm256_permutevar8x32_epi32(khi, pick_lo);
  return _mm256_castsi256_ps(_mm256_permute2x128_si256(lo32, hi32, 0x20));
}

// tanh(x) = 1 − 2 / (exp(2x) + 1): absolute error ~1e-7, saturates to ±1.
inline __m256 tanh_ps(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 e = avx2::exp_ps(_mm256_add_ps(x, x));
  return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.f), _mm256_add_ps(e, one)));
}

// Turns row r of S into P' and row r of dP into dS, in place, 8 keys at a time over nvk 16-key blocks.
void softmax_grad_row(const BwdTile& t, int64_t r, int64_t nvk) {
  float* srow = t.s + r * kBwdBc;
  float* dprow = t.dp + r * kBwdBc;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_set1_epi32(t.lo[r]), hi = _mm256_set1_epi32(t.hi[r]);
  const __m256 lse = _mm256_set1_ps(t.lse[r]), di = _mm256_set1_ps(t.di[r]);
  const __m256 scale = _mm256_set1_ps(t.scale);
  const bool cap = t.softcap > 0;
  const __m256 cval = _mm256_set1_ps(t.softcap), cinv = _mm256_set1_ps(cap ? 1.f / t.softcap : 0.f);
  const __m256 one = _mm256_set1_ps(1.f);
  const uint8_t* allow = t.allow ? t.allow + r * t.allow_r : nullptr;
  const float* bias = t.bias ? t.bias + r * t.bias_r : nullptr;
  for (int64_t j0 = 0; j0 < 16 * nvk; j0 += 8) {
    const __m256i j = _mm256_add_epi32(iota, _mm256_set1_epi32(static_cast<int32_t>(j0)));
    // lo <= j < hi
    __m256i valid = _mm256_andnot_si256(_mm256_cmpgt_epi32(lo, j), _mm256_cmpgt_epi32(hi, j));
    if (allow && !_mm256_testz_si256(valid, valid)) {
      alignas(32) int32_t m[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(m), valid);
      for (int l = 0; l < 8; ++l)
        if (m[l] && !allow[(j0 + l) * t.allow_c]) m[l] = 0;
      valid = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
    }
    if (_mm256_testz_si256(valid, valid)) {
      _mm256_storeu_ps(srow + j0, _mm256_setzero_ps());
      _mm256_storeu_ps(dprow + j0, _mm256_setzero_ps());
      continue;
    }
    const __m256 vmask = _mm256_castsi256_ps(valid);
    const __m256 sacc = _mm256_loadu_ps(srow + j0);
    const __m256 dpacc = _mm256_loadu_ps(dprow + j0);
    const __m256 pre = _mm256_mul_ps(sacc, scale);
    __m256 x = pre, th = _mm256_setzero_ps();
    if (cap) {
      th = tanh_ps(_mm256_mul_ps(pre, cinv));
      x = _mm256_mul_ps(cval, th);
    }
    if (bias) {
      __m256 bv;
      if (t.bias_c == 1) {
        bv = _mm256_maskload_ps(bias + j0, valid);  // lanes outside [lo, hi) are not read
      } else if (t.bias_c == 0) {
        bv = _mm256_set1_ps(bias[0]);
      } else {
        alignas(32) int32_t m[8];
        alignas(32) float tmp[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(m), valid);
        for (int l = 0; l < 8; ++l) tmp[l] = m[l] ? bias[(j0 + l) * t.bias_c] : 0.f;
        bv = _mm256_load_ps(tmp);
      }
      x = _mm256_add_ps(x, bv);
    }
    // exp(−inf) = 0 covers −inf bias and fully masked rows (lse = +inf).
    const __m256 p = _mm256_and_ps(vmask, avx2::exp_ps(_mm256_sub_ps(x, lse)));
    __m256 pk = p, dpk = dpacc;
    if (t.dropout) {
      const __m256 ks =
          _mm256_and_ps(keep_mask(t.drop_row[r], t.k0 + j0, t.drop_threshold), _mm256_set1_ps(t.drop_scale));
      pk = _mm256_mul_ps(p, ks);
      dpk = _mm256_mul_ps(dpacc, ks);
    }
    __m256 ds = _mm256_mul_ps(p, _mm256_sub_ps(dpk, di));
    if (cap) ds = _mm256_mul_ps(ds, _mm256_fnmadd_ps(th, th, one));
    ds = _mm256_mul_ps(ds, scale);
    _mm256_storeu_ps(srow + j0, pk);
    _mm256_storeu_ps(dprow + j0, _mm256_and_ps(vmask, ds));
  }
}

}  // namespace

void bwd_pack_kv_avx2(const float* k, int64_t k_rs, const float* v, int64_t v_rs, int64_t nk, int64_t D,
                      float* kt, float* vt) {
  const float* src[2] = {k, v};
  const int64_t rs[2] = {k_rs, v_rs};
  float* dst[2] = {kt, vt};
  for (int s = 0; s < 2; ++s)
    for (int64_t j0 = 0; j0 < nk; j0 += 8) {
      const int64_t nj = nk - j0 < 8 ? nk - j0 : 8;
      const __m256i keys = avx2::lanes(nj);
      for (int64_t d0 = 0; d0 < D; d0 += 8) {
        const int64_t nd = D - d0 < 8 ? D - d0 : 8;
        const __m256i cols = avx2::lanes(nd);
        __m256 x[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          x[i] = i < nj ? _mm256_maskload_ps(src[s] + (j0 + i) * rs[s] + d0, cols) : _mm256_setzero_ps();
        avx2::transpose8(x);  // x[i]: column d0 + i of keys j0 .. j0 + 7
        for (int64_t i = 0; i < nd; ++i) {
          float* o = dst[s] + (d0 + i) * kBwdBc + j0;
          if (nj == 8)
            _mm256_storeu_ps(o, x[i]);
          else
            _mm256_maskstore_ps(o, keys, x[i]);
        }
      }
    }
}

// bwd_tile_avx512's loops with the same ranges: each block of kMB rows computes only the 16-key blocks
// its rows can see, and the products over queries or keys run only over the range whose P' and dS can
// be nonzero (the skipped terms are exact zeros).
void bwd_tile_avx2(const BwdTile& t) {
  const int64_t nr = t.nr, nk = t.nk, Dp = t.Dp, D = t.D;
  const int64_t nvk = (nk + 15) / 16, nvd = Dp / 16;
  for (int64_t m0 = 0; m0 < nr; m0 += kMB) {
    const int64_t mb = nr - m0 < kMB ? nr - m0 : kMB;
    const int64_t lo = t.lo[m0], hi = t.hi[m0 + mb - 1];
    const int64_t v0 = lo / 16, v1 = hi > lo ? (hi + 15) / 16 : v0;
    for (int64_t v = v0; v < v1; ++v) {
      pick<true>(mb)(D, t.q + m0 * t.q_rs, t.q_rs, 1, t.kt + 16 * v, kBwdBc, t.s + m0 * kBwdBc + 16 * v,
                     kBwdBc);
      pick<true>(mb)(D, t.dout + m0 * t.dout_rs, t.dout_rs, 1, t.vt + 16 * v, kBwdBc,
                     t.dp + m0 * kBwdBc + 16 * v, kBwdBc);
    }
  }
  for (int64_t r = 0; r < nr; ++r) softmax_grad_row(t, r, nvk);
  int64_t r0 = 0, r1 = 0;
  for (int64_t j0 = 0; j0 < nk; j0 += kMB) {
    const int64_t jb = nk - j0 < kMB ? nk - j0 : kMB;
    while (r0 < nr && t.hi[r0] <= j0) ++r0;  // rows before r0 see no key >= j0
    if (r1 < r0) r1 = r0;
    while (r1 < nr && t.lo[r1] < j0 + jb) ++r1;  // rows from r1 on see no key < j0 + jb
    const int64_t T = r1 > r0 ? r1 - r0 : 0;
    for (int64_t v = 0; v < nvd; ++v) {
      pick<false>(jb)(T, t.s + r0 * kBwdBc + j0, 1, kBwdBc, t.dout + r0 * t.dout_rs + 16 * v, t.dout_rs,
                      t.dv + j0 * Dp + 16 * v, Dp);
      pick<false>(jb)(T, t.dp + r0 * kBwdBc + j0, 1, kBwdBc, t.q + r0 * t.q_rs + 16 * v, t.q_rs,
                      t.dk + j0 * Dp + 16 * v, Dp);
    }
  }
  for (int64_t m0 = 0; m0 < nr; m0 += kMB) {
    const int64_t mb = nr - m0 < kMB ? nr - m0 : kMB;
    const int64_t lo = t.lo[m0], hi = t.hi[m0 + mb - 1];
    const int64_t T = hi > lo ? hi - lo : 0;
    for (int64_t v = 0; v < nvd; ++v) {
      const float* a = t.dp + m0 * kBwdBc + (T > 0 ? lo : 0);
      const float* x = t.kp + (T > 0 ? lo : 0) * Dp + 16 * v;
      float* c = t.dq + m0 * t.dq_rs + 16 * v;
      if (t.dq_add)
        pick<false>(mb)(T, a, kBwdBc, 1, x, Dp, c, t.dq_rs);
      else
        pick<true>(mb)(T, a, kBwdBc, 1, x, Dp, c, t.dq_rs);
    }
  }
}

}  // namespace attn::kernels::cpu

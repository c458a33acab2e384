// The body of kernels/cpu/paged_attention.h, written once over a lane type V (included by
// paged_attention.cc with 1 lane, paged_attention_avx2.cc with 8 and paged_attention_avx512.cc
// with 16). V provides, on float lanes F of V::N elements:
//   F zero(), set1(float), load(const float*), load_n(const float*, n) (lanes >= n are 0, not read),
//   load(const uint16_t*), load_n(const uint16_t*, n) (IEEE half bits), store(float*, F),
//   mul(F, F), sub(F, F), fma(a, b, c) = a·b + c, exp(F), tanh(F), F hsum(F a[N]) (lane i = Σ of a[i]'s
//   lanes)
// The cache element type T is float or uint16_t (half bits).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/paged_attention.h"

namespace attn::kernels::cpu::detail {
namespace {

// D rounded up to 16 floats: the stride of the query and accumulator rows in the scratch.
inline int64_t paged_padded(int64_t D) { return (D + 15) / 16 * 16; }

template <typename V, typename T>
struct PagedBody {
  using F = typename V::F;
  static constexpr int N = V::N;
  static constexpr int64_t kTile = kPagedTile;

  // Scores of `nt` keys k[t · D] against qs (scaled, zero-padded to the chunk): sc[0, nt).
  static void scores(const float* qs, const T* k, int64_t D, int64_t nt, float* sc) {
    const int64_t full = D / N * N;
    for (int64_t j = 0; j < nt; j += N) {
      const int64_t m = std::min<int64_t>(N, nt - j);
      F acc[N];
      for (int i = 0; i < N; ++i) acc[i] = V::zero();
      for (int64_t c = 0; c < full; c += N) {
        const F qv = V::load(qs + c);
        for (int64_t i = 0; i < m; ++i) acc[i] = V::fma(qv, V::load(k + (j + i) * D + c), acc[i]);
      }
      if (full < D) {
        const F qv = V::load(qs + full);
        for (int64_t i = 0; i < m; ++i)
          acc[i] = V::fma(qv, V::load_n(k + (j + i) * D + full, D - full), acc[i]);
      }
      V::store(sc + j, V::hsum(acc));
    }
  }

  // acc[0, D) = acc · corr + Σ_t p[t] · v[t · D], the chunks of 4 vectors with the keys inside.
  static void accumulate(float* acc, float corr, const float* p, const T* v, int64_t D, int64_t nt) {
    const F cv = V::set1(corr);
    const int64_t full = D / N * N;
    int64_t c = 0;
    for (; c + 4 * N <= full; c += 4 * N) {
      F a0 = V::mul(V::load(acc + c), cv), a1 = V::mul(V::load(acc + c + N), cv);
      F a2 = V::mul(V::load(acc + c + 2 * N), cv), a3 = V::mul(V::load(acc + c + 3 * N), cv);
      for (int64_t t = 0; t < nt; ++t) {
        const F pt = V::set1(p[t]);
        const T* vr = v + t * D + c;
        a0 = V::fma(pt, V::load(vr), a0);
        a1 = V::fma(pt, V::load(vr + N), a1);
        a2 = V::fma(pt, V::load(vr + 2 * N), a2);
        a3 = V::fma(pt, V::load(vr + 3 * N), a3);
      }
      V::store(acc + c, a0);
      V::store(acc + c + N, a1);
      V::store(acc + c + 2 * N, a2);
      V::store(acc + c + 3 * N, a3);
    }
    for (; c < D; c += N) {
      const int64_t n = std::min<int64_t>(N, D - c);
      F a = V::mul(V::load(acc + c), cv);
      if (n == N)
        for (int64_t t = 0; t < nt; ++t) a = V::fma(V::set1(p[t]), V::load(v + t * D + c), a);
      else
        for (int64_t t = 0; t < nt; ++t) a = V::fma(V::set1(p[t]), V::load_n(v + t * D + c, n), a);
      V::store(acc + c, a);
    }
  }

  static void item(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t g, int64_t r0, int64_t r1,
                   float* scratch) {
    const int64_t G = a.H / a.Hkv, D = a.D, Dp = paged_padded(D), bt = a.block_tokens;
    const int64_t nv = (r1 - r0) * G;
    float* qs = scratch;         // [nv, Dp]
    float* acc = qs + nv * Dp;   // [nv, Dp]
    float* mx = acc + nv * Dp;   // [nv]
    float* sum = mx + nv;        // [nv]
    float* sc = sum + nv;        // [kTile + 16]
    float* p = sc + kTile + 16;  // [kTile + 16]
    for (int64_t v = 0; v < nv; ++v) {
      const int64_t r = r0 + v / G, h = g * G + v % G;
      const float* q = a.q + ((s.row0 + r) * a.H + h) * D;
      for (int64_t d = 0; d < Dp; ++d) {
        qs[v * Dp + d] = d < D ? q[d] * a.scale : 0.0f;
        acc[v * Dp + d] = 0.0f;
      }
      mx[v] = -std::numeric_limits<float>::infinity();
      sum[v] = 0.0f;
    }
    int64_t lo0, hi0, lo1, hi1;
    paged_row_range(a, s, r0, &lo0, &hi0);
    paged_row_range(a, s, r1 - 1, &lo1, &hi1);
    const T* pool = static_cast<const T*>(a.kv);
    for (int64_t t0 = lo0; t0 <= hi1;) {
      const int64_t t1 = std::min(std::min(hi1 + 1, (t0 / bt + 1) * bt), t0 + kTile);
      const int64_t nt = t1 - t0;
      const T* kb = pool + s.blocks[t0 / bt] * a.block_stride + (g * bt + t0 % bt) * D;
      const T* vb = kb + a.Hkv * bt * D;
      for (int64_t v = 0; v < nv; ++v) {
        int64_t lo, hi;
        paged_row_range(a, s, r0 + v / G, &lo, &hi);
        if (t1 <= lo || t0 > hi) continue;
        scores(qs + v * Dp, kb, D, nt, sc);
        if (a.softcap > 0) {
          const F inv = V::set1(1.0f / a.softcap), cap = V::set1(a.softcap);
          for (int64_t j = 0; j < nt; j += N)
            V::store(sc + j, V::mul(cap, V::tanh(V::mul(V::load(sc + j), inv))));
        }
        const float ninf = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < nt; ++j)
          if (t0 + j < lo || t0 + j > hi) sc[j] = ninf;
        const int64_t padded = (nt + N - 1) / N * N;
        for (int64_t j = nt; j < padded; ++j) sc[j] = ninf;
        float tm = ninf;
        for (int64_t j = 0; j < nt; ++j) tm = std::max(tm, sc[j]);
        if (tm == ninf) continue;  // no key of this tile is visible to this row
        const float m_new = std::max(mx[v], tm);
        const float corr = mx[v] == m_new ? 1.0f : std::exp(mx[v] - m_new);
        const F mv = V::set1(m_new);
        for (int64_t j = 0; j < padded; j += N) V::store(p + j, V::exp(V::sub(V::load(sc + j), mv)));
        float ps = 0.0f;
        for (int64_t j = 0; j < nt; ++j) ps += p[j];
        sum[v] = sum[v] * corr + ps;
        mx[v] = m_new;
        accumulate(acc + v * Dp, corr, p, vb, D, nt);
      }
      t0 = t1;
    }
    for (int64_t v = 0; v < nv; ++v) {
      const int64_t r = r0 + v / G, h = g * G + v % G, row = (s.row0 + r) * a.H + h;
      float* o = a.out + row * D;
      const float inv = sum[v] > 0 ? 1.0f / sum[v] : 0.0f;
      for (int64_t d = 0; d < D; ++d) o[d] = acc[v * Dp + d] * inv;
      if (a.lse) a.lse[row] = sum[v] > 0 ? mx[v] + std::log(sum[v]) : -std::numeric_limits<float>::infinity();
    }
  }
};

// The item for either cache type.
template <typename V>
void paged_item(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t g, int64_t r0, int64_t r1,
                float* scratch) {
  if (a.f16)
    PagedBody<V, uint16_t>::item(a, s, g, r0, r1, scratch);
  else
    PagedBody<V, float>::item(a, s, g, r0, r1, scratch);
}

}  // namespace
}  // namespace attn::kernels::cpu::detail

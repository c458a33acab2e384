// The body of kernels/cpu/paged_attention.h, written once over a lane type V (included by
// paged_attention.cc with 1 lane, paged_attention_avx2.cc with 8 and paged_attention_avx512.cc
// with 16). V provides, on float lanes F of V::N elements:
//   F zero(), set1(float), load(const float*), load_n(const float*, n) (lanes >= n are 0, not read),
//   load(const uint16_t*), load_n(const uint16_t*, n) (IEEE half bits), load(const int8_t*),
//   load_n(const int8_t*, n) (integers as floats), store(float*, F),
//   mul(F, F), sub(F, F), fma(a, b, c) = a·b + c, exp(F), tanh(F), transpose(F a[N]) (an N x N block)
// The cache element type T is float, uint16_t (half bits) or int8_t (q8: each row's f32 scale d is
// applied to its scores, d_k · (q·k_int), and to its probabilities, (p · d_v) · v_int).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

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
  static constexpr bool kQ8 = std::is_same_v<T, int8_t>;

  // acc[0, D) = acc · corr + Σ_t p[t] · vr[t][0, D), the chunks of 4 vectors with the keys inside.
  template <typename U>
  static void accumulate(float* acc, float corr, const float* p, const U* const* vr, int64_t D, int64_t nt) {
    const F cv = V::set1(corr);
    const int64_t full = D / N * N;
    int64_t c = 0;
    for (; c + 4 * N <= full; c += 4 * N) {
      F a0 = V::mul(V::load(acc + c), cv), a1 = V::mul(V::load(acc + c + N), cv);
      F a2 = V::mul(V::load(acc + c + 2 * N), cv), a3 = V::mul(V::load(acc + c + 3 * N), cv);
      for (int64_t t = 0; t < nt; ++t) {
        const F pt = V::set1(p[t]);
        const U* x = vr[t] + c;
        a0 = V::fma(pt, V::load(x), a0);
        a1 = V::fma(pt, V::load(x + N), a1);
        a2 = V::fma(pt, V::load(x + 2 * N), a2);
        a3 = V::fma(pt, V::load(x + 3 * N), a3);
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
        for (int64_t t = 0; t < nt; ++t) a = V::fma(V::set1(p[t]), V::load(vr[t] + c), a);
      else
        for (int64_t t = 0; t < nt; ++t) a = V::fma(V::set1(p[t]), V::load_n(vr[t] + c, n), a);
      V::store(acc + c, a);
    }
  }

  // The tile's keys transposed: kt[d · kTile + j] = k_j[d] for d < Dp, j < round_up(nt, N) (rows past
  // D are 0), N × N blocks at a time; columns [round_up(nt, N), kTile) of a partial tile are 0 (their
  // scores are computed, never read; zeros keep stale scratch, perhaps denormal, out of the FMAs).
  static void transpose_keys(const T* const* kr, int64_t D, int64_t nt, float* kt) {
    const int64_t full = D / N * N, Dp = paged_padded(D), done = (nt + N - 1) / N * N;
    for (int64_t j = 0; j < nt; j += N)
      for (int64_t c = 0; c < Dp; c += N) {
        F blk[N];
        for (int i = 0; i < N; ++i)
          blk[i] = c < full ? V::load(kr[j + i] + c) : c < D ? V::load_n(kr[j + i] + c, D - c) : V::zero();
        V::transpose(blk);
        for (int x = 0; x < N; ++x) V::store(kt + (c + x) * kTile + j, blk[x]);
      }
    if (done < kTile)
      for (int64_t d = 0; d < D; ++d) std::fill(kt + d * kTile + done, kt + (d + 1) * kTile, 0.0f);
  }

  // Scores of VB query vectors qs[v · Dp] against the transposed tile: sc[v · ldsc + j], j <
  // round_up(nt, N). Each key vector loaded once serves VB FMAs (no horizontal sums).
  static constexpr int kKeyVecs = static_cast<int>(kTile / N);
  static constexpr int kVB = 8 * N / kTile > 1 ? static_cast<int>(8 * N / kTile) : 1;
  template <int VB>
  static void scores_kt(const float* qs, int64_t Dp, const float* kt, int64_t D, float* sc, int64_t ldsc) {
    // All kTile columns (those past the tile's keys hold zeros: their scores are never read), so every
    // index is a constant and the accumulators stay in registers. Each score is one FMA chain over d.
    F acc[VB][kKeyVecs];
    for (int v = 0; v < VB; ++v)
      for (int x = 0; x < kKeyVecs; ++x) acc[v][x] = V::zero();
    for (int64_t d = 0; d < D; ++d) {
      const float* row = kt + d * kTile;
      F k[kKeyVecs];
      for (int x = 0; x < kKeyVecs; ++x) k[x] = V::load(row + x * N);
      for (int v = 0; v < VB; ++v) {
        const F b = V::set1(qs[v * Dp + d]);
        for (int x = 0; x < kKeyVecs; ++x) acc[v][x] = V::fma(b, k[x], acc[v][x]);
      }
    }
    for (int v = 0; v < VB; ++v)
      for (int x = 0; x < kKeyVecs; ++x) V::store(sc + v * ldsc + x * N, acc[v][x]);
  }

  // accumulate() for two query vectors at once: each V chunk loaded once serves both.
  template <typename U>
  static void accumulate2(float* acc0, float* acc1, float corr0, float corr1, const float* p0,
                          const float* p1, const U* const* vr, int64_t D, int64_t nt) {
    const F c0 = V::set1(corr0), c1 = V::set1(corr1);
    const int64_t full = D / N * N;
    int64_t c = 0;
    for (; c + 4 * N <= full; c += 4 * N) {  // 8 accumulators: enough independent FMA chains
      F a[4], b[4];
      for (int i = 0; i < 4; ++i) {
        a[i] = V::mul(V::load(acc0 + c + i * N), c0);
        b[i] = V::mul(V::load(acc1 + c + i * N), c1);
      }
      for (int64_t t = 0; t < nt; ++t) {
        const F p = V::set1(p0[t]), q = V::set1(p1[t]);
        for (int i = 0; i < 4; ++i) {
          const F x = V::load(vr[t] + c + i * N);
          a[i] = V::fma(p, x, a[i]);
          b[i] = V::fma(q, x, b[i]);
        }
      }
      for (int i = 0; i < 4; ++i) {
        V::store(acc0 + c + i * N, a[i]);
        V::store(acc1 + c + i * N, b[i]);
      }
    }
    for (; c < D; c += N) {
      const int64_t n = std::min<int64_t>(N, D - c);
      F a = V::mul(V::load(acc0 + c), c0), b = V::mul(V::load(acc1 + c), c1);
      for (int64_t t = 0; t < nt; ++t) {
        const F x = n == N ? V::load(vr[t] + c) : V::load_n(vr[t] + c, n);
        a = V::fma(V::set1(p0[t]), x, a);
        b = V::fma(V::set1(p1[t]), x, b);
      }
      V::store(acc0 + c, a);
      V::store(acc1 + c, b);
    }
  }

  // One query vector's tile of scores sv[0, nt) (keys t0 .. t1 − 1, the row seeing lo .. hi, at least
  // one of them): softcap, mask, then the online softmax step: the running maximum *mx and sum *sum
  // updated, pv[0, round_up(nt, N)) = exp(s − max) (0 for masked keys), *cor = the factor the
  // accumulator must be rescaled by.
  static void online_softmax(float* sv, float* pv, int64_t t0, int64_t t1, int64_t lo, int64_t hi,
                             float softcap, float* mx, float* sum, float* cor) {
    const int64_t nt = t1 - t0, padded = (nt + N - 1) / N * N;
    const float ninf = -std::numeric_limits<float>::infinity();
    if (softcap > 0) {
      const F inv = V::set1(1.0f / softcap), cap = V::set1(softcap);
      for (int64_t j = 0; j < nt; j += N)
        V::store(sv + j, V::mul(cap, V::tanh(V::mul(V::load(sv + j), inv))));
    }
    if (t0 < lo || t1 - 1 > hi)
      for (int64_t j = 0; j < nt; ++j)
        if (t0 + j < lo || t0 + j > hi) sv[j] = ninf;
    for (int64_t j = nt; j < padded; ++j) sv[j] = ninf;
    F tmv = V::load(sv);
    for (int64_t j = N; j < padded; j += N) tmv = V::max(tmv, V::load(sv + j));
    const float m_new = std::max(*mx, V::reduce_max(tmv));
    *cor = *mx == m_new ? 1.0f : std::exp(*mx - m_new);
    const F mv = V::set1(m_new);
    F psv = V::zero();
    for (int64_t j = 0; j < padded; j += N) {
      const F e = V::exp(V::sub(V::load(sv + j), mv));
      V::store(pv + j, e);
      psv = V::add(psv, e);
    }
    *sum = *sum * *cor + V::reduce_sum(psv);
    *mx = m_new;
  }

  // The K and V rows of positions [t0, t1) of kv head g, one division per block; for q8 their scales
  // too (ks, vs).
  static void key_rows(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t g, int64_t t0, int64_t t1,
                       const T** kr, const T** vr, float* ks, float* vs) {
    const int64_t bt = a.block_tokens, D = a.D, voff = a.Hkv * bt * D;
    const T* pool = static_cast<const T*>(a.kv);
    for (int64_t t = t0; t < t1;) {
      const int64_t b = t / bt, end = std::min(t1, (b + 1) * bt), i = g * bt + t - b * bt;
      const T* row = pool + s.blocks[b] * a.block_stride + i * D;
      if constexpr (kQ8) {
        const float* kd =
            reinterpret_cast<const float*>(
                reinterpret_cast<const char*>(pool + s.blocks[b] * a.block_stride) + a.q8_scales) +
            i;
        const float* vd = kd + a.Hkv * bt;
        std::copy_n(kd, end - t, ks);
        std::copy_n(vd, end - t, vs);
        ks += end - t;
        vs += end - t;
      }
      for (; t < end; ++t, row += D) {
        *kr++ = row;
        *vr++ = row + voff;
      }
    }
  }

  // Positions [t0, t1) of kv head g into the cache while the tile before computes: the blocks lie
  // anywhere in the pool, so the hardware prefetcher (which stops at page ends) does not find them.
  static void prefetch(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t g, int64_t t0, int64_t t1) {
    const int64_t bt = a.block_tokens, D = a.D, voff = a.Hkv * bt * D;
    const T* pool = static_cast<const T*>(a.kv);
    for (int64_t t = t0; t < t1;) {
      const int64_t b = t / bt, end = std::min(t1, (b + 1) * bt);
      const auto* k =
          reinterpret_cast<const char*>(pool + s.blocks[b] * a.block_stride + (g * bt + t - b * bt) * D);
      const auto* v = k + voff * static_cast<int64_t>(sizeof(T));
      const int64_t bytes = (end - t) * D * static_cast<int64_t>(sizeof(T));
      for (int64_t o = 0; o < bytes; o += 64) {
        __builtin_prefetch(k + o);
        __builtin_prefetch(v + o);
      }
      if constexpr (kQ8) {
        const char* kd = reinterpret_cast<const char*>(pool + s.blocks[b] * a.block_stride) + a.q8_scales +
                         (g * bt + t - b * bt) * static_cast<int64_t>(sizeof(float));
        __builtin_prefetch(kd);
        __builtin_prefetch(kd + a.Hkv * bt * static_cast<int64_t>(sizeof(float)));
      }
      t = end;
    }
  }

  // P·V of a tile for every query vector of the item, two at a time.
  template <typename U>
  static void pv_tile(float* acc, const float* cor, const float* p, const U* const* vr, int64_t nv,
                      int64_t Dp, int64_t D, int64_t nt) {
    constexpr int64_t ld = kTile + 16;
    int64_t v = 0;
    for (; v + 2 <= nv; v += 2)
      accumulate2(acc + v * Dp, acc + (v + 1) * Dp, cor[v], cor[v + 1], p + v * ld, p + (v + 1) * ld, vr, D,
                  nt);
    if (v < nv) accumulate(acc + v * Dp, cor[v], p + v * ld, vr, D, nt);
  }

  // Saves query vector v's running state as share `part` of its row and starts the next share.
  static void save_share(float* sp, int64_t part, int64_t D, int64_t Dp, float* acc, float* mx, float* sum) {
    float* dst = sp + part * (D + 2);
    std::copy_n(acc, D, dst);
    dst[D] = *mx;
    dst[D + 1] = *sum;
    std::fill_n(acc, Dp, 0.0f);
    *mx = -std::numeric_limits<float>::infinity();
    *sum = 0.0f;
  }

  // The K and V rows of tile [t0, t1) (and q8's scales) into kr, vr, ksc, vsc: lanes before `first`
  // (keys before the item's first) take the first visible key's rows, lanes past the tile's keys up to
  // the vector width the first lane's: computed, then masked (p = 0).
  static void tile_rows(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t g, int64_t t0, int64_t t1,
                        int64_t first, const T** kr, const T** vr, float* ksc, float* vsc) {
    key_rows(a, s, g, t0 + first, t1, kr + first, vr + first, ksc + first, vsc + first);
    for (int64_t j = 0; j < first; ++j) {
      kr[j] = kr[first];
      vr[j] = vr[first];
      ksc[j] = ksc[first];
      vsc[j] = 0.0f;
    }
    const int64_t nt = t1 - t0, padded = (nt + N - 1) / N * N;
    for (int64_t j = nt; j < padded; ++j) {
      kr[j] = kr[0];
      ksc[j] = 1.0f;
      vsc[j] = 0.0f;
    }
  }

  // P·V of a tile. A chunk's many query vectors take the tile's V rows converted to f32 once into vf
  // (the same values, so the same bits as converting them at each load, which a decode item of few
  // vectors does).
  static void pv_tile_of(float* acc, const float* cor, const float* p, const T* const* vr, float* vf,
                         int64_t nv, int64_t Dp, int64_t D, int64_t nt) {
    if (std::is_same_v<T, float> || nv <= 4) return pv_tile(acc, cor, p, vr, nv, Dp, D, nt);
    const float* vrf[kTile + 16];
    for (int64_t t = 0; t < nt; ++t) {
      float* dst = vf + t * Dp;
      int64_t c = 0;
      for (; c + N <= D; c += N) V::store(dst + c, V::load(vr[t] + c));
      if (c < D) V::store(dst + c, V::load_n(vr[t] + c, D - c));
      vrf[t] = dst;
    }
    pv_tile(acc, cor, p, vrf, nv, Dp, D, nt);
  }

  // The item's end: a share's running state into it.partial, or each query vector's output and
  // log-sum-exp (a row cut into shares: its last share saved, then all merged as a decode row's are).
  static void finish(const PagedAttnArgs& a, const PagedItem& it, int64_t nv, int64_t Dp, float* acc,
                     float* mx, float* sum, float* sp, const int64_t* parts) {
    const PagedSeqArgs& s = a.seqs[it.s];
    const int64_t G = a.H / a.Hkv, D = a.D;
    if (it.partial) {
      for (int64_t v = 0; v < nv; ++v) {
        float* part = it.partial + v * (D + 2);
        std::copy_n(acc + v * Dp, D, part);
        part[D] = mx[v];
        part[D + 1] = sum[v];
      }
      return;
    }
    for (int64_t v = 0; v < nv; ++v) {
      const int64_t r = it.r0 + v / G, h = it.g * G + v % G, row = (s.row0 + r) * a.H + h;
      float* o = a.out + row * D;
      float l;
      if (parts[v / G] > 1) {
        float* own = sp + v * kPagedMaxShares * (D + 2);
        save_share(own, parts[v / G] - 1, D, Dp, acc + v * Dp, &mx[v], &sum[v]);
        l = paged_merge(own, parts[v / G], D + 2, D, o);
      } else {
        const float inv = sum[v] > 0 ? 1.0f / sum[v] : 0.0f;
        for (int64_t d = 0; d < D; ++d) o[d] = acc[v * Dp + d] * inv;
        l = sum[v] > 0 ? mx[v] + std::log(sum[v]) : -std::numeric_limits<float>::infinity();
      }
      if (a.lse) a.lse[row] = l;
    }
  }

  static void item(const PagedAttnArgs& a, const PagedItem& it, float* scratch) {
    const PagedSeqArgs& s = a.seqs[it.s];
    const int64_t g = it.g, r0 = it.r0, r1 = it.r1;
    const int64_t G = a.H / a.Hkv, D = a.D, Dp = paged_padded(D);
    const int64_t nv = (r1 - r0) * G;
    constexpr int64_t ld = kTile + 16;  // a row of scores or probabilities
    float* qs = scratch;                // [nv, Dp]
    float* acc = qs + nv * Dp;          // [nv, Dp]
    float* mx = acc + nv * Dp;          // [nv]
    float* sum = mx + nv;               // [nv]
    float* cor = sum + nv;              // [nv] this tile's rescaling
    float* sc = cor + nv;               // [nv, ld]
    float* p = sc + nv * ld;            // [nv, ld]
    // [Dp, kTile] the tile's keys transposed. Every row's scores come from it, one decode row or a
    // prompt chunk's many: a row's score bits then do not depend on how many rows share its item (a
    // chunk's size, the batch), which the runtime's batch invariance needs (tests/models/
    // decoder_batch_test.cc). Before, items of few rows took per-key dot products (another summation
    // order), so a prompt prefilled in other chunks, beside other sequences, drifted.
    float* kt = p + nv * ld;
    float* sp = kt + Dp * kTile;  // [nv, kPagedMaxShares, D + 2] the shares of a chunk's long rows
    float* vf = sp + nv * kPagedMaxShares * (D + 2);  // [kTile, Dp] the tile's V rows in f32 (f16, q8)
    const T* kr[kTile + 16];                          // the tile's key and value rows, read in place
    const T* vr[kTile + 16];
    float ksc[kTile + 16], vsc[kTile + 16];  // q8: their scales
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
    // Each row's visible keys (clamped to this item's share) and, unless the item is itself a share,
    // the bounds of its own shares (paged_shares) and the one it is in.
    int64_t rlo[kPagedRows], rhi[kPagedRows], parts[kPagedRows], cur[kPagedRows];
    int64_t bnd[kPagedRows][kPagedMaxShares + 1];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r - r0;
      paged_row_range(a, s, r, &rlo[i], &rhi[i]);
      parts[i] = it.partial ? 1 : paged_shares(rlo[i], rhi[i], bnd[i]);
      cur[i] = 0;
      rlo[i] = std::max(rlo[i], it.k0);
      rhi[i] = std::min(rhi[i], it.k1 - 1);
    }
    const int64_t lo0 = rlo[0], hi1 = rhi[r1 - r0 - 1];
    // Tiles start at multiples of kTile whatever the rows see, so a key's lane in its tile, and with it
    // every sum, is the same for the row alone and beside others. Keys before lo0 fill a tile's first
    // lanes with lo0's rows (their blocks may be released): computed, then masked.
    for (int64_t t0 = lo0 / kTile * kTile; t0 <= hi1;) {
      const int64_t t1 = std::min(hi1 + 1, t0 + kTile);
      const int64_t nt = t1 - t0, first = std::max(t0, lo0) - t0;
      tile_rows(a, s, g, t0, t1, first, kr, vr, ksc, vsc);
      const int64_t padded = (nt + N - 1) / N * N;
      prefetch(a, s, g, t1, std::min(hi1 + 1, t1 + kTile));
      transpose_keys(kr, D, nt, kt);
      int64_t vs = 0;
      for (; vs + kVB <= nv; vs += kVB) scores_kt<kVB>(qs + vs * Dp, Dp, kt, D, sc + vs * ld, ld);
      for (; vs < nv; ++vs) scores_kt<1>(qs + vs * Dp, Dp, kt, D, sc + vs * ld, ld);
      for (int64_t r = 0; r < r1 - r0; ++r)  // a row whose next share starts here
        if (cur[r] + 1 < parts[r] && t0 >= bnd[r][cur[r] + 1]) {
          for (int64_t v = r * G; v < (r + 1) * G; ++v)
            save_share(sp + v * kPagedMaxShares * (D + 2), cur[r], D, Dp, acc + v * Dp, &mx[v], &sum[v]);
          ++cur[r];
        }
      for (int64_t v = 0; v < nv; ++v) {
        float* sv = sc + v * ld;
        float* pv = p + v * ld;
        const int64_t lo = rlo[v / G], hi = rhi[v / G];
        cor[v] = 1.0f;
        if (t1 <= lo || t0 > hi) {  // no key of this tile is visible to this row
          std::fill_n(pv, padded, 0.0f);
          continue;
        }
        if constexpr (kQ8)  // scores d_k · (q·k_int)
          for (int64_t j = 0; j < padded; j += N) V::store(sv + j, V::mul(V::load(sv + j), V::load(ksc + j)));
        online_softmax(sv, pv, t0, t1, lo, hi, a.softcap, &mx[v], &sum[v], &cor[v]);
        if constexpr (kQ8)  // probabilities times d_v, for P·V over v_int
          for (int64_t j = 0; j < padded; j += N) V::store(pv + j, V::mul(V::load(pv + j), V::load(vsc + j)));
      }
      pv_tile_of(acc, cor, p, vr, vf, nv, Dp, D, nt);
      t0 = t1;
    }
    finish(a, it, nv, Dp, acc, mx, sum, sp, parts);
  }
};

// The item for any cache type.
template <typename V>
void paged_item(const PagedAttnArgs& a, const PagedItem& it, float* scratch) {
  if (a.q8)
    PagedBody<V, int8_t>::item(a, it, scratch);
  else if (a.f16)
    PagedBody<V, uint16_t>::item(a, it, scratch);
  else
    PagedBody<V, float>::item(a, it, scratch);
}

}  // namespace
}  // namespace attn::kernels::cpu::detail

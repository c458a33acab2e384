// The vector body of kernels/cpu/q8k.h, written once over an integer-dot primitive D (included by
// q8k_avx2.cc, D = vpmaddubsw + vpmaddwd, and q8k_avx512.cc, D = AVX-512 VNNI vpdpbusd on 256-bit
// lanes; Zen 4 runs 512-bit operations as two 256-bit halves, so 32 bytes a step costs nothing there).
// D provides, on __m256i of 32 bytes u (unsigned) and s (signed, in [-127, 127]):
//   __m256i dot(u, s)            8 int32 lanes, lane i = Σ of u·s over bytes 4i..4i+3
//   __m256i dot_scaled(u, s, a, b)  the same with lanes 0-3 times a, lanes 4-7 times b (int)
//   __m256i expand_bits(uint32 m)   byte i = 0xff when bit i of m is set, else 0
// Every integer sum is exact; the scaling is f32 FMAs per block (the order differs from the oracle's
// double, the integers do not).
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/q8k.h"

namespace attn::kernels::cpu::detail {
namespace {

inline float half_of(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The same number of chains for any number of activation rows, so a row's sum is taken in one order
// whatever rows share the call (the runtime's batch invariance: tests/kernels/q8k_test.cc). Four, as
// the one-row (decode) kernel always had: its sums, and so Gemma 3's agreement with llama.cpp, are
// unchanged; with four rows the 16 accumulators fill the AVX2 register file.
constexpr int chains(int R) { return R == 1 ? 4 : R == 2 ? 2 : 1; }
template <int P>
inline __m256 fold(const __m256* a) {
  if constexpr (P == 4) return _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
  if constexpr (P == 2) return _mm256_add_ps(a[0], a[1]);
  return a[0];
}

template <typename D>
struct Q8Body {
  // Blocks of 32 go round-robin to P independent FMA chains per activation row (one chain would wait
  // out the FMA latency at every block); `step(b, p)` handles block b on chain p.
  template <int P, typename Step>
  static void blocks(int64_t nb, Step step) {
    int64_t b = 0;
    for (; b + P <= nb; b += P) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) step(b + p, p);
    }
    for (; b < nb; ++b) step(b, 0);
  }

  template <int R>
  static void q8_0(const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, float* out) {
    constexpr int P = chains(R);
    __m256 acc[R][P];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) acc[r][p] = _mm256_setzero_ps();
    blocks<P>(K / 32, [&](int64_t b, int p) {
      const std::byte* blk = row + 34 * b;
      const float dw = half_of(blk);
      const __m256i w = load32(blk + 2);
      const __m256i aw = _mm256_sign_epi8(w, w);  // |w| (-128 stays 0x80, 128 unsigned)
      for (int r = 0; r < R; ++r) {
        const __m256i xv = load32(x.q + (m0 + r) * x.ldq + 32 * b);
        const __m256i is = D::dot(aw, _mm256_sign_epi8(xv, w));
        acc[r][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw * x.d[(m0 + r) * x.ldd + b]),
                                    acc[r][p]);
      }
    });
    for (int r = 0; r < R; ++r) out[r] = hsum(fold<P>(acc[r]));
  }

  // The formats of 32-value blocks with 4-bit quants, element i the low nibble of quant byte i and
  // 16 + i its high one. Q4_0: 18-byte blocks (f16 d, 16 bytes of quants), value d·(q - 8); Q5_0:
  // 22-byte blocks (f16 d, 4 bytes of fifth bits, the quants), value d·(q - 16); Q4_1: 20-byte blocks
  // (f16 d, f16 m, the quants), value d·q + m. The offset or the min enters through the activations'
  // block sums: -offset·Σ dw·dx·Σxq, or +Σ m·dx·Σxq.
  template <int R, KFormat F>
  static void q_offset(const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, float* out) {
    constexpr bool Five = F == KFormat::q5_0, Min = F == KFormat::q4_1;
    constexpr int P = chains(R);
    constexpr int64_t block_bytes = Five ? 22 : Min ? 20 : 18, quants = Five ? 6 : Min ? 4 : 2;
    constexpr float offset = Five ? 16.0f : Min ? -1.0f : 8.0f;  // Q4_1: corr holds m·dx·Σxq, added
    __m256 acc[R][P];
    float corr[R][P];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) acc[r][p] = _mm256_setzero_ps(), corr[r][p] = 0;
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    blocks<P>(K / 32, [&](int64_t b, int p) {
      const std::byte* blk = row + block_bytes * b;
      const float dw = half_of(blk);
      float mw = 0;
      if constexpr (Min) mw = half_of(blk + 2);
      const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + quants));
      __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), lo4);
      if constexpr (Five) {
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        q = _mm256_or_si256(q, _mm256_and_si256(D::expand_bits(qh), _mm256_set1_epi8(0x10)));
      }
      for (int r = 0; r < R; ++r) {
        const int64_t m = m0 + r;
        const __m256i xv = load32(x.q + m * x.ldq + 32 * b);
        const float dx = x.d[m * x.ldd + b], s = dw * dx;
        acc[r][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(D::dot(q, xv)), _mm256_set1_ps(s), acc[r][p]);
        corr[r][p] += (Min ? mw * dx : s) *
                      static_cast<float>(x.bsum[m * x.ldb + 2 * b] + x.bsum[m * x.ldb + 2 * b + 1]);
      }
    });
    for (int r = 0; r < R; ++r) {
      float c = 0;
      for (int p = 0; p < P; ++p) c += corr[r][p];
      out[r] = hsum(fold<P>(acc[r])) - offset * c;
    }
  }

  template <int R, bool Five>
  static void q45_k(const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, float* out) {
    __m256 acc[R];
    float corr[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), corr[r] = 0;
    const __m256i lo4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    const int64_t nb = K / 256, bb = Five ? 176 : 144;
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = row + bb * b;
      const auto* u = reinterpret_cast<const uint8_t*>(blk);
      const float d = half_of(blk), dmin = half_of(blk + 2);
      const uint8_t* qs = u + (Five ? 48 : 16);
      __m256i qhv = _mm256_setzero_si256();
      if constexpr (Five) qhv = load32(u + 16);
      int sc[8], mn[8];
      for (int j = 0; j < 8; ++j) k_scale_min(u + 4, j, &sc[j], &mn[j]);
      __m256i iacc[R];
      for (int r = 0; r < R; ++r) iacc[r] = _mm256_setzero_si256();
      for (int jp = 0; jp < 4; ++jp) {
        const __m256i raw = load32(qs + 32 * jp);
        __m256i qa = _mm256_and_si256(raw, lo4);
        __m256i qb = _mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4);
        if constexpr (Five) {
          qa = _mm256_or_si256(qa,
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhv, 2 * jp), one), 4));
          qb = _mm256_or_si256(
              qb, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhv, 2 * jp + 1), one), 4));
        }
        const int sa = sc[2 * jp], sb = sc[2 * jp + 1];
        for (int r = 0; r < R; ++r) {
          const int8_t* xq = x.q + (m0 + r) * x.ldq + 256 * b + 64 * jp;
          iacc[r] = _mm256_add_epi32(iacc[r], D::dot_scaled(qa, load32(xq), sa, sa));
          iacc[r] = _mm256_add_epi32(iacc[r], D::dot_scaled(qb, load32(xq + 32), sb, sb));
        }
      }
      for (int r = 0; r < R; ++r) {
        const int64_t m = m0 + r;
        const float dx = x.d[m * x.ldd + b];
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(d * dx), acc[r]);
        const int32_t* bs = x.bsum + m * x.ldb + 16 * b;
        int32_t ms = 0;
        for (int j = 0; j < 8; ++j) ms += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
        corr[r] += dmin * dx * static_cast<float>(ms);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) - corr[r];
  }

  template <int R>
  static void q6_k(const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, float* out) {
    __m256 acc[R];
    float corr[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps(), corr[r] = 0;
    const __m256i lo4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
    const int64_t nb = K / 256;
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = row + 210 * b;
      const auto* u = reinterpret_cast<const uint8_t*>(blk);
      const uint8_t* ql = u;
      const uint8_t* qh = u + 128;
      const auto* sc = reinterpret_cast<const int8_t*>(u + 192);
      const float d = half_of(blk + 208);
      __m256i iacc[R];
      for (int r = 0; r < R; ++r) iacc[r] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i l0 = load32(ql + 64 * h), l1 = load32(ql + 64 * h + 32), hv = load32(qh + 32 * h);
        for (int t = 0; t < 4; ++t) {
          const __m256i l = t % 2 ? l1 : l0;
          const __m256i lo =
              t / 2 ? _mm256_and_si256(_mm256_srli_epi16(l, 4), lo4) : _mm256_and_si256(l, lo4);
          const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hv, 2 * t), three), 4);
          const __m256i q = _mm256_or_si256(lo, hi);
          const int c = 4 * h + t;
          for (int r = 0; r < R; ++r) {
            const int8_t* xq = x.q + (m0 + r) * x.ldq + 256 * b + 32 * c;
            iacc[r] = _mm256_add_epi32(iacc[r], D::dot_scaled(q, load32(xq), sc[2 * c], sc[2 * c + 1]));
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        const int64_t m = m0 + r;
        const float dx = x.d[m * x.ldd + b];
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(d * dx), acc[r]);
        const int32_t* bs = x.bsum + m * x.ldb + 16 * b;
        int32_t ms = 0;
        for (int g = 0; g < 16; ++g) ms += sc[g] * bs[g];
        corr[r] += 32.0f * d * dx * static_cast<float>(ms);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) - corr[r];
  }

  template <int R>
  static void row_r(KFormat f, const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, float* out) {
    switch (f) {
      case KFormat::q8_0:
        q8_0<R>(row, K, x, m0, out);
        break;
      case KFormat::q4_0:
        q_offset<R, KFormat::q4_0>(row, K, x, m0, out);
        break;
      case KFormat::q5_0:
        q_offset<R, KFormat::q5_0>(row, K, x, m0, out);
        break;
      case KFormat::q4_1:
        q_offset<R, KFormat::q4_1>(row, K, x, m0, out);
        break;
      case KFormat::q4_k:
        q45_k<R, false>(row, K, x, m0, out);
        break;
      case KFormat::q5_k:
        q45_k<R, true>(row, K, x, m0, out);
        break;
      case KFormat::q6_k:
        q6_k<R>(row, K, x, m0, out);
        break;
      default:
        break;
    }
  }

  static void row(KFormat f, const std::byte* rowp, int64_t K, const Q8KRows& x, int64_t m0, int R,
                  float* out) {
    switch (R) {
      case 1:
        row_r<1>(f, rowp, K, x, m0, out);
        break;
      case 2:
        row_r<2>(f, rowp, K, x, m0, out);
        break;
      case 3:
        row_r<3>(f, rowp, K, x, m0, out);
        break;
      default:
        row_r<4>(f, rowp, K, x, m0, out);
        break;
    }
  }

  // Weight rows [n0, n1) against one activation row (decode): the format chosen once, the row kernel
  // inlined into the loop (a call and two switches per row cost a third of a 640-wide Q8_0 row).
  template <typename Fn>
  static void each_row(int64_t n0, int64_t n1, float* y, bool accumulate, Fn fn) {
    float out[1];
    for (int64_t n = n0; n < n1; ++n) {
      fn(n, out);
      y[n] = accumulate ? y[n] + out[0] : out[0];
    }
  }
  // Listed rows against one activation row: the same row kernels as rows_m1 (the same values), the
  // bytes of the row kAhead places on prefetched (the rows are scattered: each is a fresh DRAM read).
  template <typename Fn>
  static void each_listed(const std::byte* w, int64_t rb, const int64_t* rows, int64_t count, float* y,
                          Fn fn) {
    constexpr int64_t kAhead = 12;
    float out[1];
    for (int64_t i = 0; i < count; ++i) {
      if (i + kAhead < count) {
        const char* p = reinterpret_cast<const char*>(w + rows[i + kAhead] * rb);
        for (int64_t o = 0; o < rb; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
        _mm_prefetch(p + rb - 1, _MM_HINT_T0);
      }
      fn(rows[i], out);
      y[rows[i]] = out[0];
    }
  }
  static void row_list(KFormat f, const std::byte* w, int64_t rb, const int64_t* rows, int64_t count,
                       int64_t K, const Q8KRows& x, float* y) {
    switch (f) {
      case KFormat::q8_0:
        each_listed(w, rb, rows, count, y, [&](int64_t n, float* o) { q8_0<1>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q4_0:
        each_listed(w, rb, rows, count, y,
                    [&](int64_t n, float* o) { q_offset<1, KFormat::q4_0>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q5_0:
        each_listed(w, rb, rows, count, y,
                    [&](int64_t n, float* o) { q_offset<1, KFormat::q5_0>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q4_1:
        each_listed(w, rb, rows, count, y,
                    [&](int64_t n, float* o) { q_offset<1, KFormat::q4_1>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q4_k:
        each_listed(w, rb, rows, count, y,
                    [&](int64_t n, float* o) { q45_k<1, false>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q5_k:
        each_listed(w, rb, rows, count, y,
                    [&](int64_t n, float* o) { q45_k<1, true>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q6_k:
        each_listed(w, rb, rows, count, y, [&](int64_t n, float* o) { q6_k<1>(w + n * rb, K, x, 0, o); });
        break;
      default:
        break;
    }
  }
  static void rows_m1(KFormat f, const std::byte* w, int64_t rb, int64_t n0, int64_t n1, int64_t K,
                      const Q8KRows& x, float* y, bool accumulate) {
    switch (f) {
      case KFormat::q8_0:
        each_row(n0, n1, y, accumulate, [&](int64_t n, float* o) { q8_0<1>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q4_0:
        each_row(n0, n1, y, accumulate,
                 [&](int64_t n, float* o) { q_offset<1, KFormat::q4_0>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q5_0:
        each_row(n0, n1, y, accumulate,
                 [&](int64_t n, float* o) { q_offset<1, KFormat::q5_0>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q4_1:
        each_row(n0, n1, y, accumulate,
                 [&](int64_t n, float* o) { q_offset<1, KFormat::q4_1>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q4_k:
        each_row(n0, n1, y, accumulate,
                 [&](int64_t n, float* o) { q45_k<1, false>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q5_k:
        each_row(n0, n1, y, accumulate, [&](int64_t n, float* o) { q45_k<1, true>(w + n * rb, K, x, 0, o); });
        break;
      case KFormat::q6_k:
        each_row(n0, n1, y, accumulate, [&](int64_t n, float* o) { q6_k<1>(w + n * rb, K, x, 0, o); });
        break;
      default:
        break;
    }
  }
};

}  // namespace
}  // namespace attn::kernels::cpu::detail

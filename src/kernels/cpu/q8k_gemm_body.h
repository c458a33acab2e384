// The tile loop of kernels/cpu/q8k_gemm.h, written once over a vector type D of 16 int32 / f32 lanes
// (one weight row each): q8k_gemm_avx512.cc (D = one zmm, vpdpbusd) and q8k_gemm_avx2.cc (D = two ymm,
// vpmaddubsw + vpmaddwd). D provides
//   I, F, W          int32 x16, f32 x16, the 64 weight bytes of one step (16 rows x 4 k)
//   W loadw(p)       W loadw4(p) (32 bytes of nibbles: byte i holds value i low, value i + 32 high)
//   W loadw6(p)      the nibbles of loadw4 and, in the 16 bytes after them, each value's two high bits
//                    (value i in byte i % 16, bits 2 (i / 16) and up) as bits 4-5
//   W loadw5(p)      the nibbles of loadw4 and, in the 8 bytes after them, each value's fifth bit (value
//                    i in bit i % 8 of byte i / 8) as bit 4
//   F loadu8(const uint8_t*)  F loadi8(const int8_t*)  (16 bytes -> f32)
//   I bcast_i(const int32_t*)   F loadf(p)  F loadh(const uint16_t*) (16 f16 -> f32)
//   F bcastf(const float*)
//   I dot<S8>(I acc, W w, const int8_t* x4)   acc + Σ over 4 k of w·x per row (S8: w holds q + 128 of
//                                             a signed quant and the kernel multiplies the signed q)
//   F cvt(I)  F fma(a, b, c) = a·b + c  F fnma(a, b, c) = c - a·b  F mul(a, b)  F zero()
//   void store(float* y, F v, int valid, bool accumulate)   lanes [0, valid)
//   kMR              tokens per tile (registers: 2 vectors per token)
//   kSigned8         whether dot<true> exists (the AVX2 kernel's Q8_0)
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/q8k_gemm.h"

namespace attn::kernels::cpu::detail {
namespace {

template <typename D>
struct Q8Gemm {
  using I = typename D::I;
  using F = typename D::F;
  using W = typename D::W;

  struct Tile {
    const uint8_t* pq;   // panel quants
    const uint8_t* ws;   // the weights' scales [G][16]: f32, f16 (kHalf) or bytes (k8: Q4_K u8, Q6_K i8)
    const uint8_t* wm;   // their mins [G][16] (kMins), the same type
    const uint16_t* wd;  // k8: the scales' and mins' f16 multipliers per 256 [K / 256][16]
    const uint16_t* wdm;
    int64_t G;
    int spg;           // 4-k steps per group
    const int8_t* xq;  // token m0's quants
    int64_t ldq;
    const int32_t* off;  // terms at token m0 (row stride G)
    const float* dx;
    const float* mn;
    float* y;  // y[m0, n]
    int64_t ldy;
    int valid;
    bool accumulate;
    bool first;  // the first tile of its token block over this panel
  };

  // The panel layout of a format, as template flags: mins (Q4_1 / Q4_K / Q5_K), signed Q8_0 quants (the
  // AVX2 kernel), f16 scales and mins (Q8_0 / Q4_0 / Q4_1 / Q5_0), quants as nibbles (Q4_0 / Q4_1 /
  // Q4_K: 32 bytes per 4-k step).
  // The K-quants' panels keep their blocks' 8-bit scales with f16 multipliers (k8: Q4_K, Q5_K, Q6_K);
  // Q6_K its quants as nibbles plus a plane of high bit pairs (k6), Q5_0 / Q5_K as nibbles plus a plane
  // of fifth bits (k5).
  enum : unsigned { kMins = 1, kSigned = 2, kHalf = 4, kNibbles = 8, k6 = 16, k8 = 32, k5 = 64 };

  template <int R, unsigned L>
  static void tile(const Tile& t) {
    constexpr bool K45 = L & kMins, S8 = L & kSigned, H16 = L & kHalf, N4 = L & kNibbles, B6 = L & k6,
                   SC8 = L & k8, B5 = L & k5;
    constexpr int64_t step_bytes = B6   ? 48
                                   : B5 ? 40
                                   : N4 ? 32
                                        : 64,
                      gps = B6 ? 16 : 8;  // groups per 256 (k8)
    F acc[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = D::zero();
    const uint8_t* pq = t.pq;
    for (int64_t g = 0; g < t.G; ++g) {
      I is[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) is[r] = D::bcast_i(t.off + r * t.G + g);
      const int64_t k0 = g * t.spg * 4;
      for (int s = 0; s < t.spg; ++s) {
        W w;
        if constexpr (B6)
          w = D::loadw6(pq);
        else if constexpr (B5)
          w = D::loadw5(pq);
        else if constexpr (N4)
          w = D::loadw4(pq);
        else
          w = D::loadw(pq);
        // the first tile of a token block streams the panel from memory faster than the hardware
        // prefetchers fetch it (they stop at 4 KiB pages): one line 4 KiB ahead per step (Qwen3-0.6B-
        // shaped Q4_K_M, one stream: +15-25%; SmolLM2 at 16 streams: +3-4%). Later tiles find the panel
        // in cache, and prefetching from them slows a prompt's tiles.
        if (t.first) __builtin_prefetch(pq + 4096);
        pq += step_bytes;
        const int8_t* xk = t.xq + k0 + 4 * s;
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) is[r] = D::template dot<S8>(is[r], w, xk + r * t.ldq);
      }
      F sv;
      if constexpr (SC8) {  // d · sc in f32: exact (an f16 times an integer below 2^7)
        const F sc =
            B6 ? D::loadi8(reinterpret_cast<const int8_t*>(t.ws) + g * 16) : D::loadu8(t.ws + g * 16);
        sv = D::mul(sc, D::loadh(t.wd + g / gps * 16));
      } else if constexpr (H16) {
        sv = D::loadh(reinterpret_cast<const uint16_t*>(t.ws) + g * 16);
      } else {
        sv = D::loadf(reinterpret_cast<const float*>(t.ws) + g * 16);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        acc[r] = D::fma(D::cvt(is[r]), D::mul(sv, D::bcastf(t.dx + r * t.G + g)), acc[r]);
      if constexpr (K45) {
        F ov;
        if constexpr (SC8)
          ov = D::mul(D::loadu8(t.wm + g * 16), D::loadh(t.wdm + g / gps * 16));
        else if constexpr (H16)
          ov = D::loadh(reinterpret_cast<const uint16_t*>(t.wm) + g * 16);
        else
          ov = D::loadf(reinterpret_cast<const float*>(t.wm) + g * 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r] = D::fnma(ov, D::bcastf(t.mn + r * t.G + g), acc[r]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) D::store(t.y + r * t.ldy, acc[r], t.valid, t.accumulate);
  }

  template <int R, unsigned L>
  static void tile_n(int n, const Tile& t) {
    if (n == R)
      tile<R, L>(t);
    else if constexpr (R > 1)
      tile_n<R - 1, L>(n, t);
  }

  // A batched decoding step's few rows take tiles of at most 8 tokens (16 rows: 8 + 8 rather than
  // 12 + 4; the 12-token tile also spills its accumulators around each group's scaling): SmolLM2 at 16
  // streams +2-20%, prompts no faster. Each row's sums are the same operations in any tile, so the
  // bits do not change.
  template <unsigned L>
  static void run_f(const Q8GemmArgs& a) {
    constexpr int kSmall = D::kMR < 8 ? D::kMR : 8;
    if (a.x->M <= 16)
      run_tiles<kSmall, L>(a);
    else
      run_tiles<D::kMR, L>(a);
  }

  template <int MR, unsigned L>
  static void run_tiles(const Q8GemmArgs& a) {
    constexpr int64_t TB = MR * 8;  // tokens per block: their quants stay in L2 while the panels pass
    const Q8KRows& x = *a.x;
    const int64_t gs = q8k_gemm_group(a.f), G = a.K / gs;
    const Q8PanelLayout lay = q8k_gemm_layout(a.f, a.K);
    Tile t{};
    t.G = G;
    t.spg = static_cast<int>(gs / 4);
    t.ldq = x.ldq;
    t.ldy = a.ldy;
    t.accumulate = a.accumulate;
    for (int64_t mb = 0; mb < x.M; mb += TB) {
      const int64_t me = std::min(x.M, mb + TB);
      for (int64_t p = 0; p < a.np; ++p) {
        const auto* base = reinterpret_cast<const uint8_t*>(a.panels + p * a.panel_bytes);
        t.pq = base;
        t.ws = base + lay.scales;
        t.wm = base + lay.mins;
        t.wd = reinterpret_cast<const uint16_t*>(base + lay.d);
        t.wdm = reinterpret_cast<const uint16_t*>(base + lay.dmin);
        const int64_t n = a.n0 + p * kQ8PanelRows;
        t.valid = static_cast<int>(std::min<int64_t>(kQ8PanelRows, a.N - n));
        for (int64_t m = mb; m < me; m += MR) {
          const int R = static_cast<int>(std::min<int64_t>(MR, me - m));
          t.xq = x.q + m * x.ldq;
          t.off = a.t->off.data() + m * G;
          t.dx = a.t->dx.data() + m * G;
          t.mn = a.t->mn.data() + m * G;
          t.y = a.y + m * a.ldy + n;
          t.first = m == mb;
          tile_n<MR, L>(R, t);
        }
      }
    }
  }

  static void run(const Q8GemmArgs& a) {
    switch (a.f) {
      case KFormat::q8_0:
        if constexpr (D::kSigned8) {
          if (a.t->signed_q8) {
            run_f<kSigned | kHalf>(a);
            return;
          }
        }
        run_f<kHalf>(a);
        return;
      case KFormat::q5_0:
        run_f<kHalf | k5>(a);
        return;
      case KFormat::q4_0:
        run_f<kHalf | kNibbles>(a);
        return;
      case KFormat::q4_1:
        run_f<kMins | kHalf | kNibbles>(a);
        return;
      case KFormat::q4_k:
        run_f<kMins | kNibbles | k8>(a);
        return;
      case KFormat::q5_k:
        run_f<kMins | k5 | k8>(a);
        return;
      default:  // Q6_K
        run_f<k6 | k8>(a);
        return;
    }
  }
};

}  // namespace
}  // namespace attn::kernels::cpu::detail

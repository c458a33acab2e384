// The tile loop of kernels/cpu/q8k_gemm.h, written once over a vector type D of 16 int32 / f32 lanes
// (one weight row each): q8k_gemm_avx512.cc (D = one zmm, vpdpbusd) and q8k_gemm_avx2.cc (D = two ymm,
// vpmaddubsw + vpmaddwd). D provides
//   I, F, W          int32 x16, f32 x16, the 64 weight bytes of one step (16 rows x 4 k)
//   W loadw(p)       I bcast_i(const int32_t*)   F loadf(p)  F bcastf(const float*)
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
    const uint8_t* pq;  // panel quants
    const float* ps;    // panel scales [G][16]
    const float* po;    // panel mins [G][16]
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
  };

  template <int R, bool K45, bool S8>
  static void tile(const Tile& t) {
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
        const W w = D::loadw(pq);
        pq += 64;
        const int8_t* xk = t.xq + k0 + 4 * s;
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) is[r] = D::template dot<S8>(is[r], w, xk + r * t.ldq);
      }
      const F sv = D::loadf(t.ps + g * 16);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        acc[r] = D::fma(D::cvt(is[r]), D::mul(sv, D::bcastf(t.dx + r * t.G + g)), acc[r]);
      if constexpr (K45) {
        const F ov = D::loadf(t.po + g * 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r] = D::fnma(ov, D::bcastf(t.mn + r * t.G + g), acc[r]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) D::store(t.y + r * t.ldy, acc[r], t.valid, t.accumulate);
  }

  template <int R, bool K45, bool S8>
  static void tile_n(int n, const Tile& t) {
    if (n == R)
      tile<R, K45, S8>(t);
    else if constexpr (R > 1)
      tile_n<R - 1, K45, S8>(n, t);
  }

  template <bool K45, bool S8>
  static void run_f(const Q8GemmArgs& a) {
    constexpr int MR = D::kMR;
    constexpr int64_t TB = MR * 8;  // tokens per block: their quants stay in L2 while the panels pass
    const Q8KRows& x = *a.x;
    const int64_t gs = q8k_gemm_group(a.f), G = a.K / gs;
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
        t.ps = reinterpret_cast<const float*>(base + kQ8PanelRows * a.K);
        t.po = t.ps + G * kQ8PanelRows;
        const int64_t n = a.n0 + p * kQ8PanelRows;
        t.valid = static_cast<int>(std::min<int64_t>(kQ8PanelRows, a.N - n));
        for (int64_t m = mb; m < me; m += MR) {
          const int R = static_cast<int>(std::min<int64_t>(MR, me - m));
          t.xq = x.q + m * x.ldq;
          t.off = a.t->off.data() + m * G;
          t.dx = a.t->dx.data() + m * G;
          t.mn = a.t->mn.data() + m * G;
          t.y = a.y + m * a.ldy + n;
          tile_n<MR, K45, S8>(R, t);
        }
      }
    }
  }

  static void run(const Q8GemmArgs& a) {
    const bool k45 = a.f == KFormat::q4_k || a.f == KFormat::q5_k;
    const bool s8 = a.f == KFormat::q8_0 && a.t->signed_q8;
    if constexpr (D::kSigned8) {
      if (s8) {
        run_f<false, true>(a);
        return;
      }
    }
    if (k45)
      run_f<true, false>(a);
    else
      run_f<false, false>(a);
  }
};

}  // namespace
}  // namespace attn::kernels::cpu::detail

// The screening copy of a Q8_0 vocabulary matrix for exact greedy decoding (issue 19, g19b; the op is
// ops::GreedyScreen in include/attn/ops/quantized.h).
//
// Every Q8_0 block of 32 weights w (w_i = d·q_i) is re-quantized to 5 bits: a scale s (an f16 rounded
// UP from max|w| / 15.5) and u_i = clamp(round(w_i / s) + 16, 0, 31), so ŵ_i = s·(u_i − 16) and
// |w_i − ŵ_i| <= s / 2 on every weight (no clipping beyond half a step). 22 bytes per 32 weights against
// Q8_0's 34: the greedy step reads 115 MB instead of 178 MB for Gemma 3's 262,144 × 640 tied embedding.
// Blocks go in pairs (K a multiple of 64). A row of nb = K / 32 blocks:
//   [nb·16 bytes of nibbles] [nb·4 bytes of fifth bits] [nb f16 scales]
// Pair p (blocks 2p, 2p+1): nibble bytes 32p.. 32p+31, byte j < 16: element j of block 2p (low nibble)
// and element 16 + j (high nibble); byte 16 + j: the same for block 2p+1. The pair's 64 unpacked bytes
// run [low nibbles (32) | high nibbles (32)], i.e. elements [2p: 0-15 | 2p+1: 0-15 | 2p: 16-31 |
// 2p+1: 16-31]; bit k of the pair's 8 bytes of fifth bits belongs to unpacked byte k. The activation row
// is reordered the same way once per call (ScreenX::xq).
//
// Against an activation row in Q8_0 blocks (x_i = dx_b·qx_i, exactly what the full product multiplies):
//   value = Σ_b s_b·(dx_b·Σ_i u_i·qx_i + g_b),     g_b = −16·dx_b·Σ_i qx_i (integer sums exact, f32 scaling)
//   bound = Σ_b s_b·hb_b,                          hb_b = (1/2 + 2^-9)·Σ_i |x_i| over block b
// Hölder per block: |Σ_i (w_i − ŵ_i)·x_i| <= (s_b / 2)·‖x_b‖₁, so |exact − value| <= bound. The 2^-9
// term covers the f32 rounding of both products and of value ± bound (each below 2^-18·Σ_b 47·s_b·‖x_b‖₁
// for these short sums; the margin is ~50×). Measured on Gemma 3 (a per-row Cauchy–Schwarz bound with
// ‖w − ŵ‖₂·‖x‖₂ prunes nothing at 5 bits: the hidden vector has a few huge coordinates, which Hölder
// per block keeps local).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn::kernels {

inline constexpr int64_t kScreenBlockBytes = 22;
inline constexpr double kScreenMargin = 1.0 / 512.0;  // the f32-rounding part of hb_b, times ‖x_b‖₁
// Outlier columns: kScreenOutliers columns O (chosen by the caller: where |x| is largest; Gemma 3's
// hidden vector keeps a few huge coordinates in fixed channels) get a correction of their 5-bit error,
// δ_j = w_j − ŵ_j ≈ t·c_j with int8 c_j and one f16 t per row (t rounded up from max|δ| / 127.5), so
// their part of the bound shrinks from s_b/2 to t/2 ≈ s_b/508. Then
//   value += t·Σ_{j∈O} c_j·x_j,   hb_b = ½·Σ_{i∈b, i∉O} |x_i| + 2^-9·Σ_{i∈b} |x_i|,   bound += t·ho,
//   ho = ½·Σ_{j∈O} |x_j|.
inline constexpr int64_t kScreenOutliers = 16;
// Bytes of one screen row of K weights (K a multiple of 64): the blocks, then c [16] and t (f16).
inline int64_t qscreen_row_bytes(int64_t K) { return K / 32 * kScreenBlockBytes + kScreenOutliers + 2; }

// One activation row prepared for the screen (qscreen_prepare): xq [K] the Q8_0 quants in the pair order
// above, d [K / 32] their scales, g [K / 32] and hb [K / 32] as above.
struct ScreenX {
  const int8_t* xq = nullptr;
  const float* d = nullptr;
  const float* g = nullptr;
  const float* hb = nullptr;
  const float* xo = nullptr;  // [kScreenOutliers] x at the outlier columns
  float ho = 0;
  int64_t K = 0;
};
// xq, g, hb, xo [16], ho from the row q [K], d [K / 32] (K a multiple of 64) and the outlier columns
// cols [16] (ascending, distinct, < K); false when a scale or a bound is not finite.
bool qscreen_prepare(const int8_t* q, const float* d, int64_t K, const int32_t* cols, int8_t* xq, float* g,
                     float* hb, float* xo, float* ho);

// The smallest f16 >= v (v finite, > 0), as bits; +inf when v is above the largest half.
uint16_t qscreen_f16_at_least(double v);

namespace cpu {
// Rows [n0, n1) of the screen (row stride qscreen_row_bytes(K)) from the Q8_0 rows w (34 bytes a block).
// False when a scale is not finite (the rows are then not usable). AVX-512 when active (the same bytes as
// the portable loop: the same f32 operations), else portable code.
bool qscreen_build(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                   std::byte* screen);
// Rows [n0, n1): value[n] and bound[n] as above, on the calling thread: AVX-512 VNNI when the active ISA is
// avx512 and the CPU has VNNI, AVX2 when avx2 or better, else the oracle.
void qscreen_rows(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                  float* bound);
// The rows n of [0, N) with value[n] + bound[n] >= lower (NaN included), ascending, into rows; returns
// their count.
int64_t qscreen_select(const float* value, const float* bound, int64_t N, float lower, int64_t* rows);
namespace detail {
bool qscreen_build_avx512(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen);
bool qscreen_build_scalar(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen);
// The outlier corrections of row n (c [16], t) from its stored blocks u (element order, K bytes) and
// scales; false when t is not finite.
bool qscreen_outliers(const std::byte* w, int64_t n, int64_t K, const int32_t* cols, const uint8_t* u,
                      std::byte* row);
void qscreen_rows_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound);
void qscreen_rows_avx2(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound);
}  // namespace detail
}  // namespace cpu

namespace ref {
// The oracle: the integer sums, then the scaling in double.
void qscreen_rows(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                  float* bound);
}  // namespace ref
}  // namespace attn::kernels

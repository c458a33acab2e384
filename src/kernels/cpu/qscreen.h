// The screening copy of a Q8_0 vocabulary matrix for exact greedy decoding (issue 19, g19b; the op is
// ops::GreedyScreen in include/attn/ops/quantized.h).
//
// Every Q8_0 block of 32 weights w (w_i = d·q_i) is re-quantized to 5 bits: a scale s (an f16 rounded
// UP from max|w| / 15.5) and u_i = clamp(round(w_i / s) + 16, 0, 31), so ŵ_i = s·(u_i − 16) and
// |w_i − ŵ_i| <= s / 2 on every weight (no clipping beyond half a step). 22 bytes per 32 weights against
// Q8_0's 34: the greedy step reads 115 MB instead of 178 MB for Gemma 3's 262,144 × 640 tied embedding.
// Blocks go in pairs (K a multiple of 64).
//
// Layout (g19c): rows go in panels of 16, so that one vpdpbusd multiplies 4 consecutive k of 16 rows by
// the same 4 activation bytes (broadcast) and every lane of the result belongs to one row: no per-pair
// scale permutes and no horizontal sums (the row-major layout of g19b spent half its instructions
// there). A panel of nb = K / 32 blocks, qscreen_panel_bytes(K) bytes (a multiple of 64), read front to
// back: the blocks in pairs of 704 bytes (11 cache lines), then the outlier corrections. Block b:
//   for each step s = 0..3 (k = 32b + 8s .. 32b + 8s + 7):
//     64 nibble bytes at qscreen_nib(b, s): byte 4r + i holds u(row r, k = 32b + 8s + i) in its low
//       nibble and u(r, 32b + 8s + 4 + i) in its high nibble (i = 0..3)
//     8 + 8 bytes of fifth bits at qscreen_bits(b, s): bit 4r + i of the first 8 = bit 4 of the
//       low-nibble u of byte 4r + i, of the second 8 the same for the high nibble
//   the scales at qscreen_scales(b): row r an f16 at 2·r
//   the outlier corrections at 352·nb: c(row r, outlier j) int8 at 16·j + r, then t(r) f16 at 256 + 2·r
// Rows past N in the last panel are zero (their values are computed and not stored).
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
inline constexpr int64_t kScreenPanel = 16;  // rows per panel
// Bytes of one panel of 16 rows (16 row_bytes, rounded up to a multiple of 64) and of a screen of N rows.
inline int64_t qscreen_panel_bytes(int64_t K) { return (kScreenPanel * qscreen_row_bytes(K) + 63) / 64 * 64; }
inline int64_t qscreen_nib(int64_t b, int64_t s) { return 704 * (b / 2) + 256 * (b % 2) + 64 * s; }
inline int64_t qscreen_bits(int64_t b, int64_t s) { return 704 * (b / 2) + 512 + 64 * (b % 2) + 16 * s; }
inline int64_t qscreen_scales(int64_t b) { return 704 * (b / 2) + 640 + 32 * (b % 2); }
inline int64_t qscreen_bytes(int64_t N, int64_t K) {
  return (N + kScreenPanel - 1) / kScreenPanel * qscreen_panel_bytes(K);
}

// One activation row prepared for the screen (qscreen_prepare): xq [K] the Q8_0 quants (in k order),
// d [K / 32] their scales, g [K / 32] and hb [K / 32] as above.
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
// Rows [n0, n1) of the screen (panels as above; qscreen_bytes(N, K) bytes, zeroed before the first call)
// from the Q8_0 rows w (34 bytes a block). False when a scale is not finite (the rows are then not
// usable). Calls on different panels may run concurrently (rows of one panel share bytes). AVX-512 when
// active (the same bytes as the portable loop: the same f32 operations), else portable code.
bool qscreen_build(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                   std::byte* screen);
// Rows [n0, n1): value[n] and bound[n] as above, on the calling thread: AVX-512 VNNI when the active ISA is
// avx512 and the CPU has VNNI, AVX2 when avx2 or better, else the oracle.
void qscreen_rows(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                  float* bound);
// The same for R activation rows xs[R] (one K): row r's values at value + r·ld and bounds at bound + r·ld
// (ld >= n1), each bit for bit what qscreen_rows gives it alone. With VNNI each panel is read from memory
// once for all R rows and unpacked once per 8 of them.
void qscreen_rows_multi(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX* xs, int64_t R,
                        float* value, float* bound, int64_t ld);
// The rows n of [0, N) with value[n] + bound[n] >= lower (NaN included), ascending, into rows (room for
// N + 1: the portable loop writes one past its last pick); returns their count. AVX-512 when active.
int64_t qscreen_select(const float* value, const float* bound, int64_t N, float lower, int64_t* rows);
// max(lower, max over n of value[n] − bound[n]) on [0, N), a NaN difference skipped (as std::max(l, NaN)
// is l): the best lower end of the exact logits. AVX-512 when active.
float qscreen_lower(const float* value, const float* bound, int64_t N, float lower);
namespace detail {
bool qscreen_build_avx512(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen);
bool qscreen_build_scalar(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen);
// The outlier corrections of row n (c [16], t as f16 bits) from its 5-bit quants u (element order, K
// bytes) and block scales sh [K / 32] (f16 bits); false when t is not finite.
bool qscreen_outliers(const std::byte* w, int64_t n, int64_t K, const int32_t* cols, const uint8_t* u,
                      const uint16_t* sh, int8_t* c, uint16_t* th);
// Writes row n's quants u [K], scales sh [K / 32], corrections c [16] and t into its panel.
void qscreen_store_row(std::byte* screen, int64_t n, int64_t K, const uint8_t* u, const uint16_t* sh,
                       const int8_t* c, uint16_t th);
void qscreen_rows_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound);
void qscreen_rows_multi_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX* xs, int64_t R,
                             float* value, float* bound, int64_t ld);
void qscreen_rows_avx2(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound);
float qscreen_lower_avx512(const float* value, const float* bound, int64_t N, float lower);
int64_t qscreen_select_avx512(const float* value, const float* bound, int64_t N, float lower, int64_t* rows);
float qscreen_lower_scalar(const float* value, const float* bound, int64_t N, float lower);
int64_t qscreen_select_scalar(const float* value, const float* bound, int64_t N, float lower, int64_t* rows);
}  // namespace detail
}  // namespace cpu

namespace ref {
// The oracle: the integer sums, then the scaling in double.
void qscreen_rows(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                  float* bound);
}  // namespace ref
}  // namespace attn::kernels

// Swin-style 2-D window attention, forward and backward.
//
// The tokens of a grid of Hg x Wg positions attend only to the tokens of
// their own non-overlapping M x M window, at cost O(N·M²) for N = Hg·Wg
// instead of O(N²). Built on attn::attention: the grid is partitioned into
// windows, the operator runs on [B·nW, H, M², D] with a u8 `allow` mask and
// the optional relative-position bias, and the partition is reversed.
//
// Shapes (row-major, outermost first):
//   q    [B, H,   Hg, Wg, D]
//   k, v [B, Hkv, Hg, Wg, D]   Hkv divides H (grouped-query heads, as in attention())
//   out  [B, H,   Hg, Wg, D]   f32 (f64 for f64 inputs)
//   lse  [B, H,   Hg, Wg]      log-sum-exp over the keys each token may attend to
//   bias [H or 1, M², M²]      optional; slot t = ty·M + tx inside a window; shared by all windows
//
// Semantics (the same as Swin Transformer's window and shifted-window attention):
//  * Padding. When Hg or Wg is not a multiple of M, the grid is padded at the
//    bottom / right to Hp x Wp, multiples of M. Padded positions are masked out
//    as keys and as queries; they never appear in the output. (Swin's detection
//    code pads with zero tokens that do take part as keys; masking them makes
//    the result independent of what a pad would hold.)
//  * Shift. With shift s > 0 the padded grid is rolled cyclically by −s in both
//    directions (token (y, x) moves to ((y − s) mod Hp, (x − s) mod Wp)) before
//    the partition. Tokens that wrapped around (y < s, or x < s) share windows
//    with tokens they were not next to; a token may attend to another only when
//    both wrapped, or both did not, in each direction (Swin's region labels).
//    Swin adds −100 to such logits; here they are masked exactly (−inf).
//  * Window larger than the grid: as Swin does, when min(Hg, Wg) <= M the window
//    is clamped to M = min(Hg, Wg) and the shift to 0. The bias must then be
//    sized for the clamped window; window_geometry() tells callers which it is.
//  * scale defaults to 1/sqrt(D). Every query sees at least itself, so no real
//    token has a fully masked row.
#pragma once

#include <attn/core/tensor.h>
#include <attn/ops/attention.h>

#include <cstdint>
#include <optional>

namespace attn {

struct WindowAttentionOptions {
  int64_t window = 7;           // M >= 1
  int64_t shift = 0;            // cyclic shift s, 0 <= s < M (Swin: M / 2 on every other block)
  std::optional<double> scale;  // default 1/sqrt(D)
  Tensor bias;                  // optional additive bias [H or 1, M², M²] (float), shared by all windows
  Backend backend = Backend::automatic;
};

// The partition actually used for an Hg x Wg grid (after Swin's clamp).
struct WindowGeometry {
  int64_t Hg, Wg;    // the grid
  int64_t window;    // M used (min(requested, Hg, Wg) when the grid is no larger than the window)
  int64_t shift;     // s used (0 after a clamp)
  int64_t Hp, Wp;    // padded grid, multiples of window
  int64_t nWh, nWw;  // windows per column / row; nW = nWh·nWw
  bool padded() const { return Hp != Hg || Wp != Wg; }
  // Whether the operator needs an allow mask (shift > 0 or padding).
  bool masked() const { return shift > 0 || padded(); }
};

// Validates window and shift (window >= 1, 0 <= shift < window) and applies the clamp.
WindowGeometry window_geometry(int64_t Hg, int64_t Wg, const WindowAttentionOptions& options);

struct WindowAttentionResult {
  Tensor out;  // [B, H, Hg, Wg, D]
  Tensor lse;  // [B, H, Hg, Wg]
};

WindowAttentionResult window_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const WindowAttentionOptions& options = {});

// Gradients of sum(dout · out), in grid layout: dq [B, H, Hg, Wg, D],
// dk, dv [B, Hkv, Hg, Wg, D]. `out` and `lse` are what window_attention()
// returned for the same inputs and options. (No gradient for the bias.)
AttentionGrads window_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                         const Tensor& lse, const Tensor& dout,
                                         const WindowAttentionOptions& options = {});

// Swin's relative-position bias: bias[h, i, j] = table[idx(i, j), h] with
// idx(i, j) = (yi − yj + M − 1)·(2M − 1) + (xi − xj + M − 1), where token
// t = y·M + x of an M x M window. `table` is [(2M − 1)², H], the layout of
// `relative_position_bias_table` in Swin checkpoints (pass table.transpose(0, 1)
// for a table stored [H, (2M − 1)²]). Returns f32 [H, M², M²]
// (f64 for an f64 table).
Tensor swin_relative_position_bias(const Tensor& table, int64_t window);

}  // namespace attn

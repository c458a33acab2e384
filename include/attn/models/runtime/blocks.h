// The shared inference blocks of the runtime (issue 37): what every decoder and the BERT encoders are
// composed of, written once. Row-wise work only, so a row's values do not depend on the rows it shares a
// call with (the runtime's batch invariance). The products go through ops::linear_rows
// (ops/weight_matrix.h) and attention through ops::paged_attention: those pick their kernels.
#pragma once

#include <attn/core/parallel.h>

#include <cstdint>
#include <span>
#include <vector>

namespace attn::models::runtime {

// fn(b, e) over rows [0, rows): split over the pool from 2 · grain rows (prompt chunks, and batched
// decoding steps of 16 sequences or more), else on the calling thread (one sequence's step).
template <class F>
void for_rows(int64_t rows, F&& fn, int64_t grain = 8) {
  if (rows >= 2 * grain && num_threads() > 1 && !in_parallel_for())
    parallel_for(rows, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
  else
    fn(0, rows);
}

// RMSNorm of `rows` rows of n: out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w (sum in double; out may be x).
void rms_norm_rows(const float* x, const float* w, int64_t rows, int64_t n, double eps, float* out);

// LayerNorm of `rows` rows of n in place, after adding a residual branch y [rows, n] and a bias [n] (each
// optional, null): h = LayerNorm(h + y + bias) · w + b, biased variance, eps inside the square root, f32
// (ops::residual_layer_norm's vector kernels). The BERT encoders' embedding and post-layer norms.
void layer_norm_rows(float* h, const float* y, const float* bias, const float* w, const float* b,
                     int64_t rows, int64_t n, double eps);

// An embedding row as the sum of table rows (word + position + token type): out[i] = parts[0][i] +
// parts[1][i] + ..., in f32, left to right; parts[0] may be out itself (a row its table wrote there).
void sum_rows(std::span<const float* const> parts, int64_t n, float* out);

// Rotary position embedding. `pairs`: dimensions (2i, 2i+1) rotate together (GGUF's llama layout, whose
// converter permutes q and k for it); `halves`: i and i + dims/2 (NeoX; Qwen, Gemma, Phi-3). The first
// `dims` of each head's D rotate (partial rotary when dims < D).
enum class RopeStyle { pairs, halves };

struct Rope {
  RopeStyle style = RopeStyle::pairs;
  int64_t dims = 0;              // rotated dimensions, even, <= D
  std::vector<double> inv_freq;  // [dims / 2]: base^(−2i/dims) / factor_i
  double position_scale = 1.0;   // linear RoPE scaling: positions · 1/factor

  static Rope make(RopeStyle style, int64_t dims, double base, std::span<const float> freq_factors = {},
                   double linear_factor = 1.0);
  // cos / sin of each row's position: [rows, dims / 2] each (resized).
  void tables(const int64_t* positions, int64_t rows, std::vector<float>& cs, std::vector<float>& sn) const;
  // x [rows, heads, D] rotated in place on rows [r0, r1) with those tables.
  void apply(float* x, int64_t r0, int64_t r1, int64_t heads, int64_t D, const float* cs,
             const float* sn) const;
};

enum class Activation { silu, gelu_tanh };
// g[i] = act(g[i]) · u[i] for i in [0, n).
void gated_activation(Activation act, float* g, const float* u, int64_t n);
// x[i] = c · tanh(x[i] / c) (c > 0).
void soft_cap(float* x, int64_t n, float c);

}  // namespace attn::models::runtime

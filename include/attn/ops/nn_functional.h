// Differentiable neural-network ops: embeddings and positions, norms,
// activations, dropout, softmax, cross-entropy and attention.
//
// Same conventions as include/attn/ops/basic.h: f32 (fp32 compute) or f64
// (double, for gradient checks) inputs sharing one dtype, any strides,
// attn::Error with expected vs actual on bad input, a backward recorded when
// grad mode is on and an input requires grad. "Rows" are the last dim: an op
// on x [..., C] treats x as [rows, C].
#pragma once

#include <attn/core/tensor.h>
#include <attn/ops/attention.h>

#include <cstdint>
#include <string_view>

namespace attn {

// ---- embeddings and positions ------------------------------------------------------
// out[..., :] = table[ids[...], :]: ids [...] i64 or i32, table [V, C] -> [..., C].
// An id outside [0, V) throws attn::Error naming the id and V. Differentiable in table.
Tensor embedding(const Tensor& ids, const Tensor& table);

// [offset, offset + 1, ..., offset + L - 1] as i64 [L]. Learned positions are
// embedding(position_ids(L, offset), pos_table).
Tensor position_ids(int64_t L, int64_t offset = 0);

// Sinusoidal positions ("Attention Is All You Need"), a constant [L, C]:
//   PE(pos, 2i) = sin(pos / 10000^(2i / C)),  PE(pos, 2i + 1) = cos(pos / 10000^(2i / C)),
// for pos = offset + row. Odd C is allowed (the last column is a sine).
Tensor sinusoidal_positions(int64_t L, int64_t C, int64_t offset = 0, DType dtype = DType::f32);

// Rotary position embedding on x [..., L, D] (D even). Position of row l is
// offset + l (offset = tokens already in the KV cache when decoding). Pair i
// (i < D/2) rotates by angle pos · base^(-2i / D):
//   interleaved: dims (2i, 2i + 1)      (RoFormer, GPT-J, Meta's Llama code)
//   half_split:  dims (i, i + D/2)      (GPT-NeoX, Hugging Face Llama "rotate_half")
enum class RopeLayout { interleaved, half_split };
struct RopeOptions {
  RopeLayout layout = RopeLayout::half_split;
  double base = 10000.0;
  int64_t offset = 0;
};
Tensor rope(const Tensor& x, const RopeOptions& options = {});

// ---- norms ----------------------------------------------------------------------------
// y = (x - mean) / sqrt(var + eps) · weight + bias over the last dim (biased
// variance). x [..., C]; weight, bias [C], each optional (undefined = 1 / 0).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// y = x / sqrt(mean(x²) + eps) · weight over the last dim. weight [C] optional.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);

// ---- activations ------------------------------------------------------------------------
Tensor relu(const Tensor& x);
// approximate: "none" (exact: x · Φ(x) with erf; "erf" is accepted too) or "tanh"
// (0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))), PyTorch's names.
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor silu(const Tensor& x);  // x · sigmoid(x)
// silu(a) · b; a and b have the same shape (the two halves of a gated FFN).
Tensor swiglu(const Tensor& a, const Tensor& b);

// Training only: zeroes each element with probability p (a pure function of
// (seed, flat index)) and scales survivors by 1/(1 - p). Returns x itself when
// !train or p == 0. p in [0, 1).
Tensor dropout(const Tensor& x, double p, bool train, uint64_t seed);
// dropout(relu(x), p, train, seed) in one pass (forward and backward), the same bits.
Tensor relu_dropout(const Tensor& x, double p, bool train, uint64_t seed);
// r + dropout(x, p, train, seed) in one pass (a residual connection), the same bits; r broadcasts
// as in add() (then as two operations).
Tensor add_dropout(const Tensor& r, const Tensor& x, double p, bool train, uint64_t seed);

// ---- softmax and losses -------------------------------------------------------------------
// Over the last dim. A row of all -inf gives 0 (softmax) / -inf (log_softmax), never NaN.
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);

struct CrossEntropyOptions {
  int64_t ignore_index = -100;   // targets equal to it contribute nothing (padding)
  double label_smoothing = 0.0;  // in [0, 1], as in PyTorch
};
// Mean over non-ignored rows of (1 - ε) · (-log p[t]) + ε · mean_v(-log p[v]),
// p = softmax(logits row): logits [N, V], targets [N] i64 or i32. A target
// outside [0, V) (and not ignore_index) throws attn::Error naming it and V.
// When every target is ignored the loss is 0 with zero gradients (PyTorch
// returns NaN). Differentiable in logits; returns a rank-0 tensor.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options = {});

// ---- attention ------------------------------------------------------------------------------
// The attention operator (include/attn/ops/attention.h) as a differentiable
// op: returns out [B, H, Lq, D] and records a backward that calls
// attn::attention_backward with the saved out and lse. q, k, v are
// differentiable; the masks (allow, bias) are constants. options.capture is
// ignored (use attn::attention for weights).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace attn

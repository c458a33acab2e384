// The attention operator: Attention(Q, K, V) = softmax(Q Kᵀ · scale + mask) V.
//
// Shapes (row-major, outermost first):
//   q    [B, H,   Lq, D]
//   k, v [B, Hkv, Lk, D]      Hkv divides H: query head h reads kv head h / (H / Hkv)
//   out  [B, H,   Lq, D]
//   lse  [B, H,   Lq]         log-sum-exp of the masked, scaled (and soft-capped) logits
// Inputs may be non-contiguous views. f32 inputs compute in fp32 and return
// f32; f64 inputs run the reference in f64. bf16 inputs return f32: on a CPU
// with AVX512_BF16 the fused forward multiplies in bf16 (Q·Kᵀ and P·V with
// bf16 products, P rounded to bf16, fp32 softmax and accumulation; error
// ~2^-9·max|v|), otherwise and in the backward they are widened to fp32.
//
// Semantics fixed once for the whole engine:
//  * scale defaults to 1/sqrt(D).
//  * Logit of query i, key j:  s = scale · q_i·k_j; with softcap c > 0,
//    s = c · tanh(s / c); then + bias[b,h,i,j]. A position is masked (logit −inf)
//    when allow[b,h,i,j] is false, j ≥ key_lengths[b], the causal rule or the
//    window excludes it, or the bias is −inf there.
//  * Diagonal alignment, shared by causal and window: query i sits at key
//    position p(i) = i (Align::top_left, PyTorch's is_causal) or
//    p(i) = i + Lk − Lq (Align::bottom_right, FlashAttention ≥ 2.1, what
//    KV-cache decoding needs). Causal keeps j ≤ p(i). Window (left, right)
//    keeps p(i) − left ≤ j ≤ p(i) + right; −1 means unbounded on that side.
//  * `allow` is boolean (dtype u8, nonzero = may attend); `bias` is additive
//    float. Both broadcast (numpy rules) to [B, H, Lq, Lk].
//  * A fully masked query row gives output 0, lse −inf and zero gradients;
//    never NaN.
//  * NaN propagates: a NaN logit at an unmasked position (a NaN in q, k or
//    the bias) makes that query row's output and lse NaN in every backend and
//    on every instruction set, also when every logit of the row is NaN; a NaN
//    at a masked position is ignored. A NaN in v reaches the output through
//    the weighted sum. Nothing is clamped to 0. (Inference-only decode kernels
//    follow the same rule.)
//  * Dropout (training only) drops probabilities after the softmax with
//    probability p and scales survivors by 1/(1−p). The keep decision is a
//    pure function of (seed, b, h, i, j), so every backend and the backward
//    pass agree exactly. lse and captured weights are pre-dropout.
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace attn {

enum class Align { top_left, bottom_right };

enum class Backend {
  automatic,  // the fused CPU kernel where it applies, else the reference
  reference,  // scalar code that reads like the formula; the oracle
  fused,      // tiled online-softmax CPU kernel (throws if it cannot run the call)
};

// Which exact attention probabilities to return. Empty lists mean "all".
struct WeightCapture {
  bool enabled = false;
  std::vector<int64_t> batches;  // indices into B
  std::vector<int64_t> heads;    // indices into H (query heads)
  std::vector<int64_t> rows;     // indices into Lq
};

struct AttentionOptions {
  std::optional<double> scale;  // default 1/sqrt(D)
  bool causal = false;
  Align align = Align::top_left;     // for causal and window
  int64_t window_left = -1;          // −1: unbounded
  int64_t window_right = -1;         // −1: unbounded
  std::vector<int64_t> key_lengths;  // empty, or B values in [0, Lk]
  Tensor allow;                      // u8, broadcastable to [B, H, Lq, Lk]; undefined = none
  Tensor bias;                       // f32, broadcastable to [B, H, Lq, Lk]; undefined = none
  double softcap = 0.0;              // > 0 enables c·tanh(s/c)
  double dropout_p = 0.0;            // in [0, 1); training only
  uint64_t dropout_seed = 0;
  WeightCapture capture;
  Backend backend = Backend::automatic;
};

struct AttentionResult {
  Tensor out;      // [B, H, Lq, D]  f32 (f64 for f64 inputs)
  Tensor lse;      // [B, H, Lq]     f32 (f64 for f64 inputs)
  Tensor weights;  // [nb, nh, nr, Lk] exact probabilities, when capture.enabled
};

struct AttentionGrads {
  Tensor dq;  // [B, H, Lq, D]
  Tensor dk;  // [B, Hkv, Lk, D]
  Tensor dv;  // [B, Hkv, Lk, D]
};

AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionOptions& options = {});

// attention() writing the output into the caller's `out` instead of a new tensor: out is
// [B, H, Lq, D] of the result dtype (f32; f64 for f64 inputs) with unit stride in D and rows that do
// not overlap, in any other layout, e.g. a [B, Lq, H, D] buffer seen through a transpose (the layout
// torch's SDPA returns, so the model's transpose-and-reshape after it copies nothing). The result's
// `out` is that tensor; lse and weights are allocated as in attention().
AttentionResult attention_into(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const AttentionOptions& options = {});

// Gradients of sum(dout · out). `out` and `lse` are what attention() returned
// for the same inputs and options; probabilities are recomputed from lse.
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& lse, const Tensor& dout,
                                  const AttentionOptions& options = {});

// The backend `automatic` would pick for these inputs and options, and why
// (for `attn explain --cost`).
struct BackendChoice {
  Backend backend;
  std::string reason;
};
BackendChoice choose_backend(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options);
// "automatic", "reference" or "fused".
const char* backend_name(Backend b);

// The dropout keep rule, exposed so tests and other backends share it:
// true when element (b, h, i, j) survives dropout with probability 1 − p.
bool dropout_keep(uint64_t seed, int64_t b, int64_t h, int64_t i, int64_t j, double p);

}  // namespace attn

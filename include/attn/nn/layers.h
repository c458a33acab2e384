// Building blocks of the Transformer: Linear, Embedding, LayerNorm, RMSNorm,
// FeedForward and MultiHeadAttention (self- and cross-attention, GQA, RoPE,
// masks, captured weights, KV cache). All compute in f32 through the
// differentiable ops of include/attn/ops (no kernels of their own).
#pragma once

#include <attn/nn/module.h>
#include <attn/ops/attention.h>
#include <attn/ops/nn_functional.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attn::nn {

// y = x Wᵀ + b. weight [out, in] (Xavier uniform), bias [out] (zeros).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, InitRng& rng);
  Tensor forward(const Tensor& x) const;  // x: [..., in] -> [..., out]
  Tensor& weight() { return weight_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Tensor weight_, bias_;
};

// Table lookup. weight [V, C] initialised N(0, init_std²).
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t dim, double init_std, InitRng& rng);
  // ids: [...] i64/i32 -> [..., C]; ids must already be validated (see check_token_ids).
  Tensor forward(const Tensor& ids) const;
  const Tensor& weight() const { return weight_; }
  int64_t vocab() const { return weight_.size(0); }

 private:
  Tensor weight_;
};

// Throws attn::Error naming the first id outside [0, vocab), its position
// [b, l] and the vocabulary size. ids: [B, L] i64 or i32. `what` prefixes the message.
void check_token_ids(const Tensor& ids, int64_t vocab, const std::string& what);

enum class NormKind { layer_norm, rms_norm };

// LayerNorm (weight 1, bias 0, eps 1e-5) or RMSNorm (weight 1, eps 1e-6) over the last dim.
class Norm : public Module {
 public:
  Norm(NormKind kind, int64_t dim, double eps);
  Tensor forward(const Tensor& x) const;

 private:
  NormKind kind_;
  double eps_;
  Tensor weight_, bias_;
};

enum class Activation { relu, gelu, swiglu };

// relu/gelu: w2(act(w1 x)); swiglu: w2(silu(w1 x) · w3 x). Dropout on the hidden activation.
class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, Activation act, bool bias, double dropout, InitRng& rng,
              uint64_t dropout_seed);
  Tensor forward(const Tensor& x);  // x: [B, L, d_model] -> [B, L, d_model]

 private:
  Activation act_;
  double dropout_;
  DropoutSeeds seeds_;
  Linear w1_, w2_;
  std::optional<Linear> w3_;
};

// Keys and values of one attention layer so far: k, v [B, Hkv, L, D].
// Self-attention appends the new positions (concat along L) at each step;
// cross-attention fills it once from the memory and then reuses it.
//
// Without autograd (grad mode off, i.e. inference), self-attention appends in
// place instead: k and v are then views [B, Hkv, 0:L, D] of buffers with room
// for more positions (capacity doubling), so a step copies only its own
// positions instead of the whole cache.
struct KVCache {
  Tensor k, v;
  Tensor k_buf, v_buf;  // [B, Hkv, capacity, D] when appended in place; k, v view into them
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
  void clear() { k = Tensor(), v = Tensor(), k_buf = Tensor(), v_buf = Tensor(); }
  // Appends k_new, v_new [B, Hkv, n, D] in place (no autograd); k, v become views of the buffers.
  void append(const Tensor& k_new, const Tensor& v_new);
};

struct MhaConfig {
  int64_t d_model = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // 0 = heads
  bool bias = true;
  double dropout = 0.0;  // on attention probabilities (training only)
  bool rope = false;     // rotary positions on q and k (self-attention)
  RopeOptions rope_options;
};

struct MhaCall {
  bool causal = false;                // causal over keys (aligned bottom-right: KV-cache safe)
  std::vector<int64_t> key_lengths;   // empty or B values: keys j >= key_lengths[b] are masked
  int64_t position = 0;               // position of the first query (rope offset when decoding)
  bool capture = false;               // return exact attention weights
  std::vector<int64_t> capture_rows;  // query rows to capture (empty = all)
};

struct MhaResult {
  Tensor out;      // [B, Lq, d_model]
  Tensor weights;  // [B, H, rows, Lk] when MhaCall::capture
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(const MhaConfig& config, InitRng& rng, uint64_t dropout_seed);
  // x: [B, Lq, C] queries; memory: [B, Lk, C] keys/values (undefined = x, self-attention).
  // With a cache: self-attention appends this call's k/v to it and attends to
  // all of it; cross-attention computes k/v from memory once (when the cache is
  // empty) and reuses them afterwards (memory may then be undefined).
  MhaResult forward(const Tensor& x, const Tensor& memory, const MhaCall& call, KVCache* cache = nullptr,
                    bool cross = false);
  const MhaConfig& config() const { return config_; }

 private:
  // [B, L, n*D] -> [B, n, L, D]
  Tensor split_heads(const Tensor& t, int64_t n) const;
  MhaConfig config_;
  int64_t head_dim_;
  DropoutSeeds seeds_;
  Linear w_q_, w_k_, w_v_, w_o_;
};

}  // namespace attn::nn

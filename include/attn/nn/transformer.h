// Transformer layers and stacks: EncoderLayer (self-attention + FFN),
// DecoderLayer (masked self-attention, optional cross-attention, FFN), and
// the Encoder / Decoder stacks (N layers + a final norm when pre-norm).
//
//   post-norm (the paper): x = norm1(x + drop(attn(x)));  x = norm2(x + drop(ffn(x)))
//   pre-norm:              x = x + drop(attn(norm1(x)));  x = x + drop(ffn(norm2(x)))
//
// Parameter names: self_attn.{w_q,w_k,w_v,w_o}.{weight,bias}, cross_attn.*,
// ffn.{w1,w2,w3}.*, norm1/norm2/norm3.{weight,bias}; stacks: layers.<i>.*, norm.*
#pragma once

#include <attn/nn/layers.h>

#include <memory>
#include <string>
#include <vector>

namespace attn::nn {

struct LayerConfig {
  int64_t d_model = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // 0 = heads
  int64_t d_ff = 0;
  double dropout = 0.0;            // residual and FFN dropout
  double attention_dropout = 0.0;  // on attention probabilities
  Activation activation = Activation::relu;
  NormKind norm = NormKind::layer_norm;
  double norm_eps = 1e-5;
  bool pre_norm = false;
  bool bias = true;  // biases in the attention and FFN projections
  bool rope = false;
  RopeOptions rope_options;
};

// Named intermediate tensors recorded by a forward pass (for parity tests and
// debugging): "<prefix>layers.<i>" after each layer, "<prefix>norm" after the final norm.
using Trace = NamedParams;

// What a forward pass asks of the attention layers.
struct AttentionCall {
  std::vector<int64_t> key_lengths;     // self-attention key padding (empty: none)
  std::vector<int64_t> memory_lengths;  // cross-attention key padding (empty: none)
  int64_t position = 0;                 // position of the first query (decoding with a cache)
  bool capture = false;                 // capture self-attention weights per layer
  std::vector<int64_t> capture_rows;    // which query rows (empty = all)
  bool capture_cross = false;           // capture cross-attention weights (all rows)
};

class EncoderLayer : public Module {
 public:
  EncoderLayer(const LayerConfig& c, InitRng& rng, uint64_t seed);
  // x: [B, L, C] -> [B, L, C]; weights (if non-null and call.capture): [B, H, rows, L].
  Tensor forward(const Tensor& x, const AttentionCall& call, Tensor* weights = nullptr);

 private:
  LayerConfig c_;
  DropoutSeeds seeds_;
  MultiHeadAttention self_attn_;
  FeedForward ffn_;
  Norm norm1_, norm2_;
};

// Per-layer caches of a decoder: self[i] grows by the new positions, cross[i]
// holds the memory's keys/values (computed at the first step).
struct DecoderCache {
  std::vector<KVCache> self, cross;
  int64_t position = 0;  // tokens already decoded
  void clear() { self.clear(), cross.clear(), position = 0; }
  // Keeps batch rows `rows` (in that order; repeats allowed) of every cached
  // k/v: row i of the result is old row rows[i]. Beam search reorders with it
  // and drops finished sequences. Throws on a row outside [0, B).
  void select_rows(const std::vector<int64_t>& rows);
};

class DecoderLayer : public Module {
 public:
  // cross = false: a decoder-only layer (no cross-attention, no norm3).
  DecoderLayer(const LayerConfig& c, bool cross, InitRng& rng, uint64_t seed);
  // x: [B, Lq, C]; memory: [B, Ls, C] (cross only; may be undefined when the
  // cross cache is filled). Self-attention is causal. cross_weights (if
  // non-null and call.capture_cross): [B, H, Lq, Ls].
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionCall& call,
                 KVCache* self_cache = nullptr, KVCache* cross_cache = nullptr, Tensor* weights = nullptr,
                 Tensor* cross_weights = nullptr);

 private:
  LayerConfig c_;
  bool cross_;
  DropoutSeeds seeds_;
  MultiHeadAttention self_attn_;
  std::unique_ptr<MultiHeadAttention> cross_attn_;
  FeedForward ffn_;
  Norm norm1_, norm2_;
  std::unique_ptr<Norm> norm3_;
};

class Encoder : public Module {
 public:
  Encoder(const LayerConfig& c, int64_t layers, InitRng& rng, uint64_t seed);
  // x: [B, L, C] (embedded) -> [B, L, C]. weights (optional): one [B, H, rows, L] per layer.
  Tensor forward(const Tensor& x, const AttentionCall& call, Trace* trace = nullptr,
                 const std::string& prefix = "", std::vector<Tensor>* weights = nullptr);
  // Layers [begin, end) only (the final norm of a pre-norm stack when end == num_layers()):
  // forward() equals forward_layers(x, call, 0, num_layers()). Fine-tuning with frozen lower
  // layers runs [0, k) once and [k, n) every step.
  Tensor forward_layers(const Tensor& x, const AttentionCall& call, int64_t begin, int64_t end);
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

 private:
  bool pre_norm_;
  std::vector<std::unique_ptr<EncoderLayer>> layers_;
  std::unique_ptr<Norm> norm_;
};

class Decoder : public Module {
 public:
  Decoder(const LayerConfig& c, int64_t layers, bool cross, InitRng& rng, uint64_t seed);
  // x: [B, Lq, C] (embedded); memory [B, Ls, C] or undefined; cache optional
  // (when given, call.position must equal cache->position; it is advanced by Lq).
  // last_cross_weights (if non-null and call.capture_cross): the last layer's
  // cross-attention weights [B, H, Lq, Ls].
  Tensor forward(const Tensor& x, const Tensor& memory, const AttentionCall& call,
                 DecoderCache* cache = nullptr, Trace* trace = nullptr, const std::string& prefix = "",
                 Tensor* last_cross_weights = nullptr);
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  // forward() without a cache, returning every layer's attention weights:
  // self_weights [B, H, Lq, Lq] and cross_weights [B, H, Lq, Ls] (cross decoders) per layer.
  Tensor forward_with_weights(const Tensor& x, const Tensor& memory, const AttentionCall& call,
                              std::vector<Tensor>* self_weights, std::vector<Tensor>* cross_weights);

 private:
  bool pre_norm_;
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  std::unique_ptr<Norm> norm_;
};

}  // namespace attn::nn

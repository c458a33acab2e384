// The runtime's decoder (issue 37): one pre-norm Transformer decoder composed from the shared blocks
// (runtime/blocks.h), the product entry (ops/weight_matrix.h) and the paged attention entry
// (ops/paged_attention.h), configured per architecture from a GGUF file. An architecture is a
// DecoderConfig (read from the file's metadata) and the GGUF tensor names — not another engine:
//
//   llama            (Llama 2/3, SmolLM2, Mistral: llama.cpp writes them all as `llama`) RMSNorm, RoPE
//                    on pairs (the converter's permuted q/k), SwiGLU; rope_freqs.weight (Llama 3's
//                    scaled frequencies) and linear RoPE scaling when the file has them
//   qwen2            RoPE on halves, biases on q, k and v
//   qwen3            RoPE on halves, RMSNorm of each head of q and k before RoPE
//   phi3             RoPE on halves (partial when rope.dimension_count < D), fused qkv and gate-up
//                    matrices (split at load by rows, no copy), a sliding window when the file sets one
//   gemma2, gemma3   embeddings ·√C, GeGLU (tanh), norms after attention and the FFN too, attention
//                    scale 1/√query_pre_attn_scalar, sliding layers (gemma2 every other one; gemma3 by
//                    its pattern, with its own local RoPE base), soft caps; gemma3 also q/k norms
//
// Weight types: what ops::WeightMatrix takes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
// Q6_K); other types, unknown or missing tensors and wrong shapes are refused naming the tensor.
#pragma once

#include <attn/io/gguf.h>
#include <attn/models/layer_trace.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/runtime/blocks.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attn::models::runtime {

struct DecoderConfig {
  std::string arch;  // general.architecture
  int64_t vocab = 0, context = 0, dim = 0, layers = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double norm_eps = 1e-5;
  RopeStyle rope_style = RopeStyle::pairs;
  int64_t rope_dims = 0;            // rotated dims of a head (D unless partial)
  double rope_base = 10000.0;       // full-attention layers
  double rope_base_local = 0.0;     // sliding layers (0: rope_base)
  double rope_linear_factor = 1.0;  // full-attention layers: positions / factor
  std::vector<int64_t> windows;     // per layer: 0 = full attention, W = a query sees W positions
  float attn_scale = 0.0f;          // multiplies q·k (0: 1/√D)
  float attn_softcap = 0.0f, final_softcap = 0.0f;
  float embed_scale = 1.0f;
  Activation activation = Activation::silu;
  bool qk_norm = false, post_norms = false, qkv_bias = false;
  bool fused_qkv = false, fused_gate_up = false;

  // The config of a supported architecture, or attn::Error naming the file, the key and what is
  // supported.
  static DecoderConfig from_gguf(const io::GgufFile& file);
  void validate() const;
  bool sliding(int64_t layer) const { return windows[static_cast<std::size_t>(layer)] > 0; }
};

// "llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3".
const std::vector<std::string>& decoder_architectures();

// Quantization at load (issue 38): every f32 (F32 / F16 / BF16 in the file) 2-D weight matrix but the
// embeddings table — q, k, v, o, gate, up, down and an untied output matrix — converted to Q8_0 or
// Q4_0 blocks held by the decoder (ops::quantize_blocks), so they run through the quantized products
// (8-bit activations where the CPU has the vector kernel). Matrices already quantized in a GGUF stay
// as they are, and so do norms, biases, the embeddings (a tied output too) and any matrix whose K is
// not a multiple of 32.
enum class LoadQuant { none, q8_0, q4_0 };
// "none", "q8_0", "q4_0".
const char* load_quant_name(LoadQuant q);
// The LoadQuant named by s ("none", "q8_0", "q4_0"; also "Q8_0", "Q4_0"); attn::Error naming the
// choices otherwise.
LoadQuant parse_load_quant(const std::string& s);

struct DecoderOptions {
  int64_t max_context = 0;  // 0: the file's context
  LoadQuant quantize = LoadQuant::none;
  // 8-bit activations against quantized weights where the CPU has a vector kernel (ops::linear_rows);
  // false keeps f32 activations (slower; for comparisons with a reference that does not round them).
  bool activations_8bit = true;
  // Greedy picks (BatchEntry::greedy) through ops::GreedyPicker: the screened vocabulary product where
  // ops says it applies and pays, after this many full picks (0: from the first; < 0: never).
  int64_t greedy_screen_after = 128;
  // false: the screen wherever it applies, also where it is slower than the full product (tests).
  bool greedy_screen_only_where_fast = true;
};

class Decoder : public BatchDecoder {
 public:
  // `file` must outlive the decoder (its quantized blocks are read in place).
  static std::unique_ptr<Decoder> load(const io::GgufFile& file, const DecoderOptions& options = {});
  // A Hugging Face folder (config.json + model.safetensors, or shards named by
  // model.safetensors.index.json; f32, f16 or bf16 weights, kept as f32) of model_type llama, mistral,
  // qwen2, qwen3, phi3, gemma2 or gemma3_text; RoPE on halves as transformers computes it (no
  // permutation), Llama 3 scaling from rope_scaling / rope_parameters.
  static std::unique_ptr<Decoder> load_hf(const std::string& folder, const DecoderOptions& options = {});
  ~Decoder() override;

  const DecoderConfig& config() const;
  // Bytes of the weights the products and the embedding lookup read (ops::WeightMatrix::weight_bytes
  // of every matrix, 4 per value of every norm and bias): what quantization at load shrinks.
  int64_t weight_bytes() const;
  int64_t batch_vocab() const override;
  int64_t batch_context() const override;
  KvCacheConfig kv_layout() const override;
  void forward_batch(PagedKvCache& cache, std::span<const BatchEntry> batch) override;
  bool picks_greedy() const override { return true; }
  // Rows the last greedy pick computed the exact logit of (the vocabulary without the screen).
  int64_t greedy_candidates() const;
  // Builds the greedy picks' screen now (ops::GreedyPicker, its outlier columns from the hidden vector
  // of ids' last token, one private pass) where picks would screen the vocabulary, so no request pays
  // for it later (a server at load; Gemma 3: ~0.2 s). True when the screen is built (now or before).
  bool prepare_greedy_picks(std::span<const int32_t> ids);

  // Every layer's exact attention over ids from position 0, per layer [H, N, N] (row i: query i over
  // keys 0..N−1, zero where it does not see), and the logits of the last id in *logits when given.
  std::vector<std::vector<float>> attention_weights(std::span<const int32_t> ids,
                                                    std::vector<float>* logits = nullptr);
  // The logits of every prefix end: [N, vocab] for ids from position 0 (one sequence, one pass).
  std::vector<float> logits_all(std::span<const int32_t> ids);
  // One layer's attention block over ids from position 0, as this decoder computed it (its own
  // buffers, copied out; for teaching: teach/stages.h). o is W_O · att before any post-norm, and
  // x_after = x + o (or + the post-normed o) exactly.
  AttentionLayerTrace layer_trace(std::span<const int32_t> ids, int64_t layer);

  struct Impl;  // (src/models/runtime/decoder.cc)

 private:
  std::unique_ptr<Impl> impl_;
  explicit Decoder(std::unique_ptr<Impl> impl);
};

}  // namespace attn::models::runtime

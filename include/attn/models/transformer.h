// The Transformer models, all configured by one TransformerConfig (saved and
// loaded as JSON):
//
//   EncoderDecoder     the paper's Transformer ("Attention Is All You Need")
//   EncoderClassifier  encoder-only; the final vector of position 0 ([CLS]) → Linear → classes
//   DecoderLM          decoder-only language model (causal self-attention)
//
// Each model: forward() returns logits (and the loss given targets: mean
// cross-entropy with ignore_index = pad_id and the config's label smoothing);
// the decoders also have incremental entry points that use a KV cache
// (step(new token ids, cache) → logits of the last position).
// Bad input (ids outside the vocabulary, sequences longer than max_len,
// inconsistent configs) throws attn::Error. See docs/models_transformer.md.
#pragma once

#include <attn/io/json.h>
#include <attn/nn/transformer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn::models {

enum class Positions { sinusoidal, learned, rope };

struct TransformerConfig {
  int64_t src_vocab = 0;  // encoder vocabulary (EncoderDecoder, EncoderClassifier)
  int64_t tgt_vocab = 0;  // decoder vocabulary (EncoderDecoder, DecoderLM)
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t kv_heads = 0;  // 0 = heads (multi-head); < heads = grouped-query attention
  int64_t d_ff = 2048;
  int64_t encoder_layers = 6;
  int64_t decoder_layers = 6;
  double dropout = 0.1;            // embeddings, residual branches, FFN hidden
  double attention_dropout = 0.0;  // attention probabilities
  int64_t max_len = 512;
  bool pre_norm = false;  // false: post-norm as in the paper
  nn::NormKind norm = nn::NormKind::layer_norm;
  double norm_eps = 1e-5;
  nn::Activation activation = nn::Activation::relu;
  Positions positions = Positions::sinusoidal;
  double rope_base = 10000.0;
  bool bias = true;              // biases in attention / FFN projections
  bool share_embeddings = true;  // EncoderDecoder: one table for source and target (vocabs must match)
  bool tie_output = true;        // output projection = target embedding table
  bool scale_embeddings = true;  // multiply embeddings by sqrt(d_model)
  // EncoderClassifier: a LayerNorm (norm_eps) over token + position embeddings, before the
  // dropout, as BERT's embeddings.LayerNorm (param embed_norm.*). Written to JSON only when set.
  bool embed_norm = false;
  // EncoderClassifier: the head reads the mean of the final vectors over the real tokens
  // (padding left out) instead of position 0 ([CLS]); multilingual-e5 is pooled so. JSON only when set.
  bool mean_pool = false;
  // EncoderClassifier: > 0 adds a frozen copy of the top `frozen_top` encoder layers (params
  // frozen_top.*, never trained: the fine-tune copies them from the base model and keeps them); the
  // head reads the pooled vector of the trained stack concatenated with the pooled vector of that
  // copy run on the same hidden states (after layer encoder_layers - frozen_top), so the fine-tuned
  // model keeps the pretrained sentence vector beside its own. JSON only when set.
  int64_t frozen_top = 0;
  int64_t pad_id = 0;  // ignored by the loss
  double label_smoothing = 0.0;
  int64_t num_classes = 0;  // EncoderClassifier
  uint64_t seed = 0;        // parameter init and dropout masks

  int64_t head_dim() const { return heads > 0 ? d_model / heads : 0; }
  // Throws attn::Error on inconsistencies (d_model % heads, heads % kv_heads, ...).
  // needs: "encdec", "classifier" or "lm" adds the checks that model needs.
  void validate(const std::string& needs = "") const;
  nn::LayerConfig layer_config() const;

  json::Value to_json() const;
  static TransformerConfig from_json(const json::Value& v);  // missing keys keep their defaults
  void save(const std::string& path) const;
  static TransformerConfig load(const std::string& path);

  // Presets: "base" (the paper: 6+6, d_model 512, 8 heads, d_ff 2048, dropout 0.1,
  // shared and scaled embeddings, vocab 37000), "tiny" (2+2, d_model 128, 4 heads,
  // d_ff 512), "small" (2+2, d_model 256, 4 heads, d_ff 1024), "micro" (for tests:
  // 2+2, d_model 32, 4 heads, d_ff 64, vocab 64).
  static TransformerConfig preset(const std::string& name);
};

bool operator==(const TransformerConfig& a, const TransformerConfig& b);

struct ModelOutput {
  Tensor logits;  // EncoderDecoder/DecoderLM: [B, L, V]; classifier: [B, classes]
  Tensor loss;    // rank 0, when targets were given
  // EncoderClassifier with capture: per layer, [B, H, Lk] attention of position 0 ([CLS]).
  std::vector<Tensor> cls_attention;
  // EncoderClassifier::forward_embeddings with capture: per layer, [B, H, rows, Lk] attention of
  // the query rows ClassifierCall::capture_rows.
  std::vector<Tensor> attention;
};

// Shared embedding + positions: emb(ids) · sqrt(d) (if scaled) + PE, then dropout.
class TokenEmbedder {
 public:
  TokenEmbedder(const TransformerConfig& c, const nn::Embedding* table, const nn::Embedding* pos);
  // ids: [B, L] -> [B, L, C]; position of ids[:, 0] is `offset`.
  // Equals add_positions(tokens(ids), offset, training, seeds).
  Tensor forward(const Tensor& ids, int64_t offset, bool training, nn::DropoutSeeds& seeds) const;
  // The token part: ids [B, L] -> emb(ids) · sqrt(d) (if scaled), [B, L, C].
  Tensor tokens(const Tensor& ids) const;
  // x: [B, L, C] token part -> + positions (sinusoidal or learned; none for rope), then dropout.
  Tensor add_positions(const Tensor& x, int64_t offset, bool training, nn::DropoutSeeds& seeds) const;

 private:
  const TransformerConfig& c_;
  const nn::Embedding* table_;
  const nn::Embedding* pos_;
};

class EncoderDecoder : public nn::Module {
 public:
  explicit EncoderDecoder(const TransformerConfig& config);
  const TransformerConfig& config() const { return c_; }
  // src: [B, Ls] ids; src_lengths: empty or B valid lengths (key padding);
  // tgt_in: [B, Lt] decoder inputs; targets: [B, Lt] or undefined.
  ModelOutput forward(const Tensor& src, const std::vector<int64_t>& src_lengths, const Tensor& tgt_in,
                      const Tensor& targets = Tensor(), nn::Trace* trace = nullptr);
  // Encoder only: memory [B, Ls, C].
  Tensor encode(const Tensor& src, const std::vector<int64_t>& src_lengths, nn::Trace* trace = nullptr);
  // Decoder over tgt ids [B, n] at cache->position (or 0 without cache): logits [B, n, V].
  // cross_weights (optional): the last decoder layer's cross-attention [B, H, n, Ls].
  Tensor decode(const Tensor& tgt, const Tensor& memory, const std::vector<int64_t>& src_lengths,
                nn::DecoderCache* cache = nullptr, nn::Trace* trace = nullptr,
                Tensor* cross_weights = nullptr);
  // Every layer's exact attention weights for src [B, Ls] and decoder inputs tgt_in [B, Lt]
  // (teacher forcing; eval mode recommended): encoder [B, H, Ls, Ls], decoder [B, H, Lt, Lt],
  // cross [B, H, Lt, Ls], one tensor per layer each.
  struct Attention {
    std::vector<Tensor> encoder, decoder, cross;
  };
  Attention attention(const Tensor& src, const std::vector<int64_t>& src_lengths, const Tensor& tgt_in);
  // Incremental decoding: logits of the last new position, [B, V].
  // cross_weights (optional): the last decoder layer's cross-attention [B, H, n, Ls].
  Tensor step(const Tensor& tgt, const Tensor& memory, const std::vector<int64_t>& src_lengths,
              nn::DecoderCache& cache, Tensor* cross_weights = nullptr);

 private:
  TransformerConfig c_;
  nn::InitRng rng_;
  nn::DropoutSeeds seeds_;
  std::unique_ptr<nn::Embedding> src_embed_, tgt_embed_, src_pos_, tgt_pos_;
  std::unique_ptr<nn::Encoder> encoder_;
  std::unique_ptr<nn::Decoder> decoder_;
  std::unique_ptr<nn::Linear> lm_head_;
};

// What EncoderClassifier::forward_embeddings computes besides the logits.
struct ClassifierCall {
  std::vector<int64_t> lengths;       // empty or B valid lengths (key padding)
  bool capture = false;               // fill ModelOutput::cls_attention and ::attention
  std::vector<int64_t> capture_rows;  // query rows of ModelOutput::attention (empty = {0}, [CLS])
  nn::Trace* trace = nullptr;
};

class EncoderClassifier : public nn::Module {
 public:
  explicit EncoderClassifier(const TransformerConfig& config);
  const TransformerConfig& config() const { return c_; }
  // ids: [B, L] (position 0 is [CLS]); lengths: empty or B valid lengths;
  // labels: [B] class ids or undefined; capture_cls: fill cls_attention.
  // Equals forward_embeddings(embed_tokens(ids), ...).
  ModelOutput forward(const Tensor& ids, const std::vector<int64_t>& lengths, const Tensor& labels = Tensor(),
                      bool capture_cls = false, nn::Trace* trace = nullptr);
  // The token part of the input embeddings (no positions, no dropout):
  // ids [B, L] -> embed(ids) · sqrt(d_model) when scale_embeddings, [B, L, C].
  Tensor embed_tokens(const Tensor& ids) const;
  // The forward pass from token embeddings (for gradients with respect to them,
  // models/attribution.h): tokens [B, L, C] -> + positions -> encoder -> logits.
  ModelOutput forward_embeddings(const Tensor& tokens, const ClassifierCall& call,
                                 const Tensor& labels = Tensor());
  // Fine-tuning with the lowest k layers frozen: hidden_after(ids, lengths, k) is the
  // encoder's input after the embeddings and layers [0, k) ([B, L, C]; k = 0: the
  // embeddings), and forward_from(hidden, k, lengths, labels) runs layers [k, n) and the
  // head. In eval mode forward_from(hidden_after(ids, l, k), k, l, y) equals forward(ids, l, y).
  Tensor hidden_after(const Tensor& ids, const std::vector<int64_t>& lengths, int64_t layers);
  // With config().frozen_top > 0, `frozen_pooled` ([B, C], optional) is the frozen copy's pooled
  // vector of these rows (frozen_vector below), when computed once beforehand; else it is computed here.
  ModelOutput forward_from(const Tensor& hidden, int64_t first_layer, const std::vector<int64_t>& lengths,
                           const Tensor& labels = Tensor(), const Tensor& frozen_pooled = Tensor());
  // config().frozen_top > 0: the frozen copy's pooled vector [B, C] from the hidden states after
  // layer encoder_layers - frozen_top ([B, L, C]), in eval mode (no dropout).
  Tensor frozen_vector(const Tensor& hidden, const std::vector<int64_t>& lengths);
  // The first layer whose input the frozen copy reads (encoder_layers - frozen_top).
  int64_t frozen_branch_input() const { return c_.encoder_layers - c_.frozen_top; }

 private:
  Tensor embed_input(const Tensor& tokens);  // + positions, embed_norm, dropout
  Tensor pool(const Tensor& h, const std::vector<int64_t>& lengths) const;  // [B, L, C] -> [B, C]
  void add_loss(ModelOutput& out, const Tensor& labels, int64_t B) const;
  TransformerConfig c_;
  nn::InitRng rng_;
  nn::DropoutSeeds seeds_;
  std::unique_ptr<nn::Embedding> embed_, pos_;
  std::unique_ptr<nn::Norm> embed_norm_;
  std::unique_ptr<nn::Encoder> encoder_;
  std::unique_ptr<nn::Encoder> frozen_top_;  // config().frozen_top > 0
  std::unique_ptr<nn::Linear> classifier_;
  // pooled [B, C] (+ the frozen copy's [B, C]) -> logits
  Tensor head(const Tensor& pooled, const Tensor& frozen_pooled) const;
};

class DecoderLM : public nn::Module {
 public:
  explicit DecoderLM(const TransformerConfig& config);
  const TransformerConfig& config() const { return c_; }
  // ids: [B, L]; targets: [B, L] (next tokens, pad_id ignored) or undefined.
  // With a cache, ids are the new tokens at cache->position: logits [B, n, V].
  ModelOutput forward(const Tensor& ids, const Tensor& targets = Tensor(), nn::DecoderCache* cache = nullptr,
                      nn::Trace* trace = nullptr);
  // Incremental decoding: logits of the last new position, [B, V].
  Tensor step(const Tensor& ids, nn::DecoderCache& cache);

 private:
  TransformerConfig c_;
  nn::InitRng rng_;
  nn::DropoutSeeds seeds_;
  std::unique_ptr<nn::Embedding> embed_, pos_;
  std::unique_ptr<nn::Decoder> decoder_;
  std::unique_ptr<nn::Linear> lm_head_;
};

}  // namespace attn::models

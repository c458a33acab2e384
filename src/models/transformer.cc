#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/models/transformer.h>
#include <attn/ops/basic.h>
#include <attn/ops/linear.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace attn::models {

#define MODELS_FAIL(...) throw ::attn::Error(::attn::detail::concat(__VA_ARGS__))

namespace {

const char* norm_name(nn::NormKind k) { return k == nn::NormKind::layer_norm ? "layer_norm" : "rms_norm"; }
const char* act_name(nn::Activation a) {
  return a == nn::Activation::relu ? "relu" : a == nn::Activation::gelu ? "gelu" : "swiglu";
}
const char* pos_name(Positions p) {
  return p == Positions::sinusoidal ? "sinusoidal" : p == Positions::learned ? "learned" : "rope";
}

nn::NormKind parse_norm(const std::string& s) {
  if (s == "layer_norm") return nn::NormKind::layer_norm;
  if (s == "rms_norm") return nn::NormKind::rms_norm;
  MODELS_FAIL("config: norm must be \"layer_norm\" or \"rms_norm\"; got \"", s, "\"");
}
nn::Activation parse_act(const std::string& s) {
  if (s == "relu") return nn::Activation::relu;
  if (s == "gelu") return nn::Activation::gelu;
  if (s == "swiglu") return nn::Activation::swiglu;
  MODELS_FAIL("config: activation must be \"relu\", \"gelu\" or \"swiglu\"; got \"", s, "\"");
}
Positions parse_pos(const std::string& s) {
  if (s == "sinusoidal") return Positions::sinusoidal;
  if (s == "learned") return Positions::learned;
  if (s == "rope") return Positions::rope;
  MODELS_FAIL("config: positions must be \"sinusoidal\", \"learned\" or \"rope\"; got \"", s, "\"");
}

double embed_std(const TransformerConfig& c) {
  return c.scale_embeddings ? 1.0 / std::sqrt(static_cast<double>(c.d_model)) : 0.02;
}

void check_length(const TransformerConfig& c, int64_t offset, int64_t L, const char* what) {
  ATTN_CHECK(offset + L <= c.max_len, what, ": sequence of ", offset + L, " positions (", offset,
             " cached + ", L, " new) is longer than max_len ", c.max_len);
}

void check_lengths(const std::vector<int64_t>& lengths, int64_t B, int64_t L, const char* what) {
  if (lengths.empty()) return;
  ATTN_CHECK(static_cast<int64_t>(lengths.size()) == B, what, ": expected ", B,
             " lengths (one per batch row); got ", lengths.size());
  for (std::size_t b = 0; b < lengths.size(); ++b)
    ATTN_CHECK(lengths[b] >= 1 && lengths[b] <= L, what, ": length[", b, "] must be in [1, ", L, "]; got ",
               lengths[b]);
}

Tensor lm_loss(const Tensor& logits, const Tensor& targets, const TransformerConfig& c, const char* what) {
  // logits: [B, L, V]; targets: [B, L]
  ATTN_CHECK(targets.rank() == 2 && targets.size(0) == logits.size(0) && targets.size(1) == logits.size(1),
             what, ": targets must be [", logits.size(0), ", ", logits.size(1), "]; got ", targets.str());
  const int64_t N = logits.size(0) * logits.size(1), V = logits.size(2);
  CrossEntropyOptions o;
  o.ignore_index = c.pad_id;
  o.label_smoothing = c.label_smoothing;
  return cross_entropy(reshape(logits, {N, V}), targets.reshape({N}), o);
}

}  // namespace

void TransformerConfig::validate(const std::string& needs) const {
  ATTN_CHECK(d_model > 0 && heads > 0 && d_ff > 0, "config: d_model, heads and d_ff must be > 0; got ",
             d_model, ", ", heads, ", ", d_ff);
  ATTN_CHECK(d_model % heads == 0, "config: d_model (", d_model, ") must be divisible by heads (", heads,
             ")");
  const int64_t kvh = kv_heads == 0 ? heads : kv_heads;
  ATTN_CHECK(kvh > 0 && heads % kvh == 0, "config: heads (", heads, ") must be divisible by kv_heads (", kvh,
             ")");
  ATTN_CHECK(positions != Positions::rope || head_dim() % 2 == 0,
             "config: rope positions need an even head size; got d_model / heads = ", head_dim());
  ATTN_CHECK(max_len > 0, "config: max_len must be > 0; got ", max_len);
  ATTN_CHECK(dropout >= 0 && dropout < 1 && attention_dropout >= 0 && attention_dropout < 1,
             "config: dropout and attention_dropout must be in [0, 1); got ", dropout, ", ",
             attention_dropout);
  ATTN_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "config: label_smoothing must be in [0, 1]; got ",
             label_smoothing);
  ATTN_CHECK(encoder_layers >= 0 && decoder_layers >= 0, "config: layer counts must be >= 0; got ",
             encoder_layers, ", ", decoder_layers);
  ATTN_CHECK(frozen_top >= 0 && frozen_top <= encoder_layers,
             "config: frozen_top must be in [0, encoder_layers = ", encoder_layers, "]; got ", frozen_top);
  if (needs == "encdec" || needs == "classifier")
    ATTN_CHECK(src_vocab > 0, "config: src_vocab must be > 0; got ", src_vocab);
  if (needs == "encdec" || needs == "lm") {
    ATTN_CHECK(tgt_vocab > 0, "config: tgt_vocab must be > 0; got ", tgt_vocab);
    ATTN_CHECK(pad_id >= 0 && pad_id < tgt_vocab, "config: pad_id must be in [0, tgt_vocab = ", tgt_vocab,
               "); got ", pad_id);
  }
  if (needs == "encdec" && share_embeddings)
    ATTN_CHECK(src_vocab == tgt_vocab, "config: share_embeddings needs src_vocab == tgt_vocab; got ",
               src_vocab, " and ", tgt_vocab);
  if (needs == "classifier")
    ATTN_CHECK(num_classes >= 2, "config: num_classes must be >= 2; got ", num_classes);
}

nn::LayerConfig TransformerConfig::layer_config() const {
  nn::LayerConfig l;
  l.d_model = d_model;
  l.heads = heads;
  l.kv_heads = kv_heads;
  l.d_ff = d_ff;
  l.dropout = dropout;
  l.attention_dropout = attention_dropout;
  l.activation = activation;
  l.norm = norm;
  l.norm_eps = norm_eps;
  l.pre_norm = pre_norm;
  l.bias = bias;
  l.rope = positions == Positions::rope;
  l.rope_options.base = rope_base;
  l.rope_options.layout = RopeLayout::half_split;
  return l;
}

json::Value TransformerConfig::to_json() const {
  using json::Value;
  Value o = Value::object();
  o.set("src_vocab", Value::integer(src_vocab));
  o.set("tgt_vocab", Value::integer(tgt_vocab));
  o.set("d_model", Value::integer(d_model));
  o.set("heads", Value::integer(heads));
  o.set("kv_heads", Value::integer(kv_heads));
  o.set("d_ff", Value::integer(d_ff));
  o.set("encoder_layers", Value::integer(encoder_layers));
  o.set("decoder_layers", Value::integer(decoder_layers));
  o.set("dropout", Value::number(dropout));
  o.set("attention_dropout", Value::number(attention_dropout));
  o.set("max_len", Value::integer(max_len));
  o.set("pre_norm", Value::boolean(pre_norm));
  o.set("norm", Value::string(norm_name(norm)));
  o.set("norm_eps", Value::number(norm_eps));
  o.set("activation", Value::string(act_name(activation)));
  o.set("positions", Value::string(pos_name(positions)));
  o.set("rope_base", Value::number(rope_base));
  o.set("bias", Value::boolean(bias));
  o.set("share_embeddings", Value::boolean(share_embeddings));
  o.set("tie_output", Value::boolean(tie_output));
  o.set("scale_embeddings", Value::boolean(scale_embeddings));
  if (embed_norm) o.set("embed_norm", Value::boolean(true));
  if (mean_pool) o.set("mean_pool", Value::boolean(true));
  if (frozen_top > 0) o.set("frozen_top", Value::integer(frozen_top));
  o.set("pad_id", Value::integer(pad_id));
  o.set("label_smoothing", Value::number(label_smoothing));
  o.set("num_classes", Value::integer(num_classes));
  o.set("seed", Value::integer(static_cast<int64_t>(seed)));
  return o;
}

TransformerConfig TransformerConfig::from_json(const json::Value& v) {
  ATTN_CHECK(v.is_object(), "config: expected a JSON object; got ", json::type_name(v.type()));
  TransformerConfig c;
  for (const auto& [key, val] : v.members()) {
    auto i64 = [&](int64_t& dst) { dst = val.as_int64(); };
    auto dbl = [&](double& dst) { dst = val.as_double(); };
    auto bln = [&](bool& dst) { dst = val.as_bool(); };
    try {
      if (key == "src_vocab")
        i64(c.src_vocab);
      else if (key == "tgt_vocab")
        i64(c.tgt_vocab);
      else if (key == "d_model")
        i64(c.d_model);
      else if (key == "heads")
        i64(c.heads);
      else if (key == "kv_heads")
        i64(c.kv_heads);
      else if (key == "d_ff")
        i64(c.d_ff);
      else if (key == "encoder_layers")
        i64(c.encoder_layers);
      else if (key == "decoder_layers")
        i64(c.decoder_layers);
      else if (key == "dropout")
        dbl(c.dropout);
      else if (key == "attention_dropout")
        dbl(c.attention_dropout);
      else if (key == "max_len")
        i64(c.max_len);
      else if (key == "pre_norm")
        bln(c.pre_norm);
      else if (key == "norm")
        c.norm = parse_norm(val.as_string());
      else if (key == "norm_eps")
        dbl(c.norm_eps);
      else if (key == "activation")
        c.activation = parse_act(val.as_string());
      else if (key == "positions")
        c.positions = parse_pos(val.as_string());
      else if (key == "rope_base")
        dbl(c.rope_base);
      else if (key == "bias")
        bln(c.bias);
      else if (key == "share_embeddings")
        bln(c.share_embeddings);
      else if (key == "tie_output")
        bln(c.tie_output);
      else if (key == "scale_embeddings")
        bln(c.scale_embeddings);
      else if (key == "embed_norm")
        bln(c.embed_norm);
      else if (key == "mean_pool")
        bln(c.mean_pool);
      else if (key == "frozen_top")
        i64(c.frozen_top);
      else if (key == "pad_id")
        i64(c.pad_id);
      else if (key == "label_smoothing")
        dbl(c.label_smoothing);
      else if (key == "num_classes")
        i64(c.num_classes);
      else if (key == "seed")
        c.seed = static_cast<uint64_t>(val.as_int64());
      else
        MODELS_FAIL("unknown key");
    } catch (const Error& e) {
      MODELS_FAIL("config: key \"", key, "\": ", e.what());
    }
  }
  c.validate();
  return c;
}

void TransformerConfig::save(const std::string& path) const {
  io::write_file_atomically(path, json::dump(to_json(), 2) + "\n", "config");
}

TransformerConfig TransformerConfig::load(const std::string& path) {
  const std::string bytes = io::read_file(path, "config: model config");
  try {
    return from_json(json::parse(bytes));
  } catch (const Error& e) {
    MODELS_FAIL("config '", path, "': ", e.what());
  }
}

TransformerConfig TransformerConfig::preset(const std::string& name) {
  TransformerConfig c;  // defaults are the paper's base model
  if (name == "base") {
    c.src_vocab = c.tgt_vocab = 37000;
    c.label_smoothing = 0.1;
  } else if (name == "tiny" || name == "small") {
    const bool tiny = name == "tiny";
    c.src_vocab = c.tgt_vocab = 8000;
    c.d_model = tiny ? 128 : 256;
    c.heads = 4;
    c.d_ff = tiny ? 512 : 1024;
    c.encoder_layers = c.decoder_layers = 2;
    c.max_len = 256;
    c.label_smoothing = 0.1;
  } else if (name == "micro") {
    c.src_vocab = c.tgt_vocab = 64;
    c.d_model = 32;
    c.heads = 4;
    c.d_ff = 64;
    c.encoder_layers = c.decoder_layers = 2;
    c.max_len = 64;
    c.dropout = 0.0;
  } else {
    MODELS_FAIL("config: unknown preset \"", name, "\"; expected base, small, tiny or micro");
  }
  return c;
}

bool operator==(const TransformerConfig& a, const TransformerConfig& b) {
  return json::dump(a.to_json()) == json::dump(b.to_json());
}

TokenEmbedder::TokenEmbedder(const TransformerConfig& c, const nn::Embedding* table, const nn::Embedding* pos)
    : c_(c), table_(table), pos_(pos) {}

Tensor TokenEmbedder::tokens(const Tensor& ids) const {
  Tensor x = table_->forward(ids);  // x: [B, L, C]
  if (c_.scale_embeddings) x = x * std::sqrt(static_cast<double>(c_.d_model));
  return x;
}

Tensor TokenEmbedder::add_positions(const Tensor& x, int64_t offset, bool training,
                                    nn::DropoutSeeds& seeds) const {
  // x: [B, L, C]
  const int64_t L = x.size(1);
  Tensor y = x;
  if (c_.positions == Positions::sinusoidal) {
    y = y + sinusoidal_positions(L, c_.d_model, offset);
  } else if (c_.positions == Positions::learned) {
    y = y + pos_->forward(position_ids(L, offset));
  }
  if (training && c_.dropout > 0) y = dropout(y, c_.dropout, true, seeds.next());
  return y;
}

Tensor TokenEmbedder::forward(const Tensor& ids, int64_t offset, bool training,
                              nn::DropoutSeeds& seeds) const {
  return add_positions(tokens(ids), offset, training, seeds);
}

// ---------------------------------------------------------------------------------------------
EncoderDecoder::EncoderDecoder(const TransformerConfig& config)
    : c_((config.validate("encdec"), config)),
      rng_(config.seed),
      seeds_(config.seed ^ 0xD1B54A32D192ED03ull) {
  const double s = embed_std(c_);
  src_embed_ = std::make_unique<nn::Embedding>(c_.src_vocab, c_.d_model, s, rng_);
  if (c_.share_embeddings) {
    register_module("embed", src_embed_.get());
  } else {
    register_module("src_embed", src_embed_.get());
    tgt_embed_ = std::make_unique<nn::Embedding>(c_.tgt_vocab, c_.d_model, s, rng_);
    register_module("tgt_embed", tgt_embed_.get());
  }
  if (c_.positions == Positions::learned) {
    src_pos_ = std::make_unique<nn::Embedding>(c_.max_len, c_.d_model, 0.02, rng_);
    tgt_pos_ = std::make_unique<nn::Embedding>(c_.max_len, c_.d_model, 0.02, rng_);
    register_module("src_pos", src_pos_.get());
    register_module("tgt_pos", tgt_pos_.get());
  }
  encoder_ = std::make_unique<nn::Encoder>(c_.layer_config(), c_.encoder_layers, rng_, c_.seed + 1);
  decoder_ = std::make_unique<nn::Decoder>(c_.layer_config(), c_.decoder_layers, true, rng_, c_.seed + 2);
  register_module("encoder", encoder_.get());
  register_module("decoder", decoder_.get());
  if (!c_.tie_output) {
    lm_head_ = std::make_unique<nn::Linear>(c_.d_model, c_.tgt_vocab, false, rng_);
    register_module("lm_head", lm_head_.get());
  }
}

Tensor EncoderDecoder::encode(const Tensor& src, const std::vector<int64_t>& src_lengths, nn::Trace* trace) {
  nn::check_token_ids(src, c_.src_vocab, "EncoderDecoder source");
  check_length(c_, 0, src.size(1), "EncoderDecoder source");
  check_lengths(src_lengths, src.size(0), src.size(1), "EncoderDecoder source");
  Tensor x = TokenEmbedder(c_, src_embed_.get(), src_pos_.get()).forward(src, 0, is_training(), seeds_);
  if (trace != nullptr) trace->emplace_back("encoder.embed", x);
  nn::AttentionCall call;
  call.key_lengths = src_lengths;
  return encoder_->forward(x, call, trace, "encoder.");
}

Tensor EncoderDecoder::decode(const Tensor& tgt, const Tensor& memory,
                              const std::vector<int64_t>& src_lengths, nn::DecoderCache* cache,
                              nn::Trace* trace, Tensor* cross_weights) {
  nn::check_token_ids(tgt, c_.tgt_vocab, "EncoderDecoder target");
  const int64_t offset = cache != nullptr ? cache->position : 0;
  check_length(c_, offset, tgt.size(1), "EncoderDecoder target");
  const nn::Embedding* table = c_.share_embeddings ? src_embed_.get() : tgt_embed_.get();
  Tensor y = TokenEmbedder(c_, table, tgt_pos_.get()).forward(tgt, offset, is_training(), seeds_);
  if (trace != nullptr) trace->emplace_back("decoder.embed", y);
  nn::AttentionCall call;
  call.memory_lengths = src_lengths;
  call.position = offset;
  call.capture_cross = cross_weights != nullptr;
  Tensor h = decoder_->forward(y, memory, call, cache, trace, "decoder.", cross_weights);
  Tensor logits = c_.tie_output ? ops::inference_linear(h, table->weight(), Tensor())
                                : lm_head_->forward(h);  // [B, n, V]
  if (trace != nullptr) trace->emplace_back("logits", logits);
  return logits;
}

ModelOutput EncoderDecoder::forward(const Tensor& src, const std::vector<int64_t>& src_lengths,
                                    const Tensor& tgt_in, const Tensor& targets, nn::Trace* trace) {
  ATTN_CHECK(tgt_in.defined() && tgt_in.rank() == 2 && src.defined() && src.rank() == 2 &&
                 tgt_in.size(0) == src.size(0),
             "EncoderDecoder: src and tgt_in must be [B, Ls] and [B, Lt] with one B; got ",
             src.defined() ? src.str() : "none", " and ", tgt_in.defined() ? tgt_in.str() : "none");
  ModelOutput out;
  Tensor memory = encode(src, src_lengths, trace);
  out.logits = decode(tgt_in, memory, src_lengths, nullptr, trace);
  if (targets.defined()) out.loss = lm_loss(out.logits, targets, c_, "EncoderDecoder");
  return out;
}

Tensor EncoderDecoder::step(const Tensor& tgt, const Tensor& memory, const std::vector<int64_t>& src_lengths,
                            nn::DecoderCache& cache, Tensor* cross_weights) {
  Tensor logits = decode(tgt, memory, src_lengths, &cache, nullptr, cross_weights);
  return logits.select(1, logits.size(1) - 1);  // [B, V]
}

// ---------------------------------------------------------------------------------------------
EncoderClassifier::EncoderClassifier(const TransformerConfig& config)
    : c_((config.validate("classifier"), config)),
      rng_(config.seed),
      seeds_(config.seed ^ 0xD1B54A32D192ED03ull) {
  embed_ = std::make_unique<nn::Embedding>(c_.src_vocab, c_.d_model, embed_std(c_), rng_);
  register_module("embed", embed_.get());
  if (c_.positions == Positions::learned) {
    pos_ = std::make_unique<nn::Embedding>(c_.max_len, c_.d_model, 0.02, rng_);
    register_module("pos", pos_.get());
  }
  if (c_.embed_norm) {
    embed_norm_ = std::make_unique<nn::Norm>(c_.norm, c_.d_model, c_.norm_eps);
    register_module("embed_norm", embed_norm_.get());
  }
  encoder_ = std::make_unique<nn::Encoder>(c_.layer_config(), c_.encoder_layers, rng_, c_.seed + 1);
  register_module("encoder", encoder_.get());
  if (c_.frozen_top > 0) {
    frozen_top_ = std::make_unique<nn::Encoder>(c_.layer_config(), c_.frozen_top, rng_, c_.seed + 3);
    register_module("frozen_top", frozen_top_.get());
  }
  classifier_ =
      std::make_unique<nn::Linear>(c_.d_model * (c_.frozen_top > 0 ? 2 : 1), c_.num_classes, true, rng_);
  register_module("classifier", classifier_.get());
}

Tensor EncoderClassifier::head(const Tensor& pooled, const Tensor& frozen_pooled) const {
  if (!frozen_top_) return classifier_->forward(pooled);
  return classifier_->forward(concat({pooled, frozen_pooled}, 1));  // [B, 2C] -> [B, classes]
}

Tensor EncoderClassifier::frozen_vector(const Tensor& hidden, const std::vector<int64_t>& lengths) {
  ATTN_CHECK(frozen_top_ != nullptr, "EncoderClassifier::frozen_vector: the model has no frozen copy");
  frozen_top_->eval();  // always deterministic: the copy is the pretrained encoder's top
  nn::AttentionCall acall;
  acall.key_lengths = lengths;
  return pool(frozen_top_->forward_layers(hidden, acall, 0, frozen_top_->num_layers()), lengths);
}

ModelOutput EncoderClassifier::forward(const Tensor& ids, const std::vector<int64_t>& lengths,
                                       const Tensor& labels, bool capture_cls, nn::Trace* trace) {
  nn::check_token_ids(ids, c_.src_vocab, "EncoderClassifier");
  check_length(c_, 0, ids.size(1), "EncoderClassifier");
  check_lengths(lengths, ids.size(0), ids.size(1), "EncoderClassifier");
  ClassifierCall call;
  call.lengths = lengths;
  call.capture = capture_cls;
  call.trace = trace;
  // ids were checked above: embed without embed_tokens' second check.
  return forward_embeddings(TokenEmbedder(c_, embed_.get(), pos_.get()).tokens(ids), call, labels);
}

Tensor EncoderClassifier::embed_tokens(const Tensor& ids) const {
  nn::check_token_ids(ids, c_.src_vocab, "EncoderClassifier");
  return TokenEmbedder(c_, embed_.get(), pos_.get()).tokens(ids);  // [B, L, C]
}

ModelOutput EncoderClassifier::forward_embeddings(const Tensor& tokens, const ClassifierCall& call,
                                                  const Tensor& labels) {
  // tokens: [B, L, C]
  ATTN_CHECK(tokens.defined() && tokens.rank() == 3 && tokens.size(2) == c_.d_model,
             "EncoderClassifier: token embeddings must be [B, L, ", c_.d_model, "]; got ",
             tokens.defined() ? tokens.str() : "none");
  const int64_t B = tokens.size(0), L = tokens.size(1);
  ATTN_CHECK(L >= 1, "EncoderClassifier: expected at least one position (the [CLS] token); got ",
             tokens.str());
  check_length(c_, 0, L, "EncoderClassifier");
  check_lengths(call.lengths, B, L, "EncoderClassifier");
  const std::vector<int64_t> rows = call.capture_rows.empty() ? std::vector<int64_t>{0} : call.capture_rows;
  for (std::size_t r = 0; r < rows.size(); ++r)
    ATTN_CHECK(rows[r] >= 0 && rows[r] < L, "EncoderClassifier: capture_rows[", r, "] must be in [0, ", L,
               "); got ", rows[r]);
  Tensor x = embed_input(tokens);
  if (call.trace != nullptr) call.trace->emplace_back("encoder.embed", x);
  nn::AttentionCall acall;
  acall.key_lengths = call.lengths;
  acall.capture = call.capture;
  acall.capture_rows = rows;
  ModelOutput out;
  std::vector<Tensor> weights;
  Tensor frozen_pooled;
  Tensor h;
  if (frozen_top_) {
    // The frozen copy reads the hidden states after layer frozen_branch_input(): from the trace.
    nn::Trace local;
    nn::Trace* tr = call.trace != nullptr ? call.trace : &local;
    const std::size_t mark = tr->size();
    h = encoder_->forward(x, acall, tr, "encoder.", call.capture ? &weights : nullptr);
    const int64_t at = frozen_branch_input();
    Tensor mid = x;
    if (at > 0) mid = (*tr)[mark + static_cast<std::size_t>(at - 1)].second;
    frozen_pooled = frozen_vector(mid, call.lengths);
  } else {
    h = encoder_->forward(x, acall, call.trace, "encoder.", call.capture ? &weights : nullptr);
  }
  out.logits = head(pool(h, call.lengths), frozen_pooled);  // [B, classes]
  if (call.trace != nullptr) call.trace->emplace_back("logits", out.logits);
  // cls_attention: the row of query 0, when it was captured.
  const auto row0 = std::find(rows.begin(), rows.end(), int64_t{0});
  for (auto& w : weights) {
    if (row0 != rows.end()) out.cls_attention.push_back(w.select(2, row0 - rows.begin()));  // [B, H, Lk]
    out.attention.push_back(w);  // [B, H, rows, Lk]
  }
  add_loss(out, labels, B);
  return out;
}

Tensor EncoderClassifier::pool(const Tensor& h, const std::vector<int64_t>& lengths) const {
  // h: [B, L, C]
  const int64_t B = h.size(0), L = h.size(1);
  if (!c_.mean_pool) return reshape(slice(h, 1, 0, 1), {B, c_.d_model});  // [CLS]
  std::vector<float> w(static_cast<std::size_t>(B * L), 0.0f);  // 1 / length on real tokens, 0 on padding
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths.empty() ? L : lengths[static_cast<std::size_t>(b)];
    for (int64_t l = 0; l < n; ++l) w[static_cast<std::size_t>(b * L + l)] = 1.0f / static_cast<float>(n);
  }
  return sum(mul(h, Tensor::from(w, {B, L, 1})), 1);  // [B, C]
}

Tensor EncoderClassifier::embed_input(const Tensor& tokens) {
  const TokenEmbedder te(c_, embed_.get(), pos_.get());
  if (!embed_norm_) return te.add_positions(tokens, 0, is_training(), seeds_);
  Tensor x = embed_norm_->forward(te.add_positions(tokens, 0, false, seeds_));
  if (is_training() && c_.dropout > 0) x = dropout(x, c_.dropout, true, seeds_.next());
  return x;
}

void EncoderClassifier::add_loss(ModelOutput& out, const Tensor& labels, int64_t B) const {
  if (!labels.defined()) return;
  ATTN_CHECK(labels.rank() == 1 && labels.size(0) == B, "EncoderClassifier: labels must be [", B, "]; got ",
             labels.str());
  CrossEntropyOptions o;
  o.label_smoothing = c_.label_smoothing;
  out.loss = cross_entropy(out.logits, labels, o);
}

Tensor EncoderClassifier::hidden_after(const Tensor& ids, const std::vector<int64_t>& lengths,
                                       int64_t layers) {
  nn::check_token_ids(ids, c_.src_vocab, "EncoderClassifier");
  check_length(c_, 0, ids.size(1), "EncoderClassifier");
  check_lengths(lengths, ids.size(0), ids.size(1), "EncoderClassifier");
  nn::AttentionCall acall;
  acall.key_lengths = lengths;
  const Tensor x = embed_input(TokenEmbedder(c_, embed_.get(), pos_.get()).tokens(ids));
  return encoder_->forward_layers(x, acall, 0, layers);
}

ModelOutput EncoderClassifier::forward_from(const Tensor& hidden, int64_t first_layer,
                                            const std::vector<int64_t>& lengths, const Tensor& labels,
                                            const Tensor& frozen_pooled) {
  ATTN_CHECK(hidden.defined() && hidden.rank() == 3 && hidden.size(2) == c_.d_model && hidden.size(1) >= 1,
             "EncoderClassifier::forward_from: hidden states must be [B, L, ", c_.d_model, "]; got ",
             hidden.defined() ? hidden.str() : "none");
  const int64_t B = hidden.size(0);
  check_lengths(lengths, B, hidden.size(1), "EncoderClassifier");
  nn::AttentionCall acall;
  acall.key_lengths = lengths;
  ModelOutput out;
  if (!frozen_top_) {
    const Tensor h = encoder_->forward_layers(hidden, acall, first_layer, encoder_->num_layers());
    out.logits = classifier_->forward(pool(h, lengths));  // [B, classes]
  } else {
    const int64_t at = frozen_branch_input();
    ATTN_CHECK(first_layer <= at, "EncoderClassifier::forward_from: the frozen copy reads layer ", at,
               "'s input; first_layer must be at most ", at, "; got ", first_layer);
    const Tensor mid = encoder_->forward_layers(hidden, acall, first_layer, at);
    Tensor fp = frozen_pooled;
    if (fp.defined())
      ATTN_CHECK(fp.rank() == 2 && fp.size(0) == B && fp.size(1) == c_.d_model,
                 "EncoderClassifier::forward_from: frozen_pooled must be [", B, ", ", c_.d_model, "]; got ",
                 fp.str());
    else
      fp = frozen_vector(mid, lengths);
    const Tensor h = encoder_->forward_layers(mid, acall, at, encoder_->num_layers());
    out.logits = head(pool(h, lengths), fp);
  }
  add_loss(out, labels, B);
  return out;
}

// ---------------------------------------------------------------------------------------------
DecoderLM::DecoderLM(const TransformerConfig& config)
    : c_((config.validate("lm"), config)), rng_(config.seed), seeds_(config.seed ^ 0xD1B54A32D192ED03ull) {
  embed_ = std::make_unique<nn::Embedding>(c_.tgt_vocab, c_.d_model, embed_std(c_), rng_);
  register_module("embed", embed_.get());
  if (c_.positions == Positions::learned) {
    pos_ = std::make_unique<nn::Embedding>(c_.max_len, c_.d_model, 0.02, rng_);
    register_module("pos", pos_.get());
  }
  decoder_ = std::make_unique<nn::Decoder>(c_.layer_config(), c_.decoder_layers, false, rng_, c_.seed + 2);
  register_module("decoder", decoder_.get());
  if (!c_.tie_output) {
    lm_head_ = std::make_unique<nn::Linear>(c_.d_model, c_.tgt_vocab, false, rng_);
    register_module("lm_head", lm_head_.get());
  }
}

ModelOutput DecoderLM::forward(const Tensor& ids, const Tensor& targets, nn::DecoderCache* cache,
                               nn::Trace* trace) {
  nn::check_token_ids(ids, c_.tgt_vocab, "DecoderLM");
  const int64_t offset = cache != nullptr ? cache->position : 0;
  check_length(c_, offset, ids.size(1), "DecoderLM");
  Tensor x = TokenEmbedder(c_, embed_.get(), pos_.get()).forward(ids, offset, is_training(), seeds_);
  if (trace != nullptr) trace->emplace_back("decoder.embed", x);
  nn::AttentionCall call;
  call.position = offset;
  Tensor h = decoder_->forward(x, Tensor(), call, cache, trace, "decoder.");
  ModelOutput out;
  out.logits = c_.tie_output ? ops::inference_linear(h, embed_->weight(), Tensor())
                             : lm_head_->forward(h);  // [B, L, V]
  if (trace != nullptr) trace->emplace_back("logits", out.logits);
  if (targets.defined()) out.loss = lm_loss(out.logits, targets, c_, "DecoderLM");
  return out;
}

Tensor DecoderLM::step(const Tensor& ids, nn::DecoderCache& cache) {
  Tensor logits = forward(ids, Tensor(), &cache).logits;
  return logits.select(1, logits.size(1) - 1);  // [B, V]
}

}  // namespace attn::models

namespace attn::models {

EncoderDecoder::Attention EncoderDecoder::attention(const Tensor& src,
                                                    const std::vector<int64_t>& src_lengths,
                                                    const Tensor& tgt_in) {
  ATTN_CHECK(tgt_in.defined() && tgt_in.rank() == 2 && src.defined() && src.rank() == 2 &&
                 tgt_in.size(0) == src.size(0),
             "EncoderDecoder::attention: src and tgt_in must be [B, Ls] and [B, Lt] with one B; got ",
             src.defined() ? src.str() : "none", " and ", tgt_in.defined() ? tgt_in.str() : "none");
  nn::check_token_ids(src, c_.src_vocab, "EncoderDecoder source");
  check_length(c_, 0, src.size(1), "EncoderDecoder source");
  check_lengths(src_lengths, src.size(0), src.size(1), "EncoderDecoder source");
  nn::check_token_ids(tgt_in, c_.tgt_vocab, "EncoderDecoder target");
  check_length(c_, 0, tgt_in.size(1), "EncoderDecoder target");
  Attention out;
  Tensor x = TokenEmbedder(c_, src_embed_.get(), src_pos_.get()).forward(src, 0, is_training(), seeds_);
  nn::AttentionCall ec;
  ec.key_lengths = src_lengths;
  ec.capture = true;
  Tensor memory = encoder_->forward(x, ec, nullptr, "encoder.", &out.encoder);
  const nn::Embedding* table = c_.share_embeddings ? src_embed_.get() : tgt_embed_.get();
  Tensor y = TokenEmbedder(c_, table, tgt_pos_.get()).forward(tgt_in, 0, is_training(), seeds_);
  nn::AttentionCall dc;
  dc.memory_lengths = src_lengths;
  decoder_->forward_with_weights(y, memory, dc, &out.decoder, &out.cross);
  return out;
}

}  // namespace attn::models

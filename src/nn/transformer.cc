#include <attn/core/error.h>
#include <attn/nn/transformer.h>
#include <attn/ops/basic.h>

namespace attn::nn {

namespace {
MhaConfig mha_config(const LayerConfig& c, bool rope) {
  MhaConfig m;
  m.d_model = c.d_model;
  m.heads = c.heads;
  m.kv_heads = c.kv_heads;
  m.bias = c.bias;
  m.dropout = c.attention_dropout;
  m.rope = rope;
  m.rope_options = c.rope_options;
  return m;
}

// h + dropout(x): one pass in training (attn::add_dropout, the same bits as the two operations).
Tensor residual_add(const Module& m, const Tensor& h, const Tensor& x, double p, DropoutSeeds& seeds) {
  if (!m.is_training() || p <= 0) return h + x;
  return attn::add_dropout(h, x, p, true, seeds.next());
}

uint64_t sub_seed(uint64_t seed, uint64_t i) {
  uint64_t s = seed + 0x632BE59BD9B4E019ull * (i + 1);
  return attn::splitmix64(s);
}
}  // namespace

EncoderLayer::EncoderLayer(const LayerConfig& c, InitRng& rng, uint64_t seed)
    : c_(c),
      seeds_(sub_seed(seed, 0)),
      self_attn_(mha_config(c, c.rope), rng, sub_seed(seed, 1)),
      ffn_(c.d_model, c.d_ff, c.activation, c.bias, c.dropout, rng, sub_seed(seed, 2)),
      norm1_(c.norm, c.d_model, c.norm_eps),
      norm2_(c.norm, c.d_model, c.norm_eps) {
  register_module("self_attn", &self_attn_);
  register_module("norm1", &norm1_);
  register_module("ffn", &ffn_);
  register_module("norm2", &norm2_);
}

Tensor EncoderLayer::forward(const Tensor& x, const AttentionCall& call, Tensor* weights) {
  MhaCall mc;
  mc.key_lengths = call.key_lengths;
  mc.capture = call.capture && weights != nullptr;
  mc.capture_rows = call.capture_rows;
  Tensor h = x;
  if (c_.pre_norm) {
    MhaResult a = self_attn_.forward(norm1_.forward(h), Tensor(), mc);
    h = residual_add(*this, h, a.out, c_.dropout, seeds_);
    h = residual_add(*this, h, ffn_.forward(norm2_.forward(h)), c_.dropout, seeds_);
    if (mc.capture) *weights = a.weights;
  } else {
    MhaResult a = self_attn_.forward(h, Tensor(), mc);
    h = norm1_.forward(residual_add(*this, h, a.out, c_.dropout, seeds_));
    h = norm2_.forward(residual_add(*this, h, ffn_.forward(h), c_.dropout, seeds_));
    if (mc.capture) *weights = a.weights;
  }
  return h;
}

DecoderLayer::DecoderLayer(const LayerConfig& c, bool cross, InitRng& rng, uint64_t seed)
    : c_(c),
      cross_(cross),
      seeds_(sub_seed(seed, 0)),
      self_attn_(mha_config(c, c.rope), rng, sub_seed(seed, 1)),
      cross_attn_(cross ? std::make_unique<MultiHeadAttention>(mha_config(c, false), rng, sub_seed(seed, 3))
                        : nullptr),
      ffn_(c.d_model, c.d_ff, c.activation, c.bias, c.dropout, rng, sub_seed(seed, 2)),
      norm1_(c.norm, c.d_model, c.norm_eps),
      norm2_(c.norm, c.d_model, c.norm_eps),
      norm3_(cross ? std::make_unique<Norm>(c.norm, c.d_model, c.norm_eps) : nullptr) {
  register_module("self_attn", &self_attn_);
  register_module("norm1", &norm1_);
  if (cross_) register_module("cross_attn", cross_attn_.get());
  register_module("norm2", &norm2_);
  register_module("ffn", &ffn_);
  if (cross_) register_module("norm3", norm3_.get());
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const AttentionCall& call,
                             KVCache* self_cache, KVCache* cross_cache, Tensor* weights,
                             Tensor* cross_weights) {
  MhaCall sc;
  sc.causal = true;
  sc.key_lengths = call.key_lengths;
  sc.position = call.position;
  sc.capture = call.capture && weights != nullptr;
  sc.capture_rows = call.capture_rows;
  MhaCall cc;
  cc.key_lengths = call.memory_lengths;
  cc.capture = call.capture_cross && cross_weights != nullptr;
  // Norm order: norm1 around self-attention, then (with cross-attention)
  // norm2 around cross-attention and norm3 around the FFN; without it, norm2 around the FFN.
  Norm& ffn_norm = cross_ ? *norm3_ : norm2_;
  Tensor h = x;
  if (c_.pre_norm) {
    MhaResult a = self_attn_.forward(norm1_.forward(h), Tensor(), sc, self_cache);
    h = residual_add(*this, h, a.out, c_.dropout, seeds_);
    if (cross_) {
      MhaResult m = cross_attn_->forward(norm2_.forward(h), memory, cc, cross_cache, true);
      h = residual_add(*this, h, m.out, c_.dropout, seeds_);
      if (cc.capture) *cross_weights = m.weights;
    }
    h = residual_add(*this, h, ffn_.forward(ffn_norm.forward(h)), c_.dropout, seeds_);
    if (sc.capture) *weights = a.weights;
  } else {
    MhaResult a = self_attn_.forward(h, Tensor(), sc, self_cache);
    h = norm1_.forward(residual_add(*this, h, a.out, c_.dropout, seeds_));
    if (cross_) {
      MhaResult m = cross_attn_->forward(h, memory, cc, cross_cache, true);
      h = norm2_.forward(residual_add(*this, h, m.out, c_.dropout, seeds_));
      if (cc.capture) *cross_weights = m.weights;
    }
    h = ffn_norm.forward(residual_add(*this, h, ffn_.forward(h), c_.dropout, seeds_));
    if (sc.capture) *weights = a.weights;
  }
  return h;
}

Encoder::Encoder(const LayerConfig& c, int64_t layers, InitRng& rng, uint64_t seed) : pre_norm_(c.pre_norm) {
  ATTN_CHECK(layers >= 0, "Encoder: layers must be >= 0; got ", layers);
  for (int64_t i = 0; i < layers; ++i) {
    layers_.push_back(std::make_unique<EncoderLayer>(c, rng, sub_seed(seed, static_cast<uint64_t>(i))));
    register_module("layers." + std::to_string(i), layers_.back().get());
  }
  if (pre_norm_) {
    norm_ = std::make_unique<Norm>(c.norm, c.d_model, c.norm_eps);
    register_module("norm", norm_.get());
  }
}

Tensor Encoder::forward(const Tensor& x, const AttentionCall& call, Trace* trace, const std::string& prefix,
                        std::vector<Tensor>* weights) {
  Tensor h = x;
  if (weights != nullptr) weights->clear();
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Tensor w;
    h = layers_[i]->forward(h, call, weights != nullptr ? &w : nullptr);
    if (weights != nullptr) weights->push_back(w);
    if (trace != nullptr) trace->emplace_back(prefix + "layers." + std::to_string(i), h);
  }
  if (norm_) {
    h = norm_->forward(h);
    if (trace != nullptr) trace->emplace_back(prefix + "norm", h);
  }
  return h;
}

Tensor Encoder::forward_layers(const Tensor& x, const AttentionCall& call, int64_t begin, int64_t end) {
  ATTN_CHECK(begin >= 0 && begin <= end && end <= num_layers(),
             "Encoder::forward_layers: expected 0 <= begin <= end <= ", num_layers(), "; got [", begin, ", ",
             end, ")");
  Tensor h = x;
  for (int64_t i = begin; i < end; ++i) h = layers_[static_cast<std::size_t>(i)]->forward(h, call, nullptr);
  if (norm_ && end == num_layers()) h = norm_->forward(h);
  return h;
}

Decoder::Decoder(const LayerConfig& c, int64_t layers, bool cross, InitRng& rng, uint64_t seed)
    : pre_norm_(c.pre_norm) {
  ATTN_CHECK(layers >= 0, "Decoder: layers must be >= 0; got ", layers);
  for (int64_t i = 0; i < layers; ++i) {
    layers_.push_back(
        std::make_unique<DecoderLayer>(c, cross, rng, sub_seed(seed, static_cast<uint64_t>(i))));
    register_module("layers." + std::to_string(i), layers_.back().get());
  }
  if (pre_norm_) {
    norm_ = std::make_unique<Norm>(c.norm, c.d_model, c.norm_eps);
    register_module("norm", norm_.get());
  }
}

Tensor Decoder::forward(const Tensor& x, const Tensor& memory, const AttentionCall& call, DecoderCache* cache,
                        Trace* trace, const std::string& prefix, Tensor* last_cross_weights) {
  if (cache != nullptr) {
    ATTN_CHECK(call.position == cache->position, "Decoder: call.position ", call.position,
               " does not match the cache position ", cache->position);
    cache->self.resize(layers_.size());
    cache->cross.resize(layers_.size());
  }
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const bool last = i + 1 == layers_.size();
    h = layers_[i]->forward(h, memory, call, cache ? &cache->self[i] : nullptr,
                            cache ? &cache->cross[i] : nullptr, nullptr, last ? last_cross_weights : nullptr);
    if (trace != nullptr) trace->emplace_back(prefix + "layers." + std::to_string(i), h);
  }
  if (norm_) {
    h = norm_->forward(h);
    if (trace != nullptr) trace->emplace_back(prefix + "norm", h);
  }
  if (cache != nullptr) cache->position += x.size(1);
  return h;
}

namespace {
// Rows of t along dim 0: t [B, H, L, D] -> [rows.size(), H, capacity, D] (capacity >= L; positions
// from L on are left uninitialised, for appending).
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& rows, int64_t capacity) {
  Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  shape[2] = capacity;
  Tensor out = Tensor::empty(shape, t.dtype());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ATTN_CHECK(rows[i] >= 0 && rows[i] < t.size(0), "DecoderCache::select_rows: row ", rows[i],
               " is outside [0, ", t.size(0), ")");
    out.select(0, static_cast<int64_t>(i)).slice(1, 0, t.size(2)).copy_from(t.select(0, rows[i]));
  }
  return out;
}

void select_cache_rows(KVCache& c, const std::vector<int64_t>& rows) {
  if (!c.k.defined()) return;
  const int64_t L = c.length();
  if (c.k_buf.defined() && c.k.storage() == c.k_buf.storage()) {  // keep the spare capacity
    c.k_buf = gather_rows(c.k, rows, c.k_buf.size(2));
    c.v_buf = gather_rows(c.v, rows, c.v_buf.size(2));
    c.k = c.k_buf.slice(2, 0, L);
    c.v = c.v_buf.slice(2, 0, L);
    return;
  }
  c.k = gather_rows(c.k, rows, L);
  c.v = gather_rows(c.v, rows, L);
}
}  // namespace

void DecoderCache::select_rows(const std::vector<int64_t>& rows) {
  for (KVCache& c : self) select_cache_rows(c, rows);
  for (KVCache& c : cross) select_cache_rows(c, rows);
}

Tensor Decoder::forward_with_weights(const Tensor& x, const Tensor& memory, const AttentionCall& call,
                                     std::vector<Tensor>* self_weights, std::vector<Tensor>* cross_weights) {
  ATTN_CHECK(self_weights != nullptr && cross_weights != nullptr,
             "Decoder::forward_with_weights: expected two output vectors; got a null pointer");
  self_weights->clear();
  cross_weights->clear();
  AttentionCall c = call;
  c.capture = true;
  c.capture_rows.clear();
  c.capture_cross = true;
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Tensor sw, cw;
    h = layers_[i]->forward(h, memory, c, nullptr, nullptr, &sw, &cw);
    self_weights->push_back(sw);
    if (cw.defined()) cross_weights->push_back(cw);
  }
  if (norm_) h = norm_->forward(h);
  return h;
}

}  // namespace attn::nn

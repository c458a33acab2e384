#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/nn/layers.h>
#include <attn/ops/basic.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>

#include <cmath>

namespace attn::nn {

Linear::Linear(int64_t in, int64_t out, bool bias, InitRng& rng) {
  ATTN_CHECK(in > 0 && out > 0, "Linear: sizes must be > 0; got in ", in, ", out ", out);
  weight_ = register_parameter("weight", {out, in});
  rng.xavier_uniform(weight_);
  if (bias) bias_ = register_parameter("bias", {out});  // zeros
}

Tensor Linear::forward(const Tensor& x) const { return ops::inference_linear(x, weight_, bias_); }

Embedding::Embedding(int64_t vocab, int64_t dim, double init_std, InitRng& rng) {
  ATTN_CHECK(vocab > 0 && dim > 0, "Embedding: sizes must be > 0; got vocab ", vocab, ", dim ", dim);
  weight_ = register_parameter("weight", {vocab, dim});
  rng.normal(weight_, 0.0, init_std);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(ids, weight_); }

void check_token_ids(const Tensor& ids, int64_t vocab, const std::string& what) {
  ATTN_CHECK(ids.defined() && ids.rank() == 2 && (ids.dtype() == DType::i64 || ids.dtype() == DType::i32),
             what, ": token ids must be an i64 or i32 tensor [B, L]; got ",
             ids.defined() ? ids.str() : "none");
  const int64_t B = ids.size(0), L = ids.size(1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l) {
      const double id = ids.at({b, l});
      ATTN_CHECK(id >= 0 && id < static_cast<double>(vocab), what, ": token id ", static_cast<int64_t>(id),
                 " at position [", b, ", ", l, "] is outside the vocabulary [0, ", vocab, ")");
    }
}

Norm::Norm(NormKind kind, int64_t dim, double eps) : kind_(kind), eps_(eps) {
  weight_ = register_parameter("weight", {dim});
  weight_.fill(1.0);
  if (kind == NormKind::layer_norm) bias_ = register_parameter("bias", {dim});
}

Tensor Norm::forward(const Tensor& x) const {
  return kind_ == NormKind::layer_norm ? layer_norm(x, weight_, bias_, eps_) : rms_norm(x, weight_, eps_);
}

FeedForward::FeedForward(int64_t d_model, int64_t d_ff, Activation act, bool bias, double dropout,
                         InitRng& rng, uint64_t dropout_seed)
    : act_(act),
      dropout_(dropout),
      seeds_(dropout_seed),
      w1_(d_model, d_ff, bias, rng),
      w2_(d_ff, d_model, bias, rng) {
  register_module("w1", &w1_);
  register_module("w2", &w2_);
  if (act == Activation::swiglu) {
    w3_.emplace(d_model, d_ff, bias, rng);
    register_module("w3", &*w3_);
  }
}

Tensor FeedForward::forward(const Tensor& x) {
  Tensor h = w1_.forward(x);
  const bool drop = is_training() && dropout_ > 0;
  if (act_ == Activation::relu && drop)  // one pass instead of two (the same bits)
    return w2_.forward(attn::relu_dropout(h, dropout_, true, seeds_.next()));
  switch (act_) {
    case Activation::relu:
      h = relu(h);
      break;
    case Activation::gelu:
      h = gelu(h);
      break;
    case Activation::swiglu:
      h = swiglu(h, w3_->forward(x));
      break;
  }
  if (drop) h = attn::dropout(h, dropout_, true, seeds_.next());
  return w2_.forward(h);
}

namespace {
MhaConfig checked(MhaConfig c) {
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  ATTN_CHECK(c.d_model > 0 && c.heads > 0 && c.kv_heads > 0,
             "MultiHeadAttention: d_model, heads and kv_heads ", "must be > 0; got ", c.d_model, ", ",
             c.heads, ", ", c.kv_heads);
  ATTN_CHECK(c.d_model % c.heads == 0, "MultiHeadAttention: d_model (", c.d_model,
             ") must be divisible by heads (", c.heads, ")");
  ATTN_CHECK(c.heads % c.kv_heads == 0, "MultiHeadAttention: heads (", c.heads,
             ") must be divisible by kv_heads (", c.kv_heads, ")");
  ATTN_CHECK(!c.rope || (c.d_model / c.heads) % 2 == 0,
             "MultiHeadAttention: rope needs an even head size; got ", c.d_model / c.heads);
  return c;
}
}  // namespace

void KVCache::append(const Tensor& k_new, const Tensor& v_new) {
  // k_new, v_new: [B, Hkv, n, D]
  const int64_t L = length(), n = k_new.size(2);
  const bool fits = k_buf.defined() && k.defined() && k.storage() == k_buf.storage() &&
                    k_buf.size(0) == k_new.size(0) && k_buf.size(2) >= L + n;
  if (!fits) {
    int64_t cap = 16;
    while (cap < 2 * (L + n)) cap *= 2;
    Shape shape = k_new.shape();
    shape[2] = cap;
    Tensor kb = Tensor::empty(shape, k_new.dtype()), vb = Tensor::empty(shape, v_new.dtype());
    if (L > 0) {
      kb.slice(2, 0, L).copy_from(k);
      vb.slice(2, 0, L).copy_from(v);
    }
    k_buf = kb, v_buf = vb;
  }
  // Unit-stride rows in both (a decoding step's k/v are views of the projection output): copy_from
  // copies them one memcpy per row.
  k_buf.slice(2, L, L + n).copy_from(k_new);
  v_buf.slice(2, L, L + n).copy_from(v_new);
  k = k_buf.slice(2, 0, L + n);
  v = v_buf.slice(2, 0, L + n);
}

MultiHeadAttention::MultiHeadAttention(const MhaConfig& config, InitRng& rng, uint64_t dropout_seed)
    : config_(checked(config)),
      head_dim_(config_.d_model / config_.heads),
      seeds_(dropout_seed),
      w_q_(config_.d_model, config_.d_model, config_.bias, rng),
      w_k_(config_.d_model, config_.kv_heads * head_dim_, config_.bias, rng),
      w_v_(config_.d_model, config_.kv_heads * head_dim_, config_.bias, rng),
      w_o_(config_.d_model, config_.d_model, config_.bias, rng) {
  register_module("w_q", &w_q_);
  register_module("w_k", &w_k_);
  register_module("w_v", &w_v_);
  register_module("w_o", &w_o_);
}

Tensor MultiHeadAttention::split_heads(const Tensor& t, int64_t n) const {
  // t: [B, L, n*D] -> [B, n, L, D]
  return transpose(reshape(t, {t.size(0), t.size(1), n, head_dim_}), 1, 2);
}

MhaResult MultiHeadAttention::forward(const Tensor& x, const Tensor& memory, const MhaCall& call,
                                      KVCache* cache, bool cross) {
  ATTN_CHECK(x.defined() && x.rank() == 3 && x.size(2) == config_.d_model,
             "MultiHeadAttention: x must be [B, L, ", config_.d_model, "]; got ",
             x.defined() ? x.str() : "none");
  const int64_t B = x.size(0), Lq = x.size(1), H = config_.heads, Hkv = config_.kv_heads;
  Tensor q = split_heads(w_q_.forward(x), H);  // q: [B, H, Lq, D]
  Tensor k, v;                                 // k, v: [B, Hkv, Lk, D]
  RopeOptions ro = config_.rope_options;
  ro.offset = call.position;
  if (cross) {
    if (cache != nullptr && cache->length() > 0) {
      k = cache->k, v = cache->v;
    } else {
      ATTN_CHECK(
          memory.defined() && memory.rank() == 3 && memory.size(0) == B && memory.size(2) == config_.d_model,
          "MultiHeadAttention: memory must be [", B, ", Lk, ", config_.d_model, "]; got ",
          memory.defined() ? memory.str() : "none");
      k = split_heads(w_k_.forward(memory), Hkv);
      v = split_heads(w_v_.forward(memory), Hkv);
      if (cache != nullptr && !grad_mode_enabled()) {
        // Decoding reads the cached memory keys and values at every step: copy the head views
        // ([B, Hkv, Lk, D] with rows Hkv * D apart) once into one contiguous block per head, which the
        // one-query attention streams ~1.7x faster than rows 1 KiB apart (d15b,
        // docs/benchmarks-log/2026-12-01.md).
        k = k.contiguous();
        v = v.contiguous();
      }
      if (cache != nullptr) cache->k = k, cache->v = v;
    }
  } else {
    const Tensor& src = memory.defined() ? memory : x;
    k = split_heads(w_k_.forward(src), Hkv);
    v = split_heads(w_v_.forward(src), Hkv);
    if (config_.rope) {
      q = rope(q, ro);
      k = rope(k, ro);
    }
    if (cache != nullptr) {
      if (cache->length() > 0) {
        ATTN_CHECK(cache->k.size(0) == B, "MultiHeadAttention: the KV cache holds batch ", cache->k.size(0),
                   "; this call has batch ", B);
      }
      if (!grad_mode_enabled()) {
        cache->append(k, v);  // in place: copies only the new positions
        k = cache->k, v = cache->v;
      } else {
        if (cache->length() > 0) {
          k = concat({cache->k, k}, 2);
          v = concat({cache->v, v}, 2);
        }
        cache->k = k, cache->v = v;
        cache->k_buf = Tensor(), cache->v_buf = Tensor();
      }
    }
  }
  AttentionOptions opt;
  opt.causal = call.causal;
  opt.align = Align::bottom_right;
  opt.key_lengths = call.key_lengths;
  if (is_training() && config_.dropout > 0) {
    opt.dropout_p = config_.dropout;
    opt.dropout_seed = seeds_.next();
  }
  MhaResult result;
  if (cache != nullptr && Lq == 1 && opt.dropout_p == 0 && !grad_mode_enabled()) {
    // A decoding step: one query row per (batch, head) over the cache (ops::decode_attention), written
    // straight into [B, 1, C] (no score matrix, no transpose copy); other inputs take the general path,
    // which also reports bad key lengths.
    if (ops::decode_attention_applies(q, k, v, call.key_lengths)) {
      const Tensor o = ops::decode_attention(q, k, v, call.key_lengths);  // o: [B, 1, C]
      if (call.capture) {
        NoGradGuard no_grad;
        AttentionOptions copt = opt;
        copt.capture.enabled = true;
        copt.capture.rows = call.capture_rows;
        result.weights = attention(q, k, v, copt).weights;
      }
      result.out = w_o_.forward(o);
      return result;
    }
  }
  Tensor o = scaled_dot_product_attention(q, k, v, opt);  // o: [B, H, Lq, D]
  if (call.capture) {
    NoGradGuard no_grad;
    AttentionOptions copt = opt;
    copt.dropout_p = 0;
    copt.capture.enabled = true;
    copt.capture.rows = call.capture_rows;
    result.weights = attention(q.detach(), k.detach(), v.detach(), copt).weights;
  }
  o = reshape(transpose(o, 1, 2), {B, Lq, config_.d_model});
  result.out = w_o_.forward(o);
  return result;
}

}  // namespace attn::nn

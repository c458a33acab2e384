// A tiny attention block built from ops, for the training tests:
//   h = layer_norm(x); q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ split into H heads;
//   a = causal attention; r = x + dropout(a·Woᵀ + bo); loss = cross_entropy(r·Whᵀ + bh, y)
#pragma once

#include <attn/core/params.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include "testing/testing.h"

namespace attn::testing {

struct TinyModel {
  static constexpr int64_t C = 8, H = 2, D = 4, V = 5;
  NamedParams params;

  explicit TinyModel(uint64_t seed) {
    auto add = [&](const char* name, const Shape& s, double r) {
      Tensor t = random_uniform(s, seed++, -r, r);
      t.set_requires_grad(true);
      params.emplace_back(name, t);
    };
    add("attn.wq", {C, C}, 0.35);
    add("attn.wk", {C, C}, 0.35);
    add("attn.wv", {C, C}, 0.35);
    add("attn.wo", {C, C}, 0.35);
    add("attn.bo", {C}, 0.1);
    add("norm.weight", {C}, 0.1);
    add("norm.bias", {C}, 0.1);
    add("head.weight", {V, C}, 0.35);
    add("head.bias", {V}, 0.1);
  }
  const Tensor& p(std::size_t i) const { return params[i].second; }

  // x: [B, L, C] f32, y: [B, L] i64
  Tensor loss(const Tensor& x, const Tensor& y, double dropout_p, uint64_t dropout_seed) const {
    const int64_t B = x.size(0), L = x.size(1);
    const Tensor h = layer_norm(x, p(5), p(6));  // [B, L, C]
    auto heads = [&](const Tensor& w) {          // -> [B, H, L, D]
      return permute(reshape(linear(h, w), {B, L, H, D}), {0, 2, 1, 3});
    };
    AttentionOptions o;
    o.causal = true;
    const Tensor a = scaled_dot_product_attention(heads(p(0)), heads(p(1)), heads(p(2)), o);  // [B, H, L, D]
    const Tensor merged = reshape(permute(a, {0, 2, 1, 3}), {B, L, C});
    const Tensor r = add(x, dropout(linear(merged, p(3), p(4)), dropout_p, true, dropout_seed));  // [B, L, C]
    const Tensor logits = linear(reshape(r, {B * L, C}), p(7), p(8));                             // [B·L, V]
    return cross_entropy(logits, y.reshape({B * L}));
  }
};

// Rows `idx` of a [N, ...] tensor, as a new contiguous [idx.size(), ...] tensor.
inline Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& idx) {
  Shape s = t.shape();
  s[0] = static_cast<int64_t>(idx.size());
  Tensor out = Tensor::empty(s, t.dtype());
  for (std::size_t i = 0; i < idx.size(); ++i)
    out.select(0, static_cast<int64_t>(i)).copy_from(t.select(0, idx[i]));
  return out;
}

}  // namespace attn::testing

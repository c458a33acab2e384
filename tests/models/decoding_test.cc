// KV-cache decoding against recomputing the full sequence at every step, and
// the masks (padding, causal) by perturbation.
#include <attn/core/autograd.h>
#include <attn/models/transformer.h>

#include <string>
#include <vector>

#include "testing/tolerances.h"

namespace attn {
namespace {

using models::Positions;
using models::TransformerConfig;

// Seeded ids in [1, V) as i64 [B, L].
Tensor random_ids(int64_t B, int64_t L, int64_t V, uint64_t seed) {
  attn::Rng rng(seed);
  std::vector<int64_t> v(static_cast<std::size_t>(B * L));
  for (auto& x : v) x = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(V - 1)));
  return Tensor::from(v, {B, L});
}

struct DecodeCase {
  std::string name;
  Positions positions;
  bool pre_norm;
  int64_t kv_heads;
};
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name; }

TransformerConfig small_config(const DecodeCase& c) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  cfg.positions = c.positions;
  cfg.pre_norm = c.pre_norm;
  cfg.kv_heads = c.kv_heads;
  cfg.seed = 7;
  cfg.dropout = 0.1;  // eval() must switch it off
  return cfg;
}

class KvCache : public ::testing::TestWithParam<DecodeCase> {};

// Batch 2 with different lengths (7 and 5, right-padded): prefill 3 tokens,
// then one token per step; each step's logits must equal the last-position
// logits of a fresh forward over the whole prefix. Positions past a row's
// length are padding and are not compared.
TEST_P(KvCache, DecoderLmStepsMatchFullRecompute) {
  models::DecoderLM lm(small_config(GetParam()));
  lm.eval();
  NoGradGuard no_grad;
  const int64_t V = lm.config().tgt_vocab, L = 7;
  const std::vector<int64_t> len = {7, 5};
  Tensor ids = random_ids(2, L, V, 11);
  for (int64_t l = len[1]; l < L; ++l) ids.set({1, l}, 0);
  nn::DecoderCache cache;
  Tensor prefill = lm.forward(ids.slice(1, 0, 3), Tensor(), &cache).logits;  // [2, 3, V]
  EXPECT_ALL_CLOSE(prefill, lm.forward(ids.slice(1, 0, 3)).logits, testing::tol::kKvCache);
  for (int64_t t = 3; t < L; ++t) {
    Tensor step = lm.step(ids.slice(1, t, t + 1), cache);                  // [2, V]
    Tensor full = lm.forward(ids.slice(1, 0, t + 1)).logits.select(1, t);  // [2, V]
    for (int64_t b = 0; b < 2; ++b) {
      if (t < len[b]) {
        EXPECT_ALL_CLOSE(step.select(0, b), full.select(0, b), testing::tol::kKvCache) << "step " << t;
      }
    }
  }
  EXPECT_EQ(cache.position, L);
  EXPECT_EQ(cache.self[0].length(), L);
}

TEST_P(KvCache, EncoderDecoderStepsMatchFullRecompute) {
  TransformerConfig cfg = small_config(GetParam());
  models::EncoderDecoder m(cfg);
  m.eval();
  NoGradGuard no_grad;
  const int64_t V = cfg.tgt_vocab;
  const std::vector<int64_t> src_len = {6, 4};
  Tensor src = random_ids(2, 6, V, 21);
  for (int64_t l = 4; l < 6; ++l) src.set({1, l}, 0);
  Tensor tgt = random_ids(2, 5, V, 22);
  Tensor memory = m.encode(src, src_len);
  nn::DecoderCache cache;
  Tensor cross_k;
  for (int64_t t = 0; t < 5; ++t) {
    Tensor step = m.step(tgt.slice(1, t, t + 1), memory, src_len, cache);          // [2, V]
    Tensor full = m.decode(tgt.slice(1, 0, t + 1), memory, src_len).select(1, t);  // [2, V]
    EXPECT_ALL_CLOSE(step, full, testing::tol::kKvCache) << "step " << t;
    // Cross-attention keys are computed once and then reused.
    if (t == 0) cross_k = cache.cross[0].k;
    EXPECT_EQ(cache.cross[0].k.storage(), cross_k.storage());
  }
  // The full forward agrees with decode over the whole target.
  EXPECT_ALL_CLOSE(m.forward(src, src_len, tgt).logits, m.decode(tgt, memory, src_len),
                   testing::tol::kKvCache);
}

INSTANTIATE_TEST_SUITE_P(Configs, KvCache,
                         ::testing::Values(DecodeCase{"sinusoidal_post_norm", Positions::sinusoidal, false,
                                                      0},
                                           DecodeCase{"learned_pre_norm_gqa", Positions::learned, true, 2},
                                           DecodeCase{"rope_pre_norm_gqa", Positions::rope, true, 1}),
                         [](const auto& info) { return info.param.name; });

// ---- masks by perturbation -----------------------------------------------------------------------

// Largest |a - b| over everything; used to show that a perturbation did reach an output.
double max_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

TEST(Masks, CausalFutureTokensDoNotChangeEarlierLogits) {
  for (Positions pos : {Positions::sinusoidal, Positions::rope}) {
    TransformerConfig cfg = TransformerConfig::preset("micro");
    cfg.positions = pos;
    models::DecoderLM lm(cfg);
    lm.eval();
    NoGradGuard no_grad;
    Tensor ids = random_ids(2, 8, cfg.tgt_vocab, 5);
    Tensor base = lm.forward(ids).logits;  // [2, 8, V]
    const int64_t t = 4;
    Tensor changed = ids.clone();
    for (int64_t b = 0; b < 2; ++b) changed.set({b, t}, 1 + (static_cast<int64_t>(ids.at({b, t})) % 50));
    Tensor out = lm.forward(changed).logits;
    EXPECT_ALL_CLOSE(out.slice(1, 0, t), base.slice(1, 0, t), testing::tol::kKvCache);
    EXPECT_GT(max_diff(out.slice(1, t, 8), base.slice(1, t, 8)), 1e-3) << "the perturbation must matter";
  }
}

TEST(Masks, PaddedSourceTokensDoNotChangeAnything) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  models::EncoderDecoder m(cfg);
  m.eval();
  NoGradGuard no_grad;
  const std::vector<int64_t> len = {6, 3};
  Tensor src = random_ids(2, 6, cfg.src_vocab, 8), tgt = random_ids(2, 4, cfg.tgt_vocab, 9);
  Tensor base = m.forward(src, len, tgt).logits;
  Tensor changed = src.clone();
  for (int64_t l = 3; l < 6; ++l) changed.set({1, l}, 1 + (static_cast<int64_t>(src.at({1, l})) + 7) % 60);
  EXPECT_ALL_CLOSE(m.forward(changed, len, tgt).logits, base, testing::tol::kKvCache);
  // Without the lengths the same change does reach the logits of row 1.
  EXPECT_GT(max_diff(m.forward(changed, {}, tgt).logits, m.forward(src, {}, tgt).logits), 1e-3);
}

TEST(Masks, ClassifierIgnoresPaddingAndCapturesClsAttention) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  cfg.num_classes = 3;
  cfg.pre_norm = true;
  cfg.positions = Positions::learned;
  models::EncoderClassifier m(cfg);
  m.eval();
  NoGradGuard no_grad;
  const std::vector<int64_t> len = {7, 4};
  Tensor ids = random_ids(2, 7, cfg.src_vocab, 3);
  auto base = m.forward(ids, len, Tensor(), true);
  Tensor changed = ids.clone();
  changed.set({1, 5}, 1 + (static_cast<int64_t>(ids.at({1, 5})) + 3) % 60);
  auto out = m.forward(changed, len, Tensor(), true);
  EXPECT_ALL_CLOSE(out.logits, base.logits, testing::tol::kKvCache);
  ASSERT_EQ(base.cls_attention.size(), 2u);
  for (const Tensor& w : base.cls_attention) {
    ASSERT_EQ(w.shape(), (Shape{2, cfg.heads, 7}));
    for (int64_t h = 0; h < cfg.heads; ++h) {
      double sum1 = 0;
      for (int64_t j = 0; j < 7; ++j) sum1 += w.at({1, h, j});
      EXPECT_NEAR(sum1, 1.0, 1e-5);
      for (int64_t j = 4; j < 7; ++j) EXPECT_EQ(w.at({1, h, j}), 0.0) << "padded key " << j << " got weight";
    }
  }
}

}  // namespace
}  // namespace attn

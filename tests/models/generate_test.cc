// Decoding (models/generate.h) against full recomputation: greedy is the
// argmax of a fresh forward at every step, beam search is exact when the beam
// covers the search space, batched equals one by one, sampling frequencies
// match the renormalised distribution.
#include <attn/core/autograd.h>
#include <attn/models/generate.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using models::Generated;
using models::GenerateOptions;
using models::LengthPenalty;
using models::Positions;
using models::SearchKind;
using models::TransformerConfig;

std::vector<int64_t> random_seq(int64_t L, int64_t V, uint64_t seed) {
  Rng rng(seed);
  std::vector<int64_t> v(static_cast<std::size_t>(L));
  for (auto& x : v) x = 3 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(V - 3)));
  return v;
}

double close_tol(double expected) {
  return testing::tol::kKvCache.abs + testing::tol::kKvCache.rel * std::abs(expected);
}

struct ModelCase {
  std::string name;
  Positions positions;
  bool pre_norm;
  int64_t kv_heads;
};
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

TransformerConfig config_for(const ModelCase& c, int64_t vocab = 64) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  cfg.src_vocab = cfg.tgt_vocab = vocab;
  cfg.positions = c.positions;
  cfg.pre_norm = c.pre_norm;
  cfg.kv_heads = c.kv_heads;
  cfg.seed = 5;
  cfg.dropout = 0.1;  // generate() must run in eval mode
  return cfg;
}

// Log-softmax of the last position of a full forward over `prefix` (no cache), in double.
std::vector<double> full_log_probs(models::DecoderLM& lm, const std::vector<int64_t>& prefix) {
  NoGradGuard ng;
  lm.eval();
  const int64_t L = static_cast<int64_t>(prefix.size());
  Tensor logits = lm.forward(Tensor::from(prefix, {1, L})).logits.select(0, 0).select(0, L - 1);
  std::vector<double> x = logits.to_vector();
  const double mx = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  for (double& v : x) v -= mx + std::log(s);
  return x;
}

std::vector<double> full_log_probs(models::EncoderDecoder& m, const std::vector<int64_t>& src,
                                   const std::vector<int64_t>& tgt_in) {
  NoGradGuard ng;
  m.eval();
  const int64_t Ls = static_cast<int64_t>(src.size()), Lt = static_cast<int64_t>(tgt_in.size());
  Tensor logits = m.forward(Tensor::from(src, {1, Ls}), {}, Tensor::from(tgt_in, {1, Lt}))
                      .logits.select(0, 0)
                      .select(0, Lt - 1);
  std::vector<double> x = logits.to_vector();
  const double mx = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  for (double& v : x) v -= mx + std::log(s);
  return x;
}

// A generic next-token distribution: prefix of generated ids -> log-probs.
using NextFn = std::function<std::vector<double>(const std::vector<int64_t>&)>;

NextFn lm_next(models::DecoderLM& lm, const std::vector<int64_t>& prompt) {
  return [&lm, prompt](const std::vector<int64_t>& gen) {
    std::vector<int64_t> p = prompt;
    p.insert(p.end(), gen.begin(), gen.end());
    return full_log_probs(lm, p);
  };
}
NextFn encdec_next(models::EncoderDecoder& m, const std::vector<int64_t>& src, int64_t bos) {
  return [&m, src, bos](const std::vector<int64_t>& gen) {
    std::vector<int64_t> t = {bos};
    t.insert(t.end(), gen.begin(), gen.end());
    return full_log_probs(m, src, t);
  };
}

// Greedy must pick the argmax of the full recompute at every step, and its
// log_prob must be the sum of the chosen log-probs.
void expect_greedy_matches(const Generated& g, const NextFn& next, int64_t max_new) {
  std::vector<int64_t> gen;
  double lp = 0;
  for (std::size_t t = 0; t <= g.ids.size(); ++t) {
    if (t == g.ids.size() && g.stop_token < 0) break;
    std::vector<double> ls = next(gen);
    const int64_t want = std::max_element(ls.begin(), ls.end()) - ls.begin();
    const int64_t got = t < g.ids.size() ? g.ids[t] : g.stop_token;
    ASSERT_EQ(got, want) << "step " << t;
    lp += ls[want];
    gen.push_back(got);
  }
  if (g.stop_token < 0) {
    EXPECT_EQ(static_cast<int64_t>(g.ids.size()), max_new);
  }
  EXPECT_NEAR(g.log_prob, lp, close_tol(lp));
  EXPECT_NEAR(g.score, lp, close_tol(lp));
}

class Generate : public ::testing::TestWithParam<ModelCase> {};

TEST_P(Generate, GreedyIsArgmaxOfFullRecomputeLm) {
  models::DecoderLM lm(config_for(GetParam()));
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.eos_id = -1;
  const std::vector<std::vector<int64_t>> prompts = {random_seq(4, 64, 1), random_seq(1, 64, 2)};
  std::vector<Generated> out = models::generate(lm, prompts, o);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(lm.is_training());  // mode restored
  for (std::size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(out[b].source, static_cast<int64_t>(b));
    expect_greedy_matches(out[b], lm_next(lm, prompts[b]), 10);
  }
}

TEST_P(Generate, GreedyIsArgmaxOfFullRecomputeEncDec) {
  models::EncoderDecoder m(config_for(GetParam()));
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.eos_id = -1;
  const std::vector<std::vector<int64_t>> src = {random_seq(6, 64, 3), random_seq(3, 64, 4)};
  std::vector<Generated> out = models::generate(m, src, o);
  ASSERT_EQ(out.size(), 2u);
  for (std::size_t b = 0; b < 2; ++b) expect_greedy_matches(out[b], encdec_next(m, src[b], o.bos_id), 10);
}

// generate() packs the weights once per call (ops::PackedWeightScope, attn/ops/linear.h): a weight changed in
// place between two calls must be seen by the second call.
TEST_P(Generate, SeesWeightsChangedBetweenCalls) {
  models::EncoderDecoder m(config_for(GetParam()));
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.eos_id = -1;
  const std::vector<std::vector<int64_t>> src = {random_seq(5, 64, 7), random_seq(4, 64, 8)};
  const std::vector<Generated> before = models::generate(m, src, o);
  int changed = 0;
  for (auto& [name, p] : m.named_parameters()) {
    if (name.find("decoder.layers.") == std::string::npos || name.find("weight") == std::string::npos ||
        p.rank() != 2)
      continue;
    p.copy_from(testing::random_uniform(p.shape(), 900 + static_cast<uint64_t>(changed), -0.4, 0.4));
    ++changed;
  }
  ASSERT_GT(changed, 0);
  const std::vector<Generated> after = models::generate(m, src, o);
  ASSERT_EQ(after.size(), 2u);
  bool any_differs = false;
  for (std::size_t b = 0; b < 2; ++b) {
    expect_greedy_matches(after[b], encdec_next(m, src[b], o.bos_id), 8);
    any_differs = any_differs || after[b].ids != before[b].ids || after[b].log_prob != before[b].log_prob;
  }
  EXPECT_TRUE(any_differs);  // the change mattered, so a stale pack would have been caught
}

// Stop tokens: choose as eos the first token greedy produces at a step t >= 1
// that it did not produce before (t = 0 if none); the run then ends at step t,
// and the stop token is reported but not in ids.
TEST_P(Generate, StopsAtEosAndStopSet) {
  models::DecoderLM lm(config_for(GetParam()));
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.eos_id = -1;
  const std::vector<int64_t> prompt = random_seq(3, 64, 9);
  const Generated free = models::generate(lm, {prompt}, o)[0];
  std::size_t t = 1;
  while (t < free.ids.size() &&
         std::find(free.ids.begin(), free.ids.begin() + t, free.ids[t]) != free.ids.begin() + t)
    ++t;
  if (t == free.ids.size()) t = 0;
  for (bool as_eos : {true, false}) {
    GenerateOptions s = o;
    if (as_eos)
      s.eos_id = free.ids[t];
    else
      s.stop_ids = {63, free.ids[t]};
    const Generated g = models::generate(lm, {prompt}, s)[0];
    EXPECT_EQ(g.stop_token, free.ids[t]);
    EXPECT_EQ(g.ids, std::vector<int64_t>(free.ids.begin(), free.ids.begin() + t));
    expect_greedy_matches(g, lm_next(lm, prompt), 12);
  }
}

TEST_P(Generate, BeamOfOneEqualsGreedy) {
  models::EncoderDecoder m(config_for(GetParam()));
  models::DecoderLM lm(config_for(GetParam()));
  const std::vector<std::vector<int64_t>> seqs = {random_seq(5, 64, 3), random_seq(2, 64, 4)};
  GenerateOptions g;
  g.max_new_tokens = 8;
  g.eos_id = 7;
  GenerateOptions b = g;
  b.search = SearchKind::beam;
  b.beam = 1;
  b.length_alpha = 0;
  for (int model = 0; model < 2; ++model) {
    std::vector<Generated> x = model == 0 ? models::generate(m, seqs, g) : models::generate(lm, seqs, g);
    std::vector<Generated> y = model == 0 ? models::generate(m, seqs, b) : models::generate(lm, seqs, b);
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i].ids, y[i].ids) << "model " << model << " row " << i;
      EXPECT_EQ(x[i].stop_token, y[i].stop_token);
      EXPECT_NEAR(x[i].log_prob, y[i].log_prob, close_tol(x[i].log_prob));
    }
  }
}

// top_k = 1 samples the argmax; so does a tiny temperature.
TEST_P(Generate, TopKOneAndColdTemperatureEqualGreedy) {
  models::DecoderLM lm(config_for(GetParam()));
  const std::vector<std::vector<int64_t>> prompts = {random_seq(4, 64, 1), random_seq(2, 64, 2)};
  GenerateOptions g;
  g.max_new_tokens = 10;
  g.eos_id = -1;
  const std::vector<Generated> want = models::generate(lm, prompts, g);
  GenerateOptions s = g;
  s.search = SearchKind::sample;
  s.seed = 3;
  s.top_k = 1;
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 1) s.top_k = 0, s.temperature = 1e-4;
    const std::vector<Generated> got = models::generate(lm, prompts, s);
    for (std::size_t b = 0; b < 2; ++b) {
      EXPECT_EQ(got[b].ids, want[b].ids) << "variant " << variant;
      EXPECT_NEAR(got[b].log_prob, want[b].log_prob, close_tol(want[b].log_prob));
    }
  }
}

// Rows of different lengths decoded together equal each decoded alone.
TEST_P(Generate, BatchedEqualsOneByOne) {
  TransformerConfig cfg = config_for(GetParam());
  models::DecoderLM lm(cfg);
  models::EncoderDecoder m(cfg);
  const std::vector<std::vector<int64_t>> seqs = {random_seq(5, 64, 11), random_seq(2, 64, 12),
                                                  random_seq(8, 64, 13), random_seq(2, 64, 14)};
  for (SearchKind kind : {SearchKind::greedy, SearchKind::beam}) {
    GenerateOptions o;
    o.search = kind;
    o.max_new_tokens = 9;
    o.eos_id = 5;
    o.stop_ids = {6, 7};  // likely hits on some rows: finished rows leave the batch
    o.beam = 3;
    o.num_return = kind == SearchKind::beam ? 2 : 1;
    for (int model = 0; model < 2; ++model) {
      GenerateOptions oo = o;
      oo.capture_cross_attention = model == 0;
      auto run = [&](const std::vector<std::vector<int64_t>>& s) {
        return model == 0 ? models::generate(m, s, oo) : models::generate(lm, s, oo);
      };
      const std::vector<Generated> together = run(seqs);
      ASSERT_EQ(together.size(), seqs.size() * static_cast<std::size_t>(o.num_return));
      for (std::size_t b = 0; b < seqs.size(); ++b) {
        const std::vector<Generated> alone = run({seqs[b]});
        for (int64_t r = 0; r < o.num_return; ++r) {
          const Generated& x = together[b * o.num_return + r];
          const Generated& y = alone[r];
          EXPECT_EQ(x.source, static_cast<int64_t>(b));
          EXPECT_EQ(x.ids, y.ids) << "model " << model << " source " << b << " rank " << r;
          EXPECT_EQ(x.stop_token, y.stop_token);
          EXPECT_NEAR(x.score, y.score, close_tol(y.score));
          if (model == 0) {
            ASSERT_EQ(x.cross_attention.shape(), y.cross_attention.shape());
            EXPECT_ALL_CLOSE(x.cross_attention, y.cross_attention, testing::tol::kKvCache);
          }
        }
      }
    }
  }
}

// The captured cross-attention equals the head-averaged last-layer weights of
// a full (uncached) decode of the generated target; rows sum to 1.
TEST_P(Generate, CrossAttentionMatchesFullDecode) {
  models::EncoderDecoder m(config_for(GetParam()));
  const std::vector<std::vector<int64_t>> src = {random_seq(6, 64, 31), random_seq(4, 64, 32)};
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.eos_id = -1;
  o.capture_cross_attention = true;
  const std::vector<Generated> out = models::generate(m, src, o);
  m.eval();
  NoGradGuard ng;
  for (std::size_t b = 0; b < src.size(); ++b) {
    const int64_t Ls = static_cast<int64_t>(src[b].size());
    std::vector<int64_t> tgt = {o.bos_id};
    tgt.insert(tgt.end(), out[b].ids.begin(), out[b].ids.end() - 1);
    const int64_t Lt = static_cast<int64_t>(tgt.size());
    Tensor memory = m.encode(Tensor::from(src[b], {1, Ls}), {});
    Tensor w;
    m.decode(Tensor::from(tgt, {1, Lt}), memory, {}, nullptr, nullptr, &w);  // [1, H, Lt, Ls]
    ASSERT_EQ(out[b].cross_attention.shape(), (Shape{Lt, Ls}));
    const int64_t H = w.size(1);
    for (int64_t t = 0; t < Lt; ++t) {
      double row = 0;
      for (int64_t j = 0; j < Ls; ++j) {
        double avg = 0;
        for (int64_t h = 0; h < H; ++h) avg += w.at({0, h, t, j}) / static_cast<double>(H);
        const double got = out[b].cross_attention.at({t, j});
        EXPECT_NEAR(got, avg, 1e-5) << "source " << b << " step " << t << " key " << j;
        row += got;
      }
      EXPECT_NEAR(row, 1.0, 1e-5);
    }
  }
}

TEST_P(Generate, StreamingCallbackReportsTokensInOrder) {
  models::DecoderLM lm(config_for(GetParam()));
  GenerateOptions o;
  o.search = SearchKind::sample;
  o.seed = 4;
  o.max_new_tokens = 7;
  o.eos_id = -1;
  const std::vector<std::vector<int64_t>> prompts = {random_seq(3, 64, 1), random_seq(5, 64, 2)};
  std::map<int64_t, std::vector<int64_t>> seen;
  const std::vector<Generated> out =
      models::generate(lm, prompts, o, [&](int64_t s, int64_t t) { seen[s].push_back(t); });
  for (std::size_t b = 0; b < prompts.size(); ++b) EXPECT_EQ(seen[static_cast<int64_t>(b)], out[b].ids);
}

TEST_P(Generate, SameSeedSameOutput) {
  models::DecoderLM lm(config_for(GetParam()));
  GenerateOptions o;
  o.search = SearchKind::sample;
  o.max_new_tokens = 20;
  o.eos_id = -1;
  o.top_p = 0.95;
  o.seed = 17;
  const std::vector<std::vector<int64_t>> prompts = {random_seq(3, 64, 1)};
  const Generated a = models::generate(lm, prompts, o)[0];
  const Generated b = models::generate(lm, prompts, o)[0];
  EXPECT_EQ(a.ids, b.ids);
  o.seed = 18;
  const Generated c = models::generate(lm, prompts, o)[0];
  EXPECT_NE(a.ids, c.ids);  // 20 draws from ~64 tokens: a collision is vanishingly unlikely
}

INSTANTIATE_TEST_SUITE_P(Models, Generate,
                         ::testing::Values(ModelCase{"sinusoidal_postnorm", Positions::sinusoidal, false, 0},
                                           ModelCase{"learned_prenorm_gqa", Positions::learned, true, 2},
                                           ModelCase{"rope_prenorm", Positions::rope, true, 0}),
                         [](const auto& info) { return info.param.name; });

// ---- exhaustive beam search ----------------------------------------------------------------

struct ExhaustiveCase {
  std::string name;
  int64_t vocab, max_new;
  double alpha;
  LengthPenalty penalty;
  bool lm;
};
void PrintTo(const ExhaustiveCase& c, std::ostream* os) { *os << c.name; }

class BeamExhaustive : public ::testing::TestWithParam<ExhaustiveCase> {};

// Enumerates every sequence (stopped by eos or by the length limit), scores it
// from full recomputation, and checks that a beam as wide as the search space
// returns the best ones in order.
TEST_P(BeamExhaustive, FindsTheBestScoringSequences) {
  const ExhaustiveCase& c = GetParam();
  TransformerConfig cfg = config_for({"x", Positions::sinusoidal, false, 0}, c.vocab);
  cfg.d_model = 16;
  cfg.heads = 2;
  models::DecoderLM lm(cfg);
  models::EncoderDecoder m(cfg);
  const std::vector<int64_t> input = {3, 1, 2, 1};
  const int64_t eos = 2;
  NextFn next = c.lm ? lm_next(lm, input) : encdec_next(m, input, 1);
  struct Seq {
    std::vector<int64_t> ids;
    int64_t stop;
    double score;
  };
  std::vector<Seq> all;
  std::function<void(std::vector<int64_t>&, double)> expand = [&](std::vector<int64_t>& gen, double lp) {
    const std::vector<double> ls = next(gen);
    for (int64_t t = 0; t < c.vocab; ++t) {
      const int64_t n = static_cast<int64_t>(gen.size()) + 1;
      const double total = lp + ls[t];
      if (t == eos || n == c.max_new) {
        Seq s{gen, t == eos ? eos : -1, total / models::length_penalty(n, c.alpha, c.penalty)};
        if (t != eos) s.ids.push_back(t);
        all.push_back(s);
        continue;
      }
      gen.push_back(t);
      expand(gen, total);
      gen.pop_back();
    }
  };
  std::vector<int64_t> gen;
  expand(gen, 0.0);
  std::stable_sort(all.begin(), all.end(), [](const Seq& a, const Seq& b) { return a.score > b.score; });

  GenerateOptions o;
  o.search = SearchKind::beam;
  o.max_new_tokens = c.max_new;
  o.eos_id = eos;
  o.bos_id = 1;
  o.length_alpha = c.alpha;
  o.length_penalty = c.penalty;
  o.beam = static_cast<int64_t>(std::pow(c.vocab, c.max_new));  // wider than the search space
  o.num_return = 3;
  const std::vector<Generated> got =
      c.lm ? models::generate(lm, {input}, o) : models::generate(m, {input}, o);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_NEAR(got[r].score, all[r].score, close_tol(all[r].score)) << "rank " << r;
    if (r + 1 < all.size() && all[r].score - all[r + 1].score > 1e-4 &&
        (r == 0 || all[r - 1].score - all[r].score > 1e-4)) {
      EXPECT_EQ(got[r].ids, all[r].ids) << "rank " << r;
      EXPECT_EQ(got[r].stop_token, all[r].stop);
    }
  }
  if (c.alpha == 0.0) {  // a narrow beam cannot score better than the exhaustive best
    o.beam = 2;
    o.num_return = 1;
    const Generated narrow = c.lm ? models::generate(lm, {input}, o)[0] : models::generate(m, {input}, o)[0];
    EXPECT_LE(narrow.score, all[0].score + close_tol(all[0].score));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, BeamExhaustive,
    ::testing::Values(ExhaustiveCase{"lm_v5_len3_raw", 5, 3, 0.0, LengthPenalty::gnmt, true},
                      ExhaustiveCase{"lm_v4_len4_gnmt", 4, 4, 1.0, LengthPenalty::gnmt, true},
                      ExhaustiveCase{"encdec_v5_len3_power", 5, 3, 0.8, LengthPenalty::power, false},
                      ExhaustiveCase{"encdec_v4_len4_raw", 4, 4, 0.0, LengthPenalty::gnmt, false}),
    [](const auto& info) { return info.param.name; });

// ---- sampling distribution ------------------------------------------------------------------

// The test's own nucleus filter, written from the definition.
std::vector<double> nucleus(const std::vector<double>& logits, double temperature, int64_t top_k,
                            double top_p) {
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<int64_t> order(static_cast<std::size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  std::vector<double> p(static_cast<std::size_t>(V), 0.0);
  double z = 0;
  const int64_t k = top_k > 0 ? std::min(top_k, V) : V;
  for (int64_t i = 0; i < k; ++i) z += std::exp((logits[order[i]] - logits[order[0]]) / temperature);
  double cum = 0, kept = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double q = std::exp((logits[order[i]] - logits[order[0]]) / temperature) / z;
    p[order[i]] = q;
    kept += q;
    cum += q;
    if (cum >= top_p) break;
  }
  for (double& x : p) x /= kept;
  return p;
}

struct SampleCase {
  std::string name;
  double temperature;
  int64_t top_k;
  double top_p;
};
void PrintTo(const SampleCase& c, std::ostream* os) { *os << c.name; }

class Sampling : public ::testing::TestWithParam<SampleCase> {};

// 4000 copies of one prompt, one new token each (one batched step, every row
// with its own generator): the token counts must fit the filtered distribution
// of the model's logits. Tokens outside the kept set must never appear, and
// the chi-square statistic must stay below the 0.999 quantile (Wilson-Hilferty);
// a cut-off one token off, or a missing temperature, exceeds it by far.
TEST_P(Sampling, FrequenciesMatchTheFilteredDistribution) {
  const SampleCase& c = GetParam();
  TransformerConfig cfg = config_for({"x", Positions::sinusoidal, true, 0});
  models::DecoderLM lm(cfg);
  const std::vector<int64_t> prompt = random_seq(4, 64, 77);
  std::vector<double> logits;
  {
    lm.eval();
    NoGradGuard ng;
    Tensor l = lm.forward(Tensor::from(prompt, {1, 4})).logits.select(0, 0).select(0, 3);
    logits = l.to_vector();
  }
  const std::vector<double> p = nucleus(logits, c.temperature, c.top_k, c.top_p);
  const int64_t N = 4000;
  GenerateOptions o;
  o.search = SearchKind::sample;
  o.max_new_tokens = 1;
  o.eos_id = -1;
  o.temperature = c.temperature;
  o.top_k = c.top_k;
  o.top_p = c.top_p;
  o.seed = 2024;
  const std::vector<Generated> out =
      models::generate(lm, std::vector<std::vector<int64_t>>(static_cast<std::size_t>(N), prompt), o);
  std::vector<int64_t> count(p.size(), 0);
  for (const Generated& g : out) ++count[g.ids.at(0)];
  // Chi-square over the kept tokens; tokens expected fewer than 5 times share one bin.
  double chi2 = 0, pooled_e = 0, pooled_n = 0;
  int64_t bins = 0, kept = 0;
  for (std::size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) {
      EXPECT_EQ(count[t], 0) << "token " << t << " is outside the kept set";
      continue;
    }
    ++kept;
    const double e = static_cast<double>(N) * p[t];
    if (e < 5) {
      pooled_e += e, pooled_n += static_cast<double>(count[t]);
      continue;
    }
    ++bins;
    chi2 += (count[t] - e) * (count[t] - e) / e;
  }
  if (pooled_e > 0) ++bins, chi2 += (pooled_n - pooled_e) * (pooled_n - pooled_e) / pooled_e;
  ASSERT_GT(bins, 2) << "the case must keep several tokens to test anything";
  const double df = static_cast<double>(bins - 1), z = 3.09;  // 0.999 quantile of N(0, 1)
  const double crit = df * std::pow(1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df)), 3);
  EXPECT_LT(chi2, crit) << "kept " << kept << " tokens";

  // The library's distribution equals the test's own filter exactly (same cut).
  std::vector<float> lf(logits.begin(), logits.end());
  const std::vector<double> lib =
      models::sampling_distribution(lf.data(), 64, c.temperature, c.top_k, c.top_p);
  for (std::size_t t = 0; t < p.size(); ++t) {
    EXPECT_EQ(lib[t] == 0, p[t] == 0) << "token " << t;
    EXPECT_NEAR(lib[t], p[t], 1e-9);
  }
}

INSTANTIATE_TEST_SUITE_P(Filters, Sampling,
                         ::testing::Values(SampleCase{"plain", 1.0, 0, 1.0},
                                           SampleCase{"cold_0_2", 0.2, 0, 1.0},
                                           SampleCase{"hot_2", 2.0, 0, 1.0},
                                           SampleCase{"top_k_5", 1.0, 5, 1.0},
                                           SampleCase{"top_p_0_6_t_0_5", 0.5, 0, 0.6},
                                           SampleCase{"top_p_0_9_top_k_20", 0.5, 20, 0.9}),
                         [](const auto& info) { return info.param.name; });

// Hand-made distributions: the nucleus keeps the smallest prefix reaching top_p.
TEST(SamplingDistribution, NucleusCutOff) {
  const std::vector<double> probs = {0.05, 0.5, 0.1, 0.2, 0.15};
  std::vector<float> logits;
  for (double q : probs) logits.push_back(static_cast<float>(std::log(q)));
  // Sorted: 0.5 (1), 0.2 (3), 0.15 (4), 0.1 (2), 0.05 (0); cumulative 0.5, 0.7, 0.85, 0.95, 1.
  struct Cut {
    double top_p;
    std::vector<int64_t> kept;
  };
  for (const Cut& cut : {Cut{0.3, {1}}, Cut{0.69, {1, 3}}, Cut{0.72, {1, 3, 4}}, Cut{0.9, {1, 3, 4, 2}},
                         Cut{1.0, {1, 3, 4, 2, 0}}}) {
    const std::vector<double> p = models::sampling_distribution(logits.data(), 5, 1.0, 0, cut.top_p);
    double z = 0;
    for (int64_t t : cut.kept) z += probs[t];
    for (int64_t t = 0; t < 5; ++t) {
      const bool in = std::find(cut.kept.begin(), cut.kept.end(), t) != cut.kept.end();
      EXPECT_NEAR(p[t], in ? probs[t] / z : 0.0, 1e-6) << "top_p " << cut.top_p << " token " << t;
    }
  }
}

// ---- bad input ------------------------------------------------------------------------------

TEST(GenerateErrors, BadOptionsAndInput) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  models::DecoderLM lm(cfg);
  models::EncoderDecoder m(cfg);
  const std::vector<std::vector<int64_t>> ok = {{3, 4, 5}};
  GenerateOptions o;
  o.search = SearchKind::beam;
  o.beam = 0;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"beam must be >= 1", "got 0"});
  o.beam = 2;
  o.num_return = 3;
  EXPECT_ERROR_CONTAINS(models::generate(m, ok, o), {"num_return", "[1, beam = 2]", "got 3"});
  o.num_return = 1;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o, [](int64_t, int64_t) {}), {"callback", "beam"});
  o = GenerateOptions();
  o.search = SearchKind::sample;
  for (double bad : {0.0, 1.5, -0.1}) {
    o.top_p = bad;
    EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"top_p must be in (0, 1]", "got"});
  }
  o.top_p = 1;
  o.temperature = 0;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"temperature must be > 0", "got 0"});
  o.temperature = 1;
  o.top_k = -1;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"top_k must be >= 0", "got -1"});
  o = GenerateOptions();
  EXPECT_ERROR_CONTAINS(models::generate(lm, {{3, 64}}, o), {"prompt 0 token 1 is 64", "[0, 64)"});
  EXPECT_ERROR_CONTAINS(models::generate(m, {{3}, {-1}}, o), {"source 1 token 0 is -1", "[0, 64)"});
  EXPECT_ERROR_CONTAINS(models::generate(lm, {std::vector<int64_t>(64, 3)}, o),
                        {"prompt 0 has 64 tokens", "max_len - 1 = 63"});
  EXPECT_ERROR_CONTAINS(models::generate(lm, {{}}, o), {"prompt 0 has 0 tokens"});
  EXPECT_ERROR_CONTAINS(models::generate(m, {std::vector<int64_t>(65, 3)}, o),
                        {"source 0 has 65 tokens", "max_len = 64"});
  o.eos_id = 64;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"eos_id", "got 64"});
  o.eos_id = 2;
  o.bos_id = 99;
  EXPECT_ERROR_CONTAINS(models::generate(m, ok, o), {"bos_id", "got 99"});
  o.bos_id = 1;
  o.capture_cross_attention = true;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"capture_cross_attention", "EncoderDecoder"});
  o.capture_cross_attention = false;
  o.max_new_tokens = -1;
  EXPECT_ERROR_CONTAINS(models::generate(lm, ok, o), {"max_new_tokens must be >= 0", "got -1"});
}

// The length limit: a prompt near max_len stops at max_len total tokens.
TEST(GenerateLimits, StopsAtMaxLenAndZeroNewTokens) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  models::DecoderLM lm(cfg);
  GenerateOptions o;
  o.eos_id = -1;
  o.max_new_tokens = 10;
  const std::vector<Generated> out = models::generate(lm, {std::vector<int64_t>(60, 3), {3}}, o);
  EXPECT_EQ(out[0].ids.size(), 4u);  // 60 + 4 = max_len 64
  EXPECT_EQ(out[1].ids.size(), 10u);
  o.max_new_tokens = 0;
  const std::vector<Generated> none = models::generate(lm, {{3, 4}}, o);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].ids.empty());
}

}  // namespace
}  // namespace attn

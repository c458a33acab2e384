// models::runtime::Scheduler's logic on a decoder whose logits are a known function of what the cache
// holds, so every rule is checked exactly: first come first served, chunked prefill that holds
// decoding rows back by at most one chunk, prefix-cache hits, preemption by recompute under a tiny
// pool (same tokens as with room), cancel, stop tokens, length limits, and bad requests.
#include <attn/core/error.h>
#include <attn/models/runtime/scheduler.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "testing/testing.h"

namespace attn {
namespace {

using models::SearchKind;
using models::runtime::BatchEntry;
using models::runtime::FinishReason;
using models::runtime::KvCacheConfig;
using models::runtime::PagedKvCache;
using models::runtime::Scheduler;
using models::runtime::SchedulerOptions;
using models::runtime::SequenceEvent;
using models::runtime::SequenceRequest;

constexpr int64_t kVocab = 50;

// Writes every position's K row as its token (so the cache's contents can be checked) and predicts
// next = (sum of every token the sequence holds, read back from the cache) mod kVocab, by way of a
// one-hot logit. A sequence's tokens therefore depend on its whole history, and a wrong cache row
// (another sequence's, a stale block) changes them.
class SumDecoder : public models::runtime::BatchDecoder {
 public:
  explicit SumDecoder(int64_t context) : context_(context) {}
  int64_t batch_vocab() const override { return kVocab; }
  int64_t batch_context() const override { return context_; }
  KvCacheConfig kv_layout() const override {
    KvCacheConfig k;
    k.layers = 2;
    k.kv_heads = 1;
    k.head_dim = 2;
    return k;
  }
  void forward_batch(PagedKvCache& cache, std::span<const BatchEntry> batch) override {
    rows_.push_back(0);
    entries_.push_back(static_cast<int64_t>(batch.size()));
    for (const BatchEntry& e : batch) {
      const int64_t len = cache.length(e.seq), pos = len - e.n;
      rows_.back() += e.n;
      for (int64_t l = 0; l < 2; ++l)
        for (int64_t i = 0; i < e.n; ++i) {
          const float k[2] = {static_cast<float>(e.tokens[i]), 0.0f}, v[2] = {0.0f, 0.0f};
          cache.write(e.seq, l, pos + i, k, v, 1);
        }
      cache.commit(e.seq);
      if (!e.logits) continue;
      // Read every position back through layer 1's table.
      const auto& t = cache.table(e.seq, 1);
      const ops::PagedKv view = cache.view();
      const auto* data = static_cast<const float*>(view.data);
      int64_t sum = 0;
      for (int64_t p = 0; p < len; ++p) {
        const int32_t b = t[static_cast<std::size_t>(p / view.block_tokens)];
        sum += static_cast<int64_t>(data[b * view.block_stride + (p % view.block_tokens) * view.head_dim]);
      }
      std::fill(e.logits, e.logits + kVocab, 0.0f);
      e.logits[sum % kVocab] = 1.0f;
    }
  }
  std::vector<int64_t> rows_, entries_;  // per step

 private:
  int64_t context_;
};

// The tokens the SumDecoder gives one prompt alone: next = sum of all tokens so far mod V.
std::vector<int32_t> expected(const std::vector<int32_t>& prompt, int64_t n, int64_t stop = -1) {
  std::vector<int32_t> all = prompt, out;
  for (int64_t i = 0; i < n; ++i) {
    const auto t = static_cast<int32_t>(std::accumulate(all.begin(), all.end(), int64_t{0}) % kVocab);
    if (t == stop) break;
    out.push_back(t);
    all.push_back(t);
  }
  return out;
}

struct SeqRun {
  std::vector<int32_t> ids;
  std::vector<int64_t> token_steps;  // the step each token came in
  FinishReason reason = FinishReason::error;
  int64_t stop_token = -1, cached = -1, admitted_step = -1;
  bool finished = false;
};

struct Fixture {
  SumDecoder dec;
  PagedKvCache cache;
  Scheduler sched;
  std::map<int64_t, SeqRun> runs;
  int64_t step_no = 0;
  Fixture(int64_t pool_positions, SchedulerOptions o = {}, int64_t context = 4096, int64_t block = 4)
      : dec(context), cache(config(pool_positions, block)), sched(dec, cache, o) {}
  static KvCacheConfig config(int64_t positions, int64_t block) {
    KvCacheConfig k = SumDecoder(1).kv_layout();
    k.block_tokens = block;
    k.pool_bytes = positions * k.layers * 2 * k.kv_heads * k.head_dim * 4;
    return k;
  }
  int64_t submit(std::vector<int32_t> prompt, int64_t max_new, int64_t stop = -1) {
    SequenceRequest r;
    r.prompt = std::move(prompt);
    r.options.max_new_tokens = max_new;
    r.options.eos_id = stop;
    auto* self = this;
    auto key = std::make_shared<int64_t>(-1);
    r.on_event = [self, key](const SequenceEvent& e) {
      SeqRun& run = self->runs[e.id];
      if (e.kind == SequenceEvent::Kind::admitted) {
        run.cached = e.cached_tokens;
        run.admitted_step = self->step_no;
      } else if (e.kind == SequenceEvent::Kind::token) {
        run.ids.push_back(static_cast<int32_t>(e.token));
        run.token_steps.push_back(self->step_no);
      } else {
        run.finished = true;
        run.reason = e.reason;
        run.stop_token = e.stop_token;
      }
    };
    return sched.submit(std::move(r));
  }
  void run_all(int64_t max_steps = 100000) {
    while (sched.step()) {
      ++step_no;
      ASSERT_LT(step_no, max_steps) << "the scheduler does not finish";
    }
  }
};

std::vector<int32_t> prompt_of(int64_t n, int32_t seed) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((seed * 7 + i * 3) % kVocab));
  return p;
}

TEST(Scheduler, EverySequenceGetsTheTokensItWouldGetAlone) {
  Fixture f(4096);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(prompt_of(3 + 5 * i, i + 1));
  for (const auto& p : prompts) f.submit(p, 12);
  f.run_all();
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(f.runs[i].finished);
    EXPECT_EQ(f.runs[i].reason, FinishReason::length);
    EXPECT_EQ(f.runs[i].ids, expected(prompts[i], 12)) << "request " << i;
  }
  // All six in the batch from the first step: far fewer steps than one after another.
  EXPECT_LE(f.step_no, 14);
  const auto a = f.cache.accounting();
  EXPECT_EQ(f.cache.sequences(), 0);
  EXPECT_EQ(a.reserved, a.cached) << "only the prefix cache holds blocks once every request has finished";
}

// Greedy and sampled requests share steps; each sampled one draws from its own generator, so its
// tokens are those it gets alone with the same seed, whoever shares the batch.
TEST(Scheduler, SampledAndGreedyRequestsMixAndEachSampleFollowsItsSeed) {
  const auto sampled = [](int64_t seed) {
    SequenceRequest r;
    r.prompt = prompt_of(7, static_cast<int32_t>(seed));
    r.options.search = SearchKind::sample;
    r.options.temperature = 0.7;
    r.options.top_k = 8;
    r.options.max_new_tokens = 15;
    r.options.eos_id = -1;
    r.seed = static_cast<uint64_t>(seed);
    return r;
  };
  const auto run = [](std::vector<SequenceRequest> reqs) {
    SumDecoder dec(4096);
    PagedKvCache cache(Fixture::config(4096, 4));
    Scheduler sched(dec, cache);
    std::map<int64_t, std::vector<int32_t>> got;
    for (auto& r : reqs) {
      r.on_event = [&got](const SequenceEvent& e) {
        if (e.kind == SequenceEvent::Kind::token) got[e.id].push_back(static_cast<int32_t>(e.token));
      };
      sched.submit(std::move(r));
    }
    while (sched.step()) {
    }
    return got;
  };
  std::vector<SequenceRequest> mixed;
  for (int i = 0; i < 6; ++i) {
    if (i % 2) {
      mixed.push_back(sampled(100 + i));
    } else {
      SequenceRequest g;
      g.prompt = prompt_of(5 + i, i);
      g.options.max_new_tokens = 15;
      g.options.eos_id = -1;
      mixed.push_back(g);
    }
  }
  const auto together = run(mixed);
  for (int i = 0; i < 6; ++i) {
    if (i % 2) {
      const auto alone = run({sampled(100 + i)});
      EXPECT_EQ(together.at(i), alone.at(0)) << "request " << i;
    } else {
      EXPECT_EQ(together.at(i), expected(prompt_of(5 + i, i), 15)) << "request " << i;
    }
  }
  // A sampled continuation is not the greedy one (the one-hot logit leaves other tokens likely).
  EXPECT_NE(together.at(1), expected(prompt_of(7, 101), 15));
}

TEST(Scheduler, StopTokenEndsASequenceAndIsNotReported) {
  Fixture f(1024);
  const std::vector<int32_t> p = prompt_of(5, 3);
  const std::vector<int32_t> free_run = expected(p, 20);
  ASSERT_GE(free_run.size(), 4u);
  const int32_t stop = free_run[3];
  f.submit(p, 20, stop);
  f.run_all();
  const SeqRun& r = f.runs[0];
  EXPECT_EQ(r.reason, FinishReason::stop);
  EXPECT_EQ(r.stop_token, stop);
  EXPECT_EQ(r.ids, expected(p, 20, stop));
}

TEST(Scheduler, ChunkedPrefillHoldsDecodingRowsBackByOneChunkAtMost) {
  SchedulerOptions o;
  o.max_sequences = 4;
  o.prefill_chunk = 8;
  o.max_batch_tokens = 12;
  Fixture f(4096, o);
  f.submit(prompt_of(4, 1), 40);   // decoding soon
  f.submit(prompt_of(100, 2), 5);  // a long prompt: 13 chunks of at most 8 (budget 12 - 1 decode row)
  f.run_all();
  EXPECT_EQ(f.runs[0].ids, expected(prompt_of(4, 1), 40));
  EXPECT_EQ(f.runs[1].ids, expected(prompt_of(100, 2), 5));
  for (int64_t rows : f.dec.rows_) EXPECT_LE(rows, 12) << "a step over max_batch_tokens";
  // Request 0 gets a token at every step from its first one on: the long prompt never stalls it.
  const auto& steps = f.runs[0].token_steps;
  for (std::size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i], steps[i - 1] + 1) << "token " << i;
}

TEST(Scheduler, FirstComeFirstServedWhenOnlyOneFits) {
  SchedulerOptions o;
  o.max_sequences = 1;
  o.max_batch_tokens = 64;
  Fixture f(4096, o);
  for (int i = 0; i < 3; ++i) f.submit(prompt_of(6, i + 1), 4);
  f.run_all();
  EXPECT_LT(f.runs[0].admitted_step, f.runs[1].admitted_step);
  EXPECT_LT(f.runs[1].admitted_step, f.runs[2].admitted_step);
  EXPECT_LT(f.runs[0].token_steps.back(), f.runs[1].token_steps.front());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f.runs[i].ids, expected(prompt_of(6, i + 1), 4));
}

TEST(Scheduler, PrefixCacheGivesBackFullBlocksOfASharedPrompt) {
  Fixture f(4096);
  std::vector<int32_t> system = prompt_of(22, 9);  // 5 full blocks of 4, and 2 more
  std::vector<int32_t> a = system, b = system;
  a.push_back(1);
  b.push_back(2);
  f.submit(a, 6);
  f.run_all();
  f.submit(b, 6);
  f.run_all();
  EXPECT_EQ(f.runs[0].cached, 0);
  EXPECT_EQ(f.runs[1].cached, 20) << "the 5 full blocks the two prompts share";
  EXPECT_EQ(f.runs[1].ids, expected(b, 6)) << "cached rows read back as the tokens they hold";
  EXPECT_EQ(f.sched.stats().cached_tokens, 20);
  // The same prompt again: everything but the last token (whose logits are needed) from the cache.
  f.submit(a, 6);
  f.run_all();
  EXPECT_EQ(f.runs[2].cached, 20);
  EXPECT_EQ(f.runs[2].ids, f.runs[0].ids);
}

TEST(Scheduler, PreemptionUnderATinyPoolRecomputesAndGivesTheSameTokens) {
  SchedulerOptions o;
  o.max_sequences = 4;
  o.prefix_cache = false;  // every block is held by a running sequence: room only by preemption
  Fixture f(64, o);        // 16 blocks per layer: room for about 1.3 of the sequences below
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(prompt_of(10, i + 2));
  for (const auto& p : prompts) f.submit(p, 30);
  f.run_all();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f.runs[i].reason, FinishReason::length);
    EXPECT_EQ(f.runs[i].ids, expected(prompts[i], 30)) << "request " << i;
  }
  EXPECT_GT(f.sched.stats().preemptions, 0);
  EXPECT_EQ(f.cache.sequences(), 0);
  EXPECT_EQ(f.cache.accounting().reserved, 0);
}

TEST(Scheduler, CancelFreesTheBlocksAtOnce) {
  Fixture f(1024);
  const int64_t a = f.submit(prompt_of(9, 1), 100);
  const int64_t b = f.submit(prompt_of(9, 2), 100);
  for (int i = 0; i < 3; ++i) f.sched.step();
  const int64_t before = f.cache.accounting().reserved;
  f.sched.cancel(a);
  EXPECT_TRUE(f.runs[a].finished);
  EXPECT_EQ(f.runs[a].reason, FinishReason::cancelled);
  EXPECT_LT(f.cache.accounting().reserved, before);
  EXPECT_EQ(f.cache.sequences(), 1);
  f.sched.cancel(a);  // again: ignored
  f.sched.cancel(12345);
  const int64_t c = f.submit(prompt_of(3, 3), 5);
  f.sched.cancel(c);  // still waiting
  EXPECT_EQ(f.runs[c].reason, FinishReason::cancelled);
  f.run_all();
  EXPECT_EQ(f.runs[b].ids, expected(prompt_of(9, 2), 100));
}

TEST(Scheduler, ASequenceEndsWhenItsContextIsFull) {
  Fixture f(1024, {}, /*context=*/20);
  f.submit(prompt_of(15, 1), 100);
  f.run_all();
  // As models::generate: tokens until the cache is full, the last one not fed back: 20 - 15 + 1.
  EXPECT_EQ(f.runs[0].reason, FinishReason::length);
  EXPECT_EQ(f.runs[0].ids.size(), 6u);
  EXPECT_EQ(f.sched.sequence_capacity(), 20);
}

TEST(Scheduler, BadRequestsAreRefusedWithTheReason) {
  Fixture f(64, {}, 4096);  // the pool holds 64 positions: less than the context
  SequenceRequest r;
  r.options.max_new_tokens = 4;
  EXPECT_ERROR_CONTAINS(f.sched.submit(r), {"the prompt is empty"});
  r.prompt = {1, 2, static_cast<int32_t>(kVocab)};
  EXPECT_ERROR_CONTAINS(f.sched.submit(r), {"out of range [0, 50)"});
  r.prompt = prompt_of(65, 1);
  EXPECT_ERROR_CONTAINS(f.sched.submit(r), {"a sequence holds at most 64 (the KV pool's size)"});
  r.prompt = {1};
  r.options.search = SearchKind::beam;
  EXPECT_ERROR_CONTAINS(f.sched.submit(r), {"beam search"});
  r.options.search = SearchKind::sample;
  r.options.temperature = 0;
  EXPECT_ERROR_CONTAINS(f.sched.submit(r), {"temperature > 0"});
  r.options = {};
  r.options.max_new_tokens = 0;
  EXPECT_ERROR_CONTAINS(f.sched.submit(r), {"max_new_tokens must be >= 1"});
  SchedulerOptions bad;
  bad.max_batch_tokens = 4;
  bad.max_sequences = 8;
  SumDecoder d(16);
  PagedKvCache c(Fixture::config(64, 4));
  EXPECT_ERROR_CONTAINS([&] { Scheduler s(d, c, bad); }(), {"max_batch_tokens >= max_sequences"});
  EXPECT_TRUE(f.sched.idle());
}

}  // namespace
}  // namespace attn

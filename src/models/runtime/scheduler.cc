// Continuous batching (include/attn/models/runtime/scheduler.h).
#include <attn/core/error.h>
#include <attn/models/runtime/scheduler.h>
#include <attn/ops/inference.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>

namespace attn::models::runtime {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "?";
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

struct Scheduler::Impl {
  struct Seq {
    int64_t id = 0;
    SequenceRequest req;
    Rng rng{0};
    std::vector<int32_t> tokens;  // prompt + generated: what the sequence must hold
    int64_t prompt = 0;           // prompt tokens
    int64_t done = 0;             // positions computed (in the cache)
    int64_t generated = 0;
    PagedKvCache::SeqId cache_seq = -1;
    bool admitted_once = false;
    std::vector<float> attention;  // the last row's, when the request captures it
  };
  using SeqPtr = std::unique_ptr<Seq>;

  BatchDecoder& dec;
  PagedKvCache& cache;
  SchedulerOptions opt;
  int64_t V = 0, layers = 0, capacity = 0;
  std::deque<SeqPtr> waiting;
  std::vector<SeqPtr> running;  // in admission order (oldest first)
  int64_t next_id = 0;
  SchedulerStats st;
  std::vector<float> logits;
  std::vector<int64_t> picks;  // per planned row: the decoder's greedy pick

  Impl(BatchDecoder& d, PagedKvCache& c, const SchedulerOptions& o) : dec(d), cache(c), opt(o) {
    ATTN_CHECK(o.max_sequences >= 1 && o.prefill_chunk >= 1 && o.max_batch_tokens >= o.max_sequences,
               "Scheduler: expected max_sequences >= 1, prefill_chunk >= 1 and max_batch_tokens >= "
               "max_sequences; got ",
               o.max_sequences, ", ", o.prefill_chunk, " and ", o.max_batch_tokens);
    const KvCacheConfig want = d.kv_layout(), &have = c.config();
    ATTN_CHECK(want.layers == have.layers && want.kv_heads == have.kv_heads && want.head_dim == have.head_dim,
               "Scheduler: the cache holds ", have.layers, " layers x ", have.kv_heads, " kv heads x ",
               have.head_dim, "; the decoder needs ", want.layers, " x ", want.kv_heads, " x ",
               want.head_dim);
    V = d.batch_vocab();
    layers = have.layers;
    const int64_t pool_tokens = c.num_blocks() / layers * have.block_tokens;
    capacity = std::min(d.batch_context(), pool_tokens);
  }

  void emit(Seq& s, SequenceEvent e) {
    e.id = s.id;
    if (s.req.on_event) s.req.on_event(e);
  }

  void finish(Seq& s, FinishReason reason, int64_t stop_token = -1, std::string error = {}) {
    if (s.cache_seq >= 0) cache.free(s.cache_seq);
    s.cache_seq = -1;
    ++st.finished;
    SequenceEvent e;
    e.kind = SequenceEvent::Kind::finished;
    e.reason = reason;
    e.stop_token = stop_token;
    e.generated = s.generated;
    e.error = std::move(error);
    emit(s, std::move(e));
  }

  // Blocks a sequence of `positions` still needs beyond the `attached` it holds.
  int64_t blocks_for(int64_t positions, int64_t attached) const {
    const int64_t bt = cache.config().block_tokens;
    return layers * (ceil_div(positions, bt) - attached / bt);
  }

  void admit() {
    while (!waiting.empty() && static_cast<int64_t>(running.size()) < opt.max_sequences) {
      Seq& s = *waiting.front();
      s.cache_seq = cache.create();
      const auto n = static_cast<int64_t>(s.tokens.size());
      // The last token is always computed: its logits choose the next one.
      const int64_t attached =
          opt.prefix_cache ? cache.attach_prefix(s.cache_seq, s.tokens.data(), n - 1) : 0;
      const int64_t need = blocks_for(n, attached);
      const int64_t reserve = layers * static_cast<int64_t>(running.size());
      if (!running.empty() && need + reserve > cache.free_blocks() + cache.evictable_blocks()) {
        cache.free(s.cache_seq);  // later, when running sequences have finished
        s.cache_seq = -1;
        return;
      }
      s.done = attached;
      if (!s.admitted_once) {
        s.admitted_once = true;
        st.prompt_tokens += s.prompt;
        st.cached_tokens += std::min(attached, s.prompt);
        SequenceEvent e;
        e.kind = SequenceEvent::Kind::admitted;
        e.cached_tokens = attached;
        emit(s, e);
      }
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
  }

  // The youngest running sequence back to the front of the queue, its blocks freed.
  void preempt_youngest() {
    SeqPtr s = std::move(running.back());
    running.pop_back();
    cache.free(s->cache_seq);
    s->cache_seq = -1;
    s->done = 0;
    ++st.preemptions;
    waiting.push_front(std::move(s));
  }

  struct Planned {
    Seq* s;
    int64_t n;
  };

  // Rows per running sequence (oldest first), within max_batch_tokens: decode rows first.
  std::vector<Planned> plan() {
    std::vector<Planned> p;
    int64_t budget = opt.max_batch_tokens;
    for (const SeqPtr& s : running)
      if (static_cast<int64_t>(s->tokens.size()) - s->done == 1) --budget;
    for (const SeqPtr& s : running) {
      const int64_t left = static_cast<int64_t>(s->tokens.size()) - s->done;
      int64_t n = 1;
      if (left > 1) {
        n = std::min({left, opt.prefill_chunk, budget});
        budget -= n;
      }
      if (n > 0) p.push_back({s.get(), n});
    }
    return p;
  }

  // Appends the planned rows to the cache, oldest first, preempting the youngest sequences when the
  // pool runs out. Returns the rows that were appended.
  std::vector<Planned> append(std::vector<Planned> p) {
    std::vector<Planned> out;
    for (const Planned& r : p) {
      // r.s may have been preempted by an earlier row's append (it is younger than that row).
      if (std::none_of(running.begin(), running.end(), [&](const SeqPtr& s) { return s.get() == r.s; }))
        continue;
      // Without the prefix cache no block is keyed by its tokens: each is freed with its sequence.
      const int32_t* keys = opt.prefix_cache ? r.s->tokens.data() + r.s->done : nullptr;
      while (!cache.append(r.s->cache_seq, keys, r.n)) {
        if (running.back().get() == r.s && running.size() == 1) {
          // Alone and still out of blocks: cannot happen for a request that passed submit()'s check.
          Seq& s = *r.s;
          finish(s, FinishReason::error, -1,
                 "the KV pool has no room for this sequence alone (" + std::to_string(cache.num_blocks()) +
                     " blocks)");
          running.pop_back();
          break;
        }
        const bool self = running.back().get() == r.s;
        preempt_youngest();
        if (self) break;
      }
      if (std::any_of(running.begin(), running.end(), [&](const SeqPtr& s) { return s.get() == r.s; }))
        out.push_back(r);
    }
    return out;
  }

  // The decoder's greedy pick, or an error when it found a non-finite logit.
  int64_t picked(const Seq& s, int64_t t, std::string& error) const {
    if (t < 0 || t >= V)
      error = "the model produced a non-finite logit at position " + std::to_string(s.done - 1);
    return t >= 0 && t < V ? t : -1;
  }

  // The next token from one row of logits, or an error.
  int64_t choose(Seq& s, const float* x, std::string& error) {
    for (int64_t v = 0; v < V; ++v)
      if (!std::isfinite(x[v])) {
        error = "the model produced a non-finite logit (" + std::to_string(x[v]) + " for token " +
                std::to_string(v) + ") at position " + std::to_string(s.done - 1);
        return -1;
      }
    const GenerateOptions& o = s.req.options;
    if (o.search == SearchKind::greedy) return ops::row_argmax_logsumexp(x, V).token;
    return sample_token(x, V, o.temperature, o.top_k, o.top_p, s.rng);
  }

  bool step() {
    admit();
    if (running.empty()) return false;
    std::vector<Planned> rows = append(plan());
    if (rows.empty()) return !running.empty() || !waiting.empty();
    int64_t wanted = 0;
    for (const Planned& r : rows) wanted += r.s->done + r.n == static_cast<int64_t>(r.s->tokens.size());
    logits.resize(static_cast<std::size_t>(wanted * V));
    picks.assign(rows.size(), -1);
    std::vector<BatchEntry> batch;
    int64_t k = 0, M = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Planned& r = rows[i];
      BatchEntry e;
      e.seq = r.s->cache_seq;
      e.tokens = r.s->tokens.data() + r.s->done;
      e.n = r.n;
      if (r.s->done + r.n == static_cast<int64_t>(r.s->tokens.size())) {
        // A greedy sequence needs only the pick, which the decoder may find without every logit.
        if (r.s->req.options.search == SearchKind::greedy && dec.picks_greedy())
          e.greedy = &picks[i];
        else
          e.logits = logits.data() + k++ * V;
        if (r.s->req.capture_attention) e.attention = &r.s->attention;
      }
      batch.push_back(e);
      M += r.n;
    }
    try {
      dec.forward_batch(cache, batch);
    } catch (const std::exception& ex) {
      // Nothing of this step can be trusted: every sequence in it ends with the error.
      for (const Planned& r : rows) {
        finish(*r.s, FinishReason::error, -1, ex.what());
        drop(r.s);
      }
      return true;
    }
    ++st.steps;
    st.rows += M;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      Seq& s = *rows[i].s;
      s.done += rows[i].n;
      if (!batch[i].logits && !batch[i].greedy) continue;
      std::string error;
      const int64_t t =
          batch[i].greedy ? picked(s, *batch[i].greedy, error) : choose(s, batch[i].logits, error);
      if (t < 0) {
        finish(s, FinishReason::error, -1, error);
        drop(&s);
        continue;
      }
      if (is_stop_token(s.req.options, t)) {
        finish(s, FinishReason::stop, t);
        drop(&s);
        continue;
      }
      ++s.generated;
      ++st.generated_tokens;
      s.tokens.push_back(static_cast<int32_t>(t));
      SequenceEvent e;
      e.kind = SequenceEvent::Kind::token;
      e.token = t;
      if (s.req.capture_attention) {
        e.attention = &s.attention;
        e.keys = s.done;  // the positions the choosing row saw
      }
      emit(s, e);
      // The next step computes t at position size − 1: it must lie in the sequence's context.
      if (s.generated >= s.req.options.max_new_tokens || static_cast<int64_t>(s.tokens.size()) > capacity) {
        finish(s, FinishReason::length);
        drop(&s);
      }
    }
    return true;
  }

  void drop(Seq* s) {
    auto it = std::find_if(running.begin(), running.end(), [&](const SeqPtr& p) { return p.get() == s; });
    if (it != running.end()) running.erase(it);
  }
};

Scheduler::Scheduler(BatchDecoder& decoder, PagedKvCache& cache, const SchedulerOptions& options)
    : impl_(std::make_unique<Impl>(decoder, cache, options)) {}
Scheduler::~Scheduler() {
  // Whatever is left frees its blocks (no events: the owner is going away).
  for (auto& s : impl_->running)
    if (s->cache_seq >= 0) impl_->cache.free(s->cache_seq);
}

int64_t Scheduler::submit(SequenceRequest request) {
  Impl& m = *impl_;
  const auto P = static_cast<int64_t>(request.prompt.size());
  ATTN_CHECK(P > 0, "Scheduler: the prompt is empty (no tokens)");
  for (int64_t i = 0; i < P; ++i)
    ATTN_CHECK(request.prompt[i] >= 0 && request.prompt[i] < m.V, "Scheduler: token id ", request.prompt[i],
               " at ", i, " of the prompt is out of range [0, ", m.V, ")");
  const GenerateOptions& o = request.options;
  ATTN_CHECK(o.search != SearchKind::beam,
             "Scheduler: beam search is not batched here; use greedy or sample");
  ATTN_CHECK(o.max_new_tokens >= 1, "Scheduler: max_new_tokens must be >= 1; got ", o.max_new_tokens);
  if (o.search == SearchKind::sample)
    ATTN_CHECK(o.temperature > 0 && o.top_p > 0 && o.top_p <= 1 && o.top_k >= 0,
               "Scheduler: sampling needs temperature > 0, top_p in (0, 1] and top_k >= 0; got ",
               o.temperature, ", ", o.top_p, " and ", o.top_k);
  ATTN_CHECK(P <= m.capacity, "Scheduler: the prompt has ", P, " tokens; a sequence holds at most ",
             m.capacity, m.capacity < m.dec.batch_context() ? " (the KV pool's size)" : " (the context)");
  auto s = std::make_unique<Impl::Seq>();
  s->id = m.next_id++;
  s->rng = Rng(request.seed);
  s->tokens = request.prompt;
  s->prompt = P;
  s->req = std::move(request);
  m.waiting.push_back(std::move(s));
  ++m.st.submitted;
  return m.next_id - 1;
}

void Scheduler::cancel(int64_t id) {
  Impl& m = *impl_;
  for (auto it = m.waiting.begin(); it != m.waiting.end(); ++it)
    if ((*it)->id == id) {
      Impl::SeqPtr s = std::move(*it);
      m.waiting.erase(it);
      m.finish(*s, FinishReason::cancelled);
      return;
    }
  for (auto it = m.running.begin(); it != m.running.end(); ++it)
    if ((*it)->id == id) {
      Impl::SeqPtr s = std::move(*it);
      m.running.erase(it);
      m.finish(*s, FinishReason::cancelled);
      return;
    }
}

bool Scheduler::step() { return impl_->step(); }
bool Scheduler::idle() const { return impl_->running.empty() && impl_->waiting.empty(); }
int64_t Scheduler::sequence_capacity() const { return impl_->capacity; }
const PagedKvCache& Scheduler::cache() const { return impl_->cache; }
const SchedulerOptions& Scheduler::options() const { return impl_->opt; }

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = impl_->st;
  s.running = static_cast<int64_t>(impl_->running.size());
  s.waiting = static_cast<int64_t>(impl_->waiting.size());
  return s;
}

std::vector<BatchResult> generate_batch(BatchDecoder& decoder,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerateOptions& options, const SchedulerOptions& scheduler,
                                        int64_t pool_bytes, ops::KvDtype dtype) {
  KvCacheConfig kc = decoder.kv_layout();
  kc.dtype = dtype;
  if (pool_bytes <= 0) {
    int64_t positions = 0;
    for (const auto& p : prompts)
      positions += ceil_div(static_cast<int64_t>(p.size()) + options.max_new_tokens, kc.block_tokens) *
                   kc.block_tokens;
    pool_bytes = (std::max<int64_t>(positions, kc.block_tokens) + kc.block_tokens) * kc.layers *
                 ops::kv_position_bytes(dtype, kc.kv_heads, kc.head_dim);
  }
  kc.pool_bytes = pool_bytes;
  PagedKvCache cache(kc);
  Scheduler sched(decoder, cache, scheduler);
  std::vector<BatchResult> out(prompts.size());
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    SequenceRequest r;
    r.prompt = prompts[b];
    r.options = options;
    r.seed = mix_seed(options.seed, static_cast<uint64_t>(b));
    r.on_event = [&out, b](const SequenceEvent& e) {
      if (e.kind == SequenceEvent::Kind::token) out[b].ids.push_back(static_cast<int32_t>(e.token));
      if (e.kind == SequenceEvent::Kind::finished) {
        out[b].reason = e.reason;
        out[b].stop_token = e.stop_token;
      }
    };
    sched.submit(std::move(r));
  }
  while (sched.step()) {
  }
  return out;
}

}  // namespace attn::models::runtime

// Continuous batching over one BatchDecoder and one PagedKvCache (issue 37): requests join and leave
// the running batch at every step, so a decoder's weights are read once per step for every sequence.
//
// Each step():
//   1. admits waiting requests, first come first served, while fewer than max_sequences run and the
//      pool holds their prompt (free blocks + evictable cached blocks, minus one block per layer for
//      each running sequence to grow into); with prefix_cache, a request first attaches the longest
//      cached prefix of its tokens (PagedKvCache::attach_prefix) and computes only the rest;
//   2. plans one ragged batch of at most max_batch_tokens rows: one row for every sequence that is
//      decoding, then prompt chunks of at most prefill_chunk tokens, oldest first, in what is left;
//      so a long prompt holds the running streams back by one chunk per step, never more;
//   3. appends the rows to the cache, oldest sequence first; when the pool runs out, the youngest
//      running sequence is preempted (its blocks freed; it goes back to the front of the queue with
//      its prompt and the tokens it has generated, recomputed when it is admitted again — the prefix
//      cache usually gives most of them back);
//   4. runs the batch (BatchDecoder::forward_batch) and picks each finished row's next token: greedy
//      (the first maximum) or sampled from the request's own generator (models::sample_token), the
//      same choices models::generate makes for one sequence;
//   5. reports events: admitted (once), token (each generated token, stop tokens excepted), finished.
//
// A sequence ends at a stop token (options.eos_id / stop_ids), after max_new_tokens tokens, when the
// next token would not fit the sequence's context (as models::generate), on cancel(), or on an error
// (a non-finite logit). Its blocks are freed at once; its full prompt blocks stay in the prefix cache.
//
// Not thread-safe: one thread calls submit, cancel and step (a server puts its own queue in front).
// Callbacks run inside step() and submit()/cancel() (finished events) and must not call the scheduler.
#pragma once

#include <attn/core/random.h>
#include <attn/models/generate.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/runtime/kv_cache.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attn::models::runtime {

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct SequenceEvent {
  enum class Kind { admitted, token, finished };
  Kind kind = Kind::token;
  int64_t id = -1;                           // the request (submit's id)
  int64_t token = -1;                        // token: the generated token
  int64_t cached_tokens = 0;                 // admitted: prompt positions the prefix cache gave
  FinishReason reason = FinishReason::stop;  // finished
  int64_t stop_token = -1;                   // finished by a stop token: that token (not reported before)
  int64_t generated = 0;                     // finished: tokens reported
  std::string error;                         // finished with FinishReason::error: why
  // token, with SequenceRequest::capture_attention: the attention of the row that chose this token
  // (the position before it), [layers, H, keys] (BatchEntry::attention); valid during the callback.
  const std::vector<float>* attention = nullptr;
  int64_t keys = 0;
};
using SequenceCallback = std::function<void(const SequenceEvent&)>;

struct SequenceRequest {
  std::vector<int32_t> prompt;  // non-empty
  // greedy or sample (beam throws); max_new_tokens >= 1; eos_id and stop_ids end the sequence;
  // temperature, top_k, top_p as models::generate. options.seed is unused: see seed.
  GenerateOptions options;
  uint64_t seed = 0;               // the request's own generator, Rng(seed)
  bool capture_attention = false;  // token events carry their row's attention
  SequenceCallback on_event;
};

struct SchedulerOptions {
  int64_t max_sequences = 16;      // running at once (>= 1)
  int64_t max_batch_tokens = 256;  // rows of one step (>= max_sequences)
  int64_t prefill_chunk = 256;     // prompt tokens of one sequence in one step (>= 1)
  bool prefix_cache = true;        // attach cached prompt prefixes
};

struct SchedulerStats {
  int64_t running = 0, waiting = 0;
  int64_t submitted = 0, finished = 0;
  int64_t steps = 0, rows = 0;  // steps run and the rows of all of them
  int64_t prompt_tokens = 0;    // prompt tokens of admitted requests (first admission)
  int64_t cached_tokens = 0;    // ... of them attached from the prefix cache
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
};

class Scheduler {
 public:
  // The decoder and the cache (made from decoder.kv_layout()) outlive the scheduler; the cache is
  // the scheduler's alone while it lives.
  Scheduler(BatchDecoder& decoder, PagedKvCache& cache, const SchedulerOptions& options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; returns its id. Throws attn::Error naming what was expected when it can never
  // run: an empty prompt, an id out of range, beam search, max_new_tokens < 1, or a prompt that does
  // not fit sequence_capacity().
  int64_t submit(SequenceRequest request);
  // Ends a request now: its blocks are freed and it reports finished(cancelled). Unknown or finished
  // ids are ignored.
  void cancel(int64_t id);
  // One step (see above). Returns false when nothing was waiting or running.
  bool step();
  bool idle() const;

  // The most positions one sequence may hold: the decoder's context, or what the pool holds
  // when that is less.
  int64_t sequence_capacity() const;
  SchedulerStats stats() const;
  const PagedKvCache& cache() const;
  const SchedulerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Batched generation over a list of prompts (Python's generate_batch, tests): every prompt through one
// scheduler on a fresh cache of `pool_bytes` (0: room for every prompt at once), greedy or sampled per
// `options` (prompt b samples from Rng(mix_seed(options.seed, b))). Returns, per prompt in order, the
// generated tokens (without the stop token) and the finish event.
struct BatchResult {
  std::vector<int32_t> ids;
  FinishReason reason = FinishReason::stop;
  int64_t stop_token = -1;
};
std::vector<BatchResult> generate_batch(BatchDecoder& decoder,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        const GenerateOptions& options,
                                        const SchedulerOptions& scheduler = {}, int64_t pool_bytes = 0,
                                        ops::KvDtype dtype = ops::KvDtype::f32);

}  // namespace attn::models::runtime

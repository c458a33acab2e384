// One batched step of the inference runtime (issue 37): a decoder runs a RAGGED batch — some
// sequences in a prefill chunk, others decoding one token — as one pass, so each weight is read once
// per step for all of them. The rows of every entry are stacked into one activation matrix for the
// products; attention reads each entry's own keys through its block tables in a PagedKvCache
// (ops::paged_attention). The scheduler (models/runtime/scheduler.h) decides what goes in a batch.
#pragma once

#include <attn/models/runtime/kv_cache.h>

#include <cstdint>
#include <span>
#include <vector>

namespace attn::models::runtime {

// One sequence of a batch. Its `n` tokens were appended to the cache before the step
// (PagedKvCache::append): they sit at positions [length − n, length) and attend to every position
// before them. The decoder writes their keys and values and commits the sequence.
struct BatchEntry {
  PagedKvCache::SeqId seq = 0;
  const int32_t* tokens = nullptr;
  int64_t n = 0;  // >= 1
  // The logits of the LAST of the n tokens, [vocab] (written), or null: none wanted (a prefill chunk
  // that does not end the prompt).
  float* logits = nullptr;
  // Optional: the exact attention of the LAST of the n tokens on every layer, [layers, H, length]
  // (resized and written): each query head's probabilities over the sequence's positions, 0 where it
  // does not see (before a window). From the same kernel as the output (capture_last_rows).
  std::vector<float>* attention = nullptr;
  // Or, with logits null: only the greedy pick of the LAST token is wanted, written here: the index
  // argmax over its logits gives (the first of equal ones), or -1 when a logit it read is not finite.
  // Only for a decoder whose picks_greedy() is true (it may then skip most of the vocabulary product).
  int64_t* greedy = nullptr;
};

// Where each entry's rows sit in a batch, checked: n in [1, the positions appended], the sequence
// within `context` positions, every token in [0, vocab). `who` names the model in the errors
// (attn::Error with the entry, the sequence and the expected and actual values).
struct BatchRows {
  std::vector<int64_t> row0;  // per entry: its first row of the stacked activations
  std::vector<int64_t> pos0;  // per entry: the position of its first token
  int64_t rows = 0;           // Σ n
  int64_t logits = 0;         // entries that want logits
};
BatchRows batch_rows(const PagedKvCache& cache, std::span<const BatchEntry> batch, int64_t vocab,
                     int64_t context, bool context_capped, const char* who);

// For each entry of `batch` that asks for attention: its last row's probabilities on `layer`, by one
// more pass of the paged entry over that row alone (q: the batch's queries [rows, H, D] after RoPE;
// row0[b]: the first row of entry b). A decoder calls this after each layer's attention.
void capture_last_rows(const PagedKvCache& cache, std::span<const BatchEntry> batch, const int64_t* row0,
                       int64_t layer, const float* q, int64_t H, const ops::PagedAttentionOptions& options);

// A decoder the runtime can batch. Not thread-safe: one step at a time per decoder.
class BatchDecoder {
 public:
  virtual ~BatchDecoder() = default;
  virtual int64_t batch_vocab() const = 0;
  // The most positions one sequence may hold (the model's trained context, or less when the caller
  // asked for less).
  virtual int64_t batch_context() const = 0;
  // The cache layout the decoder needs: layers, kv heads, head size and per-layer windows filled in;
  // block_tokens, dtype and pool_bytes are the caller's to choose.
  virtual KvCacheConfig kv_layout() const = 0;
  // Runs every entry (see BatchEntry) and commits each sequence. Throws attn::Error on an entry whose
  // tokens are out of range or were not appended, leaving the cache's committed state as it was.
  virtual void forward_batch(PagedKvCache& cache, std::span<const BatchEntry> batch) = 0;
  // Whether forward_batch fills BatchEntry::greedy (else only logits).
  virtual bool picks_greedy() const { return false; }
};

// One sequence on a BatchDecoder with a cache of its own: the prefill / step interface of a
// single-stream engine, run as batches of one entry. For tests, benchmarks and C++ callers that hold one
// sequence; servers run many through the Scheduler (scheduler.h).
class SingleSequence {
 public:
  // capacity: positions the sequence may hold (0: decoder.batch_context(); at most that).
  explicit SingleSequence(BatchDecoder& decoder, int64_t capacity = 0);
  // Appends ids (1 to capacity() - position() of them) as one pass; returns the logits of the last,
  // [vocab], valid until the next call. attn::Error naming the sizes when they do not fit; when the
  // decoder refuses the ids (one out of range), the sequence is cleared.
  std::span<const float> prefill(std::span<const int32_t> ids);
  std::span<const float> step(int32_t id);  // prefill of one token
  void clear();                             // position() back to 0
  int64_t position() const;
  int64_t capacity() const { return cap_; }

 private:
  BatchDecoder& d_;
  int64_t cap_ = 0;
  PagedKvCache cache_;
  PagedKvCache::SeqId seq_ = 0;
  std::vector<float> logits_;
};

}  // namespace attn::models::runtime

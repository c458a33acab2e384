// The batched step's attention capture (include/attn/models/runtime/batch.h).
#include <attn/core/error.h>
#include <attn/models/runtime/batch.h>

#include <algorithm>

namespace attn::models::runtime {

BatchRows batch_rows(const PagedKvCache& cache, std::span<const BatchEntry> batch, int64_t vocab,
                     int64_t context, bool context_capped, const char* who) {
  ATTN_CHECK(!batch.empty(), who, ": an empty batch");
  BatchRows r;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const BatchEntry& e = batch[b];
    const int64_t len = cache.length(e.seq);
    ATTN_CHECK(e.n >= 1 && e.tokens != nullptr && e.n <= len, who, ": batch entry ", b, " (sequence ", e.seq,
               ") has ", e.n, " tokens; expected 1 to ", len, ", the positions appended to the cache");
    ATTN_CHECK(len <= context, who, ": sequence ", e.seq, " holds ", len,
               " positions; the model's context is ", context, context_capped ? " (--max-context)" : "");
    for (int64_t i = 0; i < e.n; ++i)
      ATTN_CHECK(e.tokens[i] >= 0 && e.tokens[i] < vocab, who, ": token id ", e.tokens[i], " at ", i,
                 " of batch entry ", b, " is out of range [0, ", vocab, ")");
    ATTN_CHECK(!(e.logits && e.greedy), who, ": batch entry ", b,
               " asks for both logits and a greedy pick; expected one of them");
    r.row0.push_back(r.rows);
    r.pos0.push_back(len - e.n);
    r.rows += e.n;
    r.logits += e.logits != nullptr;
  }
  return r;
}

void capture_last_rows(const PagedKvCache& cache, std::span<const BatchEntry> batch, const int64_t* row0,
                       int64_t layer, const float* q, int64_t H, const ops::PagedAttentionOptions& options) {
  const KvCacheConfig& c = cache.config();
  const int64_t D = c.head_dim;
  std::vector<float> out;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const BatchEntry& e = batch[b];
    if (!e.attention) continue;
    const int64_t len = cache.length(e.seq);
    const auto need = static_cast<std::size_t>(c.layers * H * len);
    if (e.attention->size() != need) e.attention->assign(need, 0.0f);
    ops::PagedSequence one = cache.attention_sequence(e.seq, layer, 1);
    one.weights = e.attention->data() + layer * H * len;
    out.resize(static_cast<std::size_t>(H * D));
    const float* qrow = q + (row0[b] + e.n - 1) * H * D;
    ops::paged_attention(qrow, H, cache.view(), {&one, 1}, options, out.data());
  }
}

namespace {
int64_t checked_capacity(const BatchDecoder& d, int64_t capacity) {
  ATTN_CHECK(capacity >= 0, "SingleSequence: capacity must be >= 0, got ", capacity);
  return capacity == 0 ? d.batch_context() : std::min(capacity, d.batch_context());
}
}  // namespace

SingleSequence::SingleSequence(BatchDecoder& decoder, int64_t capacity)
    : d_(decoder),
      cap_(checked_capacity(decoder, capacity)),
      cache_(one_sequence_pool(decoder.kv_layout(), cap_)),
      seq_(cache_.create()),
      logits_(static_cast<std::size_t>(decoder.batch_vocab())) {}

std::span<const float> SingleSequence::prefill(std::span<const int32_t> ids) {
  const auto n = static_cast<int64_t>(ids.size());
  ATTN_CHECK(n >= 1 && n <= cap_ - position(), "SingleSequence: ", n, " tokens after ", position(),
             "; the sequence holds ", cap_, " positions");
  ATTN_CHECK(cache_.append(seq_, ids.data(), n), "SingleSequence: the cache has no room for ", n,
             " more tokens after ", position());
  const BatchEntry e{seq_, ids.data(), n, logits_.data(), nullptr};
  try {
    d_.forward_batch(cache_, {&e, 1});
  } catch (...) {  // the appended positions were never written: start over rather than hold them
    clear();
    throw;
  }
  return logits_;
}

std::span<const float> SingleSequence::step(int32_t id) { return prefill({&id, 1}); }

void SingleSequence::clear() {
  cache_ = PagedKvCache(cache_.config());
  seq_ = cache_.create();
}

int64_t SingleSequence::position() const { return cache_.length(seq_); }

}  // namespace attn::models::runtime

// The batched step's attention capture (include/attn/models/runtime/batch.h).
#include <attn/core/error.h>
#include <attn/models/runtime/batch.h>

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

}  // namespace attn::models::runtime

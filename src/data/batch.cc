#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/data/batch.h>

#include <algorithm>

namespace attn::data {
namespace {

using text::Vocab;

// Writes `prefix`, as many of `body` as fit, `suffix`; returns the length.
int64_t fill_row(int64_t* row, int64_t width, int64_t max_len, const std::vector<int32_t>& body,
                 std::span<const int32_t> prefix, std::span<const int32_t> suffix, int64_t* truncated) {
  const int64_t room = max_len - static_cast<int64_t>(prefix.size() + suffix.size());
  const int64_t take = std::min<int64_t>(room, static_cast<int64_t>(body.size()));
  if (take < static_cast<int64_t>(body.size())) ++*truncated;
  int64_t n = 0;
  for (const int32_t t : prefix) row[n++] = t;
  for (int64_t i = 0; i < take; ++i) row[n++] = body[i];
  for (const int32_t t : suffix) row[n++] = t;
  for (int64_t i = n; i < width; ++i) row[i] = Vocab::kPad;
  return n;
}

void check_rows(const EncodedDataset& data, std::span<const int64_t> rows) {
  ATTN_CHECK(!rows.empty(), "batch: no rows");
  for (const int64_t r : rows) {
    ATTN_CHECK(r >= 0 && r < data.size(), "batch: row ", r, " out of range [0, ", data.size(), ")");
  }
}

}  // namespace

EncodedDataset encode_dataset(const Dataset& dataset, const text::Tokenizer& tokenizer,
                              const text::Tokenizer* pair_tokenizer) {
  bool paired = false;
  for (const Example& e : dataset.examples) paired = paired || !e.pair.empty();
  ATTN_CHECK(paired == (pair_tokenizer != nullptr), "batch: the dataset ", paired ? "has" : "has no",
             " pairs but a pair tokenizer was ", pair_tokenizer ? "given" : "not given");
  EncodedDataset out;
  out.text.reserve(dataset.examples.size());
  const auto count = [&out](const std::vector<int32_t>& ids) {
    out.total_tokens += static_cast<int64_t>(ids.size());
    out.unknown_tokens += std::count(ids.begin(), ids.end(), Vocab::kUnk);
  };
  for (const Example& e : dataset.examples) {
    out.text.push_back(tokenizer.encode(e.text));
    count(out.text.back());
    if (paired) {
      out.pair.push_back(pair_tokenizer->encode(e.pair));
      count(out.pair.back());
    }
    out.labels.push_back(e.label);
  }
  return out;
}

Batch make_batch(const EncodedDataset& data, std::span<const int64_t> rows, const SequenceOptions& o) {
  check_rows(data, rows);
  const int64_t specials = (o.add_cls ? 1 : 0) + (o.add_sep ? 1 : 0);
  ATTN_CHECK(o.max_len > specials, "batch: max_len=", o.max_len, " leaves no room for a token after ",
             specials, " special tokens");
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t L = o.max_len;
  if (!o.pad_to_max) {
    int64_t longest = 0;
    for (const int64_t r : rows) longest = std::max<int64_t>(longest, data.text[r].size());
    L = std::min(o.max_len, longest + specials);
  }
  const int32_t cls[1] = {Vocab::kCls};
  const int32_t sep[1] = {Vocab::kSep};
  Batch b;
  b.ids = Tensor::empty({B, L}, DType::i64);   // [B, L]
  b.lengths = Tensor::empty({B}, DType::i64);  // [B]
  int64_t* ids = b.ids.data<int64_t>();
  int64_t* len = b.lengths.data<int64_t>();
  bool labelled = true;
  for (const int64_t r : rows) labelled = labelled && data.labels.at(r) >= 0;
  if (labelled) b.labels = Tensor::empty({B}, DType::i64);  // [B]
  for (int64_t i = 0; i < B; ++i) {
    const int64_t r = rows[i];
    len[i] = fill_row(ids + i * L, L, L, data.text[r], std::span(cls, o.add_cls ? 1 : 0),
                      std::span(sep, o.add_sep ? 1 : 0), &b.truncated);
    if (labelled) b.labels.data<int64_t>()[i] = data.labels[r];
  }
  return b;
}

PairBatch make_pair_batch(const EncodedDataset& data, std::span<const int64_t> rows, const PairOptions& o) {
  check_rows(data, rows);
  ATTN_CHECK(data.pair.size() == data.text.size(), "batch: make_pair_batch() needs a paired dataset");
  ATTN_CHECK(o.max_src_len > 1 && o.max_tgt_len > 2,
             "batch: max_src_len must be > 1 and max_tgt_len > 2; got ", o.max_src_len, " and ",
             o.max_tgt_len);
  const int64_t B = static_cast<int64_t>(rows.size());
  int64_t Ls = o.max_src_len, Lt = o.max_tgt_len;
  if (!o.pad_to_max) {
    int64_t ls = 0, lt = 0;
    for (const int64_t r : rows) {
      ls = std::max<int64_t>(ls, data.text[r].size() + 1);
      lt = std::max<int64_t>(lt, data.pair[r].size() + 2);
    }
    Ls = std::min(Ls, ls);
    Lt = std::min(Lt, lt);
  }
  const int32_t bos[1] = {Vocab::kBos};
  const int32_t eos[1] = {Vocab::kEos};
  PairBatch b;
  b.src = Tensor::empty({B, Ls}, DType::i64);      // [B, Ls]
  b.src_lengths = Tensor::empty({B}, DType::i64);  // [B]
  b.tgt = Tensor::empty({B, Lt}, DType::i64);      // [B, Lt]
  b.tgt_lengths = Tensor::empty({B}, DType::i64);  // [B]
  for (int64_t i = 0; i < B; ++i) {
    const int64_t r = rows[i];
    b.src_lengths.data<int64_t>()[i] =
        fill_row(b.src.data<int64_t>() + i * Ls, Ls, Ls, data.text[r], {}, std::span(eos), &b.src_truncated);
    b.tgt_lengths.data<int64_t>()[i] = fill_row(b.tgt.data<int64_t>() + i * Lt, Lt, Lt, data.pair[r],
                                                std::span(bos), std::span(eos), &b.tgt_truncated);
  }
  return b;
}

std::vector<std::vector<int64_t>> epoch_batches(std::span<const int64_t> rows, int64_t batch_size,
                                                uint64_t seed, int64_t epoch, bool drop_last) {
  ATTN_CHECK(batch_size > 0, "batch: batch_size must be > 0; got ", batch_size);
  std::vector<int64_t> order(rows.begin(), rows.end());
  Rng rng(mix_seed(seed, static_cast<uint64_t>(epoch)));
  rng.shuffle(order);
  std::vector<std::vector<int64_t>> out;
  for (std::size_t i = 0; i < order.size(); i += batch_size) {
    const std::size_t end = std::min(order.size(), i + static_cast<std::size_t>(batch_size));
    if (drop_last && end - i < static_cast<std::size_t>(batch_size)) break;
    out.emplace_back(order.begin() + i, order.begin() + end);
  }
  return out;
}

}  // namespace attn::data

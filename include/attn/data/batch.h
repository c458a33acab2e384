// Batching: examples -> token ids -> fixed-shape i64 tensors.
//
// encode_dataset() tokenises every example once (EncodedDataset keeps one id
// list per text, without special tokens). make_batch() then builds, for the
// rows it is given:
//   classification  ids [B, L] = [CLS] t1 .. tk [SEP]? [PAD] ..., where k is
//                   cut so that the sequence fits max_len; lengths [B] (real
//                   tokens including [CLS]/[SEP]); labels [B] (when labelled).
//   translation     src [B, Ls] = s1 .. sk </s> [PAD] ...;
//                   tgt [B, Lt] = <s> t1 .. tk </s> [PAD] ... (a decoder
//                   reads tgt[:, :-1] and predicts tgt[:, 1:]; [PAD] = 0 is
//                   the position a loss ignores).
// L is max_len when pad_to_max, else the longest sequence of the batch.
// Every cut sequence is counted (Batch::truncated), never silent.
// epoch_batches() orders the rows of an epoch with the portable shuffle of
// random.h: the same (seed, epoch) gives the same batches on every machine.
#pragma once

#include <attn/core/tensor.h>
#include <attn/data/reader.h>
#include <attn/text/tokenizer.h>

#include <cstdint>
#include <span>
#include <vector>

namespace attn::data {

struct EncodedDataset {
  std::vector<std::vector<int32_t>> text;  // per example, no special tokens
  std::vector<std::vector<int32_t>> pair;  // per example when paired; else empty
  std::vector<int32_t> labels;             // per example (-1 when unlabelled)
  int64_t unknown_tokens = 0;              // [UNK] ids produced
  int64_t total_tokens = 0;
  int64_t size() const { return static_cast<int64_t>(text.size()); }
};

// Tokenises every example's text (and pair with `pair_tokenizer`, which must
// be given exactly when the dataset has pairs).
EncodedDataset encode_dataset(const Dataset& dataset, const text::Tokenizer& tokenizer,
                              const text::Tokenizer* pair_tokenizer = nullptr);

struct SequenceOptions {
  int64_t max_len = 100;  // including the special tokens
  bool add_cls = true;    // [CLS] first
  bool add_sep = false;   // [SEP] last
  bool pad_to_max = true;
};

struct Batch {
  Tensor ids;      // [B, L] i64
  Tensor lengths;  // [B] i64: tokens before the padding
  Tensor labels;   // [B] i64; undefined when the data is unlabelled
  int64_t truncated = 0;
};

Batch make_batch(const EncodedDataset& data, std::span<const int64_t> rows,
                 const SequenceOptions& options = {});

struct PairOptions {
  int64_t max_src_len = 64;  // including </s>
  int64_t max_tgt_len = 64;  // including <s> and </s>
  bool pad_to_max = true;
};

struct PairBatch {
  Tensor src;          // [B, Ls] i64
  Tensor src_lengths;  // [B] i64
  Tensor tgt;          // [B, Lt] i64
  Tensor tgt_lengths;  // [B] i64
  int64_t src_truncated = 0;
  int64_t tgt_truncated = 0;
};

PairBatch make_pair_batch(const EncodedDataset& data, std::span<const int64_t> rows,
                          const PairOptions& options = {});

// `rows` shuffled with mix_seed(seed, epoch) and cut into batches of
// batch_size (the last one smaller unless drop_last).
std::vector<std::vector<int64_t>> epoch_batches(std::span<const int64_t> rows, int64_t batch_size,
                                                uint64_t seed, int64_t epoch, bool drop_last = false);

}  // namespace attn::data

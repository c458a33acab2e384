// The on-disk cache of a fine-tune's frozen part (attn train classify --encoder ... --cache-dir DIR):
// the hidden states after the embeddings and the lowest k layers, one [length, hidden] f32 matrix
// per example, so that trials of recipes with the same encoder, freeze count and max length pay the
// frozen forward pass once. Internal to src/tasks.
//
// One file per (encoder name, k, max length): DIR/<encoder>-k<k>-len<max_len>.frozen. It is keyed by
// the model file's size and content hash, k, the max length, the hidden width and a hash of every
// example's piece ids (the deduplicated data set, in order); each entry is one row of that data set.
// Loading checks every field and size against the file's length and the key, every entry's row and
// length against the data, and a checksum over the whole file; a file that fails any check is not
// used: the reason is reported and the rows are computed again. A run that needs rows the file
// lacks computes them and rewrites the file (the union), written to a temporary name and renamed.
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::models {
class BertModel;
}

namespace attn::tasks::detail {

// The frozen part through the inference path (models::BertModel, the model the embed commands run, f32
// products): the hidden states after the embeddings and the lowest k layers of every sequence `ids[i]`,
// one [length, hidden] tensor each, computed in length-sorted batches of `batch` sequences. Equal to the
// nn modules' EncoderClassifier::hidden_after on the same weights up to f32 rounding (summation order:
// tests/tasks/classify_cache_test.cc). `tokens` grows by the pieces read.
std::vector<Tensor> frozen_rows(const models::BertModel& model, const std::vector<std::vector<int32_t>>& ids,
                                int64_t k, int64_t& tokens, int64_t batch = 32);

struct FrozenCacheKey {
  std::string encoder;        // "e5", "minilm" (the file name)
  uint64_t model_bytes = 0;   // size of the model file
  uint64_t model_hash = 0;    // hash of its contents
  int64_t frozen_layers = 0;  // k
  int64_t max_len = 0;        // pieces per example
  int64_t hidden = 0;         // width of each row
  int64_t rows = 0;           // examples in the data set
  uint64_t data_hash = 0;     // hash of every example's ids, in order
};

// The model file's size and content hash (reads the whole file).
void hash_model_file(const std::string& path, uint64_t& bytes, uint64_t& hash);

// Hash of a list of id sequences (order and lengths included).
uint64_t hash_id_lists(const std::vector<std::vector<int32_t>>& ids);

// The cache file for `key` inside `dir`.
std::string frozen_cache_path(const std::string& dir, const FrozenCacheKey& key);

// Reads the cache file at `path` into `out` (resized to key.rows; rows the file holds are set,
// others left empty). `lengths[r]` is the number of pieces of row r, which an entry must match.
// Returns "" when the file was read and used, otherwise why not ("no file", "corrupt: ...",
// "stale: made for ...") and leaves `out` all empty.
std::string load_frozen_cache(const std::string& path, const FrozenCacheKey& key,
                              const std::vector<int64_t>& lengths, std::vector<Tensor>& out);

// Writes every non-empty row of `rows` (key.rows of them, each [length, hidden]) to `path`
// atomically.
void save_frozen_cache(const std::string& path, const FrozenCacheKey& key, const std::vector<Tensor>& rows);

}  // namespace attn::tasks::detail

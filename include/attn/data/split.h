// Deterministic train / validation / test splits.
//
// make_split() shuffles the example indices of each class (or of all examples
// when the dataset is unlabelled or stratify is off) with the portable
// generator of random.h seeded by `seed`, then gives the first
// n - round(n * valid) - round(n * test) to train, the next round(n * valid)
// to valid and the rest to test. Classes are processed in id order. The same
// seed and the same data give the same split on every machine.
//
// A Split records everything needed to prove what a model saw: the method
// name and version, the seed, the fractions, the count of input examples and
// dataset_hash() of them, and the sorted index lists. check_split() refuses a
// split whose hash or size does not match the data it is applied to.
// Saved as JSON (attn::json):
//   {"format": "attn-split", "version": 2, "method": "...", "seed": "0x...",
//    "fractions": [0.8, 0.1, 0.1], "stratified": true, "num_examples": N,
//    "input_hash": "0x...", "counts": {"train": a, "valid": b, "test": c},
//    "train": [...], "valid": [...], "test": [...],
//    "checksum": "0x<FNV-1a 64 of the canonical JSON of every other field>"}
// from_json() refuses a version-2 split whose checksum does not match; version 1
// files (no checksum) still read.
#pragma once

#include <attn/data/reader.h>
#include <attn/io/json.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::data {

struct SplitOptions {
  double train = 0.8;
  double valid = 0.1;
  double test = 0.1;
  uint64_t seed = 1;
  bool stratify = true;  // per class when the dataset has labels
};

struct Split {
  std::string method;
  uint64_t seed = 0;
  double fractions[3] = {0, 0, 0};
  bool stratified = false;
  int64_t num_examples = 0;
  uint64_t input_hash = 0;
  std::vector<int64_t> train, valid, test;  // sorted indices into Dataset::examples

  // "stratified-shuffle-v1 seed=0x1 80/10/10 of 35124 (hash 0x...): train 28099, valid 3512, test 3513".
  std::string describe() const;
  json::Value to_json() const;
  static Split from_json(const json::Value& v);
  void save(const std::string& path) const;  // written atomically (io::write_file_atomically)
  static Split load(const std::string& path);
  bool operator==(const Split& o) const;
};

// The method string make_split() writes; bumped whenever its output would change.
inline constexpr const char* kSplitMethod =
    "stratified-shuffle-v1 (xoshiro256**, Fisher-Yates, Lemire bounded)";

Split make_split(const Dataset& dataset, const SplitOptions& options = {});

// FNV-1a 64 over every example's label, text and pair, in order: a change to
// any example, or to their order, changes it.
uint64_t dataset_hash(const Dataset& dataset);

// Throws attn::Error unless `split` was made from exactly `dataset` (same size
// and hash) and its three lists are disjoint, sorted, in range and cover
// every example.
void check_split(const Split& split, const Dataset& dataset);

// How many examples of `b` have a (text, pair) that also occurs in `a`
// (leakage check: 0 after deduplicate()).
int64_t count_text_overlap(const Dataset& dataset, const std::vector<int64_t>& a,
                           const std::vector<int64_t>& b);

// Examples per class for the given indices.
std::vector<int64_t> class_counts(const Dataset& dataset, const std::vector<int64_t>& indices);

}  // namespace attn::data

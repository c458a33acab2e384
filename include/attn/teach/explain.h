// `attn explain` as library functions: the tutorial's worked example of
// self-attention, computed step by step by plain arithmetic and checked
// against the engine. One function per mode; each takes an options struct and
// returns a Report (text + JSON). Layers, heads and positions are numbered
// from 0, in the options, the text and the JSON.
//
// Errors (a query word not in the sentence, sizes out of range, a model file
// that does not exist) are attn::Error naming the option and the bad value.
#pragma once

#include <attn/teach/lang.h>
#include <attn/teach/report.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attn::teach {

// ---- the worked example (also drawn by the viewer's demo) ----------------------

// A small dense row-major matrix of doubles, for the step-by-step arithmetic.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;  // [rows, cols]

  Mat() = default;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<std::size_t>(r * c), 0.0) {}
  double& operator()(int64_t r, int64_t c) { return v[static_cast<std::size_t>(r * cols + c)]; }
  double operator()(int64_t r, int64_t c) const { return v[static_cast<std::size_t>(r * cols + c)]; }
  std::vector<double> row(int64_t r) const;
  Mat cols_slice(int64_t first, int64_t count) const;  // columns [first, first + count)
  json::Value json() const;                            // an array of row arrays
};

// a: [n, m], b: [m, p] -> [n, p], by the schoolbook sum.
Mat matmul(const Mat& a, const Mat& b);
double dot(const std::vector<double>& a, const std::vector<double>& b);

// The worked example: a sentence, its embeddings and the projections.
//
// d_model = 8 features per word. The projections W_Q, W_K, W_V are [8, 8];
// their 8 output dimensions are named (dims) and grouped 4 + 4 into the two
// heads of the multi-head mode (head 0 and head 1); the single-head
// walkthrough uses head 0 (columns 0..3, d_k = 4). W_O [8, 8] puts each value
// dimension back under the feature of the same name.
struct Example {
  std::vector<std::string> words;     // N tokens
  std::string gloss;                  // English meaning of the default sentence, else empty
  bool hand_chosen = true;            // embeddings chosen by hand (default sentence) or generated
  uint64_t seed = 0;                  // the generator's seed when !hand_chosen
  std::vector<std::string> features;  // d_model feature names (columns of X)
  std::vector<std::string> dims;      // d_model names of the projected dimensions
  Mat X;                              // [N, d_model]
  Mat WQ, WK, WV, WO;                 // [d_model, d_model]

  int64_t n() const { return X.rows; }
  int64_t d_model() const { return X.cols; }
};

inline constexpr int64_t kExampleDModel = 8;  // d_model of the worked example
inline constexpr int64_t kSingleHeadDk = 4;   // the walkthrough's d_k (head 0's columns)
inline constexpr uint64_t kDefaultSeed = 2017;
inline constexpr std::size_t kMaxSentenceWords = 64;

// 今天 下雨 ， 我 没 带 伞 with hand-chosen embeddings.
Example default_example();
// Any sentence (one word per item); embeddings from the seeded generator
// (generated_embedding), the projections as in the default example.
Example sentence_example(const std::vector<std::string>& words, uint64_t seed);
// The generator: a word's embedding depends only on (word, seed): an FNV-1a
// hash of its UTF-8 bytes mixed with the seed starts a SplitMix64 stream; each
// of the d values is uniform in [-1, 1] rounded to two decimals, so the
// printed inputs are exact.
std::vector<double> generated_embedding(const std::string& word, uint64_t seed, int64_t d);

// ---- the modes ----------------------------------------------------------------

// The sentence of the walkthrough, multi-head and mask modes.
struct Sentence {
  std::vector<std::string> words;  // empty: the default sentence (hand-chosen embeddings)
  uint64_t seed = kDefaultSeed;    // the embedding generator's seed for `words`
};
// The example of `s`: default_example() or sentence_example(words, seed) (at
// most kMaxSentenceWords words).
Example example_of(const Sentence& s);

struct WalkthroughOptions {
  Sentence sentence;
  // The query: a word of the sentence (its first occurrence) or its position
  // from 0. Empty: 没, or the first word of a sentence without it.
  std::string query;
  Lang lang = Lang::en;  // the language of the report (the numbers are the same)
};
// One query word, one head, six steps, then the engine's agreement.
Report walkthrough(const WalkthroughOptions& options);

struct ScoresOptions {
  std::vector<double> scores;       // 1..1000 scores, each in [-700, 700]
  std::vector<std::string> tokens;  // names of the positions (one per score); empty: "position 0", ...
  Lang lang = Lang::en;             // the language of the report (the numbers are the same)
};
// softmax of the given scores: exp, sum, divide, which wins.
Report softmax_scores(const ScoresOptions& options);

struct MultiHeadOptions {
  Sentence sentence;
  std::string query;     // as in WalkthroughOptions
  int64_t heads = 2;     // dividing d_model = 8
  Lang lang = Lang::en;  // the language of the report (the numbers are the same)
};
// Every head's weights side by side, the concatenation and W_O, with shapes.
Report multi_head(const MultiHeadOptions& options);

struct CostOptions {
  int64_t n = 0, d = 0, heads = 0, batch = 1;  // heads must divide d
  bool causal = false;
  Lang lang = Lang::en;  // the language of the report (the numbers are the same)
};
// Shapes, FLOPs and memory of every step; naive against fused; the backend attn chooses.
Report cost(const CostOptions& options);

// `attn explain --cost --model gemma3`: the windowed-attention remedy for O(N²) in a real model's
// numbers. The shapes come from the GGUF metadata of a Gemma 3 file (layers, heads, kv heads, head
// size, sliding window and which layers slide); for each sequence length N (512 .. max_n, doubling):
// the attention FLOPs of one causal pass (QKᵀ and PV: 4·H·D per visible query-key pair) of the
// sliding layers, the global ones and the same model with every layer global, and the f32 KV-cache
// memory with ring-buffered windows against a full cache.
struct ModelCostOptions {
  std::string gguf;       // path of a gemma3 GGUF file
  int64_t max_n = 32768;  // the longest N shown (at most the model's context)
  Lang lang = Lang::en;   // the language of the report (the numbers are the same)
};
Report gemma3_cost(const ModelCostOptions& options);

struct MaskOptions {
  Sentence sentence;
  std::string kind;      // causal | padding | window
  int64_t length = -1;   // padding: real tokens (0..N)
  int64_t window = -1;   // window: half-width (>= 0)
  bool causal = false;   // window: also causal (look back only)
  Lang lang = Lang::en;  // the language of the report (the numbers are the same)
};
// Which positions each query may see, as a grid computed by the engine.
Report mask(const MaskOptions& options);

struct ModelOptions {
  std::string path;              // a classifier saved by `attn train classify`
  std::string sentence;          // the text to classify (as is)
  std::optional<int64_t> layer;  // encoder layer from 0; none: the last
  int64_t head = 0;              // from 0
  // The query: a token of the sentence or its position from 0 ([CLS] is 0).
  // Empty: [CLS], what the classifier reads.
  std::string word;
  int64_t show_dims = 4;  // dimensions shown in the Q/K/V table (1..4096)
  Lang lang = Lang::en;   // the language of the report (the numbers are the same)
};
// The walkthrough with a trained classifier's real Q, K, V for one layer,
// head and query, checked against the engine and the model's captured weights.
Report explain_model(const ModelOptions& options);

}  // namespace attn::teach

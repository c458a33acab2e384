// Internals of `attn explain`, shared by its files:
//   explain.cc            options, --help, dispatch to a mode
//   explain_example.cc    the worked example's inputs (illustrative, hand-chosen) and small helpers
//   explain_walkthrough.cc  the default walkthrough and --scores (softmax of given scores)
//   explain_multihead.cc  --multi-head
//   explain_cost.cc       --cost
//   explain_mask.cc       --mask
// Every mode fills a Report: the text a person reads and a JSON object with
// the same numbers for programs.
#pragma once

#include <attn/core/tensor.h>
#include <attn/models/transformer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "json.h"
#include <attn/text/table.h>

namespace attn::cli {
class Args;
}  // namespace attn::cli

namespace attn::cli::explain {

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
  Json json() const { return Json::matrix(v, rows, cols); }
};

// a: [n, m], b: [m, p] -> [n, p], by the schoolbook sum.
Mat matmul(const Mat& a, const Mat& b);
double dot(const std::vector<double>& a, const std::vector<double>& b);

// The worked example: a sentence, its embeddings and the projections.
//
// d_model = 8 features per word. The projections W_Q, W_K, W_V are [8, 8];
// their 8 output dimensions are named (dims) and grouped 4 + 4 into the two
// heads of --multi-head; the single-head walkthrough uses the first head
// (columns 0..3, d_k = 4). W_O [8, 8] puts each value dimension back under the
// feature of the same name.
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

inline constexpr int64_t kSingleHeadDk = 4;  // the walkthrough's d_k (first head's columns)
inline constexpr uint64_t kDefaultSeed = 2017;

// 今天 下雨 ， 我 没 带 伞 with hand-chosen embeddings.
Example default_example();
// Any space-separated sentence; embeddings from the seeded generator
// (generated_embedding), the projections as in the default example.
Example sentence_example(const std::vector<std::string>& words, uint64_t seed);
// The generator: a word's embedding depends only on (word, seed): an FNV-1a
// hash of its UTF-8 bytes mixed with the seed starts a SplitMix64 stream; each
// of the d values is uniform in [-1, 1] rounded to two decimals, so the
// printed inputs are exact.
std::vector<double> generated_embedding(const std::string& word, uint64_t seed, int64_t d);

// The query position (0-based) named by `query`: a word of the sentence (its
// first occurrence) or a 1-based position. Throws naming the sentence.
int64_t resolve_query(const Example& ex, const std::string& query);

// Fixed-point text with `decimals` digits; never prints "-0.00".
std::string fmt(double v, int decimals);
// Compact text for hand-chosen inputs: "1.5", "0", "-0.25".
std::string fmt_input(double v);
// "[B, H, N, N]"-style shape text from named dimensions.
std::string shape_text(const std::vector<std::string>& dims);
// Integers with thousands separators: 1,234,567.
std::string with_commas(int64_t v);
// Bytes as B / KiB / MiB / GiB / TiB with 1 decimal.
std::string human_bytes(double bytes);
// A count with a metric suffix: 1.2 k, 3.4 M, 5.6 G, 7.8 T.
std::string human_count(double v);
// A bar of `cells` full blocks for `fraction` of `width`.
std::string bar(double fraction, int width);
// "a, b and c".
std::string join_words(const std::vector<std::string>& words, const std::string& sep = " ");

// The output of one mode.
struct Report {
  std::string text;
  Json json = Json::object();

  void title(const std::string& s);    // the command's title, underlined with '='
  void heading(const std::string& s);  // a section, underlined with '-'
  void para(const std::string& s);     // text lines (may hold '\n'), then a blank line
  void line(const std::string& s = "");
  void table(const text::Table& t);  // indented two spaces, then a blank line
};

// The engine's answer for single-head attention of row `query` over K, V.
struct EngineRun {
  std::string backend;          // "fused (fp32)" or "reference (fp64)"
  std::vector<double> weights;  // [N] captured probabilities of the query row
  std::vector<double> output;   // [d] the query row of the output
  double max_diff_weights = 0;  // against the step-by-step arithmetic
  double max_diff_output = 0;
  bool compared_output = true;  // false when no expected output was given
  double tolerance = 0;
};

// Runs attn::attention on q: [1, 1, Lq, D], k/v: [1, 1, Lk, D] built from the
// given matrices (Q: [Lq, D], K/V: [Lk, D]) with weight capture of row
// `query`, with the fused fp32 kernel (Backend::automatic on f32) and the fp64
// reference, and compares with `weights`/`output` from the arithmetic (an
// empty `output` is not compared).
// Throws attn::Error if either backend differs by more than its tolerance.
std::vector<EngineRun> engine_check(const Mat& Q, const Mat& K, const Mat& V, double scale, int64_t query,
                                    const std::vector<double>& weights, const std::vector<double>& output);
// Lines saying the engine agrees; returns the same as JSON (for the key "engine").
Json report_engine(Report& r, const std::vector<EngineRun>& runs, const std::string& what);

// Tolerance for comparing the engine with the arithmetic: `base` (1e-5 for
// fp32, 1e-12 for fp64) scaled by the magnitudes that amplify rounding: the
// largest |logit| (rounding the inputs moves a logit by about eps·|logit|)
// and the largest |value| (for outputs).
double engine_tolerance(double base, double max_abs_logit, double max_abs_value);

// Tensor [1, 1, rows, cols] of dtype `dt` holding `m`.
Tensor to_tensor4(const Mat& m, DType dt);

// ---- the modes --------------------------------------------------------------
// --model: a trained classifier's real Q, K, V (explain_model.cc).
struct ModelExample {
  models::EncoderClassifier* model = nullptr;
  std::string model_name;           // for the title (the file name)
  std::vector<std::string> tokens;  // "[CLS]" then the sentence's tokens
  std::vector<int64_t> ids;         // [L]
  int64_t layer = 0, head = 0;
  int64_t query = 0;      // position in tokens (0 = [CLS])
  int64_t show_dims = 4;  // dimensions printed in the Q/K/V tables
};
void model_walkthrough(const ModelExample& ex, Report& r);
// Loads the classifier at `path` (attn train classify), tokenises `sentence` and runs
// model_walkthrough with --layer, --head, --word, --dims from `args`.
void model_mode(const std::string& path, const std::string& sentence, const Args& args, Report& r);

void walkthrough(const Example& ex, int64_t query, Report& r);
void softmax_of_scores(const std::vector<double>& scores, const std::vector<std::string>& tokens, Report& r);
void multi_head(const Example& ex, int64_t query, int64_t heads, Report& r);

struct CostParams {
  int64_t n = 0, d = 0, heads = 0, batch = 1;
  bool causal = false;
};
void cost(const CostParams& p, Report& r);

struct MaskParams {
  std::string kind;     // causal | padding | window
  int64_t length = -1;  // padding: real tokens
  int64_t window = -1;  // window: half-width
  bool causal = false;  // window: also causal (look back only)
};
void mask(const Example& ex, const MaskParams& p, Report& r);

}  // namespace attn::cli::explain

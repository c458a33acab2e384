// Internals of the explain modes (attn/teach/explain.h), shared by their files:
//   explain_example.cc      the worked example's inputs (illustrative, hand-chosen), text helpers, the engine
//   check explain_walkthrough.cc  the default walkthrough and the softmax of given scores
//   explain_multihead.cc    multi-head
//   explain_cost.cc         cost
//   explain_mask.cc         mask
//   explain_model.cc        a trained classifier's real Q, K, V
// Every mode fills a Page: the text a person reads and a JSON object with the
// same numbers for programs.
#pragma once

#include <attn/core/tensor.h>
#include <attn/io/json.h>
#include <attn/models/transformer.h>
#include <attn/teach/explain.h>
#include <attn/text/table.h>

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

namespace attn::teach {

// The query position (0-based) named by `query`: a word of the sentence (its
// first occurrence) or a position from 0. Throws naming the sentence.
int64_t resolve_query(const Example& ex, const std::string& query);
// The default query: 没, or 0 for a sentence without it.
int64_t default_query(const Example& ex);
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
// The Chinese name of a feature / dimension of the worked example ("negation" -> "否定");
// other names (generated "f1", a model's "d0") unchanged; English unchanged.
std::string feature_name(Lang lang, const std::string& name);
std::vector<std::string> feature_names(Lang lang, const std::vector<std::string>& names);
// A list in the language: "a, b and c" / "a、b 和 c".
std::string list_text(Lang lang, const std::vector<std::string>& items);

// The tutorial's first softmax table: these scores printed with these weights
// (not a softmax of the scores; the --scores mode and the walkthrough say so).
inline const std::vector<double> kTutorialScores = {0.2, 2.5, 0.8, 0.3, 0.4, 2.0};
inline const std::vector<double> kTutorialWeights = {0.06, 0.42, 0.11, 0.07, 0.07, 0.27};
// softmax(v), plainly.
std::vector<double> softmax(const std::vector<double>& v);
// The "x (engine backend)" text of a run in the page's language.
std::string backend_text(Lang lang, const std::string& backend);

// "a, b and c".
std::string join_words(const std::vector<std::string>& words, const std::string& sep = " ");

// ---- JSON values (attn::json::Value) for the reports ---------------------------
// Numbers: -0 is written as 0; NaN and infinities throw (JSON has none).
json::Value jv(double v);
inline json::Value jv(bool b) { return json::Value::boolean(b); }
inline json::Value jv(const char* s) { return json::Value::string(s); }
inline json::Value jv(std::string s) { return json::Value::string(std::move(s)); }
inline json::Value jv(json::Value v) { return v; }
template <std::integral T>
requires(!std::same_as<T, bool>) json::Value jv(T i) { return json::Value::integer(static_cast<int64_t>(i)); }
json::Value numbers(const std::vector<double>& v);
json::Value integers(const std::vector<int64_t>& v);
json::Value strings(const std::vector<std::string>& v);
// Row-major [rows, cols] as an array of row arrays.
json::Value matrix(const std::vector<double>& v, int64_t rows, int64_t cols);
// Sets the members in order: put(obj, {{"a", jv(1)}, {"b", jv("x")}}).
void put(json::Value& object, std::vector<json::Value::Member> members);

// A report being written: the text helpers over the Report's text, in `lang`.
struct Page : Report {
  Lang lang = Lang::en;  // the language of the text (the JSON is the same in both)
  // The text for this page's language.
  std::string t(const std::string& en, const std::string& zh) const { return tr(lang, en, zh); }
  void title(const std::string& s);    // the command's title, underlined with '='
  void heading(const std::string& s);  // a section, underlined with '-'
  void para(const std::string& s);     // text lines (may hold '\n'), then a blank line
  void line(const std::string& s = "");
  void table(const text::Table& t);  // indented two spaces, then a blank line
};

// A page in `lang`; the finished report with "lang" set in its JSON (the only
// member that differs between the languages).
Page page_in(Lang lang);
Report finish(Page& page);

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
// `what` names the steps compared, e.g. {"(steps 5 and 6)", "（第 5 步和第 6 步）"}.
json::Value report_engine(Page& r, const std::vector<EngineRun>& runs, const std::string& what);

// Tolerance for comparing the engine with the arithmetic: `base` (1e-5 for
// fp32, 1e-12 for fp64) scaled by the magnitudes that amplify rounding: the
// largest |logit| (rounding the inputs moves a logit by about eps·|logit|)
// and the largest |value| (for outputs).
double engine_tolerance(double base, double max_abs_logit, double max_abs_value);

// Tensor [1, 1, rows, cols] of dtype `dt` holding `m`.
Tensor to_tensor4(const Mat& m, DType dt);

// ---- the modes, on a Page ------------------------------------------------------
// A trained classifier's real Q, K, V (explain_model.cc).
struct ModelExample {
  models::EncoderClassifier* model = nullptr;
  std::string model_name;           // for the title (the file name)
  std::vector<std::string> tokens;  // "[CLS]" then the sentence's tokens
  std::vector<int64_t> ids;         // [L]
  int64_t layer = 0, head = 0;
  int64_t query = 0;      // position in tokens (0 = [CLS])
  int64_t show_dims = 4;  // dimensions printed in the Q/K/V tables
};
void model_walkthrough(const ModelExample& ex, Page& r);

void walkthrough(const Example& ex, int64_t query, Page& r);
void softmax_of_scores(const std::vector<double>& scores, const std::vector<std::string>& tokens, Page& r);
void multi_head(const Example& ex, int64_t query, int64_t heads, Page& r);
void cost(const CostOptions& p, Page& r);
// The tutorial's "multi-head attention costs h times one head", computed for
// these sizes (`pairs`: query-key pairs per batch and head): h heads of
// d_k = D / H next to one head of width D. Writes a section; returns its JSON.
json::Value heads_cost_note(Page& r, int64_t B, int64_t N, int64_t D, int64_t H, int64_t pairs);
// The tutorial's "Swin windows make attention O(N)", computed: N tokens in
// windows of M x M = M² tokens against global attention. Writes a section;
// returns its JSON.
json::Value swin_note(Page& r, int64_t N, int64_t M);
void mask(const Example& ex, const MaskOptions& p, Page& r);

}  // namespace attn::teach

// --mask causal|padding|window: which keys each query may see, as a grid over
// the sentence. Visibility comes from the engine itself: with all scores
// equal (q = 0) every visible key gets weight 1/count > 0 and every masked
// key exactly 0, so a cell is visible iff its captured weight is > 0. A
// second run with the example's real Q, K, V shows the masked weights, which
// are checked against a softmax over the visible keys computed here.
#include <attn/ops/attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "explain_internal.h"

namespace attn::teach {
namespace {

// One mask over the example (compute_mask): its rule, the visibility the
// engine gives, the masked weights; and the text and the JSON written from them.
struct Masked {
  const Example& ex;
  const MaskOptions& p;
  int64_t N;
  std::string rule, why;
  std::vector<std::vector<bool>> visible;  // [N][N]
  std::vector<int64_t> count;              // visible keys per query
  Tensor w;                                // the masked weights [1, 1, N, N]
  double max_diff;                         // against a softmax over the visible keys

  void text(Page& r) const;
  void to_json(Page& r) const;
};

Masked compute_mask(const Example& ex, const MaskOptions& p) {
  const int64_t N = ex.n(), dk = kSingleHeadDk;
  AttentionOptions o;
  std::string rule, why;
  if (p.kind == "causal") {
    o.causal = true;
    rule = "query i sees keys j <= i";
    why =
        "A decoder generates text left to right, so while predicting word i it must not look at later words.";
  } else if (p.kind == "padding") {
    ATTN_CHECK(p.length >= 0 && p.length <= N, "--length must be in [0, ", N, "] (the sentence has ", N,
               " tokens); got ", p.length);
    o.key_lengths = {p.length};
    rule = "keys j >= " + std::to_string(p.length) + " are padding, hidden from every query";
    why =
        "Sentences of different lengths share one batch by padding the short ones; the padding keys must\n"
        "not attract attention. (Rows of padding queries are computed too; a model ignores their output.)";
    if (p.length == 0)
      why += "\nWith length 0 every row is fully masked: the engine returns weights 0 and output 0.";
  } else if (p.kind == "window") {
    ATTN_CHECK(p.window >= 0, "--window must be >= 0; got ", p.window);
    o.window_left = p.window;
    o.window_right = p.causal ? 0 : p.window;
    o.causal = p.causal;
    rule = p.causal ? "query i sees keys i-" + std::to_string(p.window) + " .. i"
                    : "query i sees keys i-" + std::to_string(p.window) + " .. i+" + std::to_string(p.window);
    why =
        "Local (sliding-window) attention: each word sees only its neighbours, so the cost grows with\n"
        "N·window instead of N².";
  } else {
    ATTN_CHECK(false, "--mask: expected causal, padding or window; got '", p.kind, "'");
  }
  o.capture.enabled = true;  // every row

  // Run 1: all scores equal -> visibility.
  const Tensor zeros = Tensor::zeros({1, 1, N, dk});                 // q, k, v: [1, 1, N, d_k]
  const Tensor uniform = attention(zeros, zeros, zeros, o).weights;  // [1, 1, N, N]
  std::vector<std::vector<bool>> visible(N, std::vector<bool>(N));
  std::vector<int64_t> count(N, 0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) {
      visible[i][j] = uniform.at({0, 0, i, j}) > 0;
      count[i] += visible[i][j];
    }

  // Run 2: the example's Q, K, V (first head) with the mask.
  const Mat Q = matmul(ex.X, ex.WQ.cols_slice(0, dk)), K = matmul(ex.X, ex.WK.cols_slice(0, dk)),
            V = matmul(ex.X, ex.WV.cols_slice(0, dk));  // [N, d_k]
  const Tensor w =
      attention(to_tensor4(Q, DType::f32), to_tensor4(K, DType::f32), to_tensor4(V, DType::f32), o)
          .weights;  // [1, 1, N, N]
  // The same by arithmetic: softmax over the visible keys only.
  double max_diff = 0;
  std::vector<std::vector<double>> expect(N, std::vector<double>(N, 0.0));
  for (int64_t i = 0; i < N; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < N; ++j)
      if (visible[i][j]) sum += expect[i][j] = std::exp(dot(Q.row(i), K.row(j)) / std::sqrt(double(dk)));
    for (int64_t j = 0; j < N; ++j) {
      if (sum > 0) expect[i][j] /= sum;
      max_diff = std::max(max_diff, std::fabs(expect[i][j] - w.at({0, 0, i, j})));
    }
  }
  double max_logit = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < N; ++k)
      max_logit = std::max(max_logit, std::fabs(dot(Q.row(i), K.row(k))) / std::sqrt(double(dk)));
  const double kTol = engine_tolerance(1e-5, max_logit, 1.0);  // weights only
  ATTN_CHECK(max_diff <= kTol,
             "explain: the engine's masked weights disagree with the arithmetic: max |difference| = ",
             max_diff, "; expected <= ", kTol);
  return Masked{ex, p, N, rule, why, visible, count, w, max_diff};
}

void Masked::text(Page& r) const {
  std::string title = "attn explain --mask " + p.kind;
  if (p.kind == "padding") title += " --length " + std::to_string(p.length);
  if (p.kind == "window") title += " --window " + std::to_string(p.window) + (p.causal ? " --causal" : "");
  r.title(title + ": who may see whom");
  r.line("Sentence: " + join_words(ex.words) + "   (" + std::to_string(N) + " tokens)");
  r.para("Rule:     " + rule + "\n\n" + why);

  auto grid = [&](bool weights) {
    std::vector<text::Table::Column> cols = {{"query \\ key", text::Align::left}};
    for (int64_t j = 0; j < N; ++j) cols.push_back({ex.words[j], text::Align::center});
    cols.push_back({weights ? "sum" : "sees", text::Align::right});
    text::Table t(cols);
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {std::to_string(i) + " " + ex.words[i]};
      double sum = 0;
      for (int64_t j = 0; j < N; ++j) {
        const double x = w.at({0, 0, i, j});
        sum += x;
        row.push_back(!visible[i][j] ? "." : weights ? fmt(x, 2) : "#");
      }
      row.push_back(weights ? fmt(sum, 2) : std::to_string(count[i]));
      t.row(row);
    }
    return t;
  };
  r.heading("Visibility: # = may attend, . = masked");
  r.para(
      "Computed by the engine: attn::attention with this mask and all scores equal (q = 0), capturing every\n"
      "row's weights; a cell is visible iff its weight is > 0 (each visible key gets exactly 1/count).");
  r.table(grid(false));
  r.heading("Weights: each row is a softmax over its visible keys");
  r.para("The example's Q and K (the walkthrough's head), run through the engine with the mask:");
  r.table(grid(true));
  char diff[32];
  std::snprintf(diff, sizeof diff, "%.1e", max_diff);
  r.para(
      std::string("Masked keys get weight exactly 0 and each row's visible weights still sum to 1 (a fully\n"
                  "masked row has no weights at all and outputs 0). Engine agreement: the engine's masked\n"
                  "weights equal a softmax over the visible keys computed by arithmetic (max |difference| ") +
      diff + ").");
}

void Masked::to_json(Page& r) const {
  json::Value& j = r.json;
  j.set("mode", jv("mask"));
  j.set("mask", jv(p.kind));
  if (p.kind == "padding") j.set("length", jv(p.length));
  if (p.kind == "window") put(j, {{"window", jv(p.window)}, {"causal", jv(p.causal)}});
  j.set("rule", jv(rule));
  j.set("sentence", jv(strings(ex.words)));
  json::Value vis = json::Value::array(), wj = json::Value::array();
  for (int64_t i = 0; i < N; ++i) {
    json::Value row = json::Value::array(), wr = json::Value::array();
    for (int64_t k = 0; k < N; ++k) {
      row.push_back(jv(static_cast<bool>(visible[i][k])));
      wr.push_back(jv(w.at({0, 0, i, k})));
    }
    vis.push_back(std::move(row));
    wj.push_back(std::move(wr));
  }
  j.set("visible", jv(std::move(vis)));
  j.set("visible_count", jv(integers(count)));
  j.set("weights", jv(std::move(wj)));
  j.set("max_abs_diff_weights", jv(max_diff));
}

}  // namespace

void mask(const Example& ex, const MaskOptions& p, Page& r) {
  const Masked m = compute_mask(ex, p);
  m.text(r);
  m.to_json(r);
}

}  // namespace attn::teach

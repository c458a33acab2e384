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
  std::string rule, why;                   // English (the JSON's "rule")
  std::string rule_zh, why_zh;             // the same in Chinese
  std::vector<std::vector<bool>> visible;  // [N][N]
  std::vector<int64_t> count;              // visible keys per query
  Tensor w;                                // the masked weights [1, 1, N, N]
  double max_diff;                         // against a softmax over the visible keys

  void text(Page& r) const;
  void window_note(Page& r) const;
  void to_json(Page& r) const;
};

Masked compute_mask(const Example& ex, const MaskOptions& p) {
  const int64_t N = ex.n(), dk = kSingleHeadDk;
  AttentionOptions o;
  std::string rule, why, rule_zh, why_zh;
  if (p.kind == "causal") {
    o.causal = true;
    rule = "query i sees keys j <= i";
    rule_zh = "查询 i 只看键 j <= i";
    why =
        "A decoder generates text left to right, so while predicting word i it must not look at later words.";
    why_zh = "因果掩码：解码器从左到右生成文本，所以在预测第 i 个词时不能偷看后面的词。";
  } else if (p.kind == "padding") {
    ATTN_CHECK(p.length >= 0 && p.length <= N, "--length must be in [0, ", N, "] (the sentence has ", N,
               " tokens); got ", p.length);
    o.key_lengths = {p.length};
    rule = "keys j >= " + std::to_string(p.length) + " are padding, hidden from every query";
    rule_zh = "键 j >= " + std::to_string(p.length) + " 是填充，对所有查询都不可见";
    why =
        "Sentences of different lengths share one batch by padding the short ones; the padding keys must\n"
        "not attract attention. (Rows of padding queries are computed too; a model ignores their output.)";
    why_zh =
        "填充掩码：长短不一的句子要放进同一个批，就得把短句补齐（填充）；填充出来的键不能吸引注意力。\n"
        "（填充位置作为查询的那几行也会被计算，模型会忽略它们的输出。）";
    if (p.length == 0) {
      why += "\nWith length 0 every row is fully masked: the engine returns weights 0 and output 0.";
      why_zh += "\n长度为 0 时每一行都被完全遮住：引擎给出的权重为 0，输出也为 0。";
    }
  } else if (p.kind == "window") {
    ATTN_CHECK(p.window >= 0, "--window must be >= 0; got ", p.window);
    o.window_left = p.window;
    o.window_right = p.causal ? 0 : p.window;
    o.causal = p.causal;
    const std::string keys = p.causal ? "i-" + std::to_string(p.window) + " .. i"
                                      : "i-" + std::to_string(p.window) + " .. i+" + std::to_string(p.window);
    rule = "query i sees keys " + keys;
    rule_zh = "查询 i 只看键 " + keys;
    why =
        "Local (sliding-window) attention: each word sees only its neighbours, so the cost grows with\n"
        "N·window instead of N².";
    why_zh =
        "窗口注意力（局部的、滑动窗口的注意力）：每个词只看它的邻居，所以开销随 N·窗口 增长，而不是 N²。";
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
  return Masked{ex, p, N, rule, why, rule_zh, why_zh, visible, count, w, max_diff};
}

void Masked::text(Page& r) const {
  std::string title = "attn explain --mask " + p.kind;
  if (p.kind == "padding") title += " --length " + std::to_string(p.length);
  if (p.kind == "window") title += " --window " + std::to_string(p.window) + (p.causal ? " --causal" : "");
  r.title(title + r.t(": who may see whom", "：谁能看到谁"));
  const std::string n = std::to_string(N);
  r.line(r.t("Sentence: " + join_words(ex.words) + "   (" + n + " tokens)",
             "句子：" + join_words(ex.words) + "   （" + n + " 个词元）"));
  r.para(r.t("Rule:     " + rule + "\n\n" + why, "规则：" + rule_zh + "\n\n" + why_zh));

  auto grid = [&](bool weights) {
    std::vector<text::Table::Column> cols = {{r.t("query \\ key", "查询 \\ 键"), text::Align::left}};
    for (int64_t j = 0; j < N; ++j) cols.push_back({ex.words[j], text::Align::center});
    cols.push_back({weights ? r.t("sum", "和") : r.t("sees", "可见数"), text::Align::right});
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
  r.heading(r.t("Visibility: # = may attend, . = masked", "可见性：# = 可以关注，. = 被掩码遮住"));
  r.para(r.t(
      "Computed by the engine: attn::attention with this mask and all scores equal (q = 0), capturing every\n"
      "row's weights; a cell is visible iff its weight is > 0 (each visible key gets exactly 1/count).",
      "由引擎计算：用这个掩码、让所有分数相等（q = 0）运行 attn::attention，捕获每一行的权重；\n"
      "一个格子可见当且仅当它的权重 > 0（每个可见的键恰好得到 1/可见数）。"));
  r.table(grid(false));
  r.heading(
      r.t("Weights: each row is a softmax over its visible keys", "权重：每一行是对它可见的键做的 softmax"));
  r.para(r.t("The example's Q and K (the walkthrough's head), run through the engine with the mask:",
             "示例中的 Q 和 K（逐步演示用的那个头），加上掩码送进引擎："));
  r.table(grid(true));
  char diff[32];
  std::snprintf(diff, sizeof diff, "%.1e", max_diff);
  r.para(r.t(
      std::string("Masked keys get weight exactly 0 and each row's visible weights still sum to 1 (a fully\n"
                  "masked row has no weights at all and outputs 0). Engine agreement: the engine's masked\n"
                  "weights equal a softmax over the visible keys computed by arithmetic (max |difference| ") +
          diff + ").",
      std::string("被遮住的键权重恰好为 0，每一行可见的权重之和仍然是 1（完全被遮住的一行没有任何权重，\n"
                  "输出为 0）。引擎一致：引擎给出的带掩码权重，等于手算的只对可见键做的 softmax\n"
                  "（最大 |差| ") +
          diff + "）。"));
  if (p.kind == "window") window_note(r);
}

// The window's cost, computed from the visibility, next to the tutorial's "Swin windows make attention O(N)".
void Masked::window_note(Page& r) const {
  int64_t pairs = 0;
  for (int64_t c : count) pairs += c;
  const std::string most = std::to_string(p.causal ? p.window + 1 : 2 * p.window + 1);
  const std::string sp = std::to_string(pairs), sn = std::to_string(N * N);
  r.heading(r.t("The cost of a window, and the tutorial's \"Swin windows make attention O(N)\"",
                "窗口的开销，以及教程说的“Swin 的窗口让注意力变成 O(N)”"));
  r.para(r.t(
      "Each query sees at most " + most + " keys here, so this mask keeps " + sp + " of the N² = " + sn +
          " query-key pairs.\nFor a fixed window the pairs grow as N·window: O(N), which is the sense in "
          "which "
          "the tutorial's\nclaim holds. Swin's two-dimensional windows of M x M tokens cost N·M² pairs: "
          "linear "
          "in N,\nquadratic in M (attn explain --cost --n N --d D --heads H computes it at real sizes).",
      "这里每个查询最多看到 " + most + " 个键，所以这个掩码只保留了 " + sp + " 个查询-键对（共 N² = " + sn +
          " 个）。\n窗口大小固定时，查询-键对的个数随 N·窗口 增长，也就是 "
          "O(N)：教程的说法在这个意义上成立。\n"
          "Swin 的二维窗口每个有 M x M 个词元，开销是 N·M² 个查询-键对：对 N 是线性的，对 M 却是平方的\n"
          "（attn explain --cost --n N --d D --heads H 按真实规模计算）。"));
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

// Numeric questions: attention weights from given scores, the scaled score
// q·k/√d_k of small vectors, and the effect of √d_k on softmax saturation.
// Expected answers come from the engine (fp64 reference backend) and are
// cross-checked against the arithmetic the worked solution shows.
#include <attn/core/error.h>
#include <attn/ops/attention.h>
#include <attn/text/table.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "quiz_internal.h"

namespace attn::teach::quiz {
namespace {

// Four significant decimals, in scientific notation once the value is large (exp of big scores).
std::string num4(double v) {
  if (std::fabs(v) < 1e5) return fixed(v, 4);
  char b[32];
  std::snprintf(b, sizeof b, "%.4e", v);
  return b;
}

// Softmax of `scores` as a table: position, score, exp, weight; and the sum.
std::string softmax_table(const std::vector<double>& scores, const std::vector<double>& weights,
                          const std::string& score_name, Lang lang) {
  text::Table t({{tr(lang, "position", "位置"), text::Align::right},
                 {score_name, text::Align::right},
                 {"exp", text::Align::right},
                 {tr(lang, "weight", "权重"), text::Align::right}});
  double sum = 0;
  for (double s : scores) sum += std::exp(s);
  for (std::size_t j = 0; j < scores.size(); ++j)
    t.row({std::to_string(j), fixed(scores[j], 2), num4(std::exp(scores[j])), fixed(weights[j], 4)});
  return t.render("  ") + (lang == Lang::zh ? "  exp 之和 = " + num4(sum) + "；每个权重 = exp / 和\n"
                                            : "  sum of exp = " + num4(sum) + "; each weight = exp / sum\n");
}

Question softmax_weight(Rng& rng, Lang lang) {
  const int64_t n = rng.range(3, 5);
  std::vector<double> s(static_cast<std::size_t>(n));
  for (double& x : s) x = rng.rounded(-2, 3, 1);
  const int64_t j = rng.range(1, n) - 1;  // the position asked for, from 0
  const std::vector<double> w = engine_softmax(s, 1.0);

  Question q;
  q.kind = Kind::numeric;
  q.topic = "softmax-weight";
  q.text = lang == Lang::zh
               ? "一个查询（Query）对 " + std::to_string(n) +
                     " 个位置（从 0 开始编号）的注意力分数（已缩放）为 s = " + list_text(s, 1) +
                     "。\n它的注意力权重是 softmax(s)。位置 " + std::to_string(j) + " 得到的权重是多少？"
               : "A query has the (already scaled) attention scores s = " + list_text(s, 1) + " for " +
                     std::to_string(n) +
                     " positions (numbered from 0).\nIts attention weights are softmax(s). What weight does "
                     "position " +
                     std::to_string(j) + " get?";
  q.form = Form::number;
  q.number = w[static_cast<std::size_t>(j)];
  q.abs_tol = 0.01;
  q.decimals = 2;
  double sum = 0;
  for (double x : s) sum += std::exp(x);
  const std::string calc = tr(lang, ": exp(", "：exp(") + fixed(s[static_cast<std::size_t>(j)], 1) + ") / " +
                           num4(sum) + " = " + fixed(q.number, 4) + " ≈ " + q.key();
  q.solution = lang == Lang::zh
                   ? "softmax：权重_j = exp(s_j) / Σ_k exp(s_k)。\n" + softmax_table(s, w, "s", lang) +
                         "位置 " + std::to_string(j) + calc +
                         "。\n引擎（attn::attention，fp64 参考实现，捕获权重）算出的权重与此相同。"
                   : "softmax: weight_j = exp(s_j) / sum_k exp(s_k).\n" + softmax_table(s, w, "s", lang) +
                         "Position " + std::to_string(j) + calc +
                         ".\nThe engine (attn::attention, fp64 reference, weights captured) gives the same "
                         "weights.";
  q.data.set("scores", jv(numbers(s)));
  q.data.set("position", jv(j));
  q.data.set("weights", jv(numbers(w)));
  return q;
}

// q·k/√d_k by the engine: with a single key, the log-sum-exp of the row is its only logit.
double engine_scaled_score(const std::vector<double>& qv, const std::vector<double>& kv) {
  const int64_t d = static_cast<int64_t>(qv.size());
  const Tensor q = Tensor::from(qv, {1, 1, 1, d});  // q: [1, 1, 1, d_k]
  const Tensor k = Tensor::from(kv, {1, 1, 1, d});  // k, v: [1, 1, 1, d_k]
  AttentionOptions o;                               // default scale 1/√d_k
  o.backend = Backend::reference;
  const double lse = attention(q, k, k, o).lse.to_vector()[0];
  double dot = 0;
  for (int64_t i = 0; i < d; ++i) dot += qv[static_cast<std::size_t>(i)] * kv[static_cast<std::size_t>(i)];
  const double expect = dot / std::sqrt(static_cast<double>(d));
  ATTN_CHECK(std::fabs(lse - expect) <= 1e-12, "quiz: the engine's scaled score ", lse,
             " differs from q·k/√d_k = ", expect, " (expected |difference| <= 1e-12)");
  return lse;
}

Question scaled_score(Rng& rng, Lang lang) {
  const int64_t d = rng.range(2, 4);
  std::vector<double> qv(static_cast<std::size_t>(d)), kv(qv.size());
  // Redraw until q·k != 0: a zero score teaches nothing about the scaling.
  double dot = 0;
  while (dot == 0) {
    for (double& x : qv) x = static_cast<double>(rng.range(-3, 3));
    for (double& x : kv) x = static_cast<double>(rng.range(-3, 3));
    for (std::size_t i = 0; i < qv.size(); ++i) dot += qv[i] * kv[i];
  }
  const double score = engine_scaled_score(qv, kv);

  Question q;
  q.kind = Kind::numeric;
  q.topic = "scaled-score";
  q.text = lang == Lang::zh
               ? "q = " + list_text(qv, 0) + "，k = " + list_text(kv, 0) + "（d_k = " + std::to_string(d) +
                     "）。\n缩放后的注意力分数 q·k / √d_k 是多少？"
               : "q = " + list_text(qv, 0) + " and k = " + list_text(kv, 0) + " (d_k = " + std::to_string(d) +
                     ").\nWhat is the scaled attention score q·k / √d_k?";
  q.form = Form::number;
  q.number = score;
  q.abs_tol = 0.01;
  q.decimals = 2;
  std::string terms;
  for (std::size_t i = 0; i < qv.size(); ++i) {
    const std::string a = fixed(qv[i], 0), b = fixed(kv[i], 0);
    terms += (i ? " + " : "") + (qv[i] < 0 ? "(" + a + ")" : a) + "·" + (kv[i] < 0 ? "(" + b + ")" : b);
  }
  q.solution =
      "q·k = " + terms + " = " + fixed(dot, 0) + "\n√d_k = √" + std::to_string(d) + " = " +
      fixed(std::sqrt(static_cast<double>(d)), 4) + "\nq·k / √d_k = " + fixed(dot, 0) + " / " +
      fixed(std::sqrt(static_cast<double>(d)), 4) + " = " + fixed(score, 4) + " ≈ " + q.key() +
      (lang == Lang::zh
           ? "\n引擎的结果一致：只有这一个键（Key）时，attn::attention（默认缩放 1/√D，fp64）返回\n"
             "log-sum-exp = " +
                 fixed(score, 4) + "；只有一个键时，log-sum-exp 就是这个键的缩放分数。"
           : "\nThe engine agrees: attn::attention with this one key (default scale 1/√D, fp64) returns\n"
             "log-sum-exp = " +
                 fixed(score, 4) + ", and with a single key the log-sum-exp is that key's scaled score.");
  q.data.set("q", jv(numbers(qv)));
  q.data.set("k", jv(numbers(kv)));
  q.data.set("d_k", jv(d));
  return q;
}

void shuffle(Question& q, Rng& rng) {
  for (std::size_t i = q.choices.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.range(0, static_cast<int64_t>(i) - 1));
    std::swap(q.choices[i - 1], q.choices[j]);
    if (q.answer == static_cast<int>(i - 1)) {
      q.answer = static_cast<int>(j);
    } else if (q.answer == static_cast<int>(j)) {
      q.answer = static_cast<int>(i - 1);
    }
  }
}

Question saturation(Rng& rng, Lang lang) {
  const int64_t dk = rng.pick(std::vector<int64_t>{16, 64, 256});
  const int64_t n = 4;
  // Random q and k_j with unit-variance components; the dot products (variance d_k) rounded to 1
  // decimal are the question's data.
  std::vector<double> qv(static_cast<std::size_t>(dk));
  for (double& x : qv) x = rng.normal();
  std::vector<double> dots;
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (double x : qv) s += x * rng.normal();
    s = std::round(s * 10) / 10;
    dots.push_back(s == 0 ? 0.0 : s);
  }
  const double scale = 1 / std::sqrt(static_cast<double>(dk));
  const std::vector<double> raw = engine_softmax(dots, 1.0), scaled = engine_softmax(dots, scale);
  const double max_raw = *std::max_element(raw.begin(), raw.end());
  const double max_scaled = *std::max_element(scaled.begin(), scaled.end());
  const int variant = static_cast<int>(rng.range(0, 2));

  Question q;
  q.kind = Kind::numeric;
  q.topic = "scaling-saturation";
  const std::string sq = fixed(std::sqrt(static_cast<double>(dk)), 0);
  const bool zh = lang == Lang::zh;
  q.text =
      zh ? "q 和 k_1..k_" + std::to_string(n) + " 各有 d_k = " + std::to_string(dk) +
               " 个分量，每个分量随机抽取，均值 0、方差 1，\n所以每个点积的方差是 d_k（标准差 √d_k = " + sq +
               "）。\n得到 q·k_j = " + list_text(dots, 1) + "。\n"
         : "q and k_1..k_" + std::to_string(n) + " have d_k = " + std::to_string(dk) +
               " components, each drawn at random with mean 0 and variance 1,\nso each dot product has "
               "variance d_k (standard deviation √d_k = " +
               sq + ").\nThey give q·k_j = " + list_text(dots, 1) + ".\n";
  if (variant == 0) {
    q.text += tr(lang, "Without scaling, the weights are softmax(q·k_j). What is the largest weight?",
                 "不缩放时，权重为 softmax(q·k_j)。最大的权重是多少？");
    q.form = Form::number;
    q.number = max_raw;
  } else if (variant == 1) {
    q.text += tr(lang, "With scaling, the weights are softmax(q·k_j / √d_k). What is the largest weight?",
                 "缩放后，权重为 softmax(q·k_j / √d_k)。最大的权重是多少？");
    q.form = Form::number;
    q.number = max_scaled;
  } else {
    q.text += tr(lang, "Which is larger: the largest weight of softmax(q·k_j) or of softmax(q·k_j / √d_k)?",
                 "哪个更大：softmax(q·k_j) 的最大权重，还是 softmax(q·k_j / √d_k) 的最大权重？");
    q.form = Form::choice;
    q.choices = {
        choice(lang, "without scaling", "不缩放",
               {"unscaled", "softmax(q·k_j)", "softmax(q.k_j)", "不缩放的", "未缩放", "前者"}),
        choice(lang, "with scaling", "缩放后", {"scaled", "softmax(q·k_j / √d_k)", "缩放", "缩放的", "后者"}),
        choice(lang, "equal to 2 decimals", "保留 2 位小数时相等",
               {"equal", "same", "相等", "一样", "一样大"})};
    q.answer = fixed(max_raw, 2) == fixed(max_scaled, 2) ? 2 : max_raw > max_scaled ? 0 : 1;
    shuffle(q, rng);
  }
  q.abs_tol = 0.01;
  q.decimals = 2;
  std::vector<double> div(dots);
  for (double& x : div) x *= scale;
  q.solution =
      zh ? "不缩放，softmax(q·k_j)：\n" + softmax_table(dots, raw, "q·k_j", lang) + "  最大权重 " +
               fixed(max_raw, 4) + "\n缩放后，softmax(q·k_j / " + sq + ")：\n" +
               softmax_table(div, scaled, "q·k_j/" + sq, lang) + "  最大权重 " + fixed(max_scaled, 4) +
               "\n不缩放的点积以标准差 √d_k = " + sq +
               " 散开，softmax 因而饱和：几乎全部权重都落在最高分上，\n流经其他位置的梯度消失。除以 √d_k "
               "把分数的方差拉回 1，权重保持平缓。\n（权重由引擎以 fp64 算出，并与 exp/和 交叉核对。）"
         : "Without scaling, softmax(q·k_j):\n" + softmax_table(dots, raw, "q·k_j", lang) +
               "  largest weight " + fixed(max_raw, 4) + "\nWith scaling, softmax(q·k_j / " + sq + "):\n" +
               softmax_table(div, scaled, "q·k_j/" + sq, lang) + "  largest weight " + fixed(max_scaled, 4) +
               "\nUnscaled dot products spread with standard deviation √d_k = " + sq +
               ", so softmax saturates: nearly all\nweight goes to the top score and the gradients through "
               "the "
               "others vanish. Dividing by √d_k\nbrings the scores back to variance 1 and the weights stay "
               "soft. (Weights by the engine, fp64,\ncross-checked against exp/sum.)";
  q.data.set("d_k", jv(dk));
  q.data.set("asked", jv(variant == 0   ? "largest_unscaled"
                         : variant == 1 ? "largest_scaled"
                                        : "which_larger"));
  q.data.set("dots", jv(numbers(dots)));
  q.data.set("weights_unscaled", jv(numbers(raw)));
  q.data.set("weights_scaled", jv(numbers(scaled)));
  return q;
}

}  // namespace

void shuffle_choices(Question& q, Rng& rng) { shuffle(q, rng); }

Question numeric_question(Rng& rng, Lang lang) {
  switch (rng.range(0, 2)) {
    case 0:
      return softmax_weight(rng, lang);
    case 1:
      return scaled_score(rng, lang);
    default:
      return saturation(rng, lang);
  }
}

}  // namespace attn::teach::quiz

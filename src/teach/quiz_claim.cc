// Yes/no questions (structure topic "claim"): is a claim about attention true?
// Three claims, two of them the tutorial's own mistakes: that multi-head
// attention costs h times one head, and that a printed table is a softmax of
// its scores; the third asks whether a causal mask lets query i see key j.
// Every answer is computed: the FLOPs summed per head, the softmax by the
// engine (fp64), the visibility by the engine with the mask.
#include <attn/core/error.h>

#include <algorithm>
#include <cmath>

#include "quiz_internal.h"

namespace attn::teach::quiz {
namespace {

void yes_no(Question& q, Lang lang, bool yes) {
  q.form = Form::choice;
  q.choices = {choice(lang, "yes", "是", {"yes", "true", "对", "正确"}),
               choice(lang, "no", "否", {"no", "false", "不", "错", "不对"})};
  q.answer = yes ? 0 : 1;
}

// Matrix-product FLOPs of multi-head self-attention, summed head by head (2 per multiply-add).
int64_t mha_flops(int64_t n, int64_t d, int64_t h) {
  const int64_t dk = d / h;
  int64_t f = 3 * 2 * n * d * d + 2 * n * d * d;                         // Q, K, V and W_O projections
  for (int64_t i = 0; i < h; ++i) f += 2 * n * n * dk + 2 * n * n * dk;  // Q_h·K_hᵀ and P_h·V_h
  return f;
}

Question cost_claim(Rng& rng, Lang lang) {
  const int64_t d = rng.pick(std::vector<int64_t>{256, 512, 768}),
                n = rng.pick(std::vector<int64_t>{128, 512});
  std::vector<int64_t> hs;
  for (int64_t h : {4, 8, 12})
    if (d % h == 0) hs.push_back(h);
  const int64_t h = rng.pick(hs);
  const bool claim_h_times = rng.range(0, 1) == 0;
  const int64_t multi = mha_flops(n, d, h), one = mha_flops(n, d, 1);
  const double ratio = static_cast<double>(multi) / static_cast<double>(one);
  // "About h times" is true iff the ratio is nearer h than 1; "about the same" iff nearer 1.
  const bool near_h = std::fabs(ratio - static_cast<double>(h)) < std::fabs(ratio - 1);
  Question q;
  q.kind = Kind::structure;
  q.topic = "claim";
  const std::string sd = std::to_string(d), sh = std::to_string(h), sn = std::to_string(n);
  if (lang == Lang::zh) {
    q.text =
        "判断对错：d_model = " + sd + "，N = " + sn + "。把注意力分成 h = " + sh +
        " 个头（每个头 d_k = d_model / h）后，\n" +
        (claim_h_times ? "计算量约为一个宽 d_model 的头的 h 倍。" : "计算量与一个宽 d_model 的头大致相同。");
  } else {
    q.text = "True or not? d_model = " + sd + ", N = " + sn + ". Split into h = " + sh +
             " heads (each d_k = d_model / h), attention\n" +
             (claim_h_times ? "costs about h times the FLOPs of one head of width d_model."
                            : "costs about the same FLOPs as one head of width d_model.");
  }
  yes_no(q, lang, claim_h_times ? near_h : !near_h);
  const std::string sm = with_commas(multi), so = with_commas(one), sr = fixed(ratio, 3);
  q.solution =
      lang == Lang::zh
          ? "逐头相加（只数矩阵乘法，一次乘加 2 FLOPs）：" + sh + " 个头 " + sm +
                " FLOPs，一个宽 d_model 的头 " + so + " FLOPs，\n比值 " + sr +
                "。每个头只有 d_k = d_model / h 维，分数和加权求和的计算量在各头之间分摊，\n"
                "投影矩阵也一样大：多头并不更贵（教程说是 h 倍，这是错的）。答案：" +
                q.choices[static_cast<std::size_t>(q.answer)].text + "。"
          : "Summed head by head (matrix products, 2 FLOPs per multiply-add): " + sh + " heads " + sm +
                " FLOPs, one head of width d_model " + so + " FLOPs,\nratio " + sr +
                ". Each head has only d_k = d_model / h dimensions, so the scores and the weighted sum are\n"
                "shared out among the heads and the projections are the same size: multi-head is not dearer "
                "(the tutorial\nsays h times; it is wrong). Answer: " +
                q.choices[static_cast<std::size_t>(q.answer)].text + ".";
  q.data.set("claim", jv(claim_h_times ? "h_times" : "about_the_same"));
  q.data.set("d_model", jv(d));
  q.data.set("heads", jv(h));
  q.data.set("n", jv(n));
  q.data.set("flops_heads", jv(multi));
  q.data.set("flops_one_head", jv(one));
  return q;
}

Question softmax_claim(Rng& rng, Lang lang) {
  const int64_t n = rng.range(4, 6);
  std::vector<double> s(static_cast<std::size_t>(n));
  for (double& x : s) x = rng.rounded(-1, 3, 1);
  const std::vector<double> w = engine_softmax(s, 1.0);
  std::vector<double> shown;
  for (double x : w) shown.push_back(std::round(x * 100) / 100);
  if (rng.range(0, 1) == 0) {
    // Move 0.04..0.08 from the largest weight to the smallest: the sum stays, the ratios break.
    const double move = static_cast<double>(rng.range(4, 8)) / 100;
    const auto hi = std::max_element(shown.begin(), shown.end()) - shown.begin();
    const auto lo = std::min_element(shown.begin(), shown.end()) - shown.begin();
    shown[static_cast<std::size_t>(hi)] =
        std::round((shown[static_cast<std::size_t>(hi)] - move) * 100) / 100;
    shown[static_cast<std::size_t>(lo)] =
        std::round((shown[static_cast<std::size_t>(lo)] + move) * 100) / 100;
  }
  double gap = 0;
  for (std::size_t i = 0; i < w.size(); ++i) gap = std::max(gap, std::fabs(shown[i] - w[i]));
  const bool is_softmax = gap <= 0.005 + 1e-9;  // within the rounding to 2 decimals
  Question q;
  q.kind = Kind::structure;
  q.topic = "claim";
  q.text = lang == Lang::zh ? "判断对错：分数 s = " + list_text(s, 1) + " 的 softmax（保留 2 位小数）是\n" +
                                  list_text(shown, 2) + "。"
                            : "True or not? The softmax of the scores s = " + list_text(s, 1) +
                                  ", to 2 decimals, is\n" + list_text(shown, 2) + ".";
  yes_no(q, lang, is_softmax);
  const std::string sw = list_text(w, 4), sg = fixed(gap, 4);
  q.solution =
      lang == Lang::zh
          ? "引擎（attn::attention，fp64）算出的 softmax 是 " + sw + "；\n与所给数字的最大差 " + sg +
                (is_softmax ? "，在保留 2 位小数的舍入误差（0.005）之内。"
                            : "，超出了保留 2 位小数的舍入误差（0.005）：和仍为 1，但两个权重之比不再等于 "
                              "e^(分数之差)。\n教程第一张表就是这样的错误。") +
                "答案：" + q.choices[static_cast<std::size_t>(q.answer)].text + "。"
          : "The engine's softmax (attn::attention, fp64) is " + sw +
                ";\nthe largest gap to the given numbers is " + sg +
                (is_softmax ? ", within the rounding to 2 decimals (0.005)."
                            : ", more than the rounding to 2 decimals (0.005): they still add up to 1, but "
                              "the ratio of two\nweights is no longer e^(difference of scores). The "
                              "tutorial's first table has this mistake.") +
                " Answer: " + q.choices[static_cast<std::size_t>(q.answer)].text + ".";
  q.data.set("claim", jv("softmax_table"));
  q.data.set("scores", jv(numbers(s)));
  q.data.set("shown", jv(numbers(shown)));
  q.data.set("weights", jv(numbers(w)));
  return q;
}

Question causal_claim(Rng& rng, Lang lang) {
  MaskSpec m;
  m.lq = m.lk = rng.range(5, 8);
  m.causal = true;
  const int64_t i = rng.range(0, m.lq - 1), j = rng.range(0, m.lk - 1);
  const bool sees = quiz::engine_visible(m, i)[static_cast<std::size_t>(j)];
  ATTN_CHECK(sees == (j <= i), "quiz: the engine's causal mask lets query ", i, (sees ? " see" : " not see"),
             " key ", j, "; the rule j <= i says otherwise");
  Question q;
  q.kind = Kind::structure;
  q.topic = "claim";
  const std::string si = std::to_string(i), sj = std::to_string(j), sn = std::to_string(m.lq);
  q.text = lang == Lang::zh
               ? "判断对错：在 N = " + sn + " 个位置的解码器中（因果掩码，位置从 0 开始），查询 " + si +
                     " 可以关注键 " + sj + "。"
               : "True or not? In a decoder over N = " + sn +
                     " positions (causal mask, positions from 0), query " + si + " may attend to key " + sj +
                     ".";
  yes_no(q, lang, sees);
  q.solution =
      lang == Lang::zh
          ? "因果掩码：查询 i 只看到 j <= i 的键。" + sj + (j <= i ? " <= " : " > ") + si +
                "，引擎（attn::attention 用因果掩码，捕获权重）给这个键的权重" + (sees ? "不为零" : "为零") +
                "。答案：" + q.choices[static_cast<std::size_t>(q.answer)].text + "。"
          : "Causal mask: query i sees only keys j <= i. " + sj + (j <= i ? " <= " : " > ") + si +
                ", and the engine (attn::attention with the causal mask, weights captured) gives this key " +
                (sees ? "a non-zero" : "zero") +
                " weight. Answer: " + q.choices[static_cast<std::size_t>(q.answer)].text + ".";
  q.data.set("claim", jv("causal_sees"));
  q.data.set("n", jv(m.lq));
  q.data.set("query", jv(i));
  q.data.set("key", jv(j));
  return q;
}

}  // namespace

Question claim_question(Rng& rng, Lang lang) {
  switch (rng.range(0, 2)) {
    case 0:
      return cost_claim(rng, lang);
    case 1:
      return softmax_claim(rng, lang);
    default:
      return causal_claim(rng, lang);
  }
}

}  // namespace attn::teach::quiz

// The default walkthrough (one query word, one head, six steps) and --scores
// (softmax of given scores). Every number after the inputs is computed here
// by plain arithmetic, then again by the engine (engine_check).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "explain_internal.h"

namespace attn::teach {
namespace {

// Fewest decimals in {2, 3} that show every value exactly (else 3).
int decimals_for(const std::vector<double>& values) {
  for (int d = 2; d <= 3; ++d) {
    const double f = std::pow(10.0, d);
    bool exact = true;
    for (double v : values) exact = exact && std::fabs(v * f - std::round(v * f)) < 1e-9;
    if (exact) return d;
  }
  return 3;
}

std::vector<std::string> first(const std::vector<std::string>& v, int64_t n) {
  return std::vector<std::string>(v.begin(), v.begin() + n);
}

std::string percent(double w) { return fmt(100 * w, 1) + "%"; }

// Indices sorted by decreasing weight (stable: ties keep sentence order).
std::vector<int64_t> ranking(const std::vector<double>& w) {
  std::vector<int64_t> idx(w.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return w[a] > w[b]; });
  return idx;
}

// "a, b and c" from the first `n` ranked labels with their percentages.
std::string winners_sentence(Lang lang, const std::vector<int64_t>& order, const std::vector<double>& w,
                             const std::vector<std::string>& labels, std::size_t n) {
  // Words tied at the lowest weight are not "winners": name only those above it.
  const double lowest = w[order.back()];
  std::size_t above = 0;
  while (above < order.size() && w[order[above]] > lowest + 1e-12) ++above;
  n = std::min(n, above);
  if (n == 0) return "";
  std::vector<std::string> items;
  for (std::size_t i = 0; i < n; ++i) items.push_back(labels[order[i]] + " (" + percent(w[order[i]]) + ")");
  return list_text(lang, items);
}

text::Table ranking_table(Lang lang, const std::vector<int64_t>& order, const std::vector<double>& w,
                          const std::vector<std::string>& labels, const std::string& label_header) {
  text::Table t({{tr(lang, "rank", "名次"), text::Align::right},
                 {"#", text::Align::right},
                 {label_header, text::Align::left},
                 {tr(lang, "weight", "权重"), text::Align::right},
                 {tr(lang, "share", "占比"), text::Align::right},
                 {"", text::Align::left}});
  for (std::size_t r = 0; r < order.size(); ++r) {
    const int64_t j = order[r];
    t.row({std::to_string(r + 1), std::to_string(j), labels[j], fmt(w[j], 4), percent(w[j]), bar(w[j], 40)});
  }
  return t;
}

json::Value ranking_json(const std::vector<int64_t>& order, const std::vector<double>& w,
                         const std::vector<std::string>& labels) {
  json::Value a = json::Value::array();
  for (int64_t j : order) {
    json::Value e = json::Value::object();
    e.set("position", jv(j));
    e.set("word", jv(labels[j]));
    e.set("weight", jv(w[j]));
    a.push_back(std::move(e));
  }
  return a;
}

// "1·W_Q[negation] + 0.5·W_Q[action]" for the nonzero features of x.
std::string expansion(const std::vector<double>& x, const std::vector<std::string>& features,
                      const std::string& w) {
  std::string s;
  for (std::size_t f = 0; f < x.size(); ++f) {
    if (x[f] == 0) continue;
    s += (s.empty() ? "" : " + ") + fmt_input(x[f]) + "·" + w + "[" + features[f] + "]";
  }
  return s.empty() ? "0" : s;
}

std::string vec_text(const std::vector<double>& v, int decimals) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt(v[i], decimals);
  return s + "]";
}

// "action 3, object 2" for the nonzero components, largest first.
std::string components(Lang lang, const std::vector<double>& v, const std::vector<std::string>& names,
                       int decimals) {
  const auto order = ranking(v);
  std::string s;
  for (int64_t d : order)
    if (std::fabs(v[d]) > 1e-12)
      s += (s.empty() ? "" : tr(lang, ", ", "，")) + feature_name(lang, names[d]) + " " + fmt(v[d], decimals);
  return s.empty() ? tr(lang, "nothing (all zero)", "什么也不找（全为零）") : s;
}

// The walkthrough of one query: the arithmetic, step by step (computed on
// construction), and the sections of the text and the JSON written from it.
struct Walk {
  Walk(const Example& example, int64_t query);

  void intro(Page& r) const;
  void step1(Page& r) const;          // inputs and projections
  void steps2to5(Page& r) const;      // scores, scale, exp, normalise
  void tutorial_note(Page& r) const;  // the tutorial's first softmax table
  void step6(Page& r) const;          // the output
  void ranking_text(Page& r) const;
  json::Value engine(Page& r) const;  // the engine check; its JSON
  void to_json(Page& r, json::Value engine_json) const;

  const Example& ex;
  int64_t qi, N, dm, dk;
  std::string qw;
  std::vector<std::string> dims;
  Mat WQ, WK, WV, Q, K, V;  // W: [d_model, dk]; Q, K, V: [N, dk]
  std::vector<double> q, score, scaled, ex_, weight, out;
  double sqrt_dk = 0, exp_sum = 0, weight_sum = 0;
  std::vector<int64_t> order;
  int qd = 2;  // decimals that show Q, K, V exactly
};

Walk::Walk(const Example& example, int64_t query)
    : ex(example), qi(query), N(example.n()), dm(example.d_model()), dk(kSingleHeadDk) {
  qw = ex.words[qi];
  dims = first(ex.dims, dk);
  WQ = ex.WQ.cols_slice(0, dk), WK = ex.WK.cols_slice(0, dk), WV = ex.WV.cols_slice(0, dk);
  Q = matmul(ex.X, WQ), K = matmul(ex.X, WK), V = matmul(ex.X, WV);
  q = Q.row(qi);
  score.assign(N, 0.0), scaled.assign(N, 0.0), ex_.assign(N, 0.0), weight.assign(N, 0.0);
  sqrt_dk = std::sqrt(static_cast<double>(dk));
  for (int64_t j = 0; j < N; ++j) {
    score[j] = dot(q, K.row(j));
    scaled[j] = score[j] / sqrt_dk;
    ex_[j] = std::exp(scaled[j]);
  }
  exp_sum = std::accumulate(ex_.begin(), ex_.end(), 0.0);
  for (int64_t j = 0; j < N; ++j) weight[j] = ex_[j] / exp_sum;
  weight_sum = std::accumulate(weight.begin(), weight.end(), 0.0);
  out.assign(dk, 0.0);
  for (int64_t j = 0; j < N; ++j)
    for (int64_t d = 0; d < dk; ++d) out[d] += weight[j] * V(j, d);
  order = ranking(weight);
  qd = decimals_for([&] {
    std::vector<double> all = Q.v;
    all.insert(all.end(), K.v.begin(), K.v.end());
    all.insert(all.end(), V.v.begin(), V.v.end());
    return all;
  }());
}

void Walk::intro(Page& r) const {
  const std::string n = std::to_string(N), i = std::to_string(qi);
  r.title(r.t("attn explain: self-attention, step by step", "attn explain：自注意力，一步一步算"));
  r.para(
      r.t("  Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V\n\n"
          "Every word looks at every word of the sentence (itself included) and decides how much of\n"
          "each to take in. Below, one word does this in full, one number at a time.",
          "  Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V\n\n"
          "这就是缩放点积注意力。句子里的每个词都会查看句中所有的词（包括它自己），\n再决定从每个词那里吸收多"
          "少信息。\n"
          "下面让一个词完整地走一遍这个过程，每个数都算给你看。"));
  r.line(r.t("Sentence:   " + join_words(ex.words) + "   (" + n + " tokens" +
                 (ex.gloss.empty() ? "" : ": \"" + ex.gloss + "\"") + ")",
             "句子：     " + join_words(ex.words) + "   （" + n + " 个词元）"));
  r.line(r.t("Query word: " + qw + "   (position " + i + " of " + n +
                 ", counting from 0): which words should " + qw + " attend to?",
             "查询词：   " + qw + "   （第 " + i + " 个位置，共 " + n + " 个，从 0 开始数）：" + qw +
                 " 应该关注哪些词？"));
  r.line(
      r.t("Sizes:      d_model = " + std::to_string(dm) + " features per word, d_k = " + std::to_string(dk) +
              " dimensions per query/key/value vector (one head).",
          "维度：     d_model = " + std::to_string(dm) + "（每个词的特征数），d_k = " + std::to_string(dk) +
              "（每个查询、键、值向量的维数；单头）。"));
  r.line();
  if (ex.hand_chosen) {
    r.para(r.t(
        "Note: the inputs - the embeddings X and the projections W_Q, W_K, W_V - are ILLUSTRATIVE, chosen\n"
        "by hand so that every number can be read; they are not learned. A trained model learns them\n"
        "from data. Everything after the inputs is computed: step by step below, then again by the attn\n"
        "engine (the check at the end).",
        "注意：输入（嵌入 X 和投影矩阵 W_Q、W_K、W_V）只是示意，是为了让每个数都看得懂而手工选定的，\n"
        "并不是学出来的；训练好的模型会从数据中学到它们。输入之后的每个数都是计算出来的：\n"
        "下面先一步步手算，最后再由 attn 引擎算一遍（结尾的核对）。"));
  } else {
    const std::string seed = std::to_string(ex.seed), d = std::to_string(dm);
    r.para(r.t(
        "Note: the inputs are ILLUSTRATIVE, not learned. The embeddings X come from a deterministic\n"
        "seeded generator (seed " +
            seed + "): each word's " + d +
            " values depend only on the word and the seed,\nso they carry no meaning. The projections "
            "W_Q, W_K, W_V are the hand-chosen ones of the\n"
            "default example. Everything after the inputs is computed: step by step below, then again by\n"
            "the attn engine (the check at the end).",
        "注意：输入只是示意，不是学出来的。嵌入 X 来自一个确定性的带种子生成器（种子 " + seed +
            "）：\n每个词的 " + d +
            " 个值只取决于这个词和种子，因此不带任何含义。投影矩阵 W_Q、W_K、W_V 沿用\n"
            "默认示例中手工选定的那几个。输入之后的每个数都是计算出来的：下面先一步步手算，\n"
            "最后再由 attn 引擎算一遍（结尾的核对）。"));
  }
}

void Walk::step1(Page& r) const {
  const Lang L = r.lang;
  const std::string n = std::to_string(N), d = std::to_string(dm), k = std::to_string(dk);
  const std::string word = r.t("word", "词");
  auto feature = [&](int64_t f) {
    if (ex.hand_chosen) return feature_name(L, ex.features[f]);
    std::string name(1, 'f');  // f1..f8, built with += (GCC 12 warns, wrongly, on "f" + s here)
    name += std::to_string(f + 1);
    return name;
  };
  const std::vector<std::string> dims_l = feature_names(L, dims);
  r.heading(r.t("Step 1. Inputs and projections: Q = X·W_Q, K = X·W_K, V = X·W_V",
                "第 1 步  输入与投影：Q = X·W_Q，K = X·W_K，V = X·W_V"));
  r.para(r.t("Each word is a row of X [" + n + ", " + d + "]" +
                 (ex.hand_chosen ? ", with " + d + " hand-chosen features:"
                                 : ", generated from the word (features f1..f8):"),
             "每个词是 X [" + n + ", " + d + "] 的一行" +
                 (ex.hand_chosen ? "，共 " + d + " 个手工选定的特征：" : "，由词本身生成（特征 f1..f8）：")));
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {word, text::Align::left}};
    for (int64_t f = 0; f < dm; ++f) cols.push_back({feature(f), text::Align::right});
    text::Table t(cols);
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {std::to_string(i), ex.words[i]};
      for (int64_t f = 0; f < dm; ++f)
        row.push_back(ex.hand_chosen ? fmt_input(ex.X(i, f)) : fmt(ex.X(i, f), 2));
      t.row(row);
    }
    r.table(t);
  }
  r.para(
      r.t("The projections [" + d + ", " + k + "] map the features to d_k = " + k + " dimensions (" +
              join_words(dims, ", ") +
              "):\nW_Q says what a word looks for, W_K what it offers to be found by, W_V what it passes on.",
          "投影矩阵 [" + d + ", " + k + "] 把特征映射到 d_k = " + k + " 个维度（" + join_words(dims_l, "、") +
              "）：\nW_Q 表示一个词在寻找什么，W_K 表示它凭什么被别人找到，W_V 表示它要传递出去的内容。"));
  {
    std::vector<text::Table::Column> cols = {{r.t("feature", "特征"), text::Align::left}};
    for (int m = 0; m < 3; ++m)
      for (int64_t c = 0; c < dk; ++c) cols.push_back({dims_l[c], text::Align::right});
    text::Table t(cols);
    t.group("W_Q", 1, static_cast<int>(dk)).group("W_K", 1 + dk, dk).group("W_V", 1 + 2 * dk, dk);
    for (int64_t f = 0; f < dm; ++f) {
      std::vector<std::string> row = {feature(f)};
      for (const Mat* w : {&WQ, &WK, &WV})
        for (int64_t c = 0; c < dk; ++c) row.push_back(fmt_input((*w)(f, c)));
      t.row(row);
    }
    r.table(t);
  }
  r.para(
      r.t("Multiplying gives one query, key and value vector per word (Q, K, V: [" + n + ", " + k + "]):",
          "相乘之后，每个词得到一个查询向量、一个键向量和一个值向量（Q、K、V：[" + n + ", " + k + "]）："));
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {word, text::Align::left}};
    for (int m = 0; m < 3; ++m)
      for (int64_t c = 0; c < dk; ++c) cols.push_back({dims_l[c], text::Align::right});
    text::Table t(cols);
    t.group("Q = X·W_Q", 2, static_cast<int>(dk))
        .group("K = X·W_K", 2 + dk, dk)
        .group("V = X·W_V", 2 + 2 * dk, dk);
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {std::to_string(i), ex.words[i]};
      for (const Mat* m : {&Q, &K, &V})
        for (int64_t c = 0; c < dk; ++c) row.push_back(fmt((*m)(i, c), qd));
      t.row(row);
    }
    r.table(t);
  }
  const std::string q_is =
      "x(" + qw + ")·W_Q = " +
      (ex.hand_chosen ? expansion(ex.X.row(qi), feature_names(L, ex.features), "W_Q") + " = "
                      : std::string()) +
      vec_text(q, qd);
  r.para(r.t(
      "The query of " + qw + ":  q = " + q_is + "\nso " + qw + " looks for: " + components(L, q, dims, qd) +
          ".",
      qw + " 的查询：q = " + q_is + "\n也就是说，" + qw + " 在寻找：" + components(L, q, dims, qd) + "。"));
}

void Walk::steps2to5(Page& r) const {
  const Lang L = r.lang;
  const std::string word = r.t("word", "词");
  const std::vector<std::string> dims_l = feature_names(L, dims);
  // Step 2
  r.heading(r.t("Step 2. Scores: s_j = q · k_j, how well " + qw + "'s query matches each word's key",
                "第 2 步  分数：s_j = q · k_j，即 " + qw + " 的查询与每个词的键有多匹配"));
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {word, text::Align::left}};
    for (int64_t d = 0; d < dk; ++d) cols.push_back({dims_l[d], text::Align::right});
    if (ex.hand_chosen)
      cols.push_back({r.t("q·k_j = sum of q_d × k_jd", "q·k_j = Σ q_d × k_jd"), text::Align::left});
    cols.push_back({r.t("score s_j", "分数 s_j"), text::Align::right});
    text::Table t(cols);
    t.group("k_j", 2, static_cast<int>(dk));
    for (int64_t j = 0; j < N; ++j) {
      std::vector<std::string> row = {std::to_string(j), ex.words[j]};
      for (int64_t d = 0; d < dk; ++d) row.push_back(fmt(K(j, d), qd));
      if (ex.hand_chosen) {
        std::string terms;
        for (int64_t d = 0; d < dk; ++d)
          if (q[d] != 0 && K(j, d) != 0)
            terms += (terms.empty() ? "" : " + ") + fmt_input(q[d]) + " × " + fmt_input(K(j, d));
        row.push_back(terms.empty() ? r.t("0 (no shared dimension)", "0（没有共同的维度）") : terms);
      }
      row.push_back(fmt(score[j], 3));
      t.row(row);
    }
    r.line("q = " + vec_text(q, qd) +
           r.t("  (" + join_words(dims, ", ") + ")", "  （" + join_words(dims_l, "、") + "）"));
    r.line();
    r.table(t);
  }

  // Step 3
  const std::string k = std::to_string(dk), sq = fmt(sqrt_dk, 3);
  r.heading(r.t("Step 3. Scale: divide every score by √d_k = √" + k + " = " + sq,
                "第 3 步  缩放：每个分数都除以 √d_k = √" + k + " = " + sq));
  r.para(r.t(
      "Why: a dot product of d_k terms grows with d_k; dividing by √d_k keeps the scores in a range where\n"
      "softmax still spreads its attention instead of putting everything on one word.",
      "为什么：d_k 项相加的点积会随 d_k 变大；除以 √d_k 能把分数保持在合适的范围里，\n"
      "让 softmax 仍然把注意力分散开，而不是全部压到一个词上。"));
  {
    text::Table t({{"#", text::Align::right},
                   {word, text::Align::left},
                   {"s_j", text::Align::right},
                   {"s_j / " + sq, text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), ex.words[j], fmt(score[j], 3), fmt(scaled[j], 4)});
    r.table(t);
  }

  // Step 4
  r.heading(r.t("Step 4. Exponentiate: e^(s_j / √d_k)", "第 4 步  取指数：e^(s_j / √d_k)"));
  const double max_scaled = *std::max_element(scaled.begin(), scaled.end());
  const std::string e = fmt(std::exp(1.0), 3), mx = fmt(max_scaled, 4);
  r.para(r.t("exp makes every score positive and stretches the differences: a score 1 higher becomes " + e +
                 "\ntimes larger. (The engine computes e^(x - max) with max = " + mx +
                 ": the same weights after\nstep 5, and no overflow for large scores.)",
             "exp 让每个分数都变成正数，并拉大它们之间的差距：分数每高出 1，结果就变成 " + e +
                 " 倍。\n（引擎实际算的是 e^(x - max)，其中 max = " + mx +
                 "：经过第 5 步后得到的权重完全相同，\n而且分数很大时也不会溢出。）"));
  {
    text::Table t({{"#", text::Align::right},
                   {word, text::Align::left},
                   {"s_j / √d_k", text::Align::right},
                   {"exp", text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), ex.words[j], fmt(scaled[j], 4), fmt(ex_[j], 4)});
    r.table(t);
  }

  // Step 5
  r.heading(r.t("Step 5. Normalise: weight_j = exp_j / sum of all exp",
                "第 5 步  归一化：weight_j = exp_j / 所有 exp 之和"));
  r.para(r.t("sum of exp = ", "exp 之和 = ") + fmt(exp_sum, 4));
  {
    text::Table t({{"#", text::Align::right},
                   {word, text::Align::left},
                   {"exp", text::Align::right},
                   {"exp / " + fmt(exp_sum, 4), text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), ex.words[j], fmt(ex_[j], 4), fmt(weight[j], 4)});
    r.table(t);
  }
  r.para(
      r.t("Sum of weights = " + fmt(weight_sum, 6) + "   (weights are positive and sum to 1: a distribution)",
          "权重之和 = " + fmt(weight_sum, 6) + "   （权重都是正数，且和为 1：它们构成一个概率分布）"));
  tutorial_note(r);
}

// The tutorial's first softmax table, where this step meets it.
void Walk::tutorial_note(Page& r) const {
  std::string scores, printed, real;
  const std::vector<double> w = softmax(kTutorialScores);
  for (std::size_t j = 0; j < w.size(); ++j) {
    if (j > 0) scores += ", ", printed += ", ", real += ", ";
    scores += fmt_input(kTutorialScores[j]);
    printed += fmt(kTutorialWeights[j], 2);
    real += fmt(w[j], 2);
  }
  r.para(r.t("The tutorial's first softmax table is wrong: it prints the scores [" + scores +
                 "] with the weights\n[" + printed + "], but their softmax is\n[" + real +
                 "]. The steps above check any such table:\nattn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0",
             "教程的第一张 softmax 表是错的：它给分数 [" + scores + "] 配上的权重是\n[" + printed +
                 "]，\n而这些分数的 softmax 其实是 [" + real +
                 "]。\n用上面这几步就能核对任何一张这样的表：attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0"));
}

void Walk::step6(Page& r) const {
  const Lang L = r.lang;
  const std::vector<std::string> dims_l = feature_names(L, dims);
  // Step 6
  r.heading(r.t("Step 6. Output: z = sum over j of weight_j · v_j",
                "第 6 步  输出：z = Σ_j weight_j · v_j（对所有 j 求和）"));
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right},
                                             {r.t("word", "词"), text::Align::left},
                                             {r.t("weight", "权重"), text::Align::right}};
    for (int m = 0; m < 2; ++m)
      for (int64_t d = 0; d < dk; ++d) cols.push_back({dims_l[d], text::Align::right});
    text::Table t(cols);
    t.group("v_j", 3, static_cast<int>(dk)).group("weight_j · v_j", 3 + dk, dk);
    for (int64_t j = 0; j < N; ++j) {
      std::vector<std::string> row = {std::to_string(j), ex.words[j], fmt(weight[j], 4)};
      for (int64_t d = 0; d < dk; ++d) row.push_back(fmt(V(j, d), qd));
      for (int64_t d = 0; d < dk; ++d) row.push_back(fmt(weight[j] * V(j, d), 4));
      t.row(row);
    }
    std::vector<std::string> total = {"", r.t("z = sum", "z = 求和"), fmt(weight_sum, 4)};
    for (int64_t d = 0; d < dk; ++d) total.push_back("");
    for (int64_t d = 0; d < dk; ++d) total.push_back(fmt(out[d], 4));
    t.row(total);
    r.table(t);
  }
  {
    std::string reading;
    const auto comp = ranking(out);
    for (int64_t d : comp) {
      if (std::fabs(out[d]) < 5e-5) continue;
      int64_t best = 0;
      for (int64_t j = 1; j < N; ++j)
        if (std::fabs(weight[j] * V(j, d)) > std::fabs(weight[best] * V(best, d))) best = j;
      const std::string part = fmt(weight[best] * V(best, d), 4);
      reading += "\n  " + text::pad(dims_l[d], 8) + " " + fmt(out[d], 4) +
                 r.t("   (" + part + " of it from " + ex.words[best] + ")",
                     "   （其中 " + part + " 来自 " + ex.words[best] + "）");
    }
    r.para(r.t("z(" + qw + ") = " + vec_text(out, 4) + ": the new vector of " + qw +
                   ", a blend of the value vectors.\nIts components, largest first:" + reading,
               "z(" + qw + ") = " + vec_text(out, 4) + "：这是 " + qw +
                   " 的新向量，由各个值向量按权重混合而成。\n它的各个分量，从大到小：" + reading));
  }
}

void Walk::ranking_text(Page& r) const {
  const Lang L = r.lang;
  // Ranking
  r.heading(
      r.t("Which words win: the attention of " + qw + ", ranked", "哪些词胜出：" + qw + " 的注意力权重排名"));
  r.table(ranking_table(L, order, weight, ex.words, r.t("word", "词")));
  {
    const int64_t top = order[0];
    int64_t best = 0;
    for (int64_t d = 1; d < dk; ++d)
      if (q[d] * K(top, d) > q[best] * K(top, best)) best = d;
    const std::string winners = winners_sentence(L, order, weight, ex.words, 3);
    std::string why =
        winners.empty() ? r.t(qw + " attends to every word equally (" + percent(weight[0]) +
                                  " each): all its scores are equal, so no word stands out.",
                              qw + " 对每个词的关注都一样（各 " + percent(weight[0]) +
                                  "）：它的分数全都相等，没有哪个词突出。")
                        : r.t(qw + " attends most to " + winners + ".", qw + " 最关注的是 " + winners + "。");
    if (q[best] * K(top, best) > 0) {
      const std::string dim = feature_name(L, dims[best]), a = fmt(q[best], qd), b = fmt(K(top, best), qd),
                        p = fmt(q[best] * K(top, best), 3), tw = ex.words[top];
      why += r.t("\nWhy " + tw + ": " + qw + "'s query looks for " + dim + " (" + a + ") and " + tw +
                     "'s key offers " + dim + " (" + b + "):\ntheir product " + p +
                     " is the largest part of the largest score.",
                 "\n为什么是 " + tw + "：" + qw + " 的查询寻找" + dim + " (" + a + ")，而 " + tw +
                     " 的键提供" + dim + " (" + b + ")：\n两者的乘积 " + p + " 是最大那个分数里最大的一项。");
    }
    r.para(why);
  }
}

json::Value Walk::engine(Page& r) const {
  // Engine
  r.heading(r.t("Engine check: attn::attention with options.capture.enabled = true",
                "引擎核对：attn::attention，设置 options.capture.enabled = true"));
  const std::string n = std::to_string(N), k = std::to_string(dk), i = std::to_string(qi);
  r.para(r.t("The same Q, K, V go to the engine as tensors [B=1, H=1, L=" + n + ", D=" + k +
                 "], capturing the exact weights of row " + i + " (" + qw + ").",
             "同样的 Q、K、V 以张量 [B=1, H=1, L=" + n + ", D=" + k + "] 的形式送进引擎，并捕获第 " + i +
                 " 行（" + qw + "）的精确权重。"));
  const auto runs = engine_check(Q, K, V, 1.0 / sqrt_dk, qi, weight, out);
  json::Value engine_json = report_engine(r, runs, r.t("(steps 5 and 6)", "（第 5 步和第 6 步）"));

  r.para(
      r.t("Next: attn explain --query 带        the same steps for another word (a word or a position)\n"
          "      attn explain --multi-head      several heads side by side, concatenation and W_O\n"
          "      attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0    softmax alone\n"
          "      attn explain --mask causal     which words each word may see\n"
          "      attn explain --cost --n 4096 --d 1024 --heads 16  FLOPs and memory at real sizes\n"
          "      attn explain --help            every option",
          "接下来：attn explain --query 带        换一个词（词或位置）走同样的步骤\n"
          "        attn explain --multi-head      多个头并排、拼接与 W_O\n"
          "        attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0    单独看 softmax\n"
          "        attn explain --mask causal     每个词能看到哪些词\n"
          "        attn explain --cost --n 4096 --d 1024 --heads 16  真实规模下的 FLOPs 与内存\n"
          "        attn explain --help            全部选项"));

  return engine_json;
}

void Walk::to_json(Page& r, json::Value engine_json) const {
  json::Value& j = r.json;
  j.set("mode", jv("walkthrough"));
  j.set("formula", jv("softmax(Q K^T / sqrt(d_k)) V"));
  j.set("illustrative_inputs", jv(true));
  j.set("embeddings", jv(ex.hand_chosen ? "hand-chosen" : "generated"));
  if (!ex.hand_chosen) j.set("seed", jv(static_cast<int64_t>(ex.seed)));
  j.set("sentence", jv(strings(ex.words)));
  if (!ex.gloss.empty()) j.set("gloss", jv(ex.gloss));
  json::Value jq = json::Value::object();
  jq.set("word", jv(qw));
  jq.set("position", jv(qi));
  j.set("query", jv(std::move(jq)));
  j.set("d_model", jv(dm));
  j.set("d_k", jv(dk));
  j.set("features", jv(strings(ex.features)));
  j.set("dims", jv(strings(dims)));
  j.set("X", jv(ex.X.json()));
  j.set("W_Q", jv(WQ.json()));
  j.set("W_K", jv(WK.json()));
  j.set("W_V", jv(WV.json()));
  j.set("Q", jv(Q.json()));
  j.set("K", jv(K.json()));
  j.set("V", jv(V.json()));
  json::Value steps = json::Value::object();
  steps.set("q", jv(numbers(q)));
  steps.set("scores", jv(numbers(score)));
  steps.set("sqrt_d_k", jv(sqrt_dk));
  steps.set("scaled", jv(numbers(scaled)));
  steps.set("exp", jv(numbers(ex_)));
  steps.set("exp_sum", jv(exp_sum));
  steps.set("weights", jv(numbers(weight)));
  steps.set("weights_sum", jv(weight_sum));
  steps.set("output", jv(numbers(out)));
  j.set("steps", jv(std::move(steps)));
  j.set("ranking", jv(ranking_json(order, weight, ex.words)));
  j.set("engine", jv(std::move(engine_json)));
}

// The tutorial's first table when `scores` are its scores: its printed weights
// next to the softmax, with the ratio test; null JSON otherwise.
json::Value tutorial_check(const std::vector<double>& scores, const std::vector<double>& w, Page& r) {
  if (scores.size() != kTutorialScores.size()) return json::Value();
  for (std::size_t j = 0; j < scores.size(); ++j)
    if (std::fabs(scores[j] - kTutorialScores[j]) > 1e-12) return json::Value();
  const std::vector<double>& t = kTutorialWeights;
  r.heading(
      r.t("The tutorial's table is not a softmax of these scores", "教程里的这张表不是这些分数的 softmax"));
  text::Table tab({{"#", text::Align::right},
                   {r.t("score", "分数"), text::Align::right},
                   {r.t("the tutorial", "教程"), text::Align::right},
                   {"softmax", text::Align::right},
                   {r.t("difference", "差"), text::Align::right}});
  double tsum = 0;
  for (std::size_t j = 0; j < t.size(); ++j) {
    tsum += t[j];
    tab.row({std::to_string(j), fmt_input(scores[j]), fmt(t[j], 2), fmt(w[j], 4), fmt(t[j] - w[j], 4)});
  }
  // Positions 1 and 5 (the two largest) and 1 and 0: the ratio a softmax must have, and the tutorial's.
  auto ratio = [&](int a, int b) {
    return "weight(" + std::to_string(a) + ") / weight(" + std::to_string(b) + ") = e^(" +
           fmt_input(scores[a]) + " - " + fmt_input(scores[b]) +
           ") = " + fmt(std::exp(scores[a] - scores[b]), 3);
  };
  auto theirs = [&](int a, int b) {
    return fmt(t[a], 2) + " / " + fmt(t[b], 2) + " = " + fmt(t[a] / t[b], 3);
  };
  r.para(
      r.t("The tutorial prints these scores with the weights of its column below. They add up to " +
              fmt(tsum, 2) +
              ",\nbut they are not their softmax. In a softmax the ratio of two weights is e^(difference of\n"
              "the scores):\n  " +
              ratio(1, 5) + ", the tutorial has " + theirs(1, 5) + ";\n  " + ratio(1, 0) +
              ", the tutorial has " + theirs(1, 0) + ".",
          "教程把这些分数和下表“教程”一列的权重印在一起。这些权重加起来是 " + fmt(tsum, 2) +
              "，\n但它们不是这些分数的 softmax。softmax 中两个权重之比等于 e^(两个分数之差)：\n  " +
              ratio(1, 5) + "，教程里却是 " + theirs(1, 5) + "；\n  " + ratio(1, 0) + "，教程里却是 " +
              theirs(1, 0) + "。"));
  r.table(tab);
  json::Value j = json::Value::object();
  put(j, {{"printed_weights", numbers(t)}, {"softmax", numbers(w)}, {"is_softmax", jv(false)}});
  return j;
}

}  // namespace

void walkthrough(const Example& ex, int64_t qi, Page& r) {
  const Walk w(ex, qi);
  w.intro(r);
  w.step1(r);
  w.steps2to5(r);
  w.step6(r);
  w.ranking_text(r);
  json::Value engine_json = w.engine(r);
  w.to_json(r, std::move(engine_json));
}

void softmax_of_scores(const std::vector<double>& scores, const std::vector<std::string>& tokens, Page& r) {
  const Lang L = r.lang;
  const int64_t N = static_cast<int64_t>(scores.size());
  std::vector<std::string> labels = tokens, json_labels = tokens;  // the JSON's names stay English
  if (labels.empty())
    for (int64_t j = 0; j < N; ++j) {
      labels.push_back(r.t("position ", "位置 ") + std::to_string(j));
      json_labels.push_back("position " + std::to_string(j));
    }
  std::vector<double> e(N), w(N);
  for (int64_t j = 0; j < N; ++j) e[j] = std::exp(scores[j]);
  for (int64_t j = 0; j < N; ++j)
    ATTN_CHECK(std::fabs(scores[j]) <= 700, "--scores: score ", j, " (from 0)",
               " must be in [-700, 700] so that e^s is a ", "normal double; got ", scores[j]);
  const double sum = std::accumulate(e.begin(), e.end(), 0.0);
  for (int64_t j = 0; j < N; ++j) w[j] = e[j] / sum;
  const double wsum = std::accumulate(w.begin(), w.end(), 0.0);
  const auto order = ranking(w);

  std::string score_list, weight_list, exp_terms;
  for (int64_t j = 0; j < N; ++j) {
    if (j > 0) score_list += ", ", weight_list += ", ", exp_terms += " + ";
    score_list += fmt_input(scores[j]);
    weight_list += fmt(w[j], 2);
    exp_terms += fmt(e[j], 4);
  }
  const std::string token = r.t("token", "词元");

  r.title(r.t("attn explain --scores: softmax turns scores into attention weights",
              "attn explain --scores：softmax 把分数变成注意力权重"));
  r.para("  softmax(s)_j = e^(s_j) / (e^(s_0) + ... + e^(s_(N-1)))\n\n" +
         r.t("Scores: [" + score_list + "]   (" + std::to_string(N) + " positions)",
             "分数：[" + score_list + "]   （" + std::to_string(N) + " 个位置）"));
  r.heading(r.t("Step 1. Exponentiate every score", "第 1 步  对每个分数取指数"));
  {
    text::Table t({{"#", text::Align::right},
                   {token, text::Align::left},
                   {r.t("score s_j", "分数 s_j"), text::Align::right},
                   {"e^(s_j)", text::Align::right}});
    for (int64_t j = 0; j < N; ++j) t.row({std::to_string(j), labels[j], fmt_input(scores[j]), fmt(e[j], 4)});
    r.table(t);
  }
  r.heading(r.t("Step 2. Add them up", "第 2 步  把它们加起来"));
  r.para(r.t("sum = ", "和 = ") + exp_terms + " = " + fmt(sum, 4));
  r.heading(r.t("Step 3. Divide each by the sum", "第 3 步  每一项都除以这个和"));
  {
    text::Table t({{"#", text::Align::right},
                   {token, text::Align::left},
                   {"e^(s_j)", text::Align::right},
                   {r.t("weight = e^(s_j) / ", "权重 = e^(s_j) / ") + fmt(sum, 4), text::Align::right},
                   {r.t("2 decimals", "保留 2 位小数"), text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), labels[j], fmt(e[j], 4), fmt(w[j], 4), fmt(w[j], 2)});
    r.table(t);
  }
  r.para(r.t("Sum of weights = ", "权重之和 = ") + fmt(wsum, 6) + "\n\nsoftmax([" + score_list + "]) = [" +
         weight_list + "]");

  r.heading(r.t("Which wins", "谁胜出"));
  r.table(ranking_table(L, order, w, labels, token));
  {
    std::string s = r.t(labels[order[0]] + " wins with " + percent(w[order[0]]) + ".",
                        labels[order[0]] + " 以 " + percent(w[order[0]]) + " 胜出。");
    if (N >= 2) {
      const int64_t a = order[0], b = order[1];
      const std::string ratio = "weight(" + labels[a] + ") / weight(" + labels[b] + ") = e^(" +
                                fmt_input(scores[a]) + " - " + fmt_input(scores[b]) +
                                ") = " + fmt(std::exp(scores[a] - scores[b]), 4);
      const std::string check = fmt(w[a], 4) + " / " + fmt(w[b], 4) + " = " + fmt(w[a] / w[b], 4);
      s += r.t("\nOnly differences between scores matter: " + ratio + "\n(check: " + check +
                   ").\nAdding the same number to every score changes no weight, and a table whose ratios\n"
                   "differ from e^(difference) is not a softmax of these scores.",
               "\n起作用的只有分数之间的差：" + ratio + "\n（核对：" + check +
                   "）。\n给每个分数都加上同一个数，任何权重都不变；一张表里权重之比若不等于 e^(分数之差)，\n"
                   "它就不是这些分数的 softmax。");
    }
    r.para(s);
  }
  json::Value tutorial = tutorial_check(scores, w, r);

  r.heading(r.t("Engine check: attn::attention with options.capture.enabled = true",
                "引擎核对：attn::attention，设置 options.capture.enabled = true"));
  r.para(r.t(
      "With q = [1], k_j = [s_j], scale 1 the engine's logits are exactly the scores; its captured weights\n"
      "are compared with step 3.",
      "取 q = [1]、k_j = [s_j]、缩放系数 1，引擎算出的 logit 恰好就是这些分数；\n"
      "再把它捕获的权重与第 3 步比较。"));
  Mat Q(1, 1), K(N, 1), V(N, 1);
  Q(0, 0) = 1;
  for (int64_t j = 0; j < N; ++j) K(j, 0) = scores[j], V(j, 0) = static_cast<double>(j + 1);
  const auto runs = engine_check(Q, K, V, 1.0, 0, w, {});
  json::Value engine_json = report_engine(r, runs, r.t("(step 3)", "（第 3 步）"));

  json::Value& j = r.json;
  j.set("mode", jv("softmax"));
  j.set("scores", jv(numbers(scores)));
  j.set("tokens", jv(strings(json_labels)));
  j.set("exp", jv(numbers(e)));
  j.set("exp_sum", jv(sum));
  j.set("weights", jv(numbers(w)));
  j.set("weights_sum", jv(wsum));
  j.set("ranking", jv(ranking_json(order, w, json_labels)));
  if (!tutorial.is_null()) j.set("tutorial", std::move(tutorial));
  j.set("engine", jv(std::move(engine_json)));
}

}  // namespace attn::teach

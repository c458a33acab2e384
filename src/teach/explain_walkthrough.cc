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
std::string winners_sentence(const std::vector<int64_t>& order, const std::vector<double>& w,
                             const std::vector<std::string>& labels, std::size_t n) {
  // Words tied at the lowest weight are not "winners": name only those above it.
  const double lowest = w[order.back()];
  std::size_t above = 0;
  while (above < order.size() && w[order[above]] > lowest + 1e-12) ++above;
  n = std::min(n, above);
  if (n == 0) return "";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) s += i + 1 == n ? " and " : ", ";
    s += labels[order[i]] + " (" + percent(w[order[i]]) + ")";
  }
  return s;
}

text::Table ranking_table(const std::vector<int64_t>& order, const std::vector<double>& w,
                          const std::vector<std::string>& labels, const std::string& label_header) {
  text::Table t({{"rank", text::Align::right},
                 {"#", text::Align::right},
                 {label_header, text::Align::left},
                 {"weight", text::Align::right},
                 {"share", text::Align::right},
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
std::string components(const std::vector<double>& v, const std::vector<std::string>& names, int decimals) {
  const auto order = ranking(v);
  std::string s;
  for (int64_t d : order)
    if (std::fabs(v[d]) > 1e-12) s += (s.empty() ? "" : ", ") + names[d] + " " + fmt(v[d], decimals);
  return s.empty() ? "nothing (all zero)" : s;
}

// The walkthrough of one query: the arithmetic, step by step (computed on
// construction), and the sections of the text and the JSON written from it.
struct Walk {
  Walk(const Example& example, int64_t query);

  void intro(Page& r) const;
  void step1(Page& r) const;      // inputs and projections
  void steps2to5(Page& r) const;  // scores, scale, exp, normalise
  void step6(Page& r) const;      // the output
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
  const std::string pos = "position " + std::to_string(qi) + " of " + std::to_string(N) + ", counting from 0";
  r.title("attn explain: self-attention, step by step");
  r.para(
      "  Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V\n\n"
      "Every word looks at every word of the sentence (itself included) and decides how much of\n"
      "each to take in. Below, one word does this in full, one number at a time.");
  r.line("Sentence:   " + join_words(ex.words) + "   (" + std::to_string(N) + " tokens" +
         (ex.gloss.empty() ? "" : ": \"" + ex.gloss + "\"") + ")");
  r.line("Query word: " + qw + "   (" + pos + "): which words should " + qw + " attend to?");
  r.line("Sizes:      d_model = " + std::to_string(dm) + " features per word, d_k = " + std::to_string(dk) +
         " dimensions per query/key/value vector (one head).");
  r.line();
  if (ex.hand_chosen) {
    r.para(
        "Note: the inputs - the embeddings X and the projections W_Q, W_K, W_V - are ILLUSTRATIVE, chosen\n"
        "by hand so that every number can be read; they are not learned. A trained model learns them\n"
        "from data. Everything after the inputs is computed: step by step below, then again by the attn\n"
        "engine (the check at the end).");
  } else {
    r.para(
        "Note: the inputs are ILLUSTRATIVE, not learned. The embeddings X come from a deterministic\n"
        "seeded generator (seed " +
        std::to_string(ex.seed) +
        "): each word's 8 values depend only on the word "
        "and the seed,\nso they carry no meaning. The projections W_Q, W_K, W_V are the hand-chosen ones of "
        "the\n"
        "default example. Everything after the inputs is computed: step by step below, then again by\n"
        "the attn engine (the check at the end).");
  }
}

void Walk::step1(Page& r) const {
  r.heading("Step 1. Inputs and projections: Q = X·W_Q, K = X·W_K, V = X·W_V");
  r.para("Each word is a row of X [" + std::to_string(N) + ", " + std::to_string(dm) + "]" +
         (ex.hand_chosen ? ", with " + std::to_string(dm) + " hand-chosen features:"
                         : ", generated from the word (features f1..f8):"));
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {"word", text::Align::left}};
    for (int64_t f = 0; f < dm; ++f)
      cols.push_back({ex.hand_chosen ? ex.features[f] : "f" + std::to_string(f + 1), text::Align::right});
    text::Table t(cols);
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {std::to_string(i), ex.words[i]};
      for (int64_t f = 0; f < dm; ++f)
        row.push_back(ex.hand_chosen ? fmt_input(ex.X(i, f)) : fmt(ex.X(i, f), 2));
      t.row(row);
    }
    r.table(t);
  }
  r.para("The projections [" + std::to_string(dm) + ", " + std::to_string(dk) +
         "] map the features to d_k = " + std::to_string(dk) + " dimensions (" + join_words(dims, ", ") +
         "):\nW_Q says what a word looks for, W_K what it offers to be found by, W_V what it passes on.");
  {
    std::vector<text::Table::Column> cols = {{"feature", text::Align::left}};
    for (int m = 0; m < 3; ++m)
      for (int64_t d = 0; d < dk; ++d) cols.push_back({dims[d], text::Align::right});
    text::Table t(cols);
    t.group("W_Q", 1, static_cast<int>(dk)).group("W_K", 1 + dk, dk).group("W_V", 1 + 2 * dk, dk);
    for (int64_t f = 0; f < dm; ++f) {
      std::vector<std::string> row = {ex.hand_chosen ? ex.features[f] : "f" + std::to_string(f + 1)};
      for (const Mat* w : {&WQ, &WK, &WV})
        for (int64_t d = 0; d < dk; ++d) row.push_back(fmt_input((*w)(f, d)));
      t.row(row);
    }
    r.table(t);
  }
  r.para("Multiplying gives one query, key and value vector per word (Q, K, V: [" + std::to_string(N) + ", " +
         std::to_string(dk) + "]):");
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {"word", text::Align::left}};
    for (int m = 0; m < 3; ++m)
      for (int64_t d = 0; d < dk; ++d) cols.push_back({dims[d], text::Align::right});
    text::Table t(cols);
    t.group("Q = X·W_Q", 2, static_cast<int>(dk))
        .group("K = X·W_K", 2 + dk, dk)
        .group("V = X·W_V", 2 + 2 * dk, dk);
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {std::to_string(i), ex.words[i]};
      for (const Mat* m : {&Q, &K, &V})
        for (int64_t d = 0; d < dk; ++d) row.push_back(fmt((*m)(i, d), qd));
      t.row(row);
    }
    r.table(t);
  }
  r.para("The query of " + qw + ":  q = x(" + qw +
         ")·W_Q = " + (ex.hand_chosen ? expansion(ex.X.row(qi), ex.features, "W_Q") + " = " : std::string()) +
         vec_text(q, qd) + "\nso " + qw + " looks for: " + components(q, dims, qd) + ".");
}

void Walk::steps2to5(Page& r) const {
  // Step 2
  r.heading("Step 2. Scores: s_j = q · k_j, how well " + qw + "'s query matches each word's key");
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {"word", text::Align::left}};
    for (int64_t d = 0; d < dk; ++d) cols.push_back({dims[d], text::Align::right});
    if (ex.hand_chosen) cols.push_back({"q·k_j = sum of q_d × k_jd", text::Align::left});
    cols.push_back({"score s_j", text::Align::right});
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
        row.push_back(terms.empty() ? "0 (no shared dimension)" : terms);
      }
      row.push_back(fmt(score[j], 3));
      t.row(row);
    }
    r.line("q = " + vec_text(q, qd) + "  (" + join_words(dims, ", ") + ")");
    r.line();
    r.table(t);
  }

  // Step 3
  r.heading("Step 3. Scale: divide every score by √d_k = √" + std::to_string(dk) + " = " + fmt(sqrt_dk, 3));
  r.para(
      "Why: a dot product of d_k terms grows with d_k; dividing by √d_k keeps the scores in a range where\n"
      "softmax still spreads its attention instead of putting everything on one word.");
  {
    text::Table t({{"#", text::Align::right},
                   {"word", text::Align::left},
                   {"s_j", text::Align::right},
                   {"s_j / " + fmt(sqrt_dk, 3), text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), ex.words[j], fmt(score[j], 3), fmt(scaled[j], 4)});
    r.table(t);
  }

  // Step 4
  r.heading("Step 4. Exponentiate: e^(s_j / √d_k)");
  const double max_scaled = *std::max_element(scaled.begin(), scaled.end());
  r.para("exp makes every score positive and stretches the differences: a score 1 higher becomes " +
         fmt(std::exp(1.0), 3) + "\ntimes larger. (The engine computes e^(x - max) with max = " +
         fmt(max_scaled, 4) + ": the same weights after\nstep 5, and no overflow for large scores.)");
  {
    text::Table t({{"#", text::Align::right},
                   {"word", text::Align::left},
                   {"s_j / √d_k", text::Align::right},
                   {"exp", text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), ex.words[j], fmt(scaled[j], 4), fmt(ex_[j], 4)});
    r.table(t);
  }

  // Step 5
  r.heading("Step 5. Normalise: weight_j = exp_j / sum of all exp");
  r.para("sum of exp = " + fmt(exp_sum, 4));
  {
    text::Table t({{"#", text::Align::right},
                   {"word", text::Align::left},
                   {"exp", text::Align::right},
                   {"exp / " + fmt(exp_sum, 4), text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), ex.words[j], fmt(ex_[j], 4), fmt(weight[j], 4)});
    r.table(t);
  }
  r.para("Sum of weights = " + fmt(weight_sum, 6) + "   (weights are positive and sum to 1: a distribution)");
}

void Walk::step6(Page& r) const {
  // Step 6
  r.heading("Step 6. Output: z = sum over j of weight_j · v_j");
  {
    std::vector<text::Table::Column> cols = {
        {"#", text::Align::right}, {"word", text::Align::left}, {"weight", text::Align::right}};
    for (int m = 0; m < 2; ++m)
      for (int64_t d = 0; d < dk; ++d) cols.push_back({dims[d], text::Align::right});
    text::Table t(cols);
    t.group("v_j", 3, static_cast<int>(dk)).group("weight_j · v_j", 3 + dk, dk);
    for (int64_t j = 0; j < N; ++j) {
      std::vector<std::string> row = {std::to_string(j), ex.words[j], fmt(weight[j], 4)};
      for (int64_t d = 0; d < dk; ++d) row.push_back(fmt(V(j, d), qd));
      for (int64_t d = 0; d < dk; ++d) row.push_back(fmt(weight[j] * V(j, d), 4));
      t.row(row);
    }
    std::vector<std::string> total = {"", "z = sum", fmt(weight_sum, 4)};
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
      reading += "\n  " + text::pad(dims[d], 8) + " " + fmt(out[d], 4) + "   (" +
                 fmt(weight[best] * V(best, d), 4) + " of it from " + ex.words[best] + ")";
    }
    r.para("z(" + qw + ") = " + vec_text(out, 4) + ": the new vector of " + qw +
           ", a blend of the value vectors.\nIts components, largest first:" + reading);
  }
}

void Walk::ranking_text(Page& r) const {
  // Ranking
  r.heading("Which words win: the attention of " + qw + ", ranked");
  r.table(ranking_table(order, weight, ex.words, "word"));
  {
    const int64_t top = order[0];
    int64_t best = 0;
    for (int64_t d = 1; d < dk; ++d)
      if (q[d] * K(top, d) > q[best] * K(top, best)) best = d;
    const std::string winners = winners_sentence(order, weight, ex.words, 3);
    std::string why = winners.empty() ? qw + " attends to every word equally (" + percent(weight[0]) +
                                            " each): all its scores are equal, so no word stands out."
                                      : qw + " attends most to " + winners + ".";
    if (q[best] * K(top, best) > 0)
      why += "\nWhy " + ex.words[top] + ": " + qw + "'s query looks for " + dims[best] + " (" +
             fmt(q[best], qd) + ") and " + ex.words[top] + "'s key offers " + dims[best] + " (" +
             fmt(K(top, best), qd) + "):\ntheir product " + fmt(q[best] * K(top, best), 3) +
             " is the largest part of the largest score.";
    r.para(why);
  }
}

json::Value Walk::engine(Page& r) const {
  // Engine
  r.heading("Engine check: attn::attention with options.capture.enabled = true");
  r.para("The same Q, K, V go to the engine as tensors [B=1, H=1, L=" + std::to_string(N) +
         ", D=" + std::to_string(dk) + "], capturing the exact weights of row " + std::to_string(qi) + " (" +
         qw + ").");
  const auto runs = engine_check(Q, K, V, 1.0 / sqrt_dk, qi, weight, out);
  json::Value engine_json = report_engine(r, runs, "(steps 5 and 6)");

  r.para(
      "Next: attn explain --query 带        the same steps for another word (a word or a position)\n"
      "      attn explain --multi-head      " +
      std::string("several heads side by side, concatenation and W_O\n") +
      "      attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0    softmax alone\n"
      "      attn explain --mask causal     which words each word may see\n"
      "      attn explain --cost --n 4096 --d 1024 --heads 16  FLOPs and memory at real sizes\n"
      "      attn explain --help            every option");

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
  const int64_t N = static_cast<int64_t>(scores.size());
  std::vector<std::string> labels = tokens;
  if (labels.empty())
    for (int64_t j = 0; j < N; ++j) labels.push_back("position " + std::to_string(j));
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

  r.title("attn explain --scores: softmax turns scores into attention weights");
  r.para(
      "  softmax(s)_j = e^(s_j) / (e^(s_0) + ... + e^(s_(N-1)))\n\n"
      "Scores: [" +
      score_list + "]   (" + std::to_string(N) + " positions)");
  r.heading("Step 1. Exponentiate every score");
  {
    text::Table t({{"#", text::Align::right},
                   {"token", text::Align::left},
                   {"score s_j", text::Align::right},
                   {"e^(s_j)", text::Align::right}});
    for (int64_t j = 0; j < N; ++j) t.row({std::to_string(j), labels[j], fmt_input(scores[j]), fmt(e[j], 4)});
    r.table(t);
  }
  r.heading("Step 2. Add them up");
  r.para("sum = " + exp_terms + " = " + fmt(sum, 4));
  r.heading("Step 3. Divide each by the sum");
  {
    text::Table t({{"#", text::Align::right},
                   {"token", text::Align::left},
                   {"e^(s_j)", text::Align::right},
                   {"weight = e^(s_j) / " + fmt(sum, 4), text::Align::right},
                   {"2 decimals", text::Align::right}});
    for (int64_t j = 0; j < N; ++j)
      t.row({std::to_string(j), labels[j], fmt(e[j], 4), fmt(w[j], 4), fmt(w[j], 2)});
    r.table(t);
  }
  r.para("Sum of weights = " + fmt(wsum, 6) + "\n\nsoftmax([" + score_list + "]) = [" + weight_list + "]");

  r.heading("Which wins");
  r.table(ranking_table(order, w, labels, "token"));
  {
    std::string s = labels[order[0]] + " wins with " + percent(w[order[0]]) + ".";
    if (N >= 2) {
      const int64_t a = order[0], b = order[1];
      s += "\nOnly differences between scores matter: weight(" + labels[a] + ") / weight(" + labels[b] +
           ") = e^(" + fmt_input(scores[a]) + " - " + fmt_input(scores[b]) +
           ") = " + fmt(std::exp(scores[a] - scores[b]), 4) + "\n(check: " + fmt(w[a], 4) + " / " +
           fmt(w[b], 4) + " = " + fmt(w[a] / w[b], 4) +
           ").\nAdding the same number to every score changes no weight, and a table whose ratios\n"
           "differ from e^(difference) is not a softmax of these scores.";
    }
    r.para(s);
  }

  r.heading("Engine check: attn::attention with options.capture.enabled = true");
  r.para(
      "With q = [1], k_j = [s_j], scale 1 the engine's logits are exactly the scores; its captured weights\n"
      "are compared with step 3.");
  Mat Q(1, 1), K(N, 1), V(N, 1);
  Q(0, 0) = 1;
  for (int64_t j = 0; j < N; ++j) K(j, 0) = scores[j], V(j, 0) = static_cast<double>(j + 1);
  const auto runs = engine_check(Q, K, V, 1.0, 0, w, {});
  json::Value engine_json = report_engine(r, runs, "(step 3)");

  json::Value& j = r.json;
  j.set("mode", jv("softmax"));
  j.set("scores", jv(numbers(scores)));
  j.set("tokens", jv(strings(labels)));
  j.set("exp", jv(numbers(e)));
  j.set("exp_sum", jv(sum));
  j.set("weights", jv(numbers(w)));
  j.set("weights_sum", jv(wsum));
  j.set("ranking", jv(ranking_json(order, w, labels)));
  j.set("engine", jv(std::move(engine_json)));
}

}  // namespace attn::teach

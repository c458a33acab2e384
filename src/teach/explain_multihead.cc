// --multi-head: Q, K, V of width d_model split into h heads of d_k = d_model / h;
// each head attends on its own, the head outputs are concatenated and
// projected by W_O. Shapes are printed at every step.
#include <attn/ops/attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "explain_internal.h"

namespace attn::teach {
namespace {

struct HeadResult {
  std::vector<double> weights;  // [N]
  std::vector<double> out;      // [d_k]
};

// Single-query attention over the columns [c0, c0 + dk) of Q, K, V.
HeadResult attend(const Mat& Q, const Mat& K, const Mat& V, int64_t qi, int64_t c0, int64_t dk) {
  const int64_t N = Q.rows;
  HeadResult h;
  h.weights.assign(N, 0.0);
  h.out.assign(dk, 0.0);
  double sum = 0;
  for (int64_t j = 0; j < N; ++j) {
    double s = 0;
    for (int64_t d = 0; d < dk; ++d) s += Q(qi, c0 + d) * K(j, c0 + d);
    h.weights[j] = std::exp(s / std::sqrt(static_cast<double>(dk)));
    sum += h.weights[j];
  }
  for (int64_t j = 0; j < N; ++j) {
    h.weights[j] /= sum;
    for (int64_t d = 0; d < dk; ++d) h.out[d] += h.weights[j] * V(j, c0 + d);
  }
  return h;
}

std::string dim_text(int64_t v) { return std::to_string(v); }

bool uniform(const std::vector<double>& w) {
  const auto [lo, hi] = std::minmax_element(w.begin(), w.end());
  return *hi - *lo < 1e-12;
}

int64_t top_index(const std::vector<double>& w) { return std::max_element(w.begin(), w.end()) - w.begin(); }

// Multi-head attention of one query: the arithmetic (computed on
// construction) and the sections of the text and the JSON written from it.
struct MultiHead {
  MultiHead(const Example& example, int64_t query, int64_t head_count);

  std::string head_label(Lang lang, int64_t h) const { return tr(lang, "head ", "头 ") + std::to_string(h); }
  std::vector<std::string> head_dims(int64_t h) const {
    return std::vector<std::string>(ex.dims.begin() + h * dk, ex.dims.begin() + (h + 1) * dk);
  }
  void intro(Page& r) const;
  void shapes_and_split(Page& r) const;  // the shapes, steps 1-2
  void step3(Page& r) const;             // each head's weights
  void steps4and5(Page& r) const;        // head outputs, concatenation, W_O
  json::Value engine(Page& r) const;     // one engine call for all heads; its JSON
  void to_json(Page& r, json::Value engine_json) const;

  const Example& ex;
  int64_t qi, heads, N, dm, dk;
  std::string qw;
  Mat Q, K, V;                 // [N, d_model]
  std::vector<HeadResult> hr;  // per head
  std::vector<double> concat;  // [d_model]
  std::vector<double> out;     // concat · W_O: [d_model]
  std::string Ns, D, H, Dk;    // the sizes as text
};

MultiHead::MultiHead(const Example& example, int64_t query, int64_t head_count)
    : ex(example), qi(query), heads(head_count), N(example.n()), dm(example.d_model()) {
  ATTN_CHECK(heads >= 1 && dm % heads == 0, "--heads must divide d_model = ", dm, " (1, 2, 4 or 8); got ",
             heads);
  dk = dm / heads;
  qw = ex.words[qi];
  Q = matmul(ex.X, ex.WQ), K = matmul(ex.X, ex.WK), V = matmul(ex.X, ex.WV);
  for (int64_t h = 0; h < heads; ++h) hr.push_back(attend(Q, K, V, qi, h * dk, dk));
  for (const auto& h : hr) concat.insert(concat.end(), h.out.begin(), h.out.end());
  out.assign(dm, 0.0);
  for (int64_t c = 0; c < dm; ++c)
    for (int64_t d = 0; d < dm; ++d) out[c] += concat[d] * ex.WO(d, c);
  Ns = dim_text(N), D = dim_text(dm), H = dim_text(heads), Dk = dim_text(dk);
}

void MultiHead::intro(Page& r) const {
  r.title(r.t("attn explain --multi-head: " + H + " head" + (heads > 1 ? "s" : "") + " side by side",
              "attn explain --multi-head：多头注意力，" + H + " 个头并排"));
  r.para(r.t(
      "  MultiHead(X) = Concat(head_0, ..., head_(h-1)) · W_O,   head_i = Attention(X·W_Q_i, X·W_K_i, "
      "X·W_V_i)\n\n"
      "One head can only make one weighting per word. With h heads, Q, K and V (width d_model) are cut\n"
      "into h slices of d_k = d_model / h columns; each head attends on its own slice, and W_O mixes the\n"
      "concatenated results back into d_model features.",
      "  MultiHead(X) = Concat(head_0, ..., head_(h-1)) · W_O,   head_i = Attention(X·W_Q_i, X·W_K_i, "
      "X·W_V_i)\n\n"
      "一个头对每个词只能给出一组权重。用 h 个头时，把宽度为 d_model 的 Q、K、V 切成 h 片，\n"
      "每片 d_k = d_model / h 列；每个头只在自己那一片上做注意力，再由 W_O 把拼接起来的结果\n"
      "重新混合成 d_model 个特征。"));
  const std::string i = std::to_string(qi), n = std::to_string(N);
  r.line(r.t("Sentence:   " + join_words(ex.words) + "   (N = " + Ns + " tokens)",
             "句子：     " + join_words(ex.words) + "   （N = " + Ns + " 个词元）"));
  r.line(r.t("Query word: " + qw + "   (position " + i + " of " + n + ", counting from 0)",
             "查询词：   " + qw + "   （第 " + i + " 个位置，共 " + n + " 个，从 0 开始数）"));
  r.line(r.t("Sizes:      d_model = " + D + ", h = " + H + " heads, d_k = d_model / h = " + D + " / " + H +
                 " = " + Dk,
             "维度：     d_model = " + D + "，h = " + H + " 个头，d_k = d_model / h = " + D + " / " + H +
                 " = " + Dk));
  r.line();
  r.para(ex.hand_chosen
             ? r.t("Note: the inputs (X, W_Q, W_K, W_V, W_O) are ILLUSTRATIVE, not learned (hand-chosen, as "
                   "in the\n"
                   "default walkthrough; its single head is head 0 when h = 2). Everything else is computed.",
                   "注意：输入（X、W_Q、W_K、W_V、W_"
                   "O）只是示意，不是学出来的（与默认的逐步演示一样是手工选定的；\n"
                   "逐步演示里的那一个头，就是这里的头 0（h = 2 时））。其余的一切都是计算出来的。")
             : r.t("Note: the inputs (X, W_Q, W_K, W_V, W_O) are ILLUSTRATIVE, not learned; X comes from the "
                   "seeded\n"
                   "generator (seed " +
                       std::to_string(ex.seed) + "). Everything else is computed.",
                   "注意：输入（X、W_Q、W_K、W_V、W_O）只是示意，不是学出来的；X 来自带种子的生成器（种子 " +
                       std::to_string(ex.seed) + "）。\n其余的一切都是计算出来的。"));
}

void MultiHead::shapes_and_split(Page& r) const {
  const Lang L = r.lang;
  // Shapes, for the whole computation.
  r.heading(r.t("Shapes at every step", "每一步的形状"));
  {
    text::Table t({{r.t("step", "步骤"), text::Align::left},
                   {r.t("operation", "运算"), text::Align::left},
                   {r.t("shape", "形状"), text::Align::left}});
    t.row({r.t("input", "输入"), r.t("X: one row of features per token", "X：每个词元一行特征"),
           shape_text({"N=" + Ns, "d_model=" + D})});
    t.row({r.t("1 project", "1 投影"), "Q, K, V = X · W_Q, X · W_K, X · W_V  (W: [d_model, d_model])",
           shape_text({"N=" + Ns, "d_model=" + D})});
    t.row({r.t("2 split", "2 切分"),
           r.t("view as [N, h, d_k], then swap N and h", "看作 [N, h, d_k]，再交换 N 与 h"),
           shape_text({"h=" + H, "N=" + Ns, "d_k=" + Dk})});
    t.row({r.t("3 attend", "3 注意力"),
           r.t("scores Q_i · K_iᵀ / √d_k, softmax, per head", "每个头：分数 Q_i · K_iᵀ / √d_k，再 softmax"),
           shape_text({"h=" + H, "N=" + Ns, "N=" + Ns})});
    t.row({"", r.t("weights · V_i, per head", "每个头：权重 · V_i"),
           shape_text({"h=" + H, "N=" + Ns, "d_k=" + Dk})});
    t.row({r.t("4 concat", "4 拼接"),
           r.t("swap back and join the heads' columns", "换回顺序，把各头的列拼在一起"),
           shape_text({"N=" + Ns, "h·d_k=" + D})});
    t.row({r.t("5 project", "5 投影"), "· W_O  (W_O: [d_model, d_model])",
           shape_text({"N=" + Ns, "d_model=" + D})});
    r.table(t);
  }

  // Step 1-2: Q, K, V with their head slices.
  r.heading(r.t("Steps 1-2. Project, then split the columns into " + H + " head" + (heads > 1 ? "s" : ""),
                "第 1-2 步  投影，再把各列切分给 " + H + " 个头"));
  r.para(r.t("Q = X·W_Q, K = X·W_K, V = X·W_V: [" + Ns + ", " + D + "]. Head i gets columns " +
                 "i·d_k .. (i+1)·d_k - 1 (heads from 0), that is [" + Ns + ", " + Dk + "] each:",
             "Q = X·W_Q，K = X·W_K，V = X·W_V：[" + Ns + ", " + D + "]。头 i 分到第 " +
                 "i·d_k .. (i+1)·d_k - 1 列（头从 0 开始编号），即每个头 [" + Ns + ", " + Dk + "]："));
  for (const auto& [name, m] : {std::pair<std::string, const Mat*>{"Q", &Q}, {"K", &K}, {"V", &V}}) {
    std::vector<text::Table::Column> cols = {{name, text::Align::left}};
    for (int64_t d = 0; d < dm; ++d) cols.push_back({feature_name(L, ex.dims[d]), text::Align::right});
    text::Table t(cols);
    for (int64_t h = 0; h < heads; ++h)
      t.group(head_label(L, h), 1 + static_cast<int>(h * dk), static_cast<int>(dk));
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {ex.words[i]};
      for (int64_t d = 0; d < dm; ++d) row.push_back(fmt((*m)(i, d), ex.hand_chosen ? 2 : 3));
      t.row(row);
    }
    r.table(t);
  }
}

void MultiHead::step3(Page& r) const {
  const Lang L = r.lang;
  // Step 3: each head's weights for the query word, side by side.
  r.heading(r.t("Step 3. Each head's attention weights for " + qw + ", side by side",
                "第 3 步  各个头对 " + qw + " 的注意力权重，并排对照"));
  r.para(
      r.t("Each column is softmax(q_i · K_iᵀ / √" + Dk + ") of one head (its own scores, its own softmax).",
          "每一列是一个头的 softmax(q_i · K_iᵀ / √" + Dk + ")（各用各的分数，各做各的 softmax）。"));
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right},
                                             {r.t("word", "词"), text::Align::left}};
    for (int64_t h = 0; h < heads; ++h) cols.push_back({head_label(L, h), text::Align::right});
    text::Table t(cols);
    for (int64_t j = 0; j < N; ++j) {
      std::vector<std::string> row = {std::to_string(j), ex.words[j]};
      for (int64_t h = 0; h < heads; ++h) row.push_back(fmt(hr[h].weights[j], 4));
      t.row(row);
    }
    std::vector<std::string> sum = {"", r.t("sum", "和")}, top = {"", r.t("top word", "最关注的词")};
    for (int64_t h = 0; h < heads; ++h) {
      double s = 0;
      for (double w : hr[h].weights) s += w;
      sum.push_back(fmt(s, 4));
      top.push_back(uniform(hr[h].weights) ? r.t("(equal)", "（一样）") : ex.words[top_index(hr[h].weights)]);
    }
    t.row(sum).row(top);
    r.table(t);
  }
  {
    std::string s = r.t("What each head looks at (its d_k = " + Dk + " dimensions) and where it looks most:",
                        "每个头看的是什么（它的 d_k = " + Dk + " 个维度），以及它最关注哪里：");
    int width = 0;
    for (int64_t h = 0; h < heads; ++h)
      width = std::max(width, text::display_width(join_words(feature_names(L, head_dims(h)), ", ")) + 2);
    for (int64_t h = 0; h < heads; ++h) {
      const auto& w = hr[h].weights;
      const int64_t best = top_index(w);
      std::string dims_list = "[";  // built with += (GCC 12 warns, wrongly, on "[" + s + "]")
      dims_list += join_words(feature_names(L, head_dims(h)), ", ");
      dims_list += "]";
      s += "\n  " + head_label(L, h) + "  " + text::pad(dims_list, width) + "  -> ";
      const std::string eq = fmt(100 * w[0], 1) + "%";
      s += uniform(w) ? r.t("every word equally (" + eq + "): " + qw + "'s query is zero in these dimensions",
                            "每个词一样（" + eq + "）：" + qw + " 的查询在这些维度上全为零")
                      : ex.words[best] + " (" + fmt(100 * w[best], 1) + "%)";
    }
    r.para(s);
  }
}

void MultiHead::steps4and5(Page& r) const {
  const Lang L = r.lang;
  // Step 4: head outputs and concatenation.
  r.heading(r.t("Step 4. Head outputs z_i = weights_i · V_i, concatenated",
                "第 4 步  各头的输出 z_i = weights_i · V_i，拼接起来"));
  {
    std::vector<text::Table::Column> cols = {{"", text::Align::left}};
    for (int64_t d = 0; d < dm; ++d) cols.push_back({feature_name(L, ex.dims[d]), text::Align::right});
    text::Table t(cols);
    for (int64_t h = 0; h < heads; ++h)
      t.group(head_label(L, h), 1 + static_cast<int>(h * dk), static_cast<int>(dk));
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<std::string> row = {"z_" + std::to_string(h) + " [" + Dk + "]"};
      for (int64_t d = 0; d < dm; ++d) row.push_back(d / dk == h ? fmt(concat[d], 4) : "");
      t.row(row);
    }
    std::vector<std::string> row = {r.t("concat [", "拼接 [") + D + "]"};
    for (int64_t d = 0; d < dm; ++d) row.push_back(fmt(concat[d], 4));
    t.row(row);
    r.table(t);
  }

  // Step 5: W_O.
  r.heading(r.t("Step 5. Output projection: out = concat · W_O", "第 5 步  输出投影：out = concat · W_O"));
  r.para(r.t("W_O [" + D + ", " + D +
                 "] (illustrative) puts each value dimension back under the feature of the same\n"
                 "name; a learned W_O mixes the heads' results freely.",
             "W_O [" + D + ", " + D +
                 "]（示意）把每个值维度放回同名的特征下；\n学出来的 W_O 则会把各个头的结果自由地混合起来。"));
  {
    std::vector<text::Table::Column> cols = {{"W_O", text::Align::left}};
    for (int64_t f = 0; f < dm; ++f) cols.push_back({feature_name(L, ex.features[f]), text::Align::right});
    text::Table t(cols);
    for (int64_t d = 0; d < dm; ++d) {
      std::vector<std::string> row = {feature_name(L, ex.dims[d])};
      for (int64_t f = 0; f < dm; ++f) row.push_back(fmt_input(ex.WO(d, f)));
      t.row(row);
    }
    std::vector<std::string> o = {r.t("out [", "输出 [") + D + "]"};
    for (int64_t f = 0; f < dm; ++f) o.push_back(fmt(out[f], 4));
    t.row(o);
    r.table(t);
  }
}

json::Value MultiHead::engine(Page& r) const {
  // Engine: all heads in one call, q/k/v as non-contiguous views [1, h, N, d_k] of [1, N, h, d_k].
  r.heading(r.t("Engine check: one attn::attention call for all heads",
                "引擎核对：一次 attn::attention 调用算完所有头"));
  const std::string i = std::to_string(qi);
  r.para(r.t(
      "Q, K, V [" + Ns + ", " + D +
          "] are viewed as [B=1, N, h, d_k] and permuted to [B=1, h, N, d_k] (a strided\n"
          "view, no copy); the engine captures row " +
          i + " (" + qw +
          ") of every head. Its weights and its output\nrows (concatenated) are compared with steps 3 and 4.",
      "Q、K、V [" + Ns + ", " + D +
          "] 先看作 [B=1, N, h, d_k]，再重排为 [B=1, h, N, d_k]（带步长的视图，\n不复制数据）；"
          "引擎捕获每个头的第 " +
          i + " 行（" + qw + "）。把它的权重和拼接后的输出行\n与第 3 步和第 4 步比较。"));
  std::vector<double> ref_w;  // [h, N]
  for (const auto& h : hr) ref_w.insert(ref_w.end(), h.weights.begin(), h.weights.end());
  std::vector<EngineRun> runs;
  struct Config {
    DType dtype;
    Backend backend;
    double tolerance;
  };
  double max_logit = 0, max_v = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t d = h * dk; d < (h + 1) * dk; ++d) s += Q(qi, d) * K(j, d);
      max_logit = std::max(max_logit, std::fabs(s) / std::sqrt(static_cast<double>(dk)));
    }
  for (double x : V.v) max_v = std::max(max_v, std::fabs(x));
  for (const Config& c :
       {Config{DType::f32, Backend::automatic, engine_tolerance(1e-5, max_logit, max_v)},
        Config{DType::f64, Backend::reference, engine_tolerance(1e-12, max_logit, max_v)}}) {
    auto heads_view = [&](const Mat& m) {  // [N, d_model] -> [1, h, N, d_k]
      return to_tensor4(m, c.dtype).view({1, N, heads, dk}).permute({0, 2, 1, 3});
    };
    const Tensor q = heads_view(Q), k = heads_view(K), v = heads_view(V);  // [1, h, N, d_k] each
    AttentionOptions o;
    o.backend = c.backend;
    o.capture.enabled = true;
    o.capture.rows = {qi};
    const AttentionResult res = attention(q, k, v, o);
    const Tensor zrow = res.out.select(2, qi).reshape({dm});  // out: [1, h, N, d_k] -> [d_model]
    EngineRun run;
    const BackendChoice choice = choose_backend(q, k, v, o);
    run.backend = std::string(choice.backend == Backend::fused ? "fused" : "reference") +
                  (c.dtype == DType::f32 ? " (fp32)" : " (fp64)");
    if (c.backend == Backend::automatic) run.backend = "automatic -> " + run.backend;
    run.weights = res.weights.to_vector();  // [1, h, 1, N]
    run.output = zrow.to_vector();
    run.tolerance = c.tolerance;
    for (std::size_t i = 0; i < ref_w.size(); ++i)
      run.max_diff_weights = std::max(run.max_diff_weights, std::fabs(run.weights[i] - ref_w[i]));
    for (int64_t d = 0; d < dm; ++d)
      run.max_diff_output = std::max(run.max_diff_output, std::fabs(run.output[d] - concat[d]));
    ATTN_CHECK(run.max_diff_weights <= c.tolerance && run.max_diff_output <= c.tolerance,
               "explain: the engine (", run.backend,
               ") disagrees with the per-head arithmetic: max |weight difference| = ", run.max_diff_weights,
               ", max |output difference| = ", run.max_diff_output, "; expected both <= ", c.tolerance);
    runs.push_back(std::move(run));
  }
  json::Value engine_json = report_engine(r, runs, r.t("(steps 3 and 4)", "（第 3 步和第 4 步）"));
  return engine_json;
}

void MultiHead::to_json(Page& r, json::Value engine_json) const {
  json::Value& j = r.json;
  j.set("mode", jv("multi_head"));
  j.set("illustrative_inputs", jv(true));
  j.set("sentence", jv(strings(ex.words)));
  json::Value jq = json::Value::object();
  jq.set("word", jv(qw));
  jq.set("position", jv(qi));
  j.set("query", jv(std::move(jq)));
  j.set("d_model", jv(dm));
  j.set("heads", jv(heads));
  j.set("d_k", jv(dk));
  json::Value shapes = json::Value::object();
  shapes.set("X", jv(integers({N, dm})));
  shapes.set("QKV", jv(integers({N, dm})));
  shapes.set("per_head_QKV", jv(integers({heads, N, dk})));
  shapes.set("scores", jv(integers({heads, N, N})));
  shapes.set("head_outputs", jv(integers({heads, N, dk})));
  shapes.set("concat", jv(integers({N, dm})));
  shapes.set("output", jv(integers({N, dm})));
  j.set("shapes", jv(std::move(shapes)));
  j.set("dims", jv(strings(ex.dims)));
  j.set("features", jv(strings(ex.features)));
  j.set("Q", jv(Q.json()));
  j.set("K", jv(K.json()));
  j.set("V", jv(V.json()));
  j.set("W_O", jv(ex.WO.json()));
  json::Value hw = json::Value::array(), ho = json::Value::array();
  for (const auto& h : hr) {
    hw.push_back(numbers(h.weights));
    ho.push_back(numbers(h.out));
  }
  j.set("head_weights", jv(std::move(hw)));
  j.set("head_outputs", jv(std::move(ho)));
  j.set("concat", jv(numbers(concat)));
  j.set("output", jv(numbers(out)));
  j.set("engine", jv(std::move(engine_json)));
}

}  // namespace

void multi_head(const Example& ex, int64_t qi, int64_t heads, Page& r) {
  const MultiHead m(ex, qi, heads);
  m.intro(r);
  m.shapes_and_split(r);
  m.step3(r);
  m.steps4and5(r);
  json::Value heads_cost = heads_cost_note(r, 1, ex.n(), ex.d_model(), heads, ex.n() * ex.n());
  json::Value engine_json = m.engine(r);
  m.to_json(r, std::move(engine_json));
  r.json.set("tutorial_heads_cost", std::move(heads_cost));
}

}  // namespace attn::teach

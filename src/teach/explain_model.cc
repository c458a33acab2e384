// `attn explain --model FILE "sentence" --layer L --head H --word W`: the
// walkthrough's steps with a trained classifier's real Q, K, V. The layer's
// input is taken from the model's own forward pass (embeddings and the layers
// before it, nn::Trace), normalised by norm1 for pre-norm models, then projected
// by the head's rows of W_Q, W_K, W_V (+ biases, + rotary positions for rope
// models). Every step after that is plain arithmetic in double, checked against
// attn::attention on the same matrices AND against the weights the model itself
// captured for that layer, head and query row.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/nn_functional.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "explain_internal.h"

namespace attn::teach {
namespace {

const Tensor& param(const NamedParams& ps, const std::string& name) {
  for (const auto& [n, p] : ps)
    if (n == name) return p;
  throw Error("explain --model: the model has no parameter '" + name + "'");
}

Mat to_mat(const std::vector<double>& v, int64_t rows, int64_t cols) {
  Mat m(rows, cols);
  m.v = v;
  return m;
}

// y = x·W[r0:r0+n]ᵀ + b[r0:r0+n]: x [L, C], W [out, C] -> [L, n]
Mat project(const Mat& x, const Tensor& w, const Tensor& b, int64_t r0, int64_t n) {
  const int64_t C = x.cols;
  const std::vector<double> wv = w.to_vector();
  const std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>();
  Mat y(x.rows, n);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t d = 0; d < n; ++d) {
      double s = bv.empty() ? 0.0 : bv[r0 + d];
      for (int64_t c = 0; c < C; ++c) s += x(i, c) * wv[(r0 + d) * C + c];
      y(i, d) = s;
    }
  return y;
}

Mat norm_rows(const Mat& x, const models::TransformerConfig& c, const Tensor& w, const Tensor& b) {
  const std::vector<double> wv = w.to_vector();
  const std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>(x.cols, 0.0);
  Mat y(x.rows, x.cols);
  for (int64_t i = 0; i < x.rows; ++i) {
    const std::vector<double> r = x.row(i);
    const double n = static_cast<double>(x.cols);
    double mean = 0, var = 0;
    if (c.norm == nn::NormKind::layer_norm) {
      mean = std::accumulate(r.begin(), r.end(), 0.0) / n;
      for (double v : r) var += (v - mean) * (v - mean) / n;
    } else {
      for (double v : r) var += v * v / n;
    }
    const double inv = 1.0 / std::sqrt(var + c.norm_eps);
    for (int64_t j = 0; j < x.cols; ++j) y(i, j) = (r[j] - mean) * inv * wv[j] + bv[j];
  }
  return y;
}

Mat apply_rope(const Mat& m, double base) {
  Tensor t = Tensor::from(m.v, {1, 1, m.rows, m.cols});
  RopeOptions o;
  o.layout = RopeLayout::half_split;
  o.base = base;
  return to_mat(rope(t, o).to_vector(), m.rows, m.cols);
}

std::string cell(const std::string& tok) { return tok.size() > 24 ? tok.substr(0, 24) + "…" : tok; }

// The numbers of one layer, head and query, from the model's own forward pass
// and the arithmetic (compute_walk), and the sections of the text and the
// JSON written from them.
struct ModelWalk {
  const ModelExample& ex;
  const models::TransformerConfig& c;
  int64_t L, C, H, D, Hkv, kvh, qi, layer, head, show;
  std::string qw;
  Mat X, Q, K, V;  // the layer's input [L, C]; this head's q, k, v [L, D]
  bool rope;
  std::vector<double> q, score, scaled, ex_, weight, z, captured;
  double sqrt_d, mx, exp_sum, max_diff_model;
  std::vector<int64_t> order;

  void intro_and_inputs(Page& r) const;  // the title, the sizes, step 1
  void steps(Page& r) const;             // steps 2-6 and the ranking
  json::Value engine(Page& r) const;     // the engine check; its JSON
  void to_json(Page& r, json::Value engine_json) const;
};

ModelWalk compute_walk(const ModelExample& ex) {
  models::EncoderClassifier& m = *ex.model;
  const models::TransformerConfig& c = m.config();
  const int64_t L = static_cast<int64_t>(ex.ids.size()), C = c.d_model, H = c.heads, D = c.head_dim();
  const int64_t Hkv = c.kv_heads == 0 ? H : c.kv_heads, kvh = ex.head / (H / Hkv);
  const int64_t qi = ex.query, layer = ex.layer, head = ex.head;
  ATTN_CHECK(layer >= 0 && layer < c.encoder_layers, "--layer: expected 0..", c.encoder_layers - 1,
             " (the model has ", c.encoder_layers, " layers); got ", layer);
  ATTN_CHECK(head >= 0 && head < H, "--head: expected 0..", H - 1, " (the model has ", H, " heads); got ",
             head);
  ATTN_CHECK(qi >= 0 && qi < L, "--word: position out of range");
  const std::string& qw = ex.tokens[qi];
  const int64_t show = std::min<int64_t>(ex.show_dims, D);

  // ---- the layer's input from the model's own forward pass ----
  const bool was_training = m.is_training();
  m.eval();
  NoGradGuard ng;
  nn::Trace trace;
  models::ClassifierCall call;
  call.capture = true;
  call.capture_rows = {qi};
  call.trace = &trace;
  const Tensor ids = Tensor::from(ex.ids, {1, L});
  const models::ModelOutput out = m.forward_embeddings(m.embed_tokens(ids), call);
  m.train(was_training);
  const std::string in_name =
      layer == 0 ? "encoder.embed" : std::string("encoder.layers.") + std::to_string(layer - 1);
  Tensor x_in;
  for (const auto& [n, t] : trace)
    if (n == in_name) x_in = t;
  ATTN_CHECK(x_in.defined(), "explain --model: the forward pass recorded no '", in_name, "'");
  const Mat X = to_mat(x_in.to_vector(), L, C);  // [L, C]
  const NamedParams ps = m.named_parameters();
  const std::string pre = std::string("encoder.layers.") + std::to_string(layer) + ".";
  auto opt_param = [&](const std::string& n) -> Tensor {
    for (const auto& [k, p] : ps)
      if (k == n) return p;
    return Tensor();
  };
  const Mat A =
      c.pre_norm ? norm_rows(X, c, param(ps, pre + "norm1.weight"), opt_param(pre + "norm1.bias")) : X;
  Mat Q =
      project(A, param(ps, pre + "self_attn.w_q.weight"), opt_param(pre + "self_attn.w_q.bias"), head * D, D);
  Mat K =
      project(A, param(ps, pre + "self_attn.w_k.weight"), opt_param(pre + "self_attn.w_k.bias"), kvh * D, D);
  const Mat V =
      project(A, param(ps, pre + "self_attn.w_v.weight"), opt_param(pre + "self_attn.w_v.bias"), kvh * D, D);
  const bool rope = c.positions == models::Positions::rope;
  if (rope) Q = apply_rope(Q, c.rope_base), K = apply_rope(K, c.rope_base);
  const std::vector<double> q = Q.row(qi);

  // ---- the arithmetic ----
  const double sqrt_d = std::sqrt(static_cast<double>(D));
  std::vector<double> score(L), scaled(L), ex_(L), weight(L);
  for (int64_t j = 0; j < L; ++j) score[j] = dot(q, K.row(j)), scaled[j] = score[j] / sqrt_d;
  const double mx = *std::max_element(scaled.begin(), scaled.end());
  for (int64_t j = 0; j < L; ++j) ex_[j] = std::exp(scaled[j] - mx);
  const double exp_sum = std::accumulate(ex_.begin(), ex_.end(), 0.0);
  for (int64_t j = 0; j < L; ++j) weight[j] = ex_[j] / exp_sum;
  std::vector<double> z(D, 0.0);
  for (int64_t j = 0; j < L; ++j)
    for (int64_t d = 0; d < D; ++d) z[d] += weight[j] * V(j, d);
  std::vector<int64_t> order(L);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return weight[a] > weight[b]; });

  // The model's own captured weights of this layer, head and query row.
  const Tensor cap = out.attention.at(layer).select(0, 0).select(0, head).select(0, 0);  // [L]
  const std::vector<double> captured = cap.to_vector();
  double max_diff_model = 0;
  for (int64_t j = 0; j < L; ++j)
    max_diff_model = std::max(max_diff_model, std::fabs(captured[j] - weight[j]));
  const double model_tol = 1e-4;
  ATTN_CHECK(max_diff_model <= model_tol,
             "explain --model: the step-by-step weights differ from the model's ", "captured weights by ",
             max_diff_model, " (tolerance ", model_tol, "); this is a bug in attn");
  return ModelWalk{ex,
                   c,
                   L,
                   C,
                   H,
                   D,
                   Hkv,
                   kvh,
                   qi,
                   layer,
                   head,
                   show,
                   qw,
                   X,
                   Q,
                   K,
                   V,
                   rope,
                   q,
                   score,
                   scaled,
                   ex_,
                   weight,
                   z,
                   captured,
                   sqrt_d,
                   mx,
                   exp_sum,
                   max_diff_model,
                   order};
}

void ModelWalk::intro_and_inputs(Page& r) const {
  const std::string sl = std::to_string(layer), sh = std::to_string(head);
  const std::string where = r.t("layer " + sl + ", head " + sh, "第 " + sl + " 层、头 " + sh);
  r.title(r.t("attn explain --model: real Q, K, V of " + ex.model_name + ", " + where,
              "attn explain --model：" + ex.model_name + " 的真实 Q、K、V，" + where));
  r.para(r.t(
      "  Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V\n\n"
      "The same steps as `attn explain`, with the numbers of a trained model: its embeddings, the layers\n"
      "before this one and this head's rows of W_Q, W_K, W_V. Nothing here is hand-chosen.",
      "  Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V\n\n"
      "步骤与 `attn explain` 相同，但用的是训练好的模型的数：它的嵌入、这一层之前的各层，\n"
      "以及这个头在 W_Q、W_K、W_V 中的行。这里没有任何手工选定的数。"));
  const std::string sL = std::to_string(L), sq = std::to_string(qi);
  r.line(r.t(
      "Sentence:   " + join_words(ex.tokens) + "   (" + sL + " tokens, numbered from 0: [CLS] is position 0)",
      "句子：     " + join_words(ex.tokens) + "   （" + sL + " 个词元，从 0 开始编号：[CLS] 是位置 0）"));
  r.line(
      r.t("Query:      " + qw + "   (position " + sq + "): which tokens does it attend to in " + where + "?",
          "查询：     " + qw + "   （位置 " + sq + "）：在" + where + " 中，它关注哪些词元？"));
  const std::string gq_en =
      Hkv != H ? " (grouped-query: this head reads key/value head " + std::to_string(kvh) + ")"
               : std::string();
  const std::string gq_zh =
      Hkv != H ? "（分组查询：这个头读取的是键/值头 " + std::to_string(kvh) + "）" : std::string();
  const std::string sC = std::to_string(C), sH = std::to_string(H), sD = std::to_string(D),
                    sLayers = std::to_string(c.encoder_layers);
  r.line(r.t(
      "Sizes:      d_model = " + sC + ", " + sH + " heads, d_k = " + sD + gq_en + ", " + sLayers + " layers.",
      "维度：     d_model = " + sC + "，" + sH + " 个头，d_k = " + sD + gq_zh + "，共 " + sLayers + " 层。"));
  r.line();
  r.heading(r.t("Step 1. The layer's input and the projections", "第 1 步  这一层的输入与投影"));
  {
    std::string en = "x_i = ", zh = "x_i = ";
    if (layer == 0) {
      en += std::string("the embeddings (token") + (c.scale_embeddings ? " · √d_model" : "") +
            " + position) of each token";
      zh += std::string("每个词元的嵌入（词元嵌入") + (c.scale_embeddings ? " · √d_model" : "") +
            " + 位置嵌入）";
    } else {
      en += "the output of layer " + std::to_string(layer - 1);
      zh += "第 " + std::to_string(layer - 1) + " 层的输出";
    }
    if (c.pre_norm) en += ", then norm1 (pre-norm model)", zh += "，再经过 norm1（前置归一化模型）";
    en += ".\nq_i = x_i·W_Qᵀ, k_i = x_i·W_Kᵀ, v_i = x_i·W_Vᵀ";
    zh += "。\nq_i = x_i·W_Qᵀ，k_i = x_i·W_Kᵀ，v_i = x_i·W_Vᵀ";
    if (c.bias) en += " (+ biases)", zh += "（+ 偏置）";
    en += " with this head's " + sD + " rows of each projection";
    zh += "，用的是这个头在每个投影中的 " + sD + " 行";
    en += rope ? ";\nthen rotary positions (attn::rope, half-split) on q and k." : ".";
    zh += rope ? "；\n然后对 q 和 k 施加旋转位置编码（attn::rope，前后两半配对）。" : "。";
    if (show < D) {
      en += "\nThe tables show the first " + std::to_string(show) + " of the " + sD +
            " dimensions (--dims N for more); every sum below uses all of them.";
      zh += "\n表中只列出前 " + std::to_string(show) + " 维（共 " + sD +
            " 维；用 --dims N 显示更多）；下面每个求和都用到全部维度。";
    }
    r.para(r.t(en, zh));
  }
  {
    std::vector<text::Table::Column> cols = {{"#", text::Align::right},
                                             {r.t("token", "词元"), text::Align::left}};
    for (int g = 0; g < 3; ++g)
      for (int64_t d = 0; d < show; ++d)
        cols.push_back({std::string("d") + std::to_string(d), text::Align::right});
    text::Table t(cols);
    t.group("q", 2, static_cast<int>(show)).group("k", 2 + show, show).group("v", 2 + 2 * show, show);
    for (int64_t i = 0; i < L; ++i) {
      std::vector<std::string> row = {std::to_string(i), cell(ex.tokens[i])};
      for (const Mat* mm : std::initializer_list<const Mat*>{&Q, &K, &V})
        for (int64_t d = 0; d < show; ++d) row.push_back(fmt((*mm)(i, d), 3));
      t.row(row);
    }
    r.table(t);
  }
}

void ModelWalk::steps(Page& r) const {
  r.heading(r.t("Step 2-5. Scores, scale, exp, normalise", "第 2-5 步  分数、缩放、取指数、归一化"));
  const std::string sD = std::to_string(D), sq = fmt(sqrt_d, 3), smx = fmt(mx, 4), ssum = fmt(exp_sum, 4);
  r.para(r.t("s_j = q(" + qw + ")·k_j over all " + sD + " dimensions;\ndivided by √d_k = " + sq +
                 "; exp(s_j/√d_k − max) with max = " + smx +
                 " (the same weights, no overflow); weight_j = exp_j / " + ssum + ".",
             "s_j = q(" + qw + ")·k_j，对全部 " + sD + " 维求和；\n再除以 √d_k = " + sq +
                 "；exp(s_j/√d_k − max)，其中 max = " + smx +
                 "（权重不变，也不会溢出）；\nweight_j = exp_j / " + ssum + "。"));
  {
    text::Table t({{"#", text::Align::right},
                   {r.t("token", "词元"), text::Align::left},
                   {"s_j = q·k_j", text::Align::right},
                   {"s_j / " + sq, text::Align::right},
                   {"exp(· − max)", text::Align::right},
                   {r.t("weight", "权重"), text::Align::right},
                   {r.t("captured", "捕获值"), text::Align::right}});
    for (int64_t j = 0; j < L; ++j)
      t.row({std::to_string(j), cell(ex.tokens[j]), fmt(score[j], 4), fmt(scaled[j], 4), fmt(ex_[j], 4),
             fmt(weight[j], 4), fmt(captured[j], 4)});
    r.table(t);
  }
  r.para(
      r.t("\"captured\" is the weight the model itself produced in its forward pass (fused kernel,\n"
          "options.capture): the largest difference from the arithmetic is " +
              fmt(max_diff_model, 8) + ".",
          "“捕获值”是模型自己在前向计算中得到的权重（融合核，options.capture）：\n它与手算结果的最大差为 " +
              fmt(max_diff_model, 8) + "。"));
  r.heading(r.t("Step 6. Output: z = sum over j of weight_j · v_j",
                "第 6 步  输出：z = Σ_j weight_j · v_j（对所有 j 求和）"));
  {
    std::string zs = "[";
    for (int64_t d = 0; d < show; ++d) zs += (d ? ", " : "") + fmt(z[d], 4);
    zs += show < D ? ", ...]" : "]";
    r.para(r.t("z(" + qw + ") = " + zs + "  (" + sD +
                   " dimensions; then W_O mixes the heads back into d_model = " + std::to_string(C) + ")",
               "z(" + qw + ") = " + zs + "  （" + sD +
                   " 维；之后 W_O 把各个头重新混合成 d_model = " + std::to_string(C) + " 维）"));
  }
  r.heading(r.t("Which tokens win: the attention of " + qw + ", ranked",
                "哪些词元胜出：" + qw + " 的注意力权重排名"));
  {
    text::Table t({{r.t("rank", "名次"), text::Align::right},
                   {"#", text::Align::right},
                   {r.t("token", "词元"), text::Align::left},
                   {r.t("weight", "权重"), text::Align::right},
                   {"", text::Align::left}});
    for (int64_t k = 0; k < std::min<int64_t>(L, 10); ++k)
      t.row({std::to_string(k + 1), std::to_string(order[k]), cell(ex.tokens[order[k]]),
             fmt(weight[order[k]], 4), bar(weight[order[k]], 30)});
    r.table(t);
  }
  r.para(
      r.t("Attention is not explanation: a high weight says where this head looked, not what changed the\n"
          "prediction. `attn classify --explain` puts an attribution (integrated gradients) next to it.",
          "注意力不等于解释：权重高只说明这个头看向了哪里，并不说明是什么改变了预测。\n"
          "`attn classify --explain` 会把归因（积分梯度）和注意力放在一起对照。"));
}

json::Value ModelWalk::engine(Page& r) const {
  r.heading(r.t("Engine check: attn::attention with options.capture.enabled = true",
                "引擎核对：attn::attention，设置 options.capture.enabled = true"));
  const auto runs = engine_check(Q, K, V, 1.0 / sqrt_d, qi, weight, z);
  json::Value engine_json = report_engine(r, runs, r.t("(steps 5 and 6)", "（第 5 步和第 6 步）"));
  return engine_json;
}

void ModelWalk::to_json(Page& r, json::Value engine_json) const {
  json::Value& j = r.json;
  j.set("mode", jv("model"));
  j.set("model", jv(ex.model_name));
  j.set("tokens", jv(strings(ex.tokens)));
  j.set("layer", jv(layer));
  j.set("head", jv(head));
  j.set("kv_head", jv(kvh));
  json::Value jq = json::Value::object();
  jq.set("token", jv(qw));
  jq.set("position", jv(qi));
  j.set("query", jv(std::move(jq)));
  j.set("d_model", jv(C));
  j.set("d_k", jv(D));
  j.set("pre_norm", jv(c.pre_norm));
  j.set("rope", jv(rope));
  j.set("X", jv(X.json()));
  j.set("Q", jv(Q.json()));
  j.set("K", jv(K.json()));
  j.set("V", jv(V.json()));
  json::Value steps = json::Value::object();
  steps.set("q", jv(numbers(q)));
  steps.set("scores", jv(numbers(score)));
  steps.set("sqrt_d_k", jv(sqrt_d));
  steps.set("scaled", jv(numbers(scaled)));
  steps.set("max", jv(mx));
  steps.set("exp", jv(numbers(ex_)));
  steps.set("exp_sum", jv(exp_sum));
  steps.set("weights", jv(numbers(weight)));
  steps.set("output", jv(numbers(z)));
  j.set("steps", jv(std::move(steps)));
  j.set("captured_weights", jv(numbers(captured)));
  j.set("max_diff_captured", jv(max_diff_model));
  j.set("engine", jv(std::move(engine_json)));
}

}  // namespace

void model_walkthrough(const ModelExample& ex, Page& r) {
  const ModelWalk w = compute_walk(ex);
  w.intro_and_inputs(r);
  w.steps(r);
  json::Value engine_json = w.engine(r);
  w.to_json(r, std::move(engine_json));
}

Report explain_model(const ModelOptions& options) {
  const std::string& path = options.path;
  ATTN_CHECK(std::filesystem::exists(path), "--model: file '", path,
             "' not found; train one with 'attn train classify'");
  auto clf = models::TextClassifier::load(path);
  const models::Classification c = clf->classify({options.sentence}, false).at(0);
  ModelExample ex;
  ex.model = &clf->model();
  ex.model_name = std::filesystem::path(path).filename().string();
  ex.tokens = c.tokens;
  ex.ids.assign(c.ids.begin(), c.ids.end());  // characters or a pretrained encoder's pieces, as read
  const models::TransformerConfig& cfg = clf->model().config();
  ATTN_CHECK(cfg.encoder_layers >= 1, "--model: the model has no encoder layers (no attention to explain)");
  ex.layer = options.layer.value_or(cfg.encoder_layers - 1);
  ATTN_CHECK(ex.layer >= 0 && ex.layer < cfg.encoder_layers, "--layer must be in [0, ",
             cfg.encoder_layers - 1, "]; got ", ex.layer);
  ex.head = options.head;
  ATTN_CHECK(ex.head >= 0 && ex.head < cfg.heads, "--head must be in [0, ", cfg.heads - 1, "]; got ",
             ex.head);
  ATTN_CHECK(options.show_dims >= 1 && options.show_dims <= 4096, "--dims must be in [1, 4096]; got ",
             options.show_dims);
  ex.show_dims = options.show_dims;
  const int64_t L = static_cast<int64_t>(ex.tokens.size());
  ex.query = 0;
  if (!options.word.empty()) {
    const std::string& w = options.word;
    const auto it = std::find(ex.tokens.begin(), ex.tokens.end(), w);
    if (it != ex.tokens.end()) {
      ex.query = it - ex.tokens.begin();
    } else {
      const bool numeric = w.size() < 10 && w.find_first_not_of("0123456789") == std::string::npos;
      ATTN_CHECK(numeric, "--word: expected a token of the sentence [", join_words(ex.tokens),
                 "] or a position 0..", L - 1, "; got '", w, "'");
      const int64_t pos = std::stoll(w);
      ATTN_CHECK(pos < L, "--word: position (from 0, [CLS] = 0) must be in [0, ", L - 1, "] for [",
                 join_words(ex.tokens), "]; got ", pos);
      ex.query = pos;
    }
  }
  Page page = page_in(options.lang);
  model_walkthrough(ex, page);
  if (c.truncated)
    page.para(page.t("(The sentence was cut to the model's max_len: " + std::to_string(L - 1) + " of " +
                         std::to_string(c.text_tokens) + " characters were read.)",
                     "（句子被截断到模型的 max_len：只读入了 " + std::to_string(L - 1) + " 个字符，共 " +
                         std::to_string(c.text_tokens) + " 个。）"));
  return finish(page);
}

}  // namespace attn::teach

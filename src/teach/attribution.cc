// The attribution report (attn/teach/attribution.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/models/text_classifier.h>
#include <attn/teach/attribution.h>
#include <attn/text/table.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "explain_internal.h"

namespace attn::teach {

const char* const kNotExplanation =
    "Attention is not explanation. The attention columns say where [CLS] looked; the attribution\n"
    "columns say how much each character changed the score of the explained class (integrated\n"
    "gradients: its share of f(text) - f(baseline); input x gradient: the first-order effect).\n"
    "A character can receive much attention and change nothing (its value vector may carry little),\n"
    "and one with little attention can decide the class. Compare the two before reading the\n"
    "attention as a reason.";

const char* const kNotExplanationZh =
    "注意力不等于解释。注意力两列说明 [CLS] 看向了哪里；归因各列说明每个字符把被解释类别的\n"
    "得分改变了多少（积分梯度：它在 f(text) - f(baseline) 中所占的份额；输入 × 梯度：一阶效应）。\n"
    "一个字符可能得到很多注意力却什么也没改变（它的值向量可能几乎不携带信息），\n"
    "而一个几乎没被关注的字符却可能决定类别。把注意力当作理由之前，先把两者对照一下。";

namespace {

std::string signed_fmt(double v, int decimals) {
  const std::string s = fmt(v, decimals);
  return s[0] == '-' || s.find_first_not_of("0.") == std::string::npos ? s : "+" + s;
}

// A bar of |v| / scale over `width` cells, '+' side right (█), '-' side left (▒).
std::string signed_bar(double v, double scale, int width) {
  const std::string b = bar(scale > 0 ? std::fabs(v) / scale : 0.0, width);
  if (v >= 0) return b;
  std::string s;
  for (std::size_t i = 0; i < b.size() / 3; ++i) s += "▒";
  return s;
}

std::vector<double> without_cls(const std::vector<double>& v) { return {v.begin() + 1, v.end()}; }
std::vector<double> absolute(const std::vector<double>& v) {
  std::vector<double> a;
  for (double x : v) a.push_back(std::fabs(x));
  return a;
}

double rho(const std::vector<double>& att, const std::vector<double>& attribution) {
  if (att.size() < 3) return 0.0;  // [CLS] + fewer than 2 tokens
  return models::spearman(without_cls(att), without_cls(absolute(attribution)));
}

// The numbers of `what` as a JSON array. NaN or infinity (a model whose
// outputs are not finite) is an error: JSON cannot hold it, and writing
// anything else in its place would pass a broken report off as a real one.
json::Value finite_numbers(const std::vector<double>& v, const char* what) {
  std::vector<json::Value> items;
  for (std::size_t i = 0; i < v.size(); ++i) {
    ATTN_CHECK(std::isfinite(v[i]), "attribution: ", what, "[", i, "] is ", v[i],
               "; expected a finite number (are the model's outputs finite?)");
    items.push_back(json::Value::number(v[i]));
  }
  return json::Value::array(std::move(items));
}

// Token indices sorted by decreasing |IG| ([CLS] included, last on ties).
std::vector<int64_t> order_by_ig(const AttributionResult& r) {
  const auto& ig = r.a.integrated_gradients;
  std::vector<int64_t> idx(ig.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return std::fabs(ig[a]) > std::fabs(ig[b]); });
  return idx;
}

}  // namespace

AttributionResult attribute_prediction(models::EncoderClassifier& model, const AttributionInput& input,
                                       const AttributionReportOptions& options) {
  ATTN_CHECK(input.tokens.size() == input.ids.size() && !input.ids.empty(),
             "attribution: expected one token per id (at least [CLS]); got ", input.tokens.size(),
             " tokens and ", input.ids.size(), " ids");
  ATTN_CHECK(static_cast<int64_t>(input.labels.size()) == model.config().num_classes,
             "attribution: expected ", model.config().num_classes, " labels (the model's classes); got ",
             input.labels.size());
  models::AttributionOptions o = options.attribution;
  if (options.keep_special) o.keep.insert(o.keep.end(), input.special.begin(), input.special.end());
  if (!options.target.empty()) {
    const auto it = std::find(input.labels.begin(), input.labels.end(), options.target);
    std::string names;
    for (const auto& l : input.labels) names += (names.empty() ? "" : ", ") + l;
    ATTN_CHECK(it != input.labels.end(), "--target: expected one of the model's labels (", names, "); got '",
               options.target, "'");
    o.target = it - input.labels.begin();
  }
  AttributionResult r;
  r.a = models::attribute(model, input.ids, o);
  const auto L = input.ids.size();
  r.attention_last = r.a.cls_attention.empty() ? std::vector<double>(L, 0.0) : r.a.cls_attention.back();
  r.attention_mean.assign(L, 0.0);
  for (const auto& layer : r.a.cls_attention)
    for (std::size_t j = 0; j < L; ++j)
      r.attention_mean[j] += layer[j] / static_cast<double>(r.a.cls_attention.size());
  r.rho_last_ig = rho(r.attention_last, r.a.integrated_gradients);
  r.rho_mean_ig = rho(r.attention_mean, r.a.integrated_gradients);
  r.rho_last_ixg = rho(r.attention_last, r.a.input_x_grad);
  return r;
}

std::string attribution_text(const AttributionInput& input, const AttributionResult& r, Lang lang) {
  auto T = [lang](const std::string& en, const std::string& zh) { return tr(lang, en, zh); };
  const auto& a = r.a;
  const std::string& target = input.labels[a.target];
  const std::string p = fmt(a.probs[a.target], 3), f = fmt(a.logits[a.target], 3);
  std::string s;
  s += T("Attention next to attribution (explained class: " + target +
             (a.target == a.predicted ? ", the predicted one" : ", predicted: " + input.labels[a.predicted]) +
             "; p = " + p + ", logit f = " + f + ")\n",
         "注意力与归因对照（被解释的类别：" + target +
             (a.target == a.predicted ? "，即预测的类别" : "；预测的类别：" + input.labels[a.predicted]) +
             "；p = " + p + "，logit f = " + f + "）\n");
  if (input.truncated)
    s += T("(the text was cut to the model's max_len: only the characters below were read)\n",
           "（文本被截断到模型的 max_len：只读入了下面这些字符）\n");
  s += "\n";
  double max_ig = 0;
  for (double v : a.integrated_gradients) max_ig = std::max(max_ig, std::fabs(v));
  const std::size_t layers = a.cls_attention.size();
  text::Table t(
      {{T("rank", "名次"), text::Align::right},
       {"#", text::Align::right},
       {T("char", "字符"), text::Align::left},
       {T("last layer", "最后一层"), text::Align::right},
       {T("mean of " + std::to_string(layers), std::to_string(layers) + " 层平均"), text::Align::right},
       {"IG", text::Align::right},
       {"", text::Align::left},
       {T("input×grad", "输入×梯度"), text::Align::right}});
  t.group(T("attention of [CLS]", "[CLS] 的注意力"), 3, 2)
      .group(T("attribution to " + target, "对 " + target + " 的归因"), 5, 3);
  const auto order = order_by_ig(r);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int64_t i = order[k];
    t.row({std::to_string(k + 1), std::to_string(i), input.tokens[i], fmt(r.attention_last[i], 3),
           fmt(r.attention_mean[i], 3), signed_fmt(a.integrated_gradients[i], 3),
           signed_bar(a.integrated_gradients[i], max_ig, 12), signed_fmt(a.input_x_grad[i], 3)});
  }
  for (const auto& line : t.lines()) s += line + "\n";
  s += T("\n  █ pushes towards " + target + ", ▒ pushes away; # is the position (0 = [CLS]).\n\n",
         "\n  █ 推向 " + target + "，▒ 推离；# 是位置（0 = [CLS]）。\n\n");
  const auto n_words = input.tokens.size() - 1;
  if (n_words >= 2) {
    const std::string n = std::to_string(n_words);
    s += T("Rank correlation (Spearman, over the " + n +
               " characters, [CLS] left out) of the attention with |attribution|:\n",
           "注意力与 |归因| 的秩相关（Spearman，对 " + n + " 个字符计算，不含 [CLS]）：\n");
    s += T("  last-layer attention vs |IG|          ", "  最后一层注意力 vs |IG|        ") +
         signed_fmt(r.rho_last_ig, 2) + "\n";
    s += T("  mean-over-layers attention vs |IG|    ", "  各层平均注意力 vs |IG|        ") +
         signed_fmt(r.rho_mean_ig, 2) + "\n";
    s += T("  last-layer attention vs |input×grad|  ", "  最后一层注意力 vs |输入×梯度|  ") +
         signed_fmt(r.rho_last_ixg, 2) + "\n";
    s += T("  (1: the same order, 0: unrelated, -1: reversed)\n\n",
           "  （1：顺序相同，0：无关，-1：顺序相反）\n\n");
  }
  const bool pad = a.baseline == models::AttributionBaseline::pad;
  const std::string steps = std::to_string(a.steps);
  std::string kept_en, kept_zh;
  for (int64_t k : a.kept) {
    kept_en += (kept_en.empty() ? "" : ", ") + input.tokens[static_cast<std::size_t>(k)];
    kept_zh += (kept_zh.empty() ? "" : "、") + input.tokens[static_cast<std::size_t>(k)];
  }
  const bool trap = a.rule == models::AttributionRule::trapezoid;
  s += T("Integrated gradients: baseline " +
             std::string(pad ? "[PAD] at every position" : "zero token embeddings") + " (positions kept" +
             (kept_en.empty() ? "" : "; " + kept_en + " kept as they are") + "), " + steps + " steps (" +
             (trap ? "trapezoid" : "midpoint") + ").\n",
         "积分梯度：基线为" + std::string(pad ? "每个位置都是 [PAD]" : "全零的词元嵌入") + "（保留位置编码" +
             (kept_zh.empty() ? "" : "；" + kept_zh + " 保持不变") + "），" + steps + " 步（" +
             (trap ? "梯形法则" : "中点法则") + "）。\n");
  const std::string sums = fmt(a.ig_sum, 4),
                    diff = fmt(a.f_input, 4) + " - " + fmt(a.f_baseline, 4) + " = " +
                           fmt(a.f_input - a.f_baseline, 4),
                    err = signed_fmt(a.completeness_error, 4);
  s += T("  sum of IG = " + sums + ", f(text) - f(baseline) = " + diff + ": completeness error " + err + "\n",
         "  IG 之和 = " + sums + "，f(text) - f(baseline) = " + diff + "：完备性误差 " + err + "\n");
  const double span = std::max(1e-9, std::fabs(a.f_input - a.f_baseline));
  if (std::fabs(a.completeness_error) > 0.05 * span)
    s += T("  The error is more than 5% of the difference: raise --steps for a converged attribution.\n",
           "  误差超过了差值的 5%：请增大 --steps，让归因收敛。\n");
  s += "\n" + std::string(lang == Lang::zh ? kNotExplanationZh : kNotExplanation) + "\n";
  return s;
}

json::Value attribution_json(const AttributionInput& input, const AttributionResult& r) {
  const auto& a = r.a;
  json::Value j = json::Value::object();
  j.set("text", json::Value::string(input.text));
  j.set("label", json::Value::string(input.labels[a.predicted]));
  j.set("target", json::Value::string(input.labels[a.target]));
  j.set("probabilities", finite_numbers(a.probs, "probabilities"));
  j.set("logits", finite_numbers(a.logits, "logits"));
  j.set("labels", strings(input.labels));
  j.set("tokens", strings(input.tokens));
  j.set("truncated", json::Value::boolean(input.truncated));
  json::Value att = json::Value::object();
  att.set("last_layer", finite_numbers(r.attention_last, "attention last layer"));
  att.set("mean_over_layers", finite_numbers(r.attention_mean, "attention mean over layers"));
  std::vector<json::Value> per_layer;
  for (const auto& l : a.cls_attention) per_layer.push_back(finite_numbers(l, "attention of a layer"));
  att.set("layers", json::Value::array(std::move(per_layer)));
  j.set("attention", std::move(att));
  json::Value at = json::Value::object();
  at.set("ig", finite_numbers(a.integrated_gradients, "integrated gradients"));
  at.set("input_x_grad", finite_numbers(a.input_x_grad, "input x gradient"));
  at.set("input_x_grad_norm", finite_numbers(a.input_x_grad_norm, "input x gradient norm"));
  at.set("baseline", json::Value::string(models::baseline_name(a.baseline)));
  json::Value kept = json::Value::array();
  for (int64_t k : a.kept) kept.push_back(json::Value::integer(k));
  at.set("baseline_keeps", std::move(kept));
  at.set("steps", json::Value::integer(a.steps));
  at.set("f_input", json::Value::number(a.f_input));
  at.set("f_baseline", json::Value::number(a.f_baseline));
  at.set("ig_sum", json::Value::number(a.ig_sum));
  at.set("completeness_error", json::Value::number(a.completeness_error));
  j.set("attribution", std::move(at));
  json::Value rc = json::Value::object();
  rc.set("attention_last_vs_abs_ig", json::Value::number(r.rho_last_ig));
  rc.set("attention_mean_vs_abs_ig", json::Value::number(r.rho_mean_ig));
  rc.set("attention_last_vs_abs_input_x_grad", json::Value::number(r.rho_last_ixg));
  j.set("rank_correlation", std::move(rc));
  std::vector<json::Value> ranking;
  for (int64_t i : order_by_ig(r)) {
    json::Value e = json::Value::object();
    e.set("position", json::Value::integer(i));
    e.set("token", json::Value::string(input.tokens[i]));
    e.set("ig", json::Value::number(a.integrated_gradients[i]));
    e.set("input_x_grad", json::Value::number(a.input_x_grad[i]));
    e.set("attention_last", json::Value::number(r.attention_last[i]));
    e.set("attention_mean", json::Value::number(r.attention_mean[i]));
    ranking.push_back(std::move(e));
  }
  j.set("ranking", json::Value::array(std::move(ranking)));
  j.set("note", json::Value::string(kNotExplanation));
  return j;
}

AttributionInput attribution_input(const models::TextClassifier& model, const std::string& text,
                                   const models::Classification& c) {
  AttributionInput in;
  in.text = text;
  in.tokens = c.tokens;
  in.labels = model.labels();
  in.truncated = c.truncated;
  in.ids.assign(c.ids.begin(), c.ids.end());  // what the model read (characters or pretrained pieces)
  if (in.ids.empty()) {                       // a Classification made by hand: the character vocabulary
    in.ids.push_back(text::Vocab::kCls);
    for (std::size_t t = 1; t < c.tokens.size(); ++t)
      in.ids.push_back(model.tokenizer().vocab().id(c.tokens[t]));
  }
  const int64_t L = static_cast<int64_t>(in.ids.size());
  in.special.push_back(0);                                               // [CLS] / <s>
  if (model.pieces() != nullptr && L >= 2) in.special.push_back(L - 1);  // </s>
  return in;
}

viz::Export attribution_export(models::EncoderClassifier& model, const AttributionInput& input,
                               const AttributionResult& r, const std::string& model_name) {
  const int64_t L = static_cast<int64_t>(input.ids.size());
  viz::SelfAttentionInput in{model_name, input.text, input.tokens, {}};
  {
    NoGradGuard ng;
    const bool was_training = model.is_training();
    model.eval();
    models::ClassifierCall call;
    call.capture = true;
    for (int64_t i = 0; i < L; ++i) call.capture_rows.push_back(i);
    const models::ModelOutput out =
        model.forward_embeddings(model.embed_tokens(Tensor::from(input.ids, {1, L})), call);
    model.train(was_training);
    for (const Tensor& w : out.attention) in.layers.push_back(viz::layer_from_weights(w));  // w: [1, H, L, L]
  }
  viz::Export e = viz::self_attention_export(std::move(in));
  viz::Attribution at;
  at.tokens = input.tokens;
  at.target = input.labels[static_cast<std::size_t>(r.a.target)];
  at.baseline = models::baseline_name(r.a.baseline);
  at.steps = r.a.steps;
  at.has_completeness = true;
  at.completeness_error = r.a.completeness_error;
  at.methods = {{"ig", r.a.integrated_gradients},
                {"input_x_grad", r.a.input_x_grad},
                {"input_x_grad_norm", r.a.input_x_grad_norm}};
  e.attribution = std::move(at);
  // Validated as `attn view` reads it (shapes, row sums).
  return viz::parse_export(viz::export_json(e));
}

}  // namespace attn::teach

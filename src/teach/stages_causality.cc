// "Attention is not causality" on the explainer page (teach/stages.h, causality_panel): a review
// classifier's [CLS] attention in its last layer beside integrated gradients of its prediction
// (models/attribution.h, the midpoint rule), their completeness check and Spearman's rank correlation.
#include <attn/core/error.h>
#include <attn/models/attribution.h>
#include <attn/models/text_classifier.h>
#include <attn/teach/attribution.h>
#include <attn/teach/stages.h>

#include <algorithm>
#include <cmath>

namespace attn::teach {
namespace {

using json::Value;

Value numbers(const std::vector<double>& v, const char* what) {
  Value a = Value::array();
  for (std::size_t i = 0; i < v.size(); ++i) {
    ATTN_CHECK(std::isfinite(v[i]), "causality panel: ", what, "[", i, "] is ", v[i],
               "; expected a finite number (are the classifier's outputs finite?)");
    a.push_back(Value::number(v[i]));
  }
  return a;
}

const char* const kNoteEn =
    "Attention is not causality. The attention row says where [CLS] looked in the last layer; integrated "
    "gradients say how much each token moved the predicted class's logit, from the baseline to the text "
    "(they add up to f(text) - f(baseline)). A token can draw much attention and change nothing (its value "
    "vector may carry little, later layers and the feed-forward parts may ignore it, and a mean-pooled head "
    "does not even read [CLS]); a token with little attention can decide the class. The rank correlation "
    "shows how far the one ranking tells the other.";
const char* const kNoteZh =
    "注意力不是因果。注意力这一行说明最后一层里 [CLS] 看向了哪里；积分梯度说明每个词元把预测类别的 logit "
    "从基线推到这句话时贡献了多少（它们加起来等于 f(文本) − f(基线)）。一个词元可能得到很多注意力却什么也"
    "没改变（它的值向量可能几乎不带信息，后面的层和前馈网络可能忽略它，而取平均池化的分类头根本不读 "
    "[CLS]）；一个几乎没被关注的词元却可能决定类别。秩相关系数说明一种排序能在多大程度上说明另一种。";

}  // namespace

json::Value causality_panel(models::TextClassifier& clf, const CausalityRequest& r) {
  ATTN_CHECK(!r.text.empty(), "the text is empty; type a sentence");
  ATTN_CHECK(r.steps >= 1 && r.steps <= 256, "steps: expected 1..256 (the integral's points); got ", r.steps);
  models::Classification c;
  const std::vector<int32_t> ids32 = clf.input_ids(r.text, c);
  c.ids = ids32;
  AttributionInput in = attribution_input(clf, r.text, c);
  AttributionReportOptions o;
  o.attribution.steps = r.steps;
  o.attribution.rule = models::AttributionRule::midpoint;
  o.attribution.baseline = models::parse_baseline(r.baseline);
  // Path points per forward/backward: as many as keep a batch within 1,024 token rows (the memory of
  // 16 points at the encoder's 64 tokens): a 28-token review runs its 52 points in two batches of 26,
  // ~20 % less CPU time than four of 13 (fewer, larger matrix products).
  o.attribution.batch = std::max<int64_t>(1, 1024 / static_cast<int64_t>(in.ids.size()));
  const AttributionResult res = attribute_prediction(clf.model(), in, o);
  const models::Attribution& a = res.a;
  const int64_t L = static_cast<int64_t>(in.ids.size());
  const bool pieces = clf.pieces() != nullptr;

  // Non-special tokens: all but the first, and the last for a piece tokenizer ([SEP] / </s>).
  std::vector<bool> special(static_cast<std::size_t>(L), false);
  for (int64_t k : in.special) special[static_cast<std::size_t>(k)] = true;
  std::vector<double> att, ig_abs;
  for (int64_t i = 0; i < L; ++i)
    if (!special[static_cast<std::size_t>(i)]) {
      att.push_back(res.attention_last[static_cast<std::size_t>(i)]);
      ig_abs.push_back(std::fabs(a.integrated_gradients[static_cast<std::size_t>(i)]));
    }
  const double rho = att.size() >= 2 ? models::spearman(att, ig_abs) : 0.0;

  Value j = Value::object();
  j.set("text", Value::string(r.text));
  Value toks = Value::array(), ids = Value::array(), sp = Value::array(), labels = Value::array();
  for (int64_t i = 0; i < L; ++i) {
    toks.push_back(Value::string(in.tokens[static_cast<std::size_t>(i)]));
    ids.push_back(Value::integer(in.ids[static_cast<std::size_t>(i)]));
    sp.push_back(Value::boolean(special[static_cast<std::size_t>(i)]));
  }
  for (const std::string& l : in.labels) labels.push_back(Value::string(l));
  j.set("tokens", std::move(toks));
  j.set("ids", std::move(ids));
  j.set("special", std::move(sp));
  j.set("truncated", Value::boolean(in.truncated));
  j.set("labels", std::move(labels));
  j.set("encoder", Value::string(pieces ? "pretrained" : "characters"));
  j.set("pooling", Value::string(clf.model().config().mean_pool ? "mean" : "cls"));
  j.set("predicted", Value::integer(a.predicted));
  j.set("target", Value::integer(a.target));
  j.set("probs", numbers(a.probs, "probs"));
  j.set("logits", numbers(a.logits, "logits"));
  j.set("layers", Value::integer(static_cast<int64_t>(a.cls_attention.size())));
  j.set("layer", Value::integer(static_cast<int64_t>(a.cls_attention.size()) - 1));
  j.set("heads", Value::integer(static_cast<int64_t>(a.cls_attention_heads.size())));
  j.set("attention", numbers(res.attention_last, "attention"));
  if (r.per_head) {
    Value h = Value::array();
    for (const auto& row : a.cls_attention_heads) h.push_back(numbers(row, "attention_heads"));
    j.set("attention_heads", std::move(h));
  }
  j.set("ig", numbers(a.integrated_gradients, "ig"));
  j.set("baseline", Value::string(models::baseline_name(a.baseline)));
  Value kept = Value::array();
  for (int64_t k : a.kept) kept.push_back(Value::integer(k));
  j.set("baseline_keeps", std::move(kept));
  j.set("rule", Value::string(models::rule_name(a.rule)));
  j.set("steps", Value::integer(a.steps));
  j.set("f_input", Value::number(a.f_input));
  j.set("f_baseline", Value::number(a.f_baseline));
  j.set("ig_sum", Value::number(a.ig_sum));
  j.set("completeness_error", Value::number(a.completeness_error));
  j.set("spearman", Value::number(rho));
  j.set("spearman_tokens", Value::integer(static_cast<int64_t>(att.size())));
  j.set("spearman_of",
        Value::string("last-layer [CLS] attention (mean over heads) vs |IG|, non-special tokens"));
  j.set("note_en", Value::string(kNoteEn));
  j.set("note_zh", Value::string(kNoteZh));
  return j;
}

}  // namespace attn::teach

// The explainer (issue 41, docs/explainer.md): GET /explain (the page, in Chinese first) and
// POST /v1/explain {model, input, layer, head, pad, causality, steps, baseline, per_head} -> the stages
// of teach::StagesModel, which the page draws (+ "padding"; + "causality" from the --classify model).
#include <attn/core/error.h>
#include <attn/viz/explain_page.h>

#include <algorithm>

#include "serve/impl.h"

namespace attn::serve::detail {

void Impl::load_explainers() {
  for (const std::string& name : options.explain) {
    const std::string key = teach::stage_model_key(name);
    bool have = false;
    for (const auto& [k, m] : explainers) have = have || k == key;
    if (have) continue;
    explainers.emplace_back(key, teach::StagesModel::load(key));
    log("loaded " + explainers.back().second->name() + " (explainer)");
  }
}

void Impl::explain_page(const http::Request& req, http::Response& res) {
  viz::ExplainPageOptions o;
  const std::string lang = req.get_param_value("lang");
  if (!lang.empty()) {
    if (lang != "zh" && lang != "en") throw bad_request("lang: expected zh or en", "lang", "invalid_lang");
    o.lang = lang;
  }
  if (loaded.load())
    for (const auto& [key, m] : explainers) o.models.emplace_back(key, m->name());
  res.set_content(viz::explain_page_html(json::Value(), o), "text/html; charset=utf-8");
}

void Impl::explain_stages(const http::Request& req, http::Response& res) {
  require_ready();
  if (explainers.empty())
    throw HttpError(404,
                    "this server has no explainer model; start it with --explain e5 (or smollm2, gemma3)",
                    "model", "model_not_found");
  const json::Value body = parse_body(req);
  const std::optional<std::string> input = opt_string(body, "input");
  if (!input || input->empty())
    throw bad_request("'input' is required: the sentence to explain", "input", "missing_input");
  if (static_cast<int64_t>(input->size()) > options.limits.max_input_bytes)
    throw bad_request("'input' has " + std::to_string(input->size()) + " bytes; the limit is " +
                          std::to_string(options.limits.max_input_bytes) + " (--max-input-bytes)",
                      "input", "input_too_large");
  const std::string model = opt_string(body, "model").value_or(explainers.front().first);
  teach::StagesModel* m = nullptr;
  std::string have;
  for (const auto& [key, sm] : explainers) {
    if (key == model || sm->name() == model) m = sm.get();
    have += (have.empty() ? "'" : ", '") + key + "'";
  }
  if (!m)
    throw HttpError(404, "the explainer has no model '" + excerpt(model) + "'; this server has " + have,
                    "model", "model_not_found");
  teach::StagesRequest r;
  r.text = *input;
  r.layer = opt_integer(body, "layer", 0, 1 << 20).value_or(0);
  r.head = opt_integer(body, "head", 0, 1 << 20).value_or(0);
  r.max_tokens = std::min<int64_t>(64, options.limits.max_attention_tokens);
  r.pad = opt_integer(body, "pad", 0, 1 << 20).value_or(0);
  if (r.pad > 0 && teach::stage_model_key(m->name()) != "e5")
    throw bad_request("pad: the padding view is for the encoder (e5); a decoder's mask is causal", "pad",
                      "invalid_request");
  // "Attention is not causality": the served classifier (--classify) on the same text.
  const bool causality = opt_bool(body, "causality").value_or(false);
  teach::CausalityRequest cr;
  cr.text = r.text;
  cr.steps = opt_integer(body, "steps", 1, 256).value_or(cr.steps);
  cr.baseline = opt_string(body, "baseline").value_or(cr.baseline);
  cr.per_head = opt_bool(body, "per_head").value_or(false);
  if (cr.baseline != "pad" && cr.baseline != "zeros")
    throw bad_request("baseline: expected pad or zeros", "baseline", "invalid_request");
  if (causality && !classifier)
    throw HttpError(404,
                    "this server has no classifier for the causality panel; start it with --classify FILE",
                    "causality", "model_not_found");
  json::Value stages;
  {
    GateHold hold(gate);  // the model's own buffers, between the other requests' compute
    try {
      stages = m->stages(r);
      if (causality) stages.set("causality", teach::causality_panel(*classifier, cr));
    } catch (const Error& e) {
      throw bad_request(e.what(), "input", "invalid_request");
    }
  }
  send_json(res, 200, json::dump(stages));
}

}  // namespace attn::serve::detail

// Attention exports of the served models: POST /v1/attention, GET /view (the viewer page with a
// text's attention) and GET / (the form that asks for it).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/text/vocab.h>
#include <attn/viz/attention.h>
#include <attn/viz/view.h>

#include <algorithm>

#include "serve/impl.h"

namespace attn::serve::detail {
namespace {

// The classifier's self-attention over [CLS] + the tokens it read, every query row captured
// (the weights of the attention kernel), as the export of one stack.
viz::Export classifier_export(models::TextClassifier& clf, const std::string& model_id,
                              const std::string& text) {
  const models::Classification c = clf.classify({text}, false, 1).front();
  std::vector<int64_t> ids{text::Vocab::kCls};
  for (std::size_t t = 1; t < c.tokens.size(); ++t) ids.push_back(clf.tokenizer().vocab().id(c.tokens[t]));
  const auto L = static_cast<int64_t>(ids.size());
  viz::SelfAttentionInput in{model_id, text, c.tokens, {}};
  NoGradGuard ng;
  models::EncoderClassifier& m = clf.model();
  const bool was_training = m.is_training();
  m.eval();
  models::ClassifierCall call;
  call.capture = true;
  for (int64_t i = 0; i < L; ++i) call.capture_rows.push_back(i);
  const models::ModelOutput out = m.forward_embeddings(m.embed_tokens(Tensor::from(ids, {1, L})), call);
  m.train(was_training);
  for (const Tensor& w : out.attention) in.layers.push_back(viz::layer_from_weights(w));  // [1, H, L, L]
  return viz::self_attention_export(std::move(in));
}

std::string too_long(int64_t n, int64_t limit) {
  return "the text has " + std::to_string(n) + " tokens; attention is captured for at most " +
         std::to_string(limit) + " (--max-attention-tokens)";
}

}  // namespace

viz::Export Impl::model_export(const std::string& model_id, const std::string& text,
                               const AttentionSpec& spec) {
  const Limits& l = options.limits;
  viz::Export e;
  if (!embed_id.empty() && (model_id == embed_id || model_id == options.embed || model_id == "minilm")) {
    bool cut = false;
    const std::vector<int32_t> ids = encoder->encode(text, &cut);
    if (cut || static_cast<int64_t>(ids.size()) > l.max_attention_tokens)
      throw bad_request(cut ? "the text is longer than " + std::to_string(encoder->max_seq_length()) +
                                  " tokens, the model's limit (max_seq_length)"
                            : too_long(static_cast<int64_t>(ids.size()), l.max_attention_tokens),
                        "input", "context_length_exceeded");
    const models::BertConfig& c = encoder->model().config();
    const auto n = static_cast<int64_t>(ids.size());
    check_attention_values(attention_values(spec, c.num_layers, c.num_heads, n, n), l.max_attention_values,
                           "");
    GateHold hold(gate);
    e = viz::export_bert_attention(*encoder, embed_id, text);
  } else if (!generate_id.empty() &&
             (model_id == generate_id || std::find(generate_aliases.begin(), generate_aliases.end(),
                                                   model_id) != generate_aliases.end())) {
    const std::vector<int32_t> ids = gen_model->encode_text(text);
    if (ids.empty()) throw bad_request("the text has no tokens", "input", "empty_input");
    if (static_cast<int64_t>(ids.size()) > l.max_attention_tokens)
      throw bad_request(too_long(static_cast<int64_t>(ids.size()), l.max_attention_tokens), "input",
                        "context_length_exceeded");
    if (static_cast<int64_t>(ids.size()) > gen_model->capacity())
      throw bad_request("the text has " + std::to_string(ids.size()) + " tokens; the context holds " +
                            std::to_string(gen_model->capacity()) + " (--context)",
                        "input", "context_length_exceeded");
    const auto n = static_cast<int64_t>(ids.size());
    check_attention_values(attention_values(spec, gen_model->layers(), gen_model->heads(), n, n),
                           l.max_attention_values, "");
    GateHold hold(gate);  // the model's own sequence, between the engine's steps
    e = gen_model->attention(ids, generate_id, text);
  } else if (!classify_id.empty() && (model_id == classify_id || model_id == options.classify)) {
    if (static_cast<int64_t>(text.size()) + 1 > l.max_attention_tokens * 4)
      throw bad_request(too_long(static_cast<int64_t>(text.size()), l.max_attention_tokens), "input",
                        "context_length_exceeded");
    models::Classification shown;
    int64_t n = 0;
    try {
      n = static_cast<int64_t>(classifier->input_ids(text, shown).size());
    } catch (const Error& e) {
      throw bad_request(std::string("the text cannot be classified: ") + e.what(), "input", "invalid_input");
    }
    const models::TransformerConfig& c = classifier->model().config();
    check_attention_values(attention_values(spec, c.encoder_layers, c.heads, n, n), l.max_attention_values,
                           "");
    GateHold hold(gate);
    e = classifier_export(*classifier, classify_id, text);
  } else {
    std::string have;
    for (const std::string* id : {&embed_id, &generate_id, &classify_id})
      if (!id->empty()) have += (have.empty() ? "'" : ", '") + *id + "'";
    throw HttpError(404, "the model '" + excerpt(model_id) + "' does not exist here; this server has " + have,
                    "model", "model_not_found");
  }
  return filter_export(std::move(e), spec, l.max_attention_values);
}

void Impl::attention(const http::Request& req, http::Response& res) {
  require_ready();
  const json::Value body = parse_body(req);
  const std::optional<std::string> model = opt_string(body, "model");
  const std::optional<std::string> input = opt_string(body, "input");
  if (!input)
    throw bad_request("'input' is required: the text whose attention to capture", "input", "missing_input");
  if (static_cast<int64_t>(input->size()) > options.limits.max_input_bytes)
    throw bad_request("'input' has " + std::to_string(input->size()) + " bytes; the limit is " +
                          std::to_string(options.limits.max_input_bytes) + " (--max-input-bytes)",
                      "input", "input_too_large");
  const std::string id = model                  ? *model
                         : !embed_id.empty()    ? embed_id
                         : !generate_id.empty() ? generate_id
                                                : classify_id;
  const viz::Export e = model_export(id, *input, opt_attention(body).value_or(AttentionSpec{}));
  send_json(res, 200, viz::export_json(e));
}

void Impl::view(const http::Request& req, http::Response& res) {
  require_ready();
  const std::string text = req.get_param_value("text");
  std::string model = req.get_param_value("model");
  if (model.empty()) model = !embed_id.empty() ? embed_id : !generate_id.empty() ? generate_id : classify_id;
  const std::size_t bad = json::find_invalid_utf8(text);
  if (bad != std::string::npos)
    throw bad_request("the text is not valid UTF-8 (at byte " + std::to_string(bad) + ")", "text",
                      "invalid_utf8");
  if (text.empty()) throw bad_request("give a text: GET /view?model=ID&text=...", "text", "missing_input");
  if (static_cast<int64_t>(text.size()) > options.limits.max_input_bytes)
    throw bad_request("the text is too long", "text", "input_too_large");
  const viz::Export e = model_export(model, text, AttentionSpec{});
  res.set_content(viz::page_html(e), "text/html; charset=utf-8");
}

void Impl::index_page(const http::Request&, http::Response& res) {
  std::vector<std::pair<std::string, std::string>> models;
  if (loaded.load()) {
    if (!embed_id.empty()) models.emplace_back(embed_id, "sentence encoder");
    if (!generate_id.empty()) models.emplace_back(generate_id, "decoder (causal attention)");
    if (!classify_id.empty()) models.emplace_back(classify_id, "classifier");
  }
  res.set_content(index_html(models), "text/html; charset=utf-8");
}

}  // namespace attn::serve::detail

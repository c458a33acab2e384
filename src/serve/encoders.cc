// POST /v1/embeddings and POST /v1/classify: inputs checked and tokenized on the connection's
// thread, then run by the dynamic batchers (src/serve/batcher.h).
#include <attn/core/error.h>
#include <attn/text/vocab.h>
#include <attn/viz/attention.h>

#include <algorithm>
#include <numeric>

#include "serve/impl.h"

namespace attn::serve::detail {
namespace {

constexpr int64_t kMaxAttentionInputs = 16;

std::string plural(int64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The "input" member: strings, or token-id sequences (for embeddings).
struct Inputs {
  std::vector<std::string> texts;
  std::vector<std::vector<int64_t>> ids;
  bool single = false;  // one string (not a list)
};

Inputs read_inputs(const json::Value& body, const Limits& l, bool allow_ids) {
  const json::Value* input = member(body, "input");
  if (!input)
    throw bad_request("'input' is required: a string or a list of strings", "input", "missing_input");
  Inputs in;
  const auto check_count = [&](std::size_t n) {
    if (n == 0)
      throw bad_request("'input' is an empty list; expected at least one input", "input", "empty_input");
    if (static_cast<int64_t>(n) > l.max_inputs)
      throw bad_request("too many inputs: " + std::to_string(n) + "; the limit is " +
                            std::to_string(l.max_inputs) + " per request (--max-inputs)",
                        "input", "too_many_inputs");
  };
  const auto check_text = [&](const std::string& s, std::size_t i) {
    if (static_cast<int64_t>(s.size()) > l.max_input_bytes)
      throw bad_request("input[" + std::to_string(i) + "] has " + std::to_string(s.size()) +
                            " bytes; the limit is " + std::to_string(l.max_input_bytes) +
                            " (--max-input-bytes)",
                        "input", "input_too_large");
  };
  const auto id_list = [&](const json::Value& v, std::size_t i) {
    std::vector<int64_t> ids;
    for (const json::Value& t : v.items()) {
      if (!t.is_integer())
        throw bad_request(
            "input[" + std::to_string(i) + "]: token ids must be integers; got " + json::type_name(t.type()),
            "input", "invalid_type");
      ids.push_back(t.as_int64());
    }
    return ids;
  };
  if (input->is_string()) {
    check_text(input->as_string(), 0);
    in.texts.push_back(input->as_string());
    in.single = true;
    return in;
  }
  if (!input->is_array())
    throw bad_request(
        std::string("'input' must be a string or a list; got ") + json::type_name(input->type()), "input",
        "invalid_type");
  const auto& items = input->items();
  check_count(items.size());
  if (items[0].is_string()) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        throw bad_request("input[" + std::to_string(i) + "] must be a string like input[0]; got " +
                              json::type_name(items[i].type()),
                          "input", "invalid_type");
      check_text(items[i].as_string(), i);
      in.texts.push_back(items[i].as_string());
    }
    return in;
  }
  if (!allow_ids)
    throw bad_request(
        std::string("'input' must hold strings; got a list of ") + json::type_name(items[0].type()), "input",
        "invalid_type");
  if (items[0].is_number()) {  // one token-id sequence
    in.ids.push_back(id_list(*input, 0));
    return in;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_array())
      throw bad_request("input[" + std::to_string(i) + "] must be a list of token ids like input[0]; got " +
                            json::type_name(items[i].type()),
                        "input", "invalid_type");
    in.ids.push_back(id_list(items[i], i));
  }
  return in;
}

void append_embedding(std::string& out, const std::vector<float>& v, bool b64) {
  if (b64) {
    out += '"';
    out += base64(v.data(), v.size() * sizeof(float));
    out += '"';
    return;
  }
  out += '[';
  for (std::size_t c = 0; c < v.size(); ++c) {
    if (c) out += ',';
    append_float(out, v[c]);
  }
  out += ']';
}

}  // namespace

void Impl::embeddings(const http::Request& req, http::Response& res) {
  require_ready();
  const json::Value body = parse_body(req);
  const Limits& l = options.limits;
  const std::string model = check_model(body, "embedding", embed_id, {options.embed, "minilm"});
  const std::string format = opt_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw bad_request("'encoding_format' must be \"float\" or \"base64\"; got \"" + excerpt(format) + "\"",
                      "encoding_format", "invalid_value");
  const models::SentenceEncoder& enc = *encoder;
  if (const auto d = opt_integer(body, "dimensions", 1, 1 << 20); d && *d != enc.dim())
    throw bad_request("'dimensions' must be " + std::to_string(enc.dim()) + " for " + embed_id +
                          " (it cannot shorten its vectors); got " + std::to_string(*d),
                      "dimensions", "invalid_value");
  const bool truncate = opt_bool(body, "truncate").value_or(false);
  const std::optional<AttentionSpec> att = opt_attention(body);
  const Inputs in = read_inputs(body, l, true);
  const int64_t limit = enc.max_seq_length();
  std::vector<EmbedInput> inputs;
  std::vector<int64_t> tokens;
  if (!in.texts.empty()) {
    for (std::size_t i = 0; i < in.texts.size(); ++i) {
      bool cut = false;
      EmbedInput e{enc.encode(in.texts[i], &cut)};
      if (cut && !truncate)
        throw bad_request(
            "input[" + std::to_string(i) + "] is longer than " + std::to_string(limit) +
                " tokens, the model's limit (max_seq_length); shorten it or send \"truncate\": true",
            "input", "context_length_exceeded");
      tokens.push_back(static_cast<int64_t>(e.ids.size()));
      inputs.push_back(std::move(e));
    }
  } else {
    if (att)
      throw bad_request("'attention' needs text inputs (strings), not token ids", "attention",
                        "invalid_input");
    // Token ids of the text, as the tokenizer gives them: [CLS] and [SEP] are added here.
    const std::vector<int32_t> empty = enc.encode("");
    const int64_t V = enc.model().config().vocab_size;
    for (std::size_t i = 0; i < in.ids.size(); ++i) {
      const std::vector<int64_t>& ids = in.ids[i];
      for (const int64_t id : ids)
        if (id < 0 || id >= V)
          throw bad_request("input[" + std::to_string(i) + "] holds token id " + std::to_string(id) +
                                "; expected 0 to " + std::to_string(V - 1) + " (the vocabulary)",
                            "input", "invalid_token");
      int64_t n = static_cast<int64_t>(ids.size());
      if (n + 2 > limit) {
        if (!truncate)
          throw bad_request(
              "input[" + std::to_string(i) + "] has " + plural(n, "token") + "; the model's limit is " +
                  std::to_string(limit - 2) +
                  " plus [CLS] and [SEP] (max_seq_length); shorten it or send \"truncate\": true",
              "input", "context_length_exceeded");
        n = limit - 2;
      }
      EmbedInput e;
      e.ids.push_back(empty.front());
      for (int64_t k = 0; k < n; ++k) e.ids.push_back(static_cast<int32_t>(ids[static_cast<std::size_t>(k)]));
      e.ids.push_back(empty.back());
      tokens.push_back(static_cast<int64_t>(e.ids.size()));
      inputs.push_back(std::move(e));
    }
  }
  if (att && static_cast<int64_t>(in.texts.size()) > kMaxAttentionInputs)
    throw bad_request("'attention' is answered for at most " + std::to_string(kMaxAttentionInputs) +
                          " inputs per request; got " + std::to_string(in.texts.size()),
                      "attention", "too_many_inputs");
  if (att) {  // the exports of all inputs, sized before any compute
    const models::BertConfig& c = enc.model().config();
    int64_t values = 0;
    for (const int64_t n : tokens) values += attention_values(*att, c.num_layers, c.num_heads, n, n);
    check_attention_values(values, l.max_attention_values, "");
  }
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  const std::vector<EmbedOutput> vectors = embed_batcher->run(std::move(inputs), tokens);
  metrics.tokens("embedding", total);
  std::vector<json::Value> exports;
  if (att) {
    int64_t budget = l.max_attention_values;
    for (const std::string& text : in.texts) {
      viz::Export e;
      {
        GateHold hold(gate);
        e = viz::export_bert_attention(enc, embed_id, text);
      }
      e = filter_export(std::move(e), *att, budget);
      for (const viz::AttentionSet& s : e.sets)
        for (const viz::Layer& layer : s.layers) budget -= layer.heads * layer.rows * layer.cols;
      exports.push_back(export_value(e));
    }
  }
  const bool b64 = format == "base64";
  std::string out;
  out.reserve(vectors.size() * (b64 ? 2100 : 4200) + 256);
  out += "{\"object\":\"list\",\"data\":[";
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    if (i) out += ',';
    out += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    append_embedding(out, vectors[i], b64);
    if (att) {
      out += ",\"attention\":";
      out += json::dump(exports[i]);
    }
    out += '}';
  }
  out += "],\"model\":";
  json::write_string(out, model);
  out += ",\"usage\":{\"prompt_tokens\":" + std::to_string(total) +
         ",\"total_tokens\":" + std::to_string(total) + "}}";
  send_json(res, 200, out);
}

void Impl::classify(const http::Request& req, http::Response& res) {
  require_ready();
  const json::Value body = parse_body(req);
  const Limits& l = options.limits;
  check_model(body, "classification", classify_id, {options.classify});
  const bool truncate = opt_bool(body, "truncate").value_or(false);
  const std::optional<AttentionSpec> att = opt_attention(body);
  const Inputs in = read_inputs(body, l, false);
  if (att && static_cast<int64_t>(in.texts.size()) > kMaxAttentionInputs)
    throw bad_request("'attention' is answered for at most " + std::to_string(kMaxAttentionInputs) +
                          " inputs per request; got " + std::to_string(in.texts.size()),
                      "attention", "too_many_inputs");
  if (att) {  // the exports of all inputs, sized from their tokens before any compute
    const models::TransformerConfig& c = classifier->model().config();
    int64_t values = 0;
    for (const std::string& t : in.texts) {
      models::Classification shown;
      int64_t n = 0;
      try {
        n = static_cast<int64_t>(classifier->input_ids(t, shown).size());
      } catch (const Error&) {
        continue;  // an empty text: classify reports it below
      }
      values += attention_values(*att, c.encoder_layers, c.heads, n, n);
    }
    check_attention_values(values, l.max_attention_values, "");
  }
  std::vector<ClassifyInput> inputs;
  std::vector<int64_t> tokens;
  const int64_t max_len = classifier->max_len();
  for (const std::string& t : in.texts) {
    inputs.push_back({t});
    tokens.push_back(std::min<int64_t>(static_cast<int64_t>(t.size()) + 1, max_len));
  }
  const std::vector<ClassifyOutput> results = classify_batcher->run(std::move(inputs), tokens);
  int64_t total = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].error.empty())
      throw bad_request("input[" + std::to_string(i) + "]: " + results[i].error, "input", "invalid_input");
    if (results[i].c.truncated && !truncate)
      throw bad_request("input[" + std::to_string(i) + "] has " + plural(results[i].c.text_tokens, "token") +
                            "; the model reads at most " + std::to_string(max_len - 1) +
                            " (max_len); shorten it or send \"truncate\": true",
                        "input", "context_length_exceeded");
    total += static_cast<int64_t>(results[i].c.tokens.size());
  }
  metrics.tokens("classify", total);
  const std::vector<std::string>& labels = classifier->labels();
  json::Value predictions = json::Value::array();
  for (const ClassifyOutput& r : results) {
    std::vector<std::size_t> order(labels.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return r.c.probs[a] > r.c.probs[b]; });
    json::Value list = json::Value::array();
    for (const std::size_t k : order) {
      json::Value item = json::Value::object();
      item.set("label", json::Value::string(labels[k]));
      item.set("score", json::Value::number(r.c.probs[k]));
      list.push_back(std::move(item));
    }
    predictions.push_back(std::move(list));
  }
  if (in.single) predictions = json::Value(predictions.items().front());
  if (!att) {
    send_json(res, 200, json::dump(predictions));
    return;
  }
  json::Value exports = json::Value::array();
  for (const std::string& text : in.texts)
    exports.push_back(export_value(model_export(classify_id, text, *att)));
  json::Value out = json::Value::object();
  out.set("predictions", std::move(predictions));
  out.set("attention", in.single ? json::Value(exports.items().front()) : std::move(exports));
  send_json(res, 200, json::dump(out));
}

}  // namespace attn::serve::detail

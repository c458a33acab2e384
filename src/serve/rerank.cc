// POST /v1/rerank (also /rerank): a query and documents scored by the cross-encoder (--rerank), in the
// shape of text-embeddings-inference, llama-server and Jina: {model, query, documents, top_n,
// return_documents} -> {results: [{index, relevance_score, document?: {text}}], usage}. Pairs are
// tokenized on the connection's thread and run by the dynamic batcher.
#include <attn/core/error.h>
#include <attn/viz/export.h>

#include <algorithm>
#include <numeric>

#include "serve/impl.h"

namespace attn::serve::detail {
namespace {

constexpr int64_t kMaxAttentionDocuments = 16;

std::string doc_name(std::size_t i) { return "documents[" + std::to_string(i) + "]"; }

// "documents": strings, or Jina's / Cohere's {"text": "..."} objects.
std::vector<std::string> read_documents(const json::Value& body, const Limits& l) {
  const json::Value* d = member(body, "documents");
  if (!d)
    throw bad_request("'documents' is required: a list of strings to rank against the query", "documents",
                      "missing_documents");
  if (!d->is_array())
    throw bad_request(std::string("'documents' must be a list of strings; got ") + json::type_name(d->type()),
                      "documents", "invalid_type");
  if (d->size() == 0)
    throw bad_request("'documents' is an empty list; expected at least one document", "documents",
                      "empty_documents");
  if (static_cast<int64_t>(d->size()) > l.max_inputs)
    throw bad_request("too many documents: " + std::to_string(d->size()) + "; the limit is " +
                          std::to_string(l.max_inputs) + " per request (--max-inputs)",
                      "documents", "too_many_documents");
  std::vector<std::string> docs;
  for (std::size_t i = 0; i < d->size(); ++i) {
    const json::Value& v = d->items()[i];
    const json::Value* text = v.is_object() ? v.find("text") : &v;
    if (text == nullptr || !text->is_string())
      throw bad_request(
          doc_name(i) + " must be a string (or {\"text\": string}); got " + json::type_name(v.type()),
          "documents", "invalid_type");
    if (static_cast<int64_t>(text->as_string().size()) > l.max_input_bytes)
      throw bad_request(doc_name(i) + " has " + std::to_string(text->as_string().size()) +
                            " bytes; the limit is " + std::to_string(l.max_input_bytes) +
                            " (--max-input-bytes)",
                        "documents", "input_too_large");
    docs.push_back(text->as_string());
  }
  return docs;
}

std::string read_query(const json::Value& body, const Limits& l) {
  const json::Value* q = member(body, "query");
  if (!q)
    throw bad_request("'query' is required: the text to rank the documents against", "query",
                      "missing_query");
  if (!q->is_string())
    throw bad_request(std::string("'query' must be a string; got ") + json::type_name(q->type()), "query",
                      "invalid_type");
  if (static_cast<int64_t>(q->as_string().size()) > l.max_input_bytes)
    throw bad_request("'query' has " + std::to_string(q->as_string().size()) + " bytes; the limit is " +
                          std::to_string(l.max_input_bytes) + " (--max-input-bytes)",
                      "query", "input_too_large");
  return q->as_string();
}

}  // namespace

void Impl::rerank(const http::Request& req, http::Response& res) {
  require_ready();
  const json::Value body = parse_body(req);
  const Limits& l = options.limits;
  const std::string model = check_model(body, "rerank", rerank_id, {options.rerank});
  const std::string query = read_query(body, l);
  const std::vector<std::string> docs = read_documents(body, l);
  const int64_t top_n =
      opt_integer(body, "top_n", 1, int64_t{1} << 40).value_or(static_cast<int64_t>(docs.size()));
  const bool return_documents = opt_bool(body, "return_documents").value_or(false);
  const bool raw = opt_bool(body, "raw_scores").value_or(false);
  const bool truncate = opt_bool(body, "truncate").value_or(false);
  const std::optional<AttentionSpec> att = opt_attention(body);
  const models::CrossEncoder& ce = *reranker;
  if (att && static_cast<int64_t>(docs.size()) > kMaxAttentionDocuments)
    throw bad_request("'attention' is answered for at most " + std::to_string(kMaxAttentionDocuments) +
                          " documents per request; got " + std::to_string(docs.size()),
                      "attention", "too_many_inputs");
  std::vector<models::PairEncoding> pairs;
  std::vector<int64_t> tokens;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    try {
      pairs.push_back(ce.encode_pair(query, docs[i]));
    } catch (const Error& e) {
      throw bad_request(doc_name(i) + ": " + e.what(), "documents", "invalid_input");
    }
    if (pairs.back().truncated && !truncate)
      throw bad_request("the query with " + doc_name(i) + " is longer than " +
                            std::to_string(ce.max_seq_length()) +
                            " tokens, the model's limit; shorten it or send \"truncate\": true",
                        "documents", "context_length_exceeded");
    tokens.push_back(static_cast<int64_t>(pairs.back().ids.size()));
  }
  if (att) {  // the exports, sized before any compute
    const models::BertConfig& c = ce.model().config();
    int64_t values = 0;
    for (const int64_t n : tokens) {
      if (n > l.max_attention_tokens)
        throw bad_request("a pair has " + std::to_string(n) + " tokens; attention is captured for at most " +
                              std::to_string(l.max_attention_tokens) + " (--max-attention-tokens)",
                          "attention", "context_length_exceeded");
      values += attention_values(*att, c.num_layers, c.num_heads, n, n);
    }
    check_attention_values(values, l.max_attention_values, "");
  }
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  std::vector<float> scores = rerank_batcher->run(std::move(pairs), tokens);
  metrics.tokens("rerank", total);
  if (!raw)
    for (float& s : scores) s = models::sigmoid(s);
  std::vector<std::size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  order.resize(std::min<std::size_t>(order.size(), static_cast<std::size_t>(top_n)));
  int64_t budget = l.max_attention_values;
  json::Value results = json::Value::array();
  for (const std::size_t i : order) {
    json::Value item = json::Value::object();
    item.set("index", json::Value::integer(static_cast<int64_t>(i)));
    item.set("relevance_score", json::Value::number(scores[i]));
    if (return_documents) item.set("document", json::Value::object({{"text", json::Value::string(docs[i])}}));
    if (att) {
      models::PairAttention a;
      {
        GateHold hold(gate);
        a = ce.attention(query, docs[i]);
      }
      viz::SelfAttentionInput in{rerank_id, query + "\n" + docs[i], a.tokens, {}};
      for (const Tensor& w : a.layers) in.layers.push_back(viz::layer_from_weights(w));
      viz::Export e = filter_export(viz::self_attention_export(std::move(in)), *att, budget);
      for (const viz::AttentionSet& s : e.sets)
        for (const viz::Layer& layer : s.layers) budget -= layer.heads * layer.rows * layer.cols;
      item.set("attention", export_value(e));
    }
    results.push_back(std::move(item));
  }
  json::Value out = json::Value::object();
  out.set("object", json::Value::string("list"));
  out.set("model", json::Value::string(model));
  out.set("results", std::move(results));
  out.set("usage", json::Value::object({{"prompt_tokens", json::Value::integer(total)},
                                        {"total_tokens", json::Value::integer(total)}}));
  send_json(res, 200, json::dump(out));
}

}  // namespace attn::serve::detail

namespace attn::serve::detail {

void load_reranker(Impl& s) {
  const Limits& l = s.options.limits;
  s.reranker = std::make_unique<models::CrossEncoder>(models::CrossEncoder::load(s.options.rerank));
  s.rerank_id = s.reranker->name();
  const models::CrossEncoder* ce = s.reranker.get();
  s.rerank_batcher = std::make_unique<Batcher<models::PairEncoding, float>>(
      [&s, ce](const std::vector<const models::PairEncoding*>& batch) {
        std::vector<models::PairEncoding> pairs;
        pairs.reserve(batch.size());
        for (const models::PairEncoding* p : batch) pairs.push_back(*p);
        GateHold hold(s.gate);
        return ce->logits(pairs, 256);
      },
      l.max_batch_tokens, l.max_wait_ms, l.max_queued_inputs,
      [&s](int64_t n, int64_t t) { s.metrics.batch("rerank", n, t); },
      [&s](int64_t d) { s.metrics.queue_depth("rerank", d); });
  s.log("loaded " + s.rerank_id + " (rerank, " + ce->architecture() + ")");
}

}  // namespace attn::serve::detail

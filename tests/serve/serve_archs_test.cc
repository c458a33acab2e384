// `attn serve` on the runtime's decoder for the architectures without a hand-written engine (the tiny
// random checkpoints of tests/models/data/decoders: qwen2, qwen3, phi3, gemma2, and a Mistral written as
// llama): a chat completion is the runtime's greedy continuation of the file's own chat template,
// streamed and not; /v1/attention gives every layer's exact weights; an unsupported architecture is
// refused naming the supported ones.
#include <attn/models/runtime/scheduler.h>
#include <attn/models/text_decoder.h>
#include <attn/models/text_stream.h>
#include <gtest/gtest.h>

#include "serve/serve_testing.h"
#include "testing/testing.h"

namespace attn::serve {
namespace {

using test::body_of;
using test::Running;

std::string decoder_file(const std::string& arch) {
  return ::attn::testing::source_path("tests/models/data/decoders/" + arch + "_q8_0.gguf");
}

// The text a client gets for ids: through models::TextStream (valid UTF-8, U+FFFD for ill-formed bytes).
std::string served_text(const models::TextDecoder& m, const std::vector<int32_t>& ids) {
  models::TextStream ts([&](const std::vector<int32_t>& v) { return m.decode(v); });
  std::string out;
  for (int32_t id : ids) out += ts.push(id);
  return out + ts.finish();
}

TEST(ServeArchs, EveryDecoderArchitectureChatsOnTheRuntime) {
  for (const std::string arch : {"qwen2", "qwen3", "phi3", "gemma2", "mistral"}) {
    SCOPED_TRACE(arch);
    ServerOptions o;
    o.generate = decoder_file(arch);
    o.limits.context = 128;
    Running s(o);
    const auto r = s.post("/v1/chat/completions",
                          R"({"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 6,
                              "temperature": 0})");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    // The library's own greedy continuation of the same rendered prompt.
    models::TextDecoderOptions to;
    to.max_context = 128;
    models::TextDecoder m = models::TextDecoder::load(decoder_file(arch), to);
    models::GenerateOptions g;
    g.max_new_tokens = 6;
    m.set_stop_tokens(g);
    const std::vector<int32_t> prompt = m.encode(m.chat_pieces({{"user", "hello world"}}));
    const auto out = models::runtime::generate_batch(m.decoder(), {prompt}, g);
    const json::Value b = body_of(r);
    EXPECT_EQ(b.at("model").as_string(), arch + "_q8_0");
    EXPECT_EQ(b.at("usage").at("prompt_tokens").as_int64(), static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(b.at("usage").at("completion_tokens").as_int64(), static_cast<int64_t>(out[0].ids.size()));
    EXPECT_EQ(b.at("choices").at(std::size_t{0}).at("message").at("content").as_string(),
              served_text(m, out[0].ids));
    // Streamed: the same text in chunks.
    const auto st = s.post("/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 6,
                               "temperature": 0, "stream": true})");
    ASSERT_TRUE(st);
    ASSERT_EQ(st->status, 200) << st->body;
    std::string text;
    for (std::size_t at = 0; (at = st->body.find("data: {", at)) != std::string::npos;) {
      const std::size_t end = st->body.find('\n', at);
      const json::Value c = json::parse(st->body.substr(at + 6, end - at - 6));
      const json::Value& d = c.at("choices").at(std::size_t{0}).at("delta");
      if (const json::Value* t = d.find("content")) text += t->as_string();
      at = end;
    }
    EXPECT_EQ(text, served_text(m, out[0].ids));
    // Exact attention of every layer.
    const auto a = s.post("/v1/attention", R"({"input": "hello"})");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->status, 200) << a->body;
    const json::Value ab = body_of(a);
    EXPECT_EQ(ab.at("attention").size(), static_cast<std::size_t>(m.config().layers))
        << a->body.substr(0, 300);
  }
}

// A server of `path` with these options against the library: its reply to "hello world" (temperature
// 0, 6 tokens) and the library's greedy continuation of the same rendered prompt, with the same
// quantization at load and KV cache type, as a client reads it.
void expect_reply_of_the_library(const std::string& path, const std::string& quantize, ops::KvDtype kv) {
  ServerOptions o;
  o.generate = path;
  o.generate_quantize = quantize;
  o.kv_cache_type = kv;
  o.limits.context = 128;
  Running s(o);
  const auto r = s.post("/v1/chat/completions",
                        R"({"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 6,
                            "temperature": 0})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  models::TextDecoderOptions to;
  to.max_context = 128;
  to.quantize = models::runtime::parse_load_quant(quantize);
  models::TextDecoder m = models::TextDecoder::load(path, to);
  models::GenerateOptions g;
  g.max_new_tokens = 6;
  m.set_stop_tokens(g);
  const auto out = models::runtime::generate_batch(
      m.decoder(), {m.encode(m.chat_pieces({{"user", "hello world"}}))}, g, {}, 0, kv);
  EXPECT_EQ(body_of(r).at("choices").at(std::size_t{0}).at("message").at("content").as_string(),
            served_text(m, out[0].ids));
}

TEST(ServeArchs, AQ8KvCacheServesTheTextOfTheSameCache) {
  // --kv-cache-type q8: the reply is the library's greedy continuation over a q8 cache (int8 rows;
  // a row's bits depend on its keys alone, not on the block size or the batch).
  expect_reply_of_the_library(decoder_file("qwen3"), "none", ops::KvDtype::q8);
}

TEST(ServeArchs, QuantizeAtLoadServesTheQuantizedDecodersText) {
  // --quantize q4_0 on an F32 file: the reply is the greedy continuation of the decoder quantized the
  // same way by the library; a bad value is refused at load, naming the choices.
  const std::string path = ::attn::testing::source_path("tests/models/data/decoders/qwen3.gguf");
  expect_reply_of_the_library(path, "q4_0", ops::KvDtype::f32);
  ServerOptions bad;
  bad.generate = path;
  bad.generate_quantize = "q4_k";
  Server server(bad);
  try {
    server.load_models();
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none, q8_0, q4_0"), std::string::npos) << e.what();
  }
}

TEST(ServeArchs, AnUnsupportedArchitectureIsRefusedByName) {
  ServerOptions o;
  o.generate = ::attn::testing::source_path("tests/io/data/gguf_good.gguf");
  Server server(o);
  try {
    server.load_models();
    FAIL() << "loaded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("general.architecture"), std::string::npos) << m;
    EXPECT_NE(m.find("qwen2, qwen3, phi3, gemma2, gemma3"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace attn::serve

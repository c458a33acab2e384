// The runtime's decoder (what every command loads: models/text_decoder.h) on small GGUF files written
// here: a valid one-layer llama runs; every kind of bad file (truncated, unknown architecture, missing
// keys, inconsistent sizes, missing / unexpected / mis-shaped tensors, a non-finite weight, an
// unsupported chat template) and a prompt longer than the context give a clear attn::Error; so do the
// bad variants of the tiny Gemma 3 file (python/reference/make_gemma3_test_files.py: a wrong shape, an
// unsupported type, a window longer than the context, a missing tensor, every truncation).
#include <attn/io/gguf.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/text_decoder.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "models/tiny_gguf.h"
#include "testing/testing.h"

namespace attn::models {
namespace {

using namespace tiny_gguf;

class DecoderBad : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) { return scratch_.write(name, bytes); }
  ScratchDir scratch_;
};

TEST_F(DecoderBad, ScratchFilesArePerProcessAndRemoved) {
  std::filesystem::path dir, file;
  {
    ScratchDir a, b;
    EXPECT_NE(a.path(), b.path());
    file = a.write("x", "GGUF");
    dir = a.path();
    EXPECT_NE(file.string().find("attn_llama_" + std::to_string(::getpid()) + "_"), std::string::npos)
        << file;
    EXPECT_TRUE(std::filesystem::is_regular_file(file));
  }
  EXPECT_FALSE(std::filesystem::exists(file)) << file;
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

TEST_F(DecoderBad, TinyModelRunsAndStepsEqualOnePass) {
  TextDecoder m = TextDecoder::load(write("ok", tiny().bytes()));
  EXPECT_EQ(m.config().head_dim, 16);
  EXPECT_EQ(m.capacity(), 8);
  runtime::SingleSequence s(m.decoder());
  const std::vector<int32_t> ids = {0, 3, 5};
  const std::span<const float> a = s.prefill(ids);
  ASSERT_EQ(a.size(), 6u);
  for (float v : a) EXPECT_TRUE(std::isfinite(v));
  const std::vector<float> all(a.begin(), a.end());
  s.clear();
  s.prefill(std::vector<int32_t>{0, 3});
  const std::span<const float> b = s.step(5);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(b[i], all[i], 1e-5);
}

TEST_F(DecoderBad, PromptLongerThanContextAndTokenOutOfRange) {
  TextDecoder m = TextDecoder::load(write("ctx", tiny().bytes()));
  runtime::SingleSequence s(m.decoder());
  EXPECT_ERROR_CONTAINS(s.prefill(std::vector<int32_t>(9, 1)), {"9 tokens after 0", "holds 8 positions"});
  s.prefill(std::vector<int32_t>(8, 1));
  EXPECT_ERROR_CONTAINS(s.step(1), {"1 tokens after 8", "holds 8 positions"});
  s.clear();
  EXPECT_ERROR_CONTAINS(s.prefill(std::vector<int32_t>{0, 6}), {"token id 6 at 1", "[0, 6)"});
  EXPECT_EQ(s.position(), 0);
  EXPECT_ERROR_CONTAINS(s.prefill(std::vector<int32_t>{}), {"0 tokens after 0"});
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("ctx", tiny().bytes()), {.max_context = -1}),
                        {"max_context", ">= 0"});
}

TEST_F(DecoderBad, TruncatedFileAndCorruptMagic) {
  const std::string b = tiny().bytes();
  for (std::size_t cut : {std::size_t{3}, std::size_t{40}, b.size() / 2, b.size() - 4})
    EXPECT_THROW(TextDecoder::load(write("trunc", b.substr(0, cut))), Error) << "cut at " << cut;
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("trunc", b.substr(0, b.size() - 4))),
                        {"attn_llama_trunc.gguf"});
  std::string m = b;
  m[0] = 'X';
  EXPECT_THROW(TextDecoder::load(write("magic", m)), Error);
}

TEST_F(DecoderBad, UnknownArchitectureAndKeys) {
  TinyFile f = tiny();
  f.set("general.architecture", std::string("gpt2"));
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("arch", f.bytes())), {"gpt2", "llama", "qwen2", "gemma3"});
  f.erase("general.architecture");
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("arch", f.bytes())), {"general.architecture"});
  f = tiny();
  f.erase("llama.block_count");
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("keys", f.bytes())), {"llama.block_count"});
  f = tiny();
  f.set("llama.attention.head_count", 3u);
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("keys", f.bytes())),
                        {"llama.embedding_length 32 is not a multiple of llama.attention.head_count 3"});
  f = tiny();
  f.set("llama.attention.head_count_kv", 0u);
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("keys", f.bytes())), {"head_count_kv"});
  f = tiny();
  f.set("llama.rope.freq_base", -1.0f);
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("keys", f.bytes())), {"freq_base", "> 0"});
}

TEST_F(DecoderBad, TensorsMissingOrMisshaped) {
  TinyFile f = tiny();
  std::erase_if(f.tensors, [](const TinyTensor& t) { return t.name == "blk.0.ffn_up.weight"; });
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("tensors", f.bytes())), {"blk.0.ffn_up.weight"});
  f = tiny();
  f.tensor("blk.0.attn_k.weight")->shape = {32, 32};
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("tensors", f.bytes())), {"blk.0.attn_k.weight", "32"});
  f = tiny();
  f.tensors.push_back({"blk.0.extra.weight", {8}});
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("tensors", f.bytes())),
                        {"blk.0.extra.weight: unexpected tensor"});
  f = tiny();
  f.tensors.push_back({"output.weight", {6, 32}});  // a separate output matrix is fine
  EXPECT_NO_THROW(TextDecoder::load(write("tensors", f.bytes())));
  // The check lists every problem at once.
  f = tiny();
  f.tensor("blk.0.ffn_down.weight")->shape = {64, 32};
  std::erase_if(f.tensors, [](const TinyTensor& t) { return t.name == "output_norm.weight"; });
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("tensors", f.bytes())),
                        {"output_norm.weight: missing", "blk.0.ffn_down.weight: expected shape"});
}

TEST_F(DecoderBad, ChatTemplates) {
  TinyFile f = tiny();
  TextDecoder ok = TextDecoder::load(write("chat", f.bytes()));
  // Rendered as transformers renders it: this template writes no assistant prompt.
  EXPECT_EQ(text::join_pieces(ok.chat_pieces({{"user", "x"}}, true)), "<|im_start|>user\nx<|im_end|>\n");
  f.set("tokenizer.chat_template",
        std::string("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
                    "{% if add_generation_prompt %}<a>{% endif %}"));
  TextDecoder other = TextDecoder::load(write("chat", f.bytes()));
  const text::TextPieces pieces = other.chat_pieces({{"user", "<a>"}}, false);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_TRUE(pieces[0].allow_special);
  EXPECT_EQ(pieces[1].text, "<a>");
  EXPECT_FALSE(pieces[1].allow_special);
  f.set("tokenizer.chat_template", std::string("ok\n{% include 'other.jinja' %}"));
  TextDecoder unsupported = TextDecoder::load(write("chat", f.bytes()));
  EXPECT_ERROR_CONTAINS(unsupported.chat_pieces({{"user", "x"}}, true), {"line 2", "include"});
  f.erase("tokenizer.chat_template");
  TextDecoder none = TextDecoder::load(write("chat", f.bytes()));
  EXPECT_ERROR_CONTAINS(none.chat_pieces({{"user", "x"}}, true), {"no chat template"});
}

TEST_F(DecoderBad, HugeSizesFailFastWithoutAllocating) {
  TinyFile f = tiny();
  f.set("llama.block_count", 0xFFFFFFFFu);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("blocks", f.bytes())),
                        {"llama.block_count is 4294967295", "11 tensors"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  f = tiny();
  f.set("llama.context_length", 0x7FFFFFFFu);
  t0 = std::chrono::steady_clock::now();
  TextDecoder big = TextDecoder::load(write("context", f.bytes()), {.max_context = 64});
  EXPECT_EQ(big.capacity(), 64);  // the cache is made per request, sized by what it needs
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST_F(DecoderBad, NanNormWeightIsNamedAtLoad) {
  std::string b = tiny().bytes();
  const float one = 1.0f, nan = std::numeric_limits<float>::quiet_NaN();
  std::string ones;
  for (int i = 0; i < 32; ++i) ones.append(reinterpret_cast<const char*>(&one), 4);
  const std::size_t at = b.find(ones);
  ASSERT_NE(at, std::string::npos);
  std::memcpy(b.data() + at + 5 * 4, &nan, 4);
  EXPECT_ERROR_CONTAINS(TextDecoder::load(write("nan", b)), {"norm.weight", "non-finite", "[5]", "nan"});
}

// ---- the tiny Gemma 3 file's bad variants ----

std::string gemma_tiny(const std::string& name = "gemma3_tiny.gguf") {
  return testing::source_path("tests/models/data/" + name);
}

TEST_F(DecoderBad, Gemma3BadFilesNameTheTensorOrKey) {
  EXPECT_ERROR_CONTAINS(TextDecoder::load(gemma_tiny("gemma3_tiny_bad_shape.gguf")),
                        {"blk.1.attn_q.weight", "[64, 64]", "[32, 64]"});
  EXPECT_ERROR_CONTAINS(TextDecoder::load(gemma_tiny("gemma3_tiny_bad_type.gguf")),
                        {"blk.0.ffn_down.weight", "Q2_K", "not supported"});
  EXPECT_ERROR_CONTAINS(TextDecoder::load(gemma_tiny("gemma3_tiny_bad_window.gguf")),
                        {"gemma3.attention.sliding_window", "128", "64"});
  EXPECT_ERROR_CONTAINS(TextDecoder::load(gemma_tiny("gemma3_tiny_missing.gguf")),
                        {"blk.2.post_ffw_norm.weight: missing"});
  EXPECT_ERROR_CONTAINS(TextDecoder::load(testing::source_path("tests/io/data/gguf_bad_magic.gguf")),
                        {"GGUF"});
  // truncated: every 7919th prefix
  const std::string bytes = testing::read_text(gemma_tiny());
  for (std::size_t n = 0; n < bytes.size(); n += 7919)
    EXPECT_THROW(TextDecoder::load(write("gemma_cut", bytes.substr(0, n))), Error)
        << "prefix of " << n << " bytes";
}

TEST_F(DecoderBad, Gemma3ContextLimitAndTokenRange) {
  TextDecoder m = TextDecoder::load(gemma_tiny(), {.max_context = 8});
  EXPECT_EQ(m.capacity(), 8);
  runtime::SingleSequence s(m.decoder());
  EXPECT_ERROR_CONTAINS(s.prefill(std::vector<int32_t>(9, 5)), {"9 tokens after 0", "holds 8 positions"});
  EXPECT_ERROR_CONTAINS(s.step(100000), {"token id 100000", "out of range"});
  EXPECT_EQ(s.position(), 0);
}

}  // namespace
}  // namespace attn::models

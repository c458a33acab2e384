// LlamaModel on small GGUF files written here: a valid one-layer model runs; every kind of bad file
// (truncated, unknown architecture, missing keys, inconsistent sizes, missing / unexpected / mis-shaped
// tensors, an unknown chat template) and a prompt longer than the context give a clear attn::Error.
#include <attn/io/gguf.h>
#include <attn/models/llama.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <variant>

#include "models/tiny_gguf.h"
#include "testing/testing.h"

namespace attn::models {
namespace {

using namespace tiny_gguf;

class LlamaBad : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) { return scratch_.write(name, bytes); }
  ScratchDir scratch_;
};

TEST_F(LlamaBad, ScratchFilesArePerProcessAndRemoved) {
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

TEST_F(LlamaBad, TinyModelRuns) {
  LlamaModel m = LlamaModel::load(write("ok", tiny().bytes()));
  EXPECT_EQ(m.config().head_dim, 16);
  EXPECT_EQ(m.capacity(), 8);
  const std::vector<int32_t> ids = {0, 3, 5};
  const std::span<const float> a = m.prefill(ids);
  ASSERT_EQ(a.size(), 6u);
  for (float v : a) EXPECT_TRUE(std::isfinite(v));
  const std::vector<float> all(a.begin(), a.end());
  m.clear();
  m.prefill(std::vector<int32_t>{0, 3});
  const std::span<const float> b = m.step(5);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(b[i], all[i], 1e-5);
}

TEST_F(LlamaBad, PromptLongerThanContext) {
  LlamaModel m = LlamaModel::load(write("ctx", tiny().bytes()));
  EXPECT_ERROR_CONTAINS(m.prefill(std::vector<int32_t>(9, 1)), {"9 tokens", "exceeds the context of 8"});
  m.prefill(std::vector<int32_t>(8, 1));
  EXPECT_ERROR_CONTAINS(m.step(1), {"9 tokens (8 cached + 1 new)", "context of 8"});
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("ctx", tiny().bytes()), {.max_context = -1}),
                        {"max_context", ">= 0"});
}

TEST_F(LlamaBad, TruncatedFile) {
  const std::string b = tiny().bytes();
  for (std::size_t cut : {std::size_t{3}, std::size_t{40}, b.size() / 2, b.size() - 4}) {
    const std::string path = write("trunc", b.substr(0, cut));
    EXPECT_THROW(LlamaModel::load(path), Error) << "cut at " << cut;
  }
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("trunc", b.substr(0, b.size() - 4))),
                        {"attn_llama_trunc.gguf"});
}

TEST_F(LlamaBad, CorruptMagic) {
  std::string b = tiny().bytes();
  b[0] = 'X';
  EXPECT_THROW(LlamaModel::load(write("magic", b)), Error);
}

TEST_F(LlamaBad, UnknownArchitecture) {
  TinyFile f = tiny();
  f.set("general.architecture", std::string("gpt2"));
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("arch", f.bytes())),
                        {"unsupported architecture 'gpt2'", "llama"});
  f.erase("general.architecture");
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("arch", f.bytes())), {"general.architecture"});
}

TEST_F(LlamaBad, MissingOrInconsistentKeys) {
  TinyFile f = tiny();
  f.erase("llama.block_count");
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("keys", f.bytes())),
                        {"missing metadata key 'llama.block_count'"});
  f = tiny();
  f.set("llama.attention.head_count", 3u);
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("keys", f.bytes())), {"embedding length 32", "head_count 3"});
  f = tiny();
  f.set("llama.attention.head_count_kv", 0u);
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("keys", f.bytes())), {"head_count_kv", "> 0"});
  f = tiny();
  f.set("llama.rope.freq_base", -1.0f);
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("keys", f.bytes())), {"freq_base", "> 0"});
}

TEST_F(LlamaBad, TensorsMissingUnexpectedMisshaped) {
  TinyFile f = tiny();
  std::erase_if(f.tensors, [](const TinyTensor& t) { return t.name == "blk.0.ffn_up.weight"; });
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("tensors", f.bytes())), {"1 missing: blk.0.ffn_up.weight"});
  f = tiny();
  f.tensor("blk.0.attn_k.weight")->shape = {32, 32};
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("tensors", f.bytes())),
                        {"mis-shaped", "blk.0.attn_k.weight: expected [16, 32], got [32, 32]"});
  f = tiny();
  f.tensors.push_back({"rope_freqs.weight", {8}});
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("tensors", f.bytes())), {"1 unexpected: rope_freqs.weight"});
  f = tiny();
  f.tensors.push_back({"output.weight", {6, 32}});  // a separate output matrix is fine
  EXPECT_NO_THROW(LlamaModel::load(write("tensors", f.bytes())));
  // The check lists all problems at once.
  f = tiny();
  f.tensor("blk.0.ffn_down.weight")->shape = {64, 32};
  std::erase_if(f.tensors, [](const TinyTensor& t) { return t.name == "output_norm.weight"; });
  const LlamaTensorCheck chk = check_llama_tensors(io::GgufFile::open(write("tensors", f.bytes())),
                                                   LlamaModel::load(write("ok2", tiny().bytes())).config());
  EXPECT_EQ(chk.missing, std::vector<std::string>{"output_norm.weight"});
  ASSERT_EQ(chk.misshaped.size(), 1u);
  EXPECT_FALSE(chk.ok());
}

TEST_F(LlamaBad, TokenOutOfRange) {
  LlamaModel m = LlamaModel::load(write("tok", tiny().bytes()));
  EXPECT_ERROR_CONTAINS(m.prefill(std::vector<int32_t>{0, 6}), {"token id 6 at 1", "[0, 6)"});
  EXPECT_ERROR_CONTAINS(m.prefill(std::vector<int32_t>{}), {"no tokens"});
  EXPECT_EQ(m.position(), 0);
}

TEST_F(LlamaBad, ChatTemplates) {
  TinyFile f = tiny();
  LlamaModel ok = LlamaModel::load(write("chat", f.bytes()));
  // The file's template is rendered as transformers renders it: this one writes no assistant prompt,
  // so add_generation_prompt adds none.
  EXPECT_EQ(ok.apply_chat_template({{"user", "x"}}, true), "<|im_start|>user\nx<|im_end|>\n");
  // Any template the engine supports, not only ChatML; the message text is never special.
  f.set("tokenizer.chat_template",
        std::string("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
                    "{% if add_generation_prompt %}<a>{% endif %}"));
  LlamaModel other = LlamaModel::load(write("chat", f.bytes()));
  EXPECT_EQ(other.apply_chat_template({{"user", "x"}}, true), "[INST] x [/INST]<a>");
  const text::TextPieces pieces = other.chat_template_pieces({{"user", "<a>"}}, false);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_TRUE(pieces[0].allow_special);
  EXPECT_EQ(pieces[1].text, "<a>");
  EXPECT_FALSE(pieces[1].allow_special);
  // A construct the engine does not support: an error naming the file's template and the line.
  f.set("tokenizer.chat_template", std::string("ok\n{% include 'other.jinja' %}"));
  LlamaModel unsupported = LlamaModel::load(write("chat", f.bytes()));
  EXPECT_ERROR_CONTAINS(unsupported.apply_chat_template({{"user", "x"}}, true),
                        {"tokenizer.chat_template' line 2", "include"});
  f.erase("tokenizer.chat_template");
  LlamaModel none = LlamaModel::load(write("chat", f.bytes()));
  EXPECT_ERROR_CONTAINS(none.apply_chat_template({{"user", "x"}}, true), {"no tokenizer.chat_template"});
}

// ---- issue 18, items 2 and 3 -------------------------------------------------------------------

TEST_F(LlamaBad, HugeBlockCountFailsFastWithoutAllocating) {
  TinyFile f = tiny();
  f.set("llama.block_count", 0xFFFFFFFFu);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("blocks", f.bytes())),
                        {"llama.block_count is 4294967295", "tensors", "9 tensors each"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST_F(LlamaBad, HugeContextLengthFailsFastWithoutAllocating) {
  TinyFile f = tiny();
  f.set("llama.context_length", 0x7FFFFFFFu);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("context", f.bytes())),
                        {"KV cache of 2147483647 tokens", "llama.context_length 2147483647", "max_context"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  LlamaOptions small;
  small.max_context = 64;  // an explicit capacity loads the same file
  EXPECT_NO_THROW(LlamaModel::load(write("context_small", f.bytes()), small));
}

TEST_F(LlamaBad, NanNormWeightIsNamedAtLoad) {
  std::string b = tiny().bytes();
  // Norm weights are all 1.0f: overwrite the 6th value of the first norm in the data section.
  const float one = 1.0f, nan = std::numeric_limits<float>::quiet_NaN();
  std::string ones;
  for (int i = 0; i < 32; ++i) ones.append(reinterpret_cast<const char*>(&one), 4);
  const std::size_t at = b.find(ones);
  ASSERT_NE(at, std::string::npos);
  std::memcpy(b.data() + at + 5 * 4, &nan, 4);
  EXPECT_ERROR_CONTAINS(LlamaModel::load(write("nan", b)), {"norm.weight", "non-finite", "[5]", "nan"});
}

}  // namespace
}  // namespace attn::models

// The decoder tokenizers against Hugging Face `tokenizers`, id for id, on small but faithful
// tokenizer.json files of each family (GPT-2, SmolLM, Llama 3, Qwen2, Llama 2, Mistral, Phi-3), and the
// same vocabularies as GGUF metadata through text::load_tokenizer(GgufFile).
// Fixtures and files: python/reference/make_decoder_tokenizers.py (tests/text/data/decoder_tok/).
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/decoder_tokenizer.h>

#include <string>
#include <vector>

#include "testing/fixture_values.h"
#include "testing/testing.h"

namespace attn::text {
namespace {

std::string data_path(const std::string& name) {
  return testing::source_path("tests/text/data/decoder_tok/" + name);
}

const json::Value& fixtures() {
  static const json::Value fx = json::parse(testing::read_text(data_path("decoder_tok_ids.json")));
  return fx;
}

const std::vector<std::string> kFamilies = {"gpt2", "smollm", "llama3", "qwen2", "llama2", "mistral", "phi3"};

TEST(DecoderTokenizer, FixturesCoverTheRequiredCases) {
  for (const std::string& fam : kFamilies) {
    const json::Value& cases = fixtures().at("families").at(fam).at("cases");
    bool chinese = false, emoji = false, code = false, runs = false, digits = false, contraction = false,
         special = false;
    for (const json::Value& c : cases.items()) {
      const std::string& t = c.at("text").as_string();
      chinese |= t.find("注意力") != std::string::npos;
      emoji |= t.find("\xF0\x9F\x98\x80") != std::string::npos;
      code |= t.find("return") != std::string::npos;
      runs |= t.find("    ") != std::string::npos && t.find("\n\n") != std::string::npos;
      digits |= t.find("1234567890") != std::string::npos;
      contraction |= t.find("YOU'LL") != std::string::npos;
      special |= t.find("<|") != std::string::npos || t.find("<s>") != std::string::npos;
    }
    EXPECT_TRUE(chinese && emoji && code && runs && digits && contraction && special) << fam;
    EXPECT_GE(cases.size(), 29u) << fam;
  }
}

// tokenizer.json: every case's ids and decoded text as `tokenizers` gives them.
TEST(DecoderTokenizer, TokenizerJsonIdsMatchHuggingFace) {
  for (const std::string& fam : kFamilies) {
    SCOPED_TRACE(fam);
    const auto tok = load_tokenizer(data_path(fam + "/tokenizer.json"));
    const json::Value& f = fixtures().at("families").at(fam);
    EXPECT_EQ(tok->vocab_size(), f.at("vocab_size").as_int64());
    EXPECT_EQ(tok->eos_id(), f.at("eos_id").as_int64());
    if (f.at("bos_id").as_int64() >= 0) EXPECT_EQ(tok->bos_id(), f.at("bos_id").as_int64());
    for (const json::Value& c : f.at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
      const std::vector<int32_t> ids = tok->encode(text, tok->add_bos(), true);
      EXPECT_EQ(ids, testing::ids_of(c.at("ids")));
      EXPECT_EQ(tok->decode(testing::ids_of(c.at("ids")), true), c.at("decoded").as_string());
    }
  }
}

// The same vocabulary as GGUF metadata gives the same ids (llama.cpp's rules), except where the two
// libraries differ by design: Phi-3's rstrip flags, which GGUF does not carry, and Mistral's Metaspace
// prepend_scheme "first" (llama.cpp prefixes a space after every special token, as Llama 2's legacy
// normalizer does: its GGUF is checked against the llama2 ids, the same vocabulary).
TEST(DecoderTokenizer, GgufIdsMatchTokenizerJson) {
  for (const std::string& fam : kFamilies) {
    if (fam == "mistral") continue;
    SCOPED_TRACE(fam);
    const auto tok = load_tokenizer(io::GgufFile::open(data_path(fam + "/tokenizer.gguf")));
    EXPECT_EQ(tok->spm() != nullptr, fam == "llama2" || fam == "phi3");
    const json::Value& f = fixtures().at("families").at(fam);
    EXPECT_EQ(tok->vocab_size(), f.at("vocab_size").as_int64());
    EXPECT_EQ(tok->eos_id(), f.at("eos_id").as_int64());
    for (const json::Value& c : f.at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      if (fam == "phi3" && text.find("<|") != std::string::npos) continue;
      SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
      EXPECT_EQ(tok->encode(text, tok->add_bos(), true), testing::ids_of(c.at("ids")));
    }
  }
}

TEST(DecoderTokenizer, MistralGgufIsLlama2Legacy) {
  const auto tok = load_tokenizer(io::GgufFile::open(data_path("mistral/tokenizer.gguf")));
  for (const json::Value& c : fixtures().at("families").at("llama2").at("cases").items()) {
    SCOPED_TRACE("text: \"" + testing::printable(c.at("text").as_string()) + "\"");
    EXPECT_EQ(tok->encode(c.at("text").as_string(), true, true), testing::ids_of(c.at("ids")));
  }
}

}  // namespace
}  // namespace attn::text

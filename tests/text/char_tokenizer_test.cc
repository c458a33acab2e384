// Chinese character tokenizer: splitting rules on crafted text, decode rules,
// and round trips on the first 500 real reviews and 500 real Chinese
// sentences of the Tatoeba pairs.
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <attn/text/tokenizer.h>
#include <attn/text/utf8.h>
#include <gtest/gtest.h>

#include "text/text_test_util.h"

namespace attn::text {
namespace {

using Tokens = std::vector<std::string>;

struct SplitCase {
  const char* name;
  std::string in;
  bool group, keep_spaces;
  Tokens expected;
};

class CharSplit : public ::testing::TestWithParam<SplitCase> {};

TEST_P(CharSplit, Tokens) {
  const SplitCase& c = GetParam();
  CharTokenizerOptions o;
  o.group_ascii_alnum = c.group;
  o.keep_spaces = c.keep_spaces;
  EXPECT_EQ(char_tokenize(c.in, o), c.expected);
}

const std::string kSp(kSpaceToken);

// 很好 = E5 BE 88 E5 A5 BD; ！= EF BC 81; 。= E3 80 82; あ = E3 81 82; 𠀀 = F0 A0 80 80.
INSTANTIATE_TEST_SUITE_P(
    Cases, CharSplit,
    ::testing::Values(
        SplitCase{"cjk_each", "\xE5\xBE\x88\xE5\xA5\xBD", false, false, {"\xE5\xBE\x88", "\xE5\xA5\xBD"}},
        SplitCase{"ascii_split", "ok12", false, false, {"o", "k", "1", "2"}},
        SplitCase{"ascii_grouped",
                  "ok12\xE5\xA5\xBD"
                  "ab",
                  true,
                  false,
                  {"ok12", "\xE5\xA5\xBD", "ab"}},
        SplitCase{"punct_each",
                  "\xE5\xA5\xBD\xEF\xBC\x81\xEF\xBC\x81...",
                  true,
                  false,
                  {"\xE5\xA5\xBD", "\xEF\xBC\x81", "\xEF\xBC\x81", ".", ".", "."}},
        SplitCase{"www", "www.x.com", true, false, {"www", ".", "x", ".", "com"}},
        SplitCase{"spaces_dropped", "a b  \xE5\xA5\xBD", true, false, {"a", "b", "\xE5\xA5\xBD"}},
        SplitCase{"spaces_kept", " a b  \xE5\xA5\xBD ", true, true, {"a", kSp, "b", kSp, "\xE5\xA5\xBD"}},
        SplitCase{"other_scripts",
                  "\xE3\x81\x82\xC3\xA9"
                  "e\xF0\xA0\x80\x80",
                  true,
                  false,
                  {"\xE3\x81\x82", "\xC3\xA9", "e", "\xF0\xA0\x80\x80"}},
        SplitCase{"empty", "", true, true, {}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(CharTokenizer, EncodeDecodeAndUnknown) {
  CharTokenizerOptions o;
  o.group_ascii_alnum = true;
  const CharTokenizer tok = CharTokenizer::train({"hello world \xE5\xA5\xBD", "hello"}, o);
  // Tokens: hello x2, world, 好 -> ids 6.. ; unknown "abc" -> [UNK].
  EXPECT_EQ(tok.vocab().token(6), "hello");
  const std::vector<int32_t> ids = tok.encode("hello abc \xE5\xA5\xBD");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], Vocab::kUnk);
  // Without kept spaces, decode re-inserts a space only between ASCII runs.
  EXPECT_EQ(tok.decode(tok.encode("hello world \xE5\xA5\xBD")), "hello world\xE5\xA5\xBD");
  EXPECT_EQ(tok.decode(ids), "hello[UNK]\xE5\xA5\xBD");
  // Special ids other than [UNK] are skipped.
  const std::vector<int32_t> with_specials = {Vocab::kCls, ids[0], Vocab::kSep, Vocab::kPad};
  EXPECT_EQ(tok.decode(with_specials), "hello");
  EXPECT_THROW(tok.decode(std::vector<int32_t>{999}), Error);
  EXPECT_THROW(tok.encode("bad \xC0\xAF"), Error);
}

TEST(CharTokenizer, EmptyVocabularyIsAnError) {
  EXPECT_THROW(CharTokenizer::train({"", "   "}, {}), Error);
  EXPECT_THROW(CharTokenizer{Vocab{}}, Error);
}

TEST(CharTokenizer, VocabMinFreqAndMaxSize) {
  // 好 x3, 不 x2, 错 x1.
  const std::vector<std::string> texts = {"\xE5\xA5\xBD\xE4\xB8\x8D", "\xE5\xA5\xBD\xE4\xB8\x8D\xE9\x94\x99",
                                          "\xE5\xA5\xBD"};
  EXPECT_EQ(CharTokenizer::train(texts, {}, {1, 0}).vocab().size(), 9);
  EXPECT_EQ(CharTokenizer::train(texts, {}, {2, 0}).vocab().size(), 8);
  EXPECT_EQ(CharTokenizer::train(texts, {}, {3, 0}).vocab().size(), 7);
  EXPECT_EQ(CharTokenizer::train(texts, {}, {1, 7}).vocab().token(6), "\xE5\xA5\xBD");
}

// Real data: read the first `n` lines of a file through the reader (strict
// UTF-8, normalisation) and return their texts.
std::vector<std::string> first_review_texts(const std::string& rel, int64_t n) {
  const data::Dataset ds = data::read_text_files({{testing::real_data_path(rel), 1, "pos"}});
  std::vector<std::string> out;
  for (int64_t i = 0; i < n && i < ds.size(); ++i) out.push_back(ds.examples[i].text);
  return out;
}

void expect_round_trip(const CharTokenizer& tok, const std::vector<std::string>& texts,
                       bool expect_all_known) {
  int64_t checked = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> ids = tok.encode(texts[i]);
    const bool known = std::find(ids.begin(), ids.end(), Vocab::kUnk) == ids.end();
    if (expect_all_known) {
      ASSERT_TRUE(known) << "line " << i + 1;
    }
    if (!known) continue;
    ASSERT_EQ(tok.decode(ids), normalize_utf8(texts[i], tok.options().normalize)) << "line " << i + 1;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(CharTokenizerRealData, RoundTripFirst500Reviews) {
  ATTN_REQUIRE_REAL_DATA("reviews-zh/pos.txt");
  ATTN_REQUIRE_REAL_DATA("reviews-zh/neg.txt");
  std::vector<std::string> texts = first_review_texts("reviews-zh/pos.txt", 250);
  const std::vector<std::string> neg = first_review_texts("reviews-zh/neg.txt", 250);
  texts.insert(texts.end(), neg.begin(), neg.end());
  ASSERT_EQ(texts.size(), 500u);
  for (const bool group : {false, true}) {
    CharTokenizerOptions o;
    o.keep_spaces = true;
    o.group_ascii_alnum = group;
    // Vocabulary from the same texts: every token is known, the round trip is exact.
    expect_round_trip(CharTokenizer::train(texts, o), texts, true);
    // Vocabulary from the first 400 only: the last 100 round-trip whenever no [UNK] appears.
    const std::vector<std::string> train(texts.begin(), texts.begin() + 400);
    const std::vector<std::string> held(texts.begin() + 400, texts.end());
    expect_round_trip(CharTokenizer::train(train, o), held, false);
  }
  // Full-width folding is part of the normalised target.
  CharTokenizerOptions fw;
  fw.keep_spaces = true;
  fw.normalize.fullwidth_to_ascii = true;
  expect_round_trip(CharTokenizer::train(texts, fw), texts, true);
}

TEST(CharTokenizerRealData, RoundTrip500ChineseSentencesOfTatoeba) {
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  data::TableSpec spec;
  spec.format = data::TableFormat::tsv;
  spec.header = false;
  spec.text_column = "1";
  const data::Dataset ds = data::read_table(testing::real_data_path("tatoeba-cmn/cmn.txt"), spec);
  ASSERT_GE(ds.size(), 500);
  std::vector<std::string> texts;
  for (int i = 0; i < 500; ++i) texts.push_back(ds.examples[i].text);
  CharTokenizerOptions o;
  o.keep_spaces = true;
  const CharTokenizer tok = CharTokenizer::train(texts, o);
  expect_round_trip(tok, texts, true);
  // Every CJK ideograph is its own token.
  for (const std::string& t : texts) {
    for (const std::string& token : tok.tokenize(t)) {
      const std::u32string cps = decode_utf8(token);
      ASSERT_EQ(cps.size(), 1u) << token;  // ungrouped: one character per token
    }
  }
}

}  // namespace
}  // namespace attn::text

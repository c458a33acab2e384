// Vocabulary: fixed special ids, min-frequency and size limits, deterministic
// order, save/load round trip and every malformed file named by line.
#include <attn/core/error.h>
#include <attn/text/vocab.h>
#include <gtest/gtest.h>

#include "text/text_test_util.h"

namespace attn::text {
namespace {

TokenCounts sample_counts() {
  return {{"a", 5}, {"b", 3}, {"c", 3}, {"d", 2}, {"e", 1}, {"\xE5\xA5\xBD", 4}};
}

TEST(Vocab, SpecialIdsAreFixed) {
  const Vocab v = Vocab::build(sample_counts());
  const std::vector<std::string> expected = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>"};
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(v.token(i), expected[i]);
  EXPECT_EQ(v.id("[PAD]"), Vocab::kPad);
  EXPECT_EQ(v.id("[UNK]"), Vocab::kUnk);
  EXPECT_EQ(v.id("[CLS]"), Vocab::kCls);
  EXPECT_EQ(v.id("[SEP]"), Vocab::kSep);
  EXPECT_EQ(v.id("<s>"), Vocab::kBos);
  EXPECT_EQ(v.id("</s>"), Vocab::kEos);
  EXPECT_EQ(Vocab::kPad, 0);
}

TEST(Vocab, OrderIsCountThenBytes) {
  const Vocab v = Vocab::build(sample_counts());
  // a:5, 好:4, then b and c tie at 3 (byte order), d:2, e:1.
  const std::vector<std::string> order = {"a", "\xE5\xA5\xBD", "b", "c", "d", "e"};
  ASSERT_EQ(v.size(), 6 + 6);
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(v.token(6 + static_cast<int32_t>(i)), order[i]);
  EXPECT_EQ(v.id("zzz"), Vocab::kUnk);
  EXPECT_FALSE(v.contains("zzz"));
  EXPECT_THROW(v.token(12), Error);
  EXPECT_THROW(v.token(-1), Error);
}

struct LimitCase {
  int64_t min_freq, max_size;
  int64_t expected_size;
};

class VocabLimits : public ::testing::TestWithParam<LimitCase> {};

TEST_P(VocabLimits, MinFreqAndMaxSize) {
  const LimitCase& c = GetParam();
  const Vocab v = Vocab::build(sample_counts(), {c.min_freq, c.max_size});
  EXPECT_EQ(v.size(), c.expected_size);
  const TokenCounts counts = sample_counts();
  for (int32_t i = Vocab::kNumSpecial; i < v.size(); ++i) EXPECT_GE(counts.at(v.token(i)), c.min_freq);
  // Kept tokens are never rarer than a dropped one.
  int64_t min_kept = INT64_MAX;
  for (int32_t i = Vocab::kNumSpecial; i < v.size(); ++i)
    min_kept = std::min(min_kept, counts.at(v.token(i)));
  for (const auto& [t, n] : counts) {
    if (!v.contains(t)) {
      EXPECT_LE(n, min_kept) << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, VocabLimits,
                         ::testing::Values(LimitCase{1, 0, 12}, LimitCase{2, 0, 11}, LimitCase{3, 0, 10},
                                           LimitCase{4, 0, 8}, LimitCase{5, 0, 7}, LimitCase{1, 9, 9},
                                           LimitCase{1, 7, 7}, LimitCase{3, 8, 8}, LimitCase{1, 100, 12}));

TEST(Vocab, EmptyVocabularyIsAnError) {
  EXPECT_THROW(Vocab::build({}), Error);
  EXPECT_THROW(Vocab::build(sample_counts(), {6, 0}), Error);  // nothing reaches min_freq
  EXPECT_THROW(Vocab::build(sample_counts(), {1, 6}), Error);  // no room after the specials
  EXPECT_THROW(Vocab::from_tokens({}), Error);
  EXPECT_THROW(Vocab::build({{"[CLS]", 3}}), Error);    // a special cannot be counted
  EXPECT_THROW(Vocab::build({{"a\nb", 3}}), Error);     // line break
  EXPECT_THROW(Vocab::from_tokens({"x", "x"}), Error);  // duplicate
}

TEST(Vocab, SaveLoadRoundTrip) {
  testing::TempDir dir;
  const Vocab v = Vocab::build(sample_counts());
  v.save(dir.path("vocab.txt"));
  const Vocab w = Vocab::load(dir.path("vocab.txt"));
  EXPECT_TRUE(v == w);
  for (int32_t i = 0; i < v.size(); ++i) EXPECT_EQ(w.id(v.token(i)), i);
}

struct BadFile {
  const char* name;
  std::string bytes;
  std::string message;  // expected part of the error
};

class VocabBadFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(VocabBadFile, ErrorNamesTheProblem) {
  testing::TempDir dir;
  const std::string path = dir.file("v.txt", GetParam().bytes);
  try {
    Vocab::load(path);
    FAIL() << "accepted " << GetParam().name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

const std::string kSpecials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n<s>\n</s>\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, VocabBadFile,
    ::testing::Values(BadFile{"empty_file", "", "is empty"},
                      BadFile{"only_specials", kSpecials, "empty vocabulary"},
                      BadFile{"wrong_special", "[PAD]\n[UNK]\n[SEP]\n[CLS]\n<s>\n</s>\na\n", "line 3"},
                      BadFile{"duplicate", kSpecials + "a\nb\na\n", "line 9: token 'a' duplicates line 7"},
                      BadFile{"empty_line", kSpecials + "a\n\nb\n", "line 8: empty token"},
                      BadFile{"crlf", kSpecials + "a\r\n", "line 7"},
                      BadFile{"no_final_newline", kSpecials + "a", "no '\\n'"},
                      BadFile{"invalid_utf8", kSpecials + "a\n\xC0\xAF\n", "line 8, byte 0"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Vocab, MissingFile) {
  try {
    Vocab::load("/nonexistent/vocab.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/vocab.txt"), std::string::npos);
  }
}

}  // namespace
}  // namespace attn::text

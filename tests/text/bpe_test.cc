// English BPE: pre-tokenisation, hand-derived merges and tie-breaking,
// deterministic training, compression on held-out real English, round trips
// on 500 real Tatoeba sentences, save/load and malformed files.
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <attn/text/bpe.h>
#include <attn/text/utf8.h>
#include <gtest/gtest.h>

#include "text/text_test_util.h"

namespace attn::text {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;
const std::string kSp(kSpaceToken);

TEST(Bpe, PretokenizeSplitsPunctuationAndMarksSpaces) {
  const auto words = bpe_pretokenize("Don't stop,  now!", true);
  const std::vector<std::vector<std::string>> expected = {
      {"d", "o", "n"}, {"'"}, {"t"}, {kSp, "s", "t", "o", "p"}, {","}, {kSp, "n", "o", "w"}, {"!"}};
  EXPECT_EQ(words, expected);
  EXPECT_EQ(bpe_pretokenize("AB", false), (std::vector<std::vector<std::string>>{{"A", "B"}}));
  EXPECT_TRUE(bpe_pretokenize("  ", true).empty());
}

// Worked by hand. Words: "ab" (x1), "▁ab" (x2), "abc" (x1).
// Pair counts: (a,b) 4, (▁,a) 2, (b,c) 1 -> merge a+b.
// Then (▁,ab) 2, (ab,c) 1 -> merge ▁+ab. Then the best pair has count 1 < 2: stop.
TEST(Bpe, HandDerivedMerges) {
  BpeOptions o;
  o.vocab_size = 100;
  const BpeTokenizer tok = BpeTokenizer::train({"ab ab ab", "abc"}, o);
  EXPECT_EQ(tok.alphabet(), (std::vector<std::string>{"a", "b", "c", kSp}));
  EXPECT_EQ(tok.merges(), (Pairs{{"a", "b"}, {kSp, "ab"}}));
  EXPECT_EQ(tok.vocab().size(), 6 + 4 + 2);
  EXPECT_EQ(tok.tokenize("ab abc"), (std::vector<std::string>{"ab", kSp + "ab", "c"}));
}

// Ties go to the smaller left symbol, then the smaller right symbol (bytes).
// All three pairs occur once: (a,b) < (x,y) < (▁,a) because "▁" is E2 96 81.
TEST(Bpe, TieBreakIsByteOrder) {
  BpeOptions o;
  o.vocab_size = 100;
  o.min_pair_count = 1;
  const BpeTokenizer tok = BpeTokenizer::train({"xy ab"}, o);
  EXPECT_EQ(tok.merges(), (Pairs{{"a", "b"}, {"x", "y"}, {kSp, "ab"}}));
  // Left equal, right decides: (a,a) and (a,b) both once -> (a,a) first.
  const BpeTokenizer t2 = BpeTokenizer::train({"ab aa"}, o);
  ASSERT_FALSE(t2.merges().empty());
  EXPECT_EQ(t2.merges()[0], (std::pair<std::string, std::string>{"a", "a"}));
}

TEST(Bpe, VocabSizeIsRespected) {
  BpeOptions o;
  o.vocab_size = 6 + 4 + 1;  // specials + alphabet + one merge
  const BpeTokenizer tok = BpeTokenizer::train({"ab ab ab", "abc"}, o);
  EXPECT_EQ(tok.merges().size(), 1u);
  EXPECT_EQ(tok.vocab().size(), 11);
  o.vocab_size = 9;  // smaller than specials + alphabet
  EXPECT_THROW(BpeTokenizer::train({"ab ab ab", "abc"}, o), Error);
  EXPECT_THROW(BpeTokenizer::train({"", " "}, o), Error);  // empty vocabulary
}

TEST(Bpe, UnknownCharactersBecomeUnk) {
  BpeOptions o;
  o.vocab_size = 50;
  const BpeTokenizer tok = BpeTokenizer::train({"abc abc"}, o);
  const std::vector<int32_t> ids = tok.encode("abz");
  EXPECT_NE(std::find(ids.begin(), ids.end(), Vocab::kUnk), ids.end());
  EXPECT_EQ(tok.decode(ids), "ab[UNK]");
  // tokenize() shows the unknown character itself.
  EXPECT_EQ(tok.tokenize("abz"), (std::vector<std::string>{"ab", "z"}));
}

std::vector<std::string> english(int64_t begin, int64_t end) {
  data::TableSpec spec;
  spec.format = data::TableFormat::tsv;
  spec.header = false;
  spec.text_column = "0";
  const data::Dataset ds = data::read_table(testing::real_data_path("tatoeba-cmn/cmn.txt"), spec);
  std::vector<std::string> out;
  for (int64_t i = begin; i < end && i < ds.size(); ++i) out.push_back(ds.examples[i].text);
  return out;
}

// Every 5th sentence from the first 5000: the file is sorted by length, so a
// stride spreads short and long ones over train and held-out sets.
void strided(const std::vector<std::string>& all, std::vector<std::string>* train,
             std::vector<std::string>* held) {
  for (std::size_t i = 0; i < all.size(); ++i) (i % 5 == 4 ? held : train)->push_back(all[i]);
}

TEST(BpeRealData, TrainingIsDeterministicAndRoundTrips500Sentences) {
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  const std::vector<std::string> texts = english(0, 500);
  ASSERT_EQ(texts.size(), 500u);
  for (const bool lowercase : {true, false}) {
    BpeOptions o;
    o.vocab_size = 400;
    o.lowercase = lowercase;
    const BpeTokenizer a = BpeTokenizer::train(texts, o);
    const BpeTokenizer b = BpeTokenizer::train(texts, o);
    EXPECT_EQ(a.merges(), b.merges());
    EXPECT_TRUE(a.vocab() == b.vocab());
    EXPECT_EQ(a.vocab().size(), 400);
    NormalizeOptions norm;
    norm.lowercase_ascii = lowercase;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int32_t> ids = a.encode(texts[i]);
      ASSERT_EQ(std::count(ids.begin(), ids.end(), Vocab::kUnk), 0) << texts[i];
      ASSERT_EQ(a.decode(ids), normalize_utf8(texts[i], norm)) << "sentence " << i;
    }
  }
}

TEST(BpeRealData, CompressesHeldOutEnglish) {
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  std::vector<std::string> train, held;
  strided(english(0, 5000), &train, &held);
  BpeOptions o;
  o.vocab_size = 1000;
  const BpeTokenizer tok = BpeTokenizer::train(train, o);
  int64_t chars = 0, tokens = 0, unknown = 0;
  for (const std::string& t : held) {
    chars += static_cast<int64_t>(decode_utf8(t).size());
    const std::vector<int32_t> ids = tok.encode(t);
    tokens += static_cast<int64_t>(ids.size());
    unknown += std::count(ids.begin(), ids.end(), Vocab::kUnk);
  }
  // Character-level would need `chars` tokens (spaces included); BPE must do
  // clearly better on sentences it never saw.
  EXPECT_LT(tokens, chars / 2) << tokens << " tokens for " << chars << " characters";
  EXPECT_LT(unknown, chars / 1000);
  std::printf("bpe(vocab 1000): %lld held-out chars -> %lld tokens (%.3f tokens/char), %lld [UNK]\n",
              static_cast<long long>(chars), static_cast<long long>(tokens),
              static_cast<double>(tokens) / static_cast<double>(chars), static_cast<long long>(unknown));
}

TEST(BpeRealData, SaveLoadGivesTheSameEncoding) {
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  const std::vector<std::string> texts = english(0, 500);
  BpeOptions o;
  o.vocab_size = 300;
  const BpeTokenizer a = BpeTokenizer::train(texts, o);
  testing::TempDir dir;
  a.save(dir.path("bpe.txt"));
  const BpeTokenizer b = BpeTokenizer::load(dir.path("bpe.txt"));
  EXPECT_EQ(a.merges(), b.merges());
  EXPECT_EQ(a.alphabet(), b.alphabet());
  EXPECT_TRUE(a.vocab() == b.vocab());
  EXPECT_EQ(a.lowercase(), b.lowercase());
  for (const std::string& t : english(500, 700)) EXPECT_EQ(a.encode(t), b.encode(t)) << t;
}

TEST(Bpe, DuplicateMergeResultsShareOneId) {
  // "abc" is built both as (ab, c) and as (a, bc): the second merge reuses its id.
  testing::TempDir dir;
  const std::string path = dir.file("bpe.txt", "attn-bpe 1\nlowercase 0\nalphabet 4\na\nb\nc\n" + kSp +
                                                   "\nmerges 4\na b\nb c\nab c\na bc\n");
  const BpeTokenizer tok = BpeTokenizer::load(path);
  EXPECT_EQ(tok.vocab().size(), 6 + 4 + 3);  // ab, bc, abc
  EXPECT_EQ(tok.tokenize("abc bc"), (std::vector<std::string>{"abc", kSp, "bc"}));
  EXPECT_EQ(tok.decode(tok.encode("abc bc")), "abc bc");
  tok.save(dir.path("again.txt"));
  EXPECT_TRUE(BpeTokenizer::load(dir.path("again.txt")).vocab() == tok.vocab());
}

struct BadBpe {
  const char* name;
  std::string bytes;
  std::string message;
};

class BpeBadFile : public ::testing::TestWithParam<BadBpe> {};

TEST_P(BpeBadFile, ErrorNamesTheProblem) {
  testing::TempDir dir;
  const std::string path = dir.file("bpe.txt", GetParam().bytes);
  try {
    BpeTokenizer::load(path);
    FAIL() << "accepted " << GetParam().name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BpeBadFile,
    ::testing::Values(
        BadBpe{"empty", "", "is empty"}, BadBpe{"bad_header", "attn-bpe 2\n", "line 1"},
        BadBpe{"bad_lowercase", "attn-bpe 1\nlowercase yes\n", "line 2"},
        BadBpe{"bad_count", "attn-bpe 1\nlowercase 1\nalphabet x\n", "line 3"},
        BadBpe{"two_chars", "attn-bpe 1\nlowercase 1\nalphabet 1\nab\nmerges 0\n", "line 4"},
        BadBpe{"empty_alphabet", "attn-bpe 1\nlowercase 1\nalphabet 0\nmerges 0\n", "empty vocabulary"},
        BadBpe{"unknown_symbol", "attn-bpe 1\nlowercase 1\nalphabet 2\na\nb\nmerges 1\na c\n", "merge #1"},
        BadBpe{"merge_format", "attn-bpe 1\nlowercase 1\nalphabet 2\na\nb\nmerges 1\nab\n", "line 7"},
        BadBpe{"repeated_merge", "attn-bpe 1\nlowercase 1\nalphabet 2\na\nb\nmerges 2\na b\na b\n",
               "merge #2"},
        BadBpe{"short", "attn-bpe 1\nlowercase 1\nalphabet 2\na\n", "ends after line 4"},
        BadBpe{"trailing", "attn-bpe 1\nlowercase 1\nalphabet 1\na\nmerges 0\nx\n", "line 6"},
        BadBpe{"no_newline", "attn-bpe 1\nlowercase 1", "no '\\n'"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace attn::text

// Corpus BLEU (text/bleu.h) against the sacrebleu package: the fixture
// tests/text/data/bleu_cases.json is written by python/reference/bleu_fixtures.py
// (sacreBLEU's score, counts, precisions and tokenisation for fixed hypotheses).
#include <attn/io/json.h>
#include <attn/text/bleu.h>

#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using text::BleuOptions;
using text::BleuScore;

struct BleuCase {
  std::string name;
  json::Value v;
};

std::vector<BleuCase> load_cases() {
  const json::Value root =
      json::parse(testing::read_text(testing::source_path("tests/text/data/bleu_cases.json")));
  std::vector<BleuCase> out;
  for (const json::Value& c : root.at("cases").items()) out.push_back({c.at("name").as_string(), c});
  return out;
}

std::vector<std::string> strings(const json::Value& v) {
  std::vector<std::string> out;
  for (const auto& s : v.items()) out.push_back(s.as_string());
  return out;
}

void PrintTo(const BleuCase& c, std::ostream* os) { *os << c.name; }

class BleuVsSacrebleu : public ::testing::TestWithParam<BleuCase> {};

TEST_P(BleuVsSacrebleu, ScoreCountsAndTokens) {
  const json::Value& c = GetParam().v;
  BleuOptions o;
  o.tokenizer = text::parse_bleu_tokenizer(c.at("tokenize").as_string());
  o.lowercase = c.at("lowercase").as_bool();
  const std::vector<std::string> hyps = strings(c.at("hypotheses"));
  std::vector<std::vector<std::string>> refs;
  for (const auto& stream : c.at("references").items()) refs.push_back(strings(stream));
  const BleuScore s = text::corpus_bleu(hyps, refs, o);
  const auto tol = testing::tol::kBleu;
  EXPECT_NEAR(s.score, c.at("score").as_double(), tol.abs) << s.describe();
  EXPECT_NEAR(s.bp, c.at("bp").as_double(), tol.abs);
  EXPECT_EQ(s.sys_len, c.at("sys_len").as_int64());
  EXPECT_EQ(s.ref_len, c.at("ref_len").as_int64());
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(s.correct[n], c.at("counts").at(n).as_int64()) << "order " << n + 1;
    EXPECT_EQ(s.total[n], c.at("totals").at(n).as_int64()) << "order " << n + 1;
    EXPECT_NEAR(s.precisions[n], c.at("precisions").at(n).as_double(), tol.abs) << "order " << n + 1;
  }
  const std::vector<std::string> tok = strings(c.at("tokenized_hypotheses"));
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    std::string h = hyps[i];
    if (o.lowercase)
      for (char& ch : h)
        if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    EXPECT_EQ(text::bleu_tokenize(h, o.tokenizer), tok[i]) << "segment " << i << ": '" << hyps[i] << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, BleuVsSacrebleu, ::testing::ValuesIn(load_cases()), [](const auto& info) {
  return info.param.name.substr(0, info.param.name.find('.')) + std::to_string(info.index);
});

TEST(Bleu, FixtureIsNotEmptyAndSpansTheTokenizers) {
  const auto cases = load_cases();
  ASSERT_GE(cases.size(), 10u);
  int zh = 0, nonzero = 0;
  for (const auto& c : cases) {
    zh += c.v.at("tokenize").as_string() == "zh";
    nonzero += c.v.at("score").as_double() > 1.0;
  }
  EXPECT_GE(zh, 5);
  EXPECT_GE(nonzero, 6);
}

TEST(Bleu, ZhSplitsEveryIdeographAndKeepsAsciiWords) {
  EXPECT_EQ(text::bleu_tokenize("我没带伞，因为下雨了。", text::BleuTokenizer::zh),
            "我 没 带 伞 ， 因 为 下 雨 了 。");
  EXPECT_EQ(text::bleu_tokenize("汤姆买了 iPhone 3.5寸", text::BleuTokenizer::zh),
            "汤 姆 买 了 iPhone 3.5 寸");
}

TEST(Bleu, BadInput) {
  EXPECT_ERROR_CONTAINS(text::corpus_bleu({"a"}, {}), {"at least one reference stream"});
  EXPECT_ERROR_CONTAINS(text::corpus_bleu({"a", "b"}, {{"a"}}), {"reference stream 0 has 1", "expected 2"});
  EXPECT_ERROR_CONTAINS(text::corpus_bleu({"a\xff"}, {{"a"}}), {"hypothesis", "segment 0", "invalid UTF-8"});
  EXPECT_ERROR_CONTAINS(text::corpus_bleu({"a"}, {{"\xc0\xaf"}}),
                        {"reference stream 0 segment 0", "invalid"});
  EXPECT_ERROR_CONTAINS(text::parse_bleu_tokenizer("intl"), {"unknown tokenizer 'intl'", "none, 13a, zh"});
}

}  // namespace
}  // namespace attn

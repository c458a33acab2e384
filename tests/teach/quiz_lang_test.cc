// The quiz in Chinese (issue 17): questions, feedback and solutions in both
// languages with the same numbers, and the checker reading Chinese, full-width
// and synonym answers in either language.
#include <attn/io/json.h>
#include <attn/teach/quiz.h>
#include <attn/teach/report.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace teach = attn::teach;
namespace quiz = attn::teach::quiz;
using attn::json::Value;
using teach::Lang;

teach::Quiz make(uint64_t seed, int64_t count, Lang lang, const std::string& kind = "all") {
  teach::QuizOptions o;
  o.seed = seed;
  o.count = count;
  o.kind = kind;
  o.lang = lang;
  return teach::make_quiz(o);
}

// Every number written in a text ("0.24", "-3", "1,024" -> "1024"), in order.
std::vector<std::string> numbers_in(const std::string& text) {
  std::vector<std::string> out;
  static const std::regex re("-?[0-9][0-9,]*(\\.[0-9]+)?");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    std::string n = it->str();
    std::string digits;
    for (char c : n)
      if (c != ',') digits += c;
    out.push_back(digits);
  }
  std::sort(out.begin(), out.end());  // word order differs between the languages
  return out;
}

bool has_cjk(const std::string& s) {
  for (std::size_t i = 0; i + 2 < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0xE4 && c <= 0xE9) return true;  // U+4000..U+9FFF: CJK ideographs
  }
  return false;
}

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A question of `topic` among the first quizzes of a few seeds.
quiz::Question find(const std::string& topic, Lang lang) {
  for (uint64_t seed = 1; seed <= 20; ++seed)
    for (const auto& q : make(seed, 60, lang).questions)
      if (q.topic == topic) return q;
  ADD_FAILURE() << "no question of topic " << topic;
  return {};
}

TEST(QuizLang, ChineseQuizHasChineseTextsAndTheSameNumbers) {
  for (uint64_t seed : {1u, 7u, 42u}) {
    const teach::Quiz en = make(seed, 30, Lang::en), zh = make(seed, 30, Lang::zh);
    ASSERT_EQ(en.questions.size(), zh.questions.size());
    for (std::size_t i = 0; i < en.questions.size(); ++i) {
      const quiz::Question &e = en.questions[i], &z = zh.questions[i];
      SCOPED_TRACE("seed " + std::to_string(seed) + " question " + std::to_string(i) + " " + e.topic);
      EXPECT_EQ(e.topic, z.topic);
      EXPECT_EQ(e.form, z.form);
      EXPECT_EQ(e.key(), z.key());
      EXPECT_EQ(e.number, z.number);
      EXPECT_EQ(e.positions, z.positions);
      EXPECT_EQ(e.answer, z.answer);
      EXPECT_EQ(attn::json::dump(e.data), attn::json::dump(z.data));
      EXPECT_TRUE(has_cjk(z.text)) << z.text;
      EXPECT_TRUE(has_cjk(z.solution)) << z.solution;
      EXPECT_TRUE(has_cjk(z.how_to_answer())) << z.how_to_answer();
      EXPECT_FALSE(has_cjk(e.text)) << e.text;
      EXPECT_FALSE(has_cjk(e.solution)) << e.solution;
      // The numbers of the question and of the worked solution are the same in both languages.
      EXPECT_EQ(numbers_in(e.text), numbers_in(z.text)) << e.text << "\n---\n" << z.text;
      EXPECT_EQ(numbers_in(e.solution), numbers_in(z.solution)) << e.solution << "\n---\n" << z.solution;
      for (std::size_t c = 0; c < z.choices.size(); ++c) EXPECT_TRUE(has_cjk(z.choices[c].text));
    }
  }
}

TEST(QuizLang, JsonIsTheSameExceptTextsAndLang) {
  const Value en = attn::json::parse(teach::json_text(teach::quiz_json(make(5, 12, Lang::en))));
  const Value zh = attn::json::parse(teach::json_text(teach::quiz_json(make(5, 12, Lang::zh))));
  EXPECT_EQ(en.at("lang").as_string(), "en");
  EXPECT_EQ(zh.at("lang").as_string(), "zh");
  EXPECT_EQ(zh.at("repeat").as_string(), en.at("repeat").as_string() + " --lang zh");
  ASSERT_EQ(en.at("questions").size(), zh.at("questions").size());
  for (std::size_t i = 0; i < en.at("questions").size(); ++i) {
    const Value &e = en.at("questions").at(i), &z = zh.at("questions").at(i);
    for (const char* field : {"number", "kind", "topic", "answer_form", "key", "data"})
      EXPECT_EQ(attn::json::dump(e.at(field)), attn::json::dump(z.at(field))) << field;
    if (e.at("answer_form").as_string() != "choice") {
      EXPECT_EQ(attn::json::dump(e.at("expected")), attn::json::dump(z.at("expected")));
    }
  }
}

TEST(QuizLang, FeedbackIsInTheChosenLanguage) {
  const teach::Quiz zh = make(3, 3, Lang::zh);
  const quiz::Question& q = zh.questions[0];
  EXPECT_EQ(teach::result_text(q, true), "结果：回答正确（" + q.key() + "）\n");
  EXPECT_EQ(teach::result_text(q, false).rfind("结果：回答错误，正确答案是 " + q.key(), 0), 0u);
  EXPECT_EQ(teach::solution_text(q).rfind("详细解答：\n", 0), 0u);
  EXPECT_EQ(teach::score_text(2, 3, Lang::zh).rfind("得分：2/3", 0), 0u);
  EXPECT_NE(teach::quiz_intro(zh).find("道题"), std::string::npos);
  EXPECT_NE(teach::question_text(zh, 0).find("第 1 题，共 3 题"), std::string::npos);
  const quiz::Verdict bad = quiz::check(q, "zzz");
  EXPECT_FALSE(bad.valid);
  EXPECT_TRUE(has_cjk(bad.error)) << bad.error;
  // English stays English.
  const teach::Quiz en = make(3, 3, Lang::en);
  EXPECT_EQ(teach::result_text(en.questions[0], true), "result: right (" + q.key() + ")\n");
  EXPECT_FALSE(has_cjk(quiz::check(en.questions[0], "zzz").error));
}

TEST(QuizLang, FullWidthDigitsPunctuationAndPercentAreNumbers) {
  for (Lang lang : {Lang::en, Lang::zh}) {
    const quiz::Question q = find("softmax-weight", lang);
    const std::string key = q.key();  // e.g. "0.24"
    std::string wide;                 // ０．２４
    for (char c : key)
      wide += c == '.' ? "．" : std::string("\xEF\xBC") + static_cast<char>(0x90 + (c - '0'));
    EXPECT_TRUE(quiz::check(q, wide).correct) << wide;
    EXPECT_TRUE(quiz::check(q, wide + "。").correct) << wide;
    EXPECT_TRUE(quiz::check(q, "约" + key).correct);
    EXPECT_TRUE(quiz::check(q, "≈ " + key).correct);
    const std::string percent = fixed1(q.number * 100);
    EXPECT_TRUE(quiz::check(q, percent + "%").correct) << percent;
    EXPECT_TRUE(quiz::check(q, percent + "％").correct) << percent;
    EXPECT_FALSE(quiz::check(q, fixed1(q.number * 100 + 3) + "%").correct);
    // The full-width comma is a comma: a decimal comma is still an error, with the hint.
    const quiz::Verdict comma = quiz::check(q, "０，２５");
    EXPECT_FALSE(comma.valid);
    EXPECT_NE(comma.error.find("0.25"), std::string::npos) << comma.error;
  }
  // Full-width minus and digits in a scaled score.
  quiz::Question q;
  q.form = quiz::Form::number;
  q.number = -0.76;
  q.abs_tol = 0.01;
  EXPECT_TRUE(quiz::check(q, "－０．７６").correct);
  EXPECT_TRUE(quiz::check(q,
                          "\xE2\x88\x92"
                          "0.76")
                  .correct);  // U+2212 minus sign
  EXPECT_FALSE(quiz::check(q, "０．７６").correct);
  EXPECT_EQ(quiz::normalize_answer("　０．７６　"), "0.76");
  // Counts with full-width digits and Chinese commas.
  q.number = 1024;
  q.decimals = 0;
  q.abs_tol = 0;
  EXPECT_TRUE(quiz::check(q, "１，０２４").correct);
  EXPECT_TRUE(quiz::check(q, "1,024").correct);
}

TEST(QuizLang, ChineseListSeparatorsAndRangesForPositions) {
  quiz::Question q;
  q.form = quiz::Form::positions;
  q.positions = {0, 2, 3};
  q.max_position = 5;
  for (const char* a : {"0、2、3", "0，2，3", "0,2,3", "0 2 3", "３、０、２", "0、2-3", "0、2到3", "0、2至3",
                        "0；2；3", "0、2、3。"})
    EXPECT_TRUE(quiz::check(q, a).correct) << a;
  EXPECT_FALSE(quiz::check(q, "0、1、2").correct);
  q.positions = {1, 2, 3, 4};
  for (const char* a : {"1到4", "1至4", "1~4", "１－４", "1～4"}) EXPECT_TRUE(quiz::check(q, a).correct) << a;
  q.lang = Lang::zh;
  const quiz::Verdict past = quiz::check(q, "1、9");
  EXPECT_FALSE(past.valid);
  EXPECT_NE(past.error.find("0..5"), std::string::npos) << past.error;
}

TEST(QuizLang, ArchitectureChoicesAcceptChineseAndEnglishSynonymsInEitherLanguage) {
  for (Lang lang : {Lang::en, Lang::zh}) {
    const quiz::Question q = find("architecture", lang);
    ASSERT_EQ(q.choices.size(), 3u);
    // The index of each choice: 0 encoder only, 1 decoder only, 2 both (architecture keeps the order).
    const std::vector<std::vector<std::string>> synonyms = {
        {"仅编码器", "只用编码器", "编码器", "encoder-only", "encoder", "Encoder Only", "只有编码器"},
        {"仅解码器", "只用解码器", "解码器", "decoder-only", "decoder"},
        {"编码器-解码器", "编码器解码器", "编码器和解码器", "两者都要", "encoder-decoder", "both",
         "Encoder Decoder"}};
    for (std::size_t c = 0; c < synonyms.size(); ++c)
      for (const auto& a : synonyms[c]) {
        const quiz::Verdict v = quiz::check(q, a);
        EXPECT_TRUE(v.valid) << a << ": " << v.error;
        EXPECT_EQ(v.correct, static_cast<int>(c) == q.answer) << a;
      }
    const std::string letter(1, static_cast<char>('A' + q.answer));
    EXPECT_TRUE(quiz::check(q, letter).correct);
    // Ａ, Ｂ, Ｃ (full width) and "选 b".
    EXPECT_TRUE(quiz::check(q, std::string("\xEF\xBC") + static_cast<char>(0xA1 + q.answer)).correct);
    EXPECT_TRUE(quiz::check(q, "选 " + std::string(1, static_cast<char>('a' + q.answer))).correct);
  }
}

TEST(QuizLang, CrossAttentionAndClassifierChoicesInChinese) {
  const quiz::Question q = find("cross-attention", Lang::en);
  const std::string right =
      q.choices[static_cast<std::size_t>(q.answer)].text;  // "the decoder" | "the encoder"
  const std::string zh = right == "the decoder" ? "解码器" : "编码器";
  const std::string other = right == "the decoder" ? "来自编码器" : "来自解码器";
  EXPECT_TRUE(quiz::check(q, zh).correct);
  EXPECT_FALSE(quiz::check(q, other).correct);
  EXPECT_TRUE(quiz::check(q, other).valid);
}

TEST(QuizLang, YesNoAnswersInChinese) {
  quiz::Question q;
  q.form = quiz::Form::choice;
  q.lang = Lang::zh;
  q.choices = {quiz::Choice{"是", {"yes"}}, quiz::Choice{"否", {"no"}}};
  q.answer = 1;
  for (const char* a : {"否", "不是", "错", "不对", "no", "N", "b"})
    EXPECT_TRUE(quiz::check(q, a).correct) << a;
  for (const char* a : {"是", "对", "是的", "正确", "yes", "a"}) {
    EXPECT_TRUE(quiz::check(q, a).valid) << a;
    EXPECT_FALSE(quiz::check(q, a).correct) << a;
  }
}

TEST(QuizLang, AnswersFileInChineseScoresFullMarks) {
  // The key of the English quiz, written in full-width digits and Chinese list separators, answers the
  // Chinese quiz of the same seed.
  const teach::Quiz zh = make(11, 12, Lang::zh);
  std::vector<teach::AnswerLine> lines;
  int64_t n = 0;
  for (const auto& q : zh.questions) {
    std::string a = q.key();
    if (q.form == quiz::Form::choice)
      a = make(11, 12, Lang::en)
              .questions[static_cast<std::size_t>(n)]
              .choices[static_cast<std::size_t>(q.answer)]
              .text;  // English text
    std::string wide;
    for (char c : a) {
      if (c >= '0' && c <= '9')
        wide += std::string("\xEF\xBC") + static_cast<char>(0x90 + (c - '0'));
      else if (c == ',')
        wide += "、";
      else
        wide += c;
    }
    lines.push_back({++n, q.form == quiz::Form::choice ? a : wide});
  }
  const auto verdicts = teach::check_answers(zh, lines, "answers.txt");
  const std::string t = teach::answers_transcript(zh, lines, verdicts);
  EXPECT_NE(t.find("得分：12/12"), std::string::npos) << t;
  EXPECT_EQ(t.find("score:"), std::string::npos);
}

}  // namespace

namespace {

TEST(QuizLang, ClaimsAreYesNoQuestionsAnsweredInEitherLanguage) {
  int yes = 0, no = 0;
  std::set<std::string> claims;
  for (uint64_t seed = 1; seed <= 12; ++seed)
    for (const auto& q : make(seed, 60, Lang::zh, "structure").questions) {
      if (q.topic != "claim") continue;
      claims.insert(q.data.at("claim").as_string());
      ASSERT_EQ(q.choices.size(), 2u);
      EXPECT_EQ(q.choices[0].text, "是");
      EXPECT_EQ(q.choices[1].text, "否");
      const bool is_yes = q.answer == 0;
      (is_yes ? yes : no)++;
      for (const char* a : {"是", "对", "是的", "正确", "yes", "a", "Ａ"})
        EXPECT_EQ(quiz::check(q, a).correct, is_yes) << a << " " << q.text;
      for (const char* a : {"否", "不是", "错", "不对", "no", "b"})
        EXPECT_EQ(quiz::check(q, a).correct, !is_yes) << a;
      // The computed answer: a causal mask shows key j iff j <= i; "h times" is never right.
      const std::string c = q.data.at("claim").as_string();
      if (c == "causal_sees") {
        EXPECT_EQ(is_yes, q.data.at("key").as_int64() <= q.data.at("query").as_int64());
      }
      if (c == "h_times") {
        EXPECT_FALSE(is_yes);
      }
      if (c == "about_the_same") {
        EXPECT_TRUE(is_yes);
      }
      if (c == "softmax_table") {
        double gap = 0, z = 0;
        const auto& s = q.data.at("scores").items();
        for (const auto& x : s) z += std::exp(x.as_double());
        for (std::size_t i = 0; i < s.size(); ++i)
          gap =
              std::max(gap, std::fabs(q.data.at("shown").at(i).as_double() - std::exp(s[i].as_double()) / z));
        EXPECT_EQ(is_yes, gap <= 0.005 + 1e-9) << gap;
      }
    }
  EXPECT_EQ(claims, (std::set<std::string>{"h_times", "about_the_same", "softmax_table", "causal_sees"}));
  EXPECT_GT(yes, 0);
  EXPECT_GT(no, 0);
}

}  // namespace

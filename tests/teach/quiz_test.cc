// Tests of the quiz (attn/teach/quiz.h) through the library: the expected
// answers it states against numbers computed here from the same question data
// (exp/sum, mask rules, formulas), never against hard-coded results; the key,
// the checker, answers files and the JSON. Positions are numbered from 0. (The
// interactive loop on stdin, the random seed and the flags are the CLI's:
// tests/cli/quiz_test.cc.)
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/teach/quiz.h>
#include <attn/teach/report.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace teach = attn::teach;
using attn::json::Value;

// Per-process names: ctest -j runs the tests of this file in parallel processes.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "attn_teach_quiz_" + std::to_string(getpid()) + "_" + name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

teach::Quiz make(uint64_t seed, int64_t count, const std::string& kind = "all") {
  teach::QuizOptions o;
  o.seed = seed;
  o.count = count;
  o.kind = kind;
  return teach::make_quiz(o);
}

// The JSON as `attn quiz --json` prints it, read back by attn's strict reader.
Value json_of(const teach::Quiz& quiz, const std::vector<teach::AnswerLine>& answers = {},
              const std::vector<teach::quiz::Verdict>& verdicts = {}) {
  return attn::json::parse(teach::json_text(teach::quiz_json(quiz, answers, verdicts)));
}

Value quiz_json(uint64_t seed, int64_t count, const std::string& kind = "all") {
  return json_of(make(seed, count, kind));
}

// The answers of a file, as `attn quiz --answers FILE` reads them.
struct Answered {
  std::vector<teach::AnswerLine> answers;
  std::vector<teach::quiz::Verdict> verdicts;
  std::string transcript;  // what --answers prints
  Value json;              // what --answers --json prints
};
Answered answer(const teach::Quiz& quiz, const std::string& file_text) {
  const std::string path = temp_path("answers.txt");
  write_file(path, file_text);
  Answered a;
  a.answers = teach::read_answers(path);
  a.verdicts = teach::check_answers(quiz, a.answers, path);
  a.transcript = teach::answers_transcript(quiz, a.answers, a.verdicts);
  a.json = json_of(quiz, a.answers, a.verdicts);
  return a;
}

// Questions of many quizzes, to cover every topic.
std::vector<Value> many_questions(const std::string& kind) {
  std::vector<Value> qs;
  for (int seed = 1; seed <= 4; ++seed) {
    const Value j = quiz_json(static_cast<uint64_t>(seed), 60, kind);
    for (const auto& q : j.at("questions").items()) qs.push_back(q);
  }
  return qs;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string score_line(int right, int total) {
  return "score: " + std::to_string(right) + "/" + std::to_string(total) + "\n";
}

std::vector<double> numbers(const Value& v) {
  std::vector<double> out;
  for (const auto& x : v.items()) out.push_back(x.as_double());
  return out;
}

std::vector<int64_t> integers(const Value& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.items()) out.push_back(x.as_int64());
  return out;
}

std::vector<double> softmax(const std::vector<double>& s, double scale) {
  std::vector<double> w;
  double sum = 0;
  for (double x : s) sum += std::exp(x * scale);
  for (double x : s) w.push_back(std::exp(x * scale) / sum);
  return w;
}

// The answer key lines of --print-answers (comments dropped).
std::vector<std::string> key_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);)
    if (!l.empty() && l[0] != '#') out.push_back(l);
  return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// A valid but wrong answer to question `q` (from its JSON).
std::string wrong_answer(const Value& q) {
  const std::string form = q.at("answer_form").as_string();
  if (form == "number") {
    const double e = q.at("expected").as_double();
    if (q.at("rel_tol").as_double() > 0) return std::to_string(static_cast<int64_t>(e * 2 + 1));
    if (q.at("key").as_string().find('.') == std::string::npos)
      return std::to_string(static_cast<int64_t>(e) + 1);
    return std::to_string(e + 0.5);
  }
  if (form == "positions") {
    const auto p = integers(q.at("expected"));
    return p == std::vector<int64_t>{1} ? "2" : "1";
  }
  const auto& choices = q.at("choices").items();
  for (std::size_t c = 0; c < choices.size(); ++c)
    if (choices[c].as_string() != q.at("expected").as_string())
      return std::string(1, static_cast<char>('a' + c));
  return "?";
}

// ---- reproducibility and coverage -------------------------------------------------

TEST(QuizSeed, SameSeedGivesTheSameQuiz) {
  const teach::Quiz a = make(42, 9), b = make(42, 9);
  EXPECT_EQ(teach::json_text(teach::quiz_json(a)), teach::json_text(teach::quiz_json(b)));
  EXPECT_EQ(teach::answer_key(a), teach::answer_key(b));
  for (std::size_t i = 0; i < a.questions.size(); ++i)
    EXPECT_EQ(teach::question_text(a, i), teach::question_text(b, i));
}

TEST(QuizSeed, DifferentSeedsGiveDifferentNumbers) {
  std::set<std::string> texts;
  for (int seed = 1; seed <= 5; ++seed) {
    const Value j = quiz_json(static_cast<uint64_t>(seed), 6, "numeric");
    std::string all;
    for (const auto& q : j.at("questions").items()) all += q.at("text").as_string() + "\n";
    texts.insert(all);
  }
  EXPECT_EQ(texts.size(), 5u) << "two seeds gave the same numeric questions";
}

TEST(QuizSeed, TheRepeatCommandNamesTheSeedCountAndKind) {
  const teach::Quiz q = make(77, 4, "path");
  EXPECT_EQ(q.repeat, "attn quiz --seed 77 --count 4 --kind path");
  EXPECT_EQ(teach::quiz_intro(q).rfind("attn quiz: 4 questions (path), seed 77\nSame quiz again: " +
                                           q.repeat + "\nThe questions follow the tutorial's sections",
                                       0),
            0u)
      << teach::quiz_intro(q);
  EXPECT_EQ(quiz_json(77, 4, "path").at("repeat").as_string(), q.repeat);
}

TEST(QuizKinds, AllKindsAppearWithKindAll) {
  for (int count : {3, 7}) {
    const Value j = quiz_json(11, count, "all");
    std::map<std::string, int> kinds;
    for (const auto& q : j.at("questions").items()) ++kinds[q.at("kind").as_string()];
    EXPECT_EQ(kinds.size(), 3u) << "count " << count;
    EXPECT_GT(kinds["numeric"], 0);
    EXPECT_GT(kinds["structure"], 0);
    EXPECT_GT(kinds["path"], 0);
    EXPECT_EQ(static_cast<int>(j.at("questions").size()), count);
  }
}

TEST(QuizKinds, OneKindGivesOnlyThatKindAndAllItsTopics) {
  const std::map<std::string, std::set<std::string>> topics = {
      {"numeric", {"softmax-weight", "scaled-score", "scaling-saturation"}},
      {"structure",
       {"mask-visibility", "cross-attention", "mha-params", "mha-flops", "architecture", "classifier-token",
        "claim"}},
      {"path", {"rnn-path", "attention-path", "window-path"}},
  };
  for (const auto& [kind, want] : topics) {
    std::set<std::string> seen;
    const Value quiz = quiz_json(3, 40, kind);
    for (const auto& q : quiz.at("questions").items()) {
      EXPECT_EQ(q.at("kind").as_string(), kind);
      seen.insert(q.at("topic").as_string());
    }
    EXPECT_EQ(seen, want) << kind;
  }
}

// ---- the key and the checker ---------------------------------------------------------

struct KeyCase {
  uint64_t seed;
  int64_t count;
  std::string kind;
};

class QuizKeyTest : public ::testing::TestWithParam<KeyCase> {};

TEST_P(QuizKeyTest, PrintedKeyFedBackScoresFull) {
  const KeyCase c = GetParam();
  const teach::Quiz quiz = make(c.seed, c.count, c.kind);
  const std::string key = teach::answer_key(quiz);
  const int n = static_cast<int>(key_lines(key).size());
  ASSERT_GT(n, 0);
  const Answered a = answer(quiz, key);
  EXPECT_EQ(count_of(a.transcript, "result: right"), n);
  EXPECT_EQ(count_of(a.transcript, "result: wrong"), 0);
  EXPECT_NE(a.transcript.find(score_line(n, n)), std::string::npos) << a.transcript;
}

INSTANTIATE_TEST_SUITE_P(Seeds, QuizKeyTest,
                         ::testing::Values(KeyCase{1, 30, "all"}, KeyCase{2, 30, "numeric"},
                                           KeyCase{3, 30, "structure"}, KeyCase{4, 30, "path"},
                                           KeyCase{0, 1, "all"}, KeyCase{9223372036854775807ull, 12, "all"}));

TEST(QuizAnswers, WrongAnswersScoreZeroAndShowTheWorkedSolution) {
  const teach::Quiz quiz = make(5, 24);
  const Value j = json_of(quiz);
  std::vector<std::string> wrong;
  for (const auto& q : j.at("questions").items()) wrong.push_back(wrong_answer(q));
  const Answered a = answer(quiz, join_lines(wrong));
  EXPECT_EQ(count_of(a.transcript, "result: wrong"), 24);
  EXPECT_EQ(count_of(a.transcript, "Worked solution:"), 24);
  EXPECT_NE(a.transcript.find(score_line(0, 24)), std::string::npos);
  // Each solution is printed in full after its result.
  for (const auto& q : j.at("questions").items()) {
    const std::string sol = q.at("solution").as_string();
    const std::string first = sol.substr(0, sol.find('\n'));
    EXPECT_NE(a.transcript.find("Worked solution:\n  " + first), std::string::npos) << first;
  }
}

TEST(QuizAnswers, JsonResultsAndScoreFollowTheAnswers) {
  const teach::Quiz quiz = make(6, 6);
  const Value j = json_of(quiz);
  std::vector<std::string> lines;
  int k = 0;
  for (const auto& q : j.at("questions").items())
    lines.push_back(k++ % 2 == 0 ? q.at("key").as_string() : wrong_answer(q));
  const Value r = answer(quiz, "# my answers\n\n" + join_lines(lines)).json;
  for (std::size_t i = 0; i < r.at("questions").size(); ++i) {
    const Value& res = r.at("questions").at(i).at("result");
    EXPECT_EQ(res.at("answer").as_string(), lines[i]);
    EXPECT_EQ(res.at("correct").as_bool(), i % 2 == 0) << i;
  }
  EXPECT_EQ(r.at("score").at("right").as_int64(), 3);
  EXPECT_EQ(r.at("score").at("total").as_int64(), 6);
}

// Answers the quiz with its key, except question `index` (0-based), answered `answer`.
std::string key_except(const Value& quiz, std::size_t index, const std::string& answer) {
  std::vector<std::string> lines;
  for (const auto& q : quiz.at("questions").items()) lines.push_back(q.at("key").as_string());
  lines[index] = answer;
  return join_lines(lines);
}

TEST(QuizAnswers, NumbersAreRightWithinTheStatedToleranceOnly) {
  const teach::Quiz tq = make(8, 20, "numeric");
  const Value quiz = json_of(tq);
  int checked = 0;
  for (std::size_t i = 0; i < quiz.at("questions").size() && checked < 2; ++i) {
    const Value& q = quiz.at("questions").at(i);
    if (q.at("answer_form").as_string() != "number") continue;
    const double e = q.at("expected").as_double();
    EXPECT_DOUBLE_EQ(q.at("abs_tol").as_double(), 0.01);
    EXPECT_EQ(q.at("tolerance").as_string(), "±0.01");
    ++checked;
    for (const auto& [delta, right] : std::vector<std::pair<double, bool>>{
             {0.0, true}, {0.009, true}, {-0.009, true}, {0.0115, false}, {-0.0115, false}}) {
      char b[64];
      std::snprintf(b, sizeof b, "%.6f", e + delta);
      const Value r = answer(tq, key_except(quiz, i, b)).json;
      EXPECT_EQ(r.at("questions").at(i).at("result").at("correct").as_bool(), right)
          << "expected " << e << ", answered " << b;
      EXPECT_EQ(teach::quiz::check(tq.questions[i], b).correct, right) << b;
    }
  }
  EXPECT_EQ(checked, 2);
}

TEST(QuizAnswers, DecimalCommaIsAnErrorWithAHint) {
  const teach::Quiz tq = make(8, 20, "numeric");
  const Value quiz = json_of(tq);
  for (std::size_t i = 0; i < quiz.at("questions").size(); ++i) {
    if (quiz.at("questions").at(i).at("answer_form").as_string() != "number") continue;
    std::string message;
    try {
      answer(tq, key_except(quiz, i, "0,25"));
    } catch (const attn::Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("(question " + std::to_string(i + 1) +
                           "): expected a number such as 0.25; got '0,25' "
                           "(write decimals with a dot: 0.25)"),
              std::string::npos)
        << message;
    const teach::quiz::Verdict v = teach::quiz::check(tq.questions[i], "0,25");
    EXPECT_FALSE(v.valid);
    EXPECT_NE(v.error.find("write decimals with a dot"), std::string::npos) << v.error;
    return;
  }
  FAIL() << "no number question in the quiz";
}

TEST(QuizAnswers, ChoicesAcceptTheirTextAndPositionsAnySpelling) {
  const teach::Quiz quiz = make(12, 30, "structure");
  const Value j = json_of(quiz);
  std::vector<std::string> lines;
  int choices = 0, positions = 0;
  for (const auto& q : j.at("questions").items()) {
    const std::string form = q.at("answer_form").as_string();
    if (form == "choice") {
      lines.push_back(q.at("expected").as_string());  // the text, not the letter
      ++choices;
    } else if (form == "positions") {
      std::string list;  // "3, 1, 2" in reverse order, as single positions
      const auto p = integers(q.at("expected"));
      for (auto it = p.rbegin(); it != p.rend(); ++it)
        list += (list.empty() ? "" : ", ") + std::to_string(*it);
      lines.push_back(list);
      ++positions;
    } else {
      lines.push_back(q.at("key").as_string());
    }
  }
  ASSERT_GT(choices, 0);
  ASSERT_GT(positions, 0);
  const Answered a = answer(quiz, join_lines(lines));
  EXPECT_NE(a.transcript.find(score_line(30, 30)), std::string::npos) << a.transcript;
}

TEST(QuizAnswers, PositionsCountFromZero) {
  // A positions question: its key reads back right; the same set shifted by one is wrong, and a
  // position past the last one is not a position.
  int checked = 0;
  for (const auto& q : make(12, 30, "structure").questions) {
    if (q.form != teach::quiz::Form::positions) continue;
    ++checked;
    ASSERT_FALSE(q.positions.empty());
    EXPECT_GE(q.positions.front(), 0);
    EXPECT_LE(q.positions.back(), q.max_position);
    EXPECT_TRUE(teach::quiz::check(q, q.key()).correct) << q.key();
    std::string shifted;
    for (int64_t p : q.positions) {
      if (!shifted.empty()) shifted += ",";
      shifted += std::to_string(p + 1);
    }
    const teach::quiz::Verdict v = teach::quiz::check(q, shifted);
    EXPECT_FALSE(v.valid && v.correct) << shifted << " for " << q.key();
    const teach::quiz::Verdict past = teach::quiz::check(q, std::to_string(q.max_position + 1));
    EXPECT_FALSE(past.valid);
    EXPECT_NE(past.error.find("in 0.." + std::to_string(q.max_position)), std::string::npos) << past.error;
    EXPECT_TRUE(teach::quiz::check(q, "0").valid);
    EXPECT_NE(q.how_to_answer().find("counted from 0"), std::string::npos);
  }
  EXPECT_GT(checked, 0);
}

TEST(QuizAnswers, FileWithByteOrderMarkAndCrlfLineEndsReads) {
  const teach::Quiz quiz = make(13, 5);
  const auto lines = key_lines(teach::answer_key(quiz));
  ASSERT_EQ(lines.size(), 5u);
  std::string text = "\xEF\xBB\xBF";
  for (const auto& l : lines) text += l + "\r\n";
  const Answered a = answer(quiz, text);
  EXPECT_NE(a.transcript.find(score_line(5, 5)), std::string::npos);
}

// ---- the expected answers follow from the question data ----------------------------

TEST(QuizNumeric, SoftmaxAnswersEqualExpOverSum) {
  int weight = 0, scaled = 0, saturation = 0;
  for (const auto& q : many_questions("numeric")) {
    const std::string topic = q.at("topic").as_string();
    const Value& d = q.at("data");
    if (topic == "softmax-weight") {
      const auto s = numbers(d.at("scores"));
      const auto w = softmax(s, 1.0);
      const auto j = d.at("position").as_int64();
      EXPECT_NEAR(q.at("expected").as_double(), w[static_cast<std::size_t>(j)], 1e-12);  // from 0
      // The question shows the scores to one decimal, exactly as used.
      for (double x : s) EXPECT_DOUBLE_EQ(x, std::round(x * 10) / 10);
      ++weight;
    } else if (topic == "scaled-score") {
      const auto qv = numbers(d.at("q")), kv = numbers(d.at("k"));
      double dot = 0;
      for (std::size_t i = 0; i < qv.size(); ++i) dot += qv[i] * kv[i];
      EXPECT_NEAR(q.at("expected").as_double(), dot / std::sqrt(static_cast<double>(qv.size())), 1e-12);
      EXPECT_EQ(d.at("d_k").as_int64(), static_cast<int64_t>(qv.size()));
      ++scaled;
    } else if (topic == "scaling-saturation") {
      const auto dots = numbers(d.at("dots"));
      const double dk = d.at("d_k").as_double();
      const auto raw = softmax(dots, 1.0), sc = softmax(dots, 1 / std::sqrt(dk));
      const double max_raw = *std::max_element(raw.begin(), raw.end());
      const double max_sc = *std::max_element(sc.begin(), sc.end());
      EXPECT_GE(max_raw, max_sc);  // scaling down never sharpens a softmax
      const std::string asked = d.at("asked").as_string();
      if (asked == "largest_unscaled") {
        EXPECT_NEAR(q.at("expected").as_double(), max_raw, 1e-12);
      }
      if (asked == "largest_scaled") {
        EXPECT_NEAR(q.at("expected").as_double(), max_sc, 1e-12);
      }
      if (asked == "which_larger") {
        char a[32], b[32];
        std::snprintf(a, sizeof a, "%.2f", max_raw);
        std::snprintf(b, sizeof b, "%.2f", max_sc);
        EXPECT_EQ(q.at("expected").as_string(), std::string(a) == b ? "equal to 2 decimals"
                                                : max_raw > max_sc  ? "without scaling"
                                                                    : "with scaling");
      }
      ++saturation;
    }
  }
  EXPECT_GT(weight, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(saturation, 0);
}

// The mask rules of include/attn/ops/attention.h, written out independently.
std::vector<int64_t> visible_by_rule(const Value& d) {
  const int64_t lq = d.at("lq").as_int64(), lk = d.at("lk").as_int64(), i = d.at("query").as_int64();
  const int64_t wl = d.at("window_left").as_int64(), wr = d.at("window_right").as_int64();
  const int64_t p = d.at("align").as_string() == "bottom_right" ? i + lk - lq : i;
  std::vector<int64_t> out;
  for (int64_t j = 0; j < lk; ++j) {
    if (d.at("causal").as_bool() && j > p) continue;
    if (wl >= 0 && j < p - wl) continue;
    if (wr >= 0 && j > p + wr) continue;
    out.push_back(j);  // positions from 0
  }
  return out;
}

TEST(QuizStructure, MaskVisibilityMatchesTheMaskRules) {
  std::set<std::string> variants;
  int decoder_classifier = 0;
  for (const auto& q : many_questions("structure")) {
    const std::string topic = q.at("topic").as_string();
    const Value& d = q.at("data");
    if (topic == "mask-visibility") {
      EXPECT_EQ(integers(q.at("expected")), visible_by_rule(d)) << q.at("text").as_string();
      EXPECT_EQ(q.at("max_position").as_int64(), d.at("lk").as_int64() - 1);  // the last key
      variants.insert(std::string(d.at("causal").as_bool() ? "causal" : "full") + "/" +
                      d.at("align").as_string() + "/" + std::to_string(d.at("window_left").as_int64() >= 0));
    } else if (topic == "classifier-token" && q.at("answer_form").as_string() == "positions") {
      // Causal: only the last position has seen every token.
      EXPECT_EQ(integers(q.at("expected")), std::vector<int64_t>{d.at("n").as_int64() - 1});
      ++decoder_classifier;
    } else if (topic == "classifier-token") {
      EXPECT_EQ(q.at("expected").as_string(), "[CLS], the first token");
    }
  }
  // causal, window, causal window, bottom-right causal.
  EXPECT_EQ(variants.size(), 4u);
  EXPECT_GT(decoder_classifier, 0);
}

TEST(QuizStructure, ParametersAndFlopsMatchTheFormulas) {
  int params = 0, flops = 0;
  for (const auto& q : many_questions("structure")) {
    const std::string topic = q.at("topic").as_string();
    const Value& d = q.at("data");
    if (topic == "mha-params") {
      const int64_t dm = d.at("d_model").as_int64();
      const int64_t expect = 4 * dm * dm + (d.at("bias").as_bool() ? 4 * dm : 0);
      EXPECT_EQ(q.at("expected").as_double(), static_cast<double>(expect));
      EXPECT_EQ(q.at("tolerance").as_string(), "exact");
      EXPECT_NE(q.at("text").as_string().find(d.at("bias").as_bool() ? "have biases" : "have no biases"),
                std::string::npos);
      ++params;
    } else if (topic == "mha-flops") {
      const int64_t dm = d.at("d_model").as_int64(), n = d.at("n").as_int64();
      EXPECT_EQ(q.at("expected").as_double(), static_cast<double>(8 * n * dm * dm + 4 * n * n * dm));
      EXPECT_DOUBLE_EQ(q.at("rel_tol").as_double(), 1e-3);
      EXPECT_NE(q.at("text").as_string().find("multiply-add\nis 2 FLOPs"), std::string::npos);
      ++flops;
    } else if (topic == "cross-attention") {
      const std::string asked = d.at("asked").as_string();
      EXPECT_EQ(q.at("expected").as_string(), asked == "Q" ? "the decoder" : "the encoder");
    } else if (topic == "architecture") {
      const std::string task = d.at("task").as_string(), e = q.at("expected").as_string();
      if (task.find("sentiment") != std::string::npos) {
        EXPECT_EQ(e, "encoder only");
      }
      if (task.find("translating") != std::string::npos) {
        EXPECT_EQ(e, "encoder and decoder (both)");
      }
      if (task.find("continuing a story") != std::string::npos) {
        EXPECT_EQ(e, "decoder only");
      }
    }
  }
  EXPECT_GT(params, 0);
  EXPECT_GT(flops, 0);
}

TEST(QuizPath, PathLengthsAreDistanceForRnnOneForAttentionAndCeilForWindows) {
  std::map<std::string, int> seen;
  for (const auto& q : many_questions("path")) {
    const std::string topic = q.at("topic").as_string();
    const Value& d = q.at("data");
    const int64_t from = d.at("from").as_int64(), to = d.at("to").as_int64(), dist = std::abs(to - from);
    EXPECT_NE(from, to);
    const double e = q.at("expected").as_double();
    if (topic == "rnn-path") {
      EXPECT_LT(from, to);  // an RNN carries information forward
      EXPECT_EQ(e, static_cast<double>(dist));
    } else if (topic == "attention-path") {
      EXPECT_EQ(e, 1.0);
    } else if (topic == "window-path") {
      const int64_t w = d.at("window").as_int64();
      EXPECT_EQ(e, static_cast<double>((dist + w - 1) / w)) << "dist " << dist << " w " << w;
    }
    ++seen[topic];
  }
  EXPECT_EQ(seen.size(), 3u);
}

// ---- JSON -----------------------------------------------------------------------------

TEST(QuizJson, ParsesAndHasTheFields) {
  const Value j = quiz_json(21, 9);
  EXPECT_EQ(j.at("command").as_string(), "quiz");
  EXPECT_EQ(j.at("seed").as_int64(), 21);
  EXPECT_EQ(j.at("count").as_int64(), 9);
  EXPECT_EQ(j.at("kind").as_string(), "all");
  EXPECT_EQ(j.find("score"), nullptr);  // no answers, no score
  ASSERT_EQ(j.at("questions").size(), 9u);
  for (const auto& q : j.at("questions").items()) {
    for (const char* f : {"number", "kind", "topic", "text", "answer_form", "how_to_answer", "tolerance",
                          "expected", "key", "solution", "data"})
      EXPECT_NE(q.find(f), nullptr) << f;
    EXPECT_FALSE(q.at("text").as_string().empty());
    EXPECT_FALSE(q.at("solution").as_string().empty());
    EXPECT_EQ(q.find("result"), nullptr);
    if (q.at("answer_form").as_string() == "choice") {
      EXPECT_GE(q.at("choices").size(), 2u);
    }
  }
}

}  // namespace

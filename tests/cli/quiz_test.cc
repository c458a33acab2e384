// Tests of `attn quiz`: run the built binary (ATTN_CLI_PATH) and check the
// expected answers it states against numbers computed here from the same
// question data (exp/sum, mask rules, formulas), never against hard-coded
// results; and check the modes: --answers, --print-answers, --json, the
// interactive loop driven through stdin, and the error cases.
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
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

#include "testing/cli_runner.h"

namespace {

using attn::json::Value;

// ---- running the binary ---------------------------------------------------------

using attn::testing::CliRun;

// Per-process names: ctest -j runs the tests of this file in parallel processes.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "attn_quiz_" + std::to_string(getpid()) + "_" + name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Runs `attn quiz ARGS`, with stdin from `input` (empty stdin when not given).
CliRun run_quiz(const std::string& args, const std::string& input = "") {
  return attn::testing::run_attn("quiz " + args, input);
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string score_line(int right, int total) {
  return "score: " + std::to_string(right) + "/" + std::to_string(total) + "\n";
}

// The quiz as JSON (attn's own strict reader).
Value quiz_json(const std::string& args) {
  const CliRun r = run_quiz(args + " --json");
  EXPECT_EQ(r.status, 0) << r.err;
  return attn::json::parse(r.out);
}

// Questions of many quizzes, to cover every topic.
std::vector<Value> many_questions(const std::string& kind) {
  std::vector<Value> qs;
  for (int seed = 1; seed <= 4; ++seed) {
    const Value j = quiz_json("--seed " + std::to_string(seed) + " --count 60 --kind " + kind);
    for (const auto& q : j.at("questions").items()) qs.push_back(q);
  }
  return qs;
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
  for (const char* mode : {"--json", "--print-answers", ""}) {  // "": the interactive text, stdin at EOF
    const CliRun a = run_quiz(std::string("--seed 42 --count 9 ") + mode);
    const CliRun b = run_quiz(std::string("--seed 42 --count 9 ") + mode);
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_FALSE(a.out.empty());
    EXPECT_EQ(a.out, b.out) << mode;
  }
}

TEST(QuizSeed, DifferentSeedsGiveDifferentNumbers) {
  std::set<std::string> texts;
  for (int seed = 1; seed <= 5; ++seed) {
    const Value j = quiz_json("--seed " + std::to_string(seed) + " --count 6 --kind numeric");
    std::string all;
    for (const auto& q : j.at("questions").items()) all += q.at("text").as_string() + "\n";
    texts.insert(all);
  }
  EXPECT_EQ(texts.size(), 5u) << "two seeds gave the same numeric questions";
}

TEST(QuizSeed, WithoutSeedAFreshSeedIsPrintedAndReproducesTheQuiz) {
  const Value a = quiz_json("--count 4");
  const int64_t seed = a.at("seed").as_int64();
  const Value b = quiz_json("--count 4 --seed " + std::to_string(seed));
  EXPECT_EQ(attn::json::dump(a), attn::json::dump(b));
}

TEST(QuizKinds, AllKindsAppearWithKindAll) {
  for (int count : {3, 7}) {
    const Value j = quiz_json("--seed 11 --count " + std::to_string(count) + " --kind all");
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
       {"mask-visibility", "cross-attention", "mha-params", "mha-flops", "architecture", "classifier-token"}},
      {"path", {"rnn-path", "attention-path", "window-path"}},
  };
  for (const auto& [kind, want] : topics) {
    std::set<std::string> seen;
    const Value quiz = quiz_json("--seed 3 --count 40 --kind " + kind);
    for (const auto& q : quiz.at("questions").items()) {
      EXPECT_EQ(q.at("kind").as_string(), kind);
      seen.insert(q.at("topic").as_string());
    }
    EXPECT_EQ(seen, want) << kind;
  }
}

// ---- the key and the checker ---------------------------------------------------------

class QuizKeyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(QuizKeyTest, PrintedKeyFedBackScoresFull) {
  const std::string args = GetParam();
  const CliRun key = run_quiz(args + " --print-answers");
  ASSERT_EQ(key.status, 0) << key.err;
  const std::string path = temp_path("key.txt");
  write_file(path, key.out);
  const int n = static_cast<int>(key_lines(key.out).size());
  ASSERT_GT(n, 0);
  const CliRun r = run_quiz(args + " --answers '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "result: right"), n);
  EXPECT_EQ(count_of(r.out, "result: wrong"), 0);
  EXPECT_NE(r.out.find(score_line(n, n)), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Seeds, QuizKeyTest,
                         ::testing::Values("--seed 1 --count 30", "--seed 2 --count 30 --kind numeric",
                                           "--seed 3 --count 30 --kind structure",
                                           "--seed 4 --count 30 --kind path", "--seed 0 --count 1",
                                           "--seed 9223372036854775807 --count 12"));

TEST(QuizAnswers, WrongAnswersScoreZeroAndShowTheWorkedSolution) {
  const Value j = quiz_json("--seed 5 --count 24");
  std::vector<std::string> wrong;
  for (const auto& q : j.at("questions").items()) wrong.push_back(wrong_answer(q));
  const std::string path = temp_path("wrong.txt");
  write_file(path, join_lines(wrong));
  const CliRun r = run_quiz("--seed 5 --count 24 --answers '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "result: wrong"), 24);
  EXPECT_EQ(count_of(r.out, "Worked solution:"), 24);
  EXPECT_NE(r.out.find(score_line(0, 24)), std::string::npos);
  // Each solution is printed in full after its result.
  for (const auto& q : j.at("questions").items()) {
    const std::string sol = q.at("solution").as_string();
    const std::string first = sol.substr(0, sol.find('\n'));
    EXPECT_NE(r.out.find("Worked solution:\n  " + first), std::string::npos) << first;
  }
}

TEST(QuizAnswers, JsonResultsAndScoreFollowTheAnswers) {
  const Value j = quiz_json("--seed 6 --count 6");
  std::vector<std::string> lines;
  int k = 0;
  for (const auto& q : j.at("questions").items())
    lines.push_back(k++ % 2 == 0 ? q.at("key").as_string() : wrong_answer(q));
  const std::string path = temp_path("mixed.txt");
  write_file(path, "# my answers\n\n" + join_lines(lines));
  const Value r = quiz_json("--seed 6 --count 6 --answers '" + path + "'");
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
  const std::string path = temp_path("key_except.txt");
  write_file(path, join_lines(lines));
  return path;
}

TEST(QuizAnswers, NumbersAreRightWithinTheStatedToleranceOnly) {
  const std::string args = "--seed 8 --count 20 --kind numeric";
  const Value quiz = quiz_json(args);
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
      const Value r = quiz_json(args + " --answers '" + key_except(quiz, i, b) + "'");
      EXPECT_EQ(r.at("questions").at(i).at("result").at("correct").as_bool(), right)
          << "expected " << e << ", answered " << b;
    }
  }
  EXPECT_EQ(checked, 2);
}

TEST(QuizAnswers, DecimalCommaIsAnErrorWithAHint) {
  const std::string args = "--seed 8 --count 20 --kind numeric";
  const Value quiz = quiz_json(args);
  for (std::size_t i = 0; i < quiz.at("questions").size(); ++i) {
    if (quiz.at("questions").at(i).at("answer_form").as_string() != "number") continue;
    const CliRun r = run_quiz(args + " --answers '" + key_except(quiz, i, "0,25") + "'");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("(question " + std::to_string(i + 1) +
                         "): expected a number such as 0.25; got '0,25' "
                         "(write decimals with a dot: 0.25)"),
              std::string::npos)
        << r.err;
    return;
  }
  FAIL() << "no number question in the quiz";
}

TEST(QuizAnswers, ChoicesAcceptTheirTextAndPositionsAnySpelling) {
  const Value j = quiz_json("--seed 12 --count 30 --kind structure");
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
  const std::string path = temp_path("texts.txt");
  write_file(path, join_lines(lines));
  const CliRun r = run_quiz("--seed 12 --count 30 --kind structure --answers '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(score_line(30, 30)), std::string::npos) << r.out;
}

TEST(QuizAnswers, FileWithByteOrderMarkAndCrlfLineEndsReads) {
  const auto lines = key_lines(run_quiz("--seed 13 --count 5 --print-answers").out);
  ASSERT_EQ(lines.size(), 5u);
  std::string text = "\xEF\xBB\xBF";
  for (const auto& l : lines) text += l + "\r\n";
  const std::string path = temp_path("crlf.txt");
  write_file(path, text);
  const CliRun r = run_quiz("--seed 13 --count 5 --answers '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(score_line(5, 5)), std::string::npos);
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
      EXPECT_NEAR(q.at("expected").as_double(), w[static_cast<std::size_t>(j - 1)], 1e-12);
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
  const int64_t lq = d.at("lq").as_int64(), lk = d.at("lk").as_int64(), i = d.at("query").as_int64() - 1;
  const int64_t wl = d.at("window_left").as_int64(), wr = d.at("window_right").as_int64();
  const int64_t p = d.at("align").as_string() == "bottom_right" ? i + lk - lq : i;
  std::vector<int64_t> out;
  for (int64_t j = 0; j < lk; ++j) {
    if (d.at("causal").as_bool() && j > p) continue;
    if (wl >= 0 && j < p - wl) continue;
    if (wr >= 0 && j > p + wr) continue;
    out.push_back(j + 1);
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
      EXPECT_EQ(q.at("max_position").as_int64(), d.at("lk").as_int64());
      variants.insert(std::string(d.at("causal").as_bool() ? "causal" : "full") + "/" +
                      d.at("align").as_string() + "/" + std::to_string(d.at("window_left").as_int64() >= 0));
    } else if (topic == "classifier-token" && q.at("answer_form").as_string() == "positions") {
      // Causal: only the last position has seen every token.
      EXPECT_EQ(integers(q.at("expected")), std::vector<int64_t>{d.at("n").as_int64()});
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
  const Value j = quiz_json("--seed 21 --count 9");
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

// ---- interactive -------------------------------------------------------------------------

TEST(QuizInteractive, PipedAnswersScoreAndEachGetsASolution) {
  const CliRun key = run_quiz("--seed 31 --count 6 --print-answers");
  const auto lines = key_lines(key.out);
  ASSERT_EQ(lines.size(), 6u);
  const CliRun r = run_quiz("--seed 31 --count 6", join_lines(lines));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "answer> "), 6);
  EXPECT_EQ(count_of(r.out, "result: right"), 6);
  EXPECT_EQ(count_of(r.out, "Worked solution:"), 6);
  EXPECT_NE(r.out.find(score_line(6, 6)), std::string::npos);
  EXPECT_EQ(r.out.find("stopped after"), std::string::npos);
}

TEST(QuizInteractive, EofMidQuizEndsWithTheScoreSoFar) {
  const auto lines = key_lines(run_quiz("--seed 32 --count 5 --print-answers").out);
  ASSERT_EQ(lines.size(), 5u);
  // Two right answers, then end of input (no final newline on the second).
  const CliRun r = run_quiz("--seed 32 --count 5", lines[0] + "\n" + lines[1]);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(stopped after 2 of 5 questions)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(score_line(2, 2)), std::string::npos);
  EXPECT_NE(r.out.find("Question 3 of 5"), std::string::npos);
  EXPECT_EQ(r.out.find("Question 4 of 5"), std::string::npos);
  // EOF before any answer.
  const CliRun none = run_quiz("--seed 32 --count 5");
  EXPECT_EQ(none.status, 0);
  EXPECT_NE(none.out.find(score_line(0, 0)), std::string::npos);
}

TEST(QuizInteractive, MalformedAnswersAreAskedAgainThenCountedWrong) {
  const Value j = quiz_json("--seed 33 --count 3");
  const auto& qs = j.at("questions").items();
  // Question 1: garbage, then the right answer. Question 2: three bad answers. Question 3: right.
  const std::string input =
      "not an answer\n" + qs[0].at("key").as_string() + "\n\n???\n(z)\n" + qs[2].at("key").as_string() + "\n";
  const CliRun r = run_quiz("--seed 33 --count 3", input);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "could not read that"), 4) << r.out;
  EXPECT_EQ(count_of(r.out, "Try again"), 3);
  EXPECT_EQ(count_of(r.out, "No valid answer after 3 tries; counted as wrong."), 1);
  EXPECT_EQ(count_of(r.out, "result: right"), 2);
  EXPECT_EQ(count_of(r.out, "result: wrong"), 1);
  EXPECT_NE(r.out.find(score_line(2, 3)), std::string::npos) << r.out;
}

TEST(QuizInteractive, QuitStopsWithTheScoreSoFar) {
  const auto lines = key_lines(run_quiz("--seed 34 --count 4 --print-answers").out);
  const CliRun r = run_quiz("--seed 34 --count 4", lines[0] + "\nquit\n" + lines[2] + "\n");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("(stopped after 1 of 4 questions)"), std::string::npos);
  EXPECT_NE(r.out.find(score_line(1, 1)), std::string::npos);
}

// ---- errors ------------------------------------------------------------------------------

struct ErrorCase {
  std::string args;
  std::string file;  // written to the answers file when not empty
  std::string message;
};

class QuizErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(QuizErrorTest, ExitsNonZeroWithAClearMessage) {
  const ErrorCase& c = GetParam();
  std::string args = c.args;
  if (!c.file.empty()) {
    const std::string path = temp_path("bad_answers.txt");
    write_file(path, c.file);
    args += " --answers '" + path + "'";
  }
  const CliRun r = run_quiz(args);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // nothing half-printed
}

INSTANTIATE_TEST_SUITE_P(
    Cases, QuizErrorTest,
    ::testing::Values(ErrorCase{"--kind poetry", "",
                                "--kind: expected numeric, structure, path or all; got 'poetry'"},
                      ErrorCase{"--count 0", "", "--count must be in [1, 1000]; got 0"},
                      ErrorCase{"--count -3", "", "--count must be in [1, 1000]; got -3"},
                      ErrorCase{"--count many", "", "--count: expected a whole number; got 'many'"},
                      ErrorCase{"--seed -1", "", "--seed must be in [0, "},
                      ErrorCase{"--answers /nonexistent/answers.txt", "", "--answers: cannot read"},
                      ErrorCase{"--answers /", "", "is a directory"},
                      ErrorCase{"--seed 1 --count 2 --kind path", "3\nthree\n",
                                "line 2 (question 2): expected a whole number"},
                      ErrorCase{"--seed 1 --count 2 --kind path", "3\n", "has 1 answers; expected 2"},
                      ErrorCase{"--seed 1 --print-answers --json", "", "do not go together"},
                      ErrorCase{"--seed 1 --print-answers", "1\n", "do not go together"},
                      ErrorCase{"--colour", "", "unknown option '--colour'"}));

TEST(QuizHelp, DescribesEveryOption) {
  const CliRun r = run_quiz("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* o : {"--count", "--kind", "--seed", "--answers", "--json", "--print-answers"})
    EXPECT_NE(r.out.find(o), std::string::npos) << o;
}

}  // namespace

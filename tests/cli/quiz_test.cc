// Tests of the `attn quiz` command: run the built binary (ATTN_CLI_PATH) in
// its modes (--json, --print-answers, --answers, the interactive loop driven
// through stdin), the random seed it prints, and the errors of its flags and
// answers files. The questions, the key and the checker are tested on the
// library in tests/teach/quiz_test.cc.
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

// ---- the command in its modes -----------------------------------------------------

TEST(QuizCli, SameSeedGivesTheSameQuizInEveryMode) {
  for (const char* mode : {"--json", "--print-answers", ""}) {  // "": the interactive text, stdin at EOF
    const CliRun a = run_quiz(std::string("--seed 42 --count 9 ") + mode);
    const CliRun b = run_quiz(std::string("--seed 42 --count 9 ") + mode);
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_FALSE(a.out.empty());
    EXPECT_EQ(a.out, b.out) << mode;
  }
}

TEST(QuizSeed, WithoutSeedAFreshSeedIsPrintedAndReproducesTheQuiz) {
  const Value a = quiz_json("--count 4");
  const int64_t seed = a.at("seed").as_int64();
  const Value b = quiz_json("--count 4 --seed " + std::to_string(seed));
  EXPECT_EQ(attn::json::dump(a), attn::json::dump(b));
}

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

INSTANTIATE_TEST_SUITE_P(Seeds, QuizKeyTest, ::testing::Values("--seed 1 --count 30", "--seed 0 --count 1"));

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
  EXPECT_NE(r.out.find("positions counted from 0"), std::string::npos) << r.out;
}

}  // namespace

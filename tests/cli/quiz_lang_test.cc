// `attn quiz --lang zh`: the command in Chinese (questions, prompts, feedback,
// score and --help), Chinese and full-width answers from a file and from
// stdin, and the language from the locale. The checker itself is tested on the
// library in tests/teach/quiz_lang_test.cc.
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;

CliRun run_quiz(const std::string& args, const std::string& input = "") {
  return attn::testing::run_attn("quiz " + args, input);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "attn_quiz_lang_" + std::to_string(getpid()) + "_" + name;
}

// Digits 0-9 as full-width ０-９ and commas as 、.
std::string wide(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      o += "\xEF\xBC";
      o += static_cast<char>(0x90 + (c - '0'));
    } else if (c == ',') {
      o += "、";
    } else if (c == '.') {
      o += "．";
    } else {
      o += c;
    }
  }
  return o;
}

TEST(QuizLangCli, ChineseAnswersFileInFullWidthScoresFullMarks) {
  const CliRun key = run_quiz("--seed 21 --count 6 --kind path --print-answers --lang zh");
  ASSERT_EQ(key.status, 0) << key.err;
  EXPECT_NE(key.out.find("# 答案："), std::string::npos) << key.out;
  std::string answers;
  for (std::size_t b = 0, e; b < key.out.size(); b = e + 1) {
    e = key.out.find('\n', b);
    const std::string line = key.out.substr(b, e - b);
    if (!line.empty() && line[0] != '#') answers += wide(line) + "\n";
  }
  const std::string path = temp_path("answers.txt");
  std::ofstream(path) << answers;
  const CliRun r = run_quiz("--seed 21 --count 6 --kind path --lang zh --answers " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("得分：6/6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("结果：回答正确"), std::string::npos);
  EXPECT_NE(r.out.find("详细解答："), std::string::npos);
  EXPECT_NE(r.out.find("第 1 题，共 6 题"), std::string::npos);
}

TEST(QuizLangCli, InteractiveInChineseWithAChineseChoice) {
  // Structure questions until one is the architecture question: answer it in Chinese.
  for (int seed = 1; seed <= 40; ++seed) {
    const CliRun j =
        run_quiz("--seed " + std::to_string(seed) + " --count 1 --kind structure --json --lang zh");
    ASSERT_EQ(j.status, 0) << j.err;
    const attn::json::Value q = attn::json::parse(j.out).at("questions").at(0);
    if (q.at("topic").as_string() != "architecture") continue;
    const std::string expected = q.at("expected").as_string();  // e.g. "仅编码器"
    const std::string answer = expected == "仅编码器"   ? "只用编码器"
                               : expected == "仅解码器" ? "decoder-only"
                                                        : "编码器解码器";
    const CliRun r =
        run_quiz("--seed " + std::to_string(seed) + " --count 1 --kind structure --lang zh", answer + "\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("答案> "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("结果：回答正确"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("得分：1/1"), std::string::npos) << r.out;
    return;
  }
  FAIL() << "no architecture question in 40 seeds";
}

TEST(QuizLangCli, UnreadableAnswerGetsChineseFeedback) {
  const CliRun r = run_quiz("--seed 3 --count 1 --kind numeric --lang zh", "???\n退出\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("无法识别这个答案："), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("请再试一次"), std::string::npos);
}

TEST(QuizLangCli, HelpInChineseFromTheFlagAndTheLocale) {
  const CliRun r = run_quiz("--help --lang zh");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("用法：attn quiz", 0), 0u) << r.out;
  for (const char* h : {"题目数量", "让测验可重复", "从 FILE 读取答案", "打印答案", "两种语言的答案都能识别"})
    EXPECT_NE(r.out.find(h), std::string::npos) << h;
  const char* old = std::getenv("LC_ALL");
  const std::string saved = old ? old : "";
  setenv("LC_ALL", "zh_CN.UTF-8", 1);
  const CliRun l = run_quiz("--help");
  if (old) {
    setenv("LC_ALL", saved.c_str(), 1);
  } else {
    unsetenv("LC_ALL");
  }
  EXPECT_EQ(l.out.rfind("用法：", 0), 0u) << l.out;
  const CliRun en = run_quiz("--help --lang en");
  EXPECT_EQ(en.out.rfind("usage: attn quiz", 0), 0u);
}

}  // namespace

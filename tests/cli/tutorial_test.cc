// Tests of the `attn tutorial` command: run the built binary in both languages,
// --section, --json, --help in Chinese, the language from the locale, and the
// errors of its flags. The computed values are tested on the library in
// tests/teach/tutorial_test.cc.
#include <attn/io/json.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;

CliRun run_tutorial(const std::string& args) { return attn::testing::run_attn("tutorial " + args); }

// Sets LC_ALL (and clears LC_MESSAGES and LANG) for the binary run while it lives.
class Locale {
 public:
  explicit Locale(const char* lc_all) {
    for (const char* v : {"LC_ALL", "LC_MESSAGES", "LANG"}) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::string(old) : std::string("\x01"));
      unsetenv(v);
    }
    if (lc_all) setenv("LC_ALL", lc_all, 1);
  }
  ~Locale() {
    for (const auto& [k, v] : saved_) {
      if (v == "\x01") {
        unsetenv(k.c_str());
      } else {
        setenv(k.c_str(), v.c_str(), 1);
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(TutorialCli, ChineseSectionTwoWithItsDeeperCommand) {
  const CliRun r = run_tutorial("--lang zh --section 2 --no-timing");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 · 查询、键、值"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("缩放点积注意力"), std::string::npos);
  EXPECT_NE(r.out.find("教程所印"), std::string::npos);
  EXPECT_NE(r.out.find("-> 深入：attn explain --query 没 --lang zh"), std::string::npos);
  EXPECT_EQ(r.out.find("1 · "), std::string::npos);
}

TEST(TutorialCli, WholeWalkInEnglishHasSixSections) {
  const CliRun r = run_tutorial("--lang en --no-timing --section 1 --sentence '今天 下雨 ， 我 没 带 伞'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("7 tokens, split on spaces: 今天 | 下雨 | ， | 我 | 没 | 带 | 伞"), std::string::npos)
      << r.out;
  const CliRun c = run_tutorial("--lang zh --no-timing --section 1 --split chars");
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("共 15 个词元，按字切分"), std::string::npos) << c.out;
  EXPECT_NE(run_tutorial("--split foo").err.find("--split: expected words or chars"), std::string::npos);
  EXPECT_NE(r.out.find("6 steps"), std::string::npos);
}

TEST(TutorialCli, JsonParsesAndNamesTheLanguage) {
  const CliRun r = run_tutorial("--lang zh --json --section 3");
  ASSERT_EQ(r.status, 0) << r.err;
  const attn::json::Value j = attn::json::parse(r.out);
  EXPECT_EQ(j.at("command").as_string(), "tutorial");
  EXPECT_EQ(j.at("lang").as_string(), "zh");
  EXPECT_EQ(j.at("sections").at(0).at("id").as_string(), "multi-head");
}

TEST(TutorialCli, HelpInChineseAndTheLocaleDefault) {
  const CliRun zh = run_tutorial("--help --lang zh");
  ASSERT_EQ(zh.status, 0);
  EXPECT_EQ(zh.out.rfind("用法：attn tutorial", 0), 0u) << zh.out;
  EXPECT_NE(zh.out.find("只显示第 K 节"), std::string::npos);  // help_zh of --section
  {
    const Locale l("zh_CN.UTF-8");
    const CliRun r = run_tutorial("--help");
    EXPECT_EQ(r.out.rfind("用法：", 0), 0u) << r.out;
  }
  {
    const Locale l(nullptr);
    const CliRun r = run_tutorial("--help");
    EXPECT_EQ(r.out.rfind("usage: attn tutorial", 0), 0u) << r.out;
  }
}

TEST(TutorialCli, BadFlagsFailWithAClearMessage) {
  const CliRun s = run_tutorial("--section 9");
  EXPECT_EQ(s.status, 1);
  EXPECT_NE(s.err.find("--section"), std::string::npos) << s.err;
  const CliRun l = run_tutorial("--lang fr");
  EXPECT_EQ(l.status, 1);
  EXPECT_NE(l.err.find("fr"), std::string::npos) << l.err;
  const CliRun m = run_tutorial("--section 4 --translation-model /nonexistent.attn");
  EXPECT_EQ(m.status, 1);
  EXPECT_NE(m.err.find("/nonexistent.attn"), std::string::npos) << m.err;
}

TEST(TutorialCli, ListedInTheCommands) {
  const CliRun r = attn::testing::run_attn("help");
  EXPECT_NE(r.out.find("tutorial"), std::string::npos) << r.out;
}

}  // namespace

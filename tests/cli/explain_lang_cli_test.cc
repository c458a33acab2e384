// `--lang zh|en` of `attn explain` and `attn classify --explain` (the binary,
// ATTN_CLI_PATH): the Chinese text and help, the default from the locale, the
// error for an unknown language. What the modes print in each language is
// tested on the library in tests/teach/explain_lang_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/lang_checks.h"
#include "testing/micro_classifier.h"

namespace attn {
namespace {

using attn::testing::CliRun;
using attn::testing::run_attn;

// Sets an environment variable for the life of the object (the binary inherits it), then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ExplainLangCli, ChineseTextAndJsonWithLang) {
  const CliRun r = run_attn("explain --lang zh --query 5");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* needle : {"查询词：   带   （第 5 个位置，共 7 个，从 0 开始数）", "第 6 步  输出",
                             "引擎一致", "教程的第一张 softmax 表是错的"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing: " << needle;
  const CliRun j = run_attn("explain --mask causal --json --lang zh");
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_NE(j.out.find("\"lang\": \"zh\""), std::string::npos) << j.out.substr(0, 300);
  EXPECT_NE(j.out.find("\"rule\": \"query i sees keys j <= i\""), std::string::npos) << "JSON stays English";
}

TEST(ExplainLangCli, DefaultFollowsTheLocale) {
  const ScopedEnv messages("LC_MESSAGES", nullptr), lang("LANG", nullptr);
  {
    const ScopedEnv all("LC_ALL", "zh_CN.UTF-8");
    const CliRun r = run_attn("explain --scores 1,2");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("第 1 步  对每个分数取指数"), std::string::npos) << r.out.substr(0, 400);
    const CliRun en = run_attn("explain --scores 1,2 --lang en");  // --lang wins over the locale
    EXPECT_NE(en.out.find("Step 1. Exponentiate every score"), std::string::npos) << en.out.substr(0, 400);
  }
  const ScopedEnv all("LC_ALL", "C");
  const CliRun r = run_attn("explain --scores 1,2");
  EXPECT_NE(r.out.find("Step 1. Exponentiate every score"), std::string::npos) << r.out.substr(0, 400);
}

TEST(ExplainLangCli, ChineseHelpDescribesEveryOptionInChinese) {
  const CliRun en = run_attn("explain --help --lang en"), zh = run_attn("explain --help --lang zh");
  ASSERT_EQ(zh.status, 0) << zh.err;
  for (const char* needle : {"用法：attn explain [选项]", "选项：", "示例：", "详见：docs/explain.md",
                             "配合 --cost：序列长度 N（>= 1）", "输出文字和本帮助的语言"})
    EXPECT_NE(zh.out.find(needle), std::string::npos) << "missing: " << needle;
  for (const char* o :
       {"--query", "--sentence", "--seed",  "--scores", "--tokens", "--multi-head", "--heads",  "--cost",
        "--n",     "--d",        "--batch", "--causal", "--mask",   "--length",     "--window", "--model",
        "--layer", "--head",     "--word",  "--dims",   "--lang",   "--json",       "--help"}) {
    EXPECT_NE(zh.out.find(std::string("  ") + o + " "), std::string::npos) << "zh help lacks " << o;
    EXPECT_NE(en.out.find(std::string("  ") + o + " "), std::string::npos) << "en help lacks " << o;
  }
  // The same numbers in both (defaults, ranges, examples), and no English sentence left in Chinese.
  EXPECT_EQ(testing::numbers_in(en.out), testing::numbers_in(zh.out));
  EXPECT_EQ(testing::english_runs(zh.out), std::vector<std::string>{});
  EXPECT_FALSE(testing::english_runs(en.out).empty());
  // These are phrases of the English help.
  for (const char* english : {"the query word", "number of heads", "this text", "for programs", "usage:"})
    EXPECT_EQ(zh.out.find(english), std::string::npos) << "untranslated: " << english;
  EXPECT_NE(en.out.find("usage: attn explain [options]"), std::string::npos);
}

TEST(ExplainLangCli, UnknownLanguageIsAnError) {
  const CliRun r = run_attn("explain --lang fr");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("'fr'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("zh or en"), std::string::npos) << r.err;
}

TEST(ExplainLangCli, ClassifyExplainInChinese) {
  const std::string path = testing::save_micro_classifier(
      testing::MicroModelCase{"prenorm_learned", true, models::Positions::learned, 0},
      "attn_explain_lang_cli");
  const CliRun r = run_attn("classify --model '" + path + "' --explain --lang zh '质量很好，物流也快'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* needle : {"注意力与归因对照", "[CLS] 的注意力", "积分梯度", "注意力不等于解释", "类别   ",
                             "[CLS] 关注最多的位置", "第 0 层"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing: " << needle << "\n" << r.out;
  for (const char* english : {"label  ", "attended most to", "mean of "})
    EXPECT_EQ(r.out.find(english), std::string::npos) << "English left: " << english << "\n" << r.out;
  const CliRun j = run_attn("classify --model '" + path + "' --explain --lang zh --json '质量很好'");
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_NE(j.out.find("\"lang\": \"zh\""), std::string::npos) << j.out.substr(0, 300);
  const CliRun bad = run_attn("classify --model '" + path + "' --lang zh '质量很好'");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--lang only applies with --explain"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace attn

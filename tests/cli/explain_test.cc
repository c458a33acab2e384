// Tests of the `attn explain` command itself: one smoke test of the binary
// (ATTN_CLI_PATH), the errors of its flags (exit status 1, a message naming
// the bad value) and --help. What the modes compute is tested on the library
// in tests/teach/explain_test.cc.
#include <gtest/gtest.h>

#include <string>

#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;

CliRun run_cli(const std::string& args) { return attn::testing::run_attn("explain " + args); }

TEST(ExplainCli, WalkthroughAndJsonRun) {
  const CliRun r = run_cli("--query 5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* needle : {"Query word: 带   (position 5 of 7, counting from 0)", "Step 6.",
                             "Engine agreement: the engine's exact weights and output agree"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << "missing: " << needle;
  const CliRun j = run_cli("--mask causal --json");
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(j.out.rfind("{\n  \"mode\": \"mask\",", 0), 0u) << j.out.substr(0, 200);
  EXPECT_NE(j.out.find("\"visible_count\": [1, 2, 3, 4, 5, 6, 7]"), std::string::npos) << j.out;
}

// ---- errors -------------------------------------------------------------------------------

struct ErrorCase {
  std::string args;
  std::string names;  // the message must contain this (the bad value)
};

class ExplainErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ExplainErrorTest, ExitsNonZeroNamingTheBadValue) {
  const CliRun r = run_cli(GetParam().args);
  EXPECT_NE(r.status, 0) << GetParam().args;
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
  EXPECT_NE(r.err.find(GetParam().names), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, ExplainErrorTest,
    ::testing::Values(
        ErrorCase{"--frobnicate", "'--frobnicate'"}, ErrorCase{"stray", "'stray'"},
        ErrorCase{"--scores 0.2,abc,1", "'abc'"}, ErrorCase{"--scores 0.2,,1", "'0.2,,1'"},
        ErrorCase{"--scores 1e999", "'1e999'"}, ErrorCase{"--scores 1,2 --tokens a", "got 1"},
        ErrorCase{"--query 猫", "'猫'"}, ErrorCase{"--query 7", "got 7"}, ErrorCase{"--query -1", "'-1'"},
        ErrorCase{"--cost --n 0 --d 8 --heads 2", "got 0"},
        ErrorCase{"--cost --n -5 --d 8 --heads 2", "got -5"},
        ErrorCase{"--cost --n 12x --d 8 --heads 2", "'12x'"},
        ErrorCase{"--cost --n 16 --d 10 --heads 3", "--heads 3"}, ErrorCase{"--cost --d 8 --heads 2", "--n"},
        ErrorCase{"--multi-head --heads 3", "got 3"}, ErrorCase{"--mask diagonal", "'diagonal'"},
        ErrorCase{"--mask padding", "--length"}, ErrorCase{"--mask padding --length 8", "got 8"},
        ErrorCase{"--mask window --window -1", "got -1"}, ErrorCase{"--scores 1 --cost", "--cost"},
        ErrorCase{"--n 5", "--n"}, ErrorCase{"--query", "--query"}, ErrorCase{"--json=yes", "'--json=yes'"},
        ErrorCase{"--cost --n 1000000000 --d 1000000 --heads 1 --batch 1000000", "overflows"}));

// ---- help ---------------------------------------------------------------------------------

TEST(ExplainHelp, DescribesEveryOption) {
  const CliRun r = run_cli("--help");
  ASSERT_EQ(r.status, 0);
  for (const char* o :
       {"--query", "--sentence", "--seed", "--scores", "--tokens", "--multi-head", "--heads", "--cost", "--n",
        "--d", "--batch", "--causal", "--mask", "--length", "--window", "--json", "--help"})
    EXPECT_NE(r.out.find(std::string("  ") + o + " "), std::string::npos) << "help lacks " << o;
  EXPECT_NE(r.out.find("numbered from 0"), std::string::npos) << r.out;
}

}  // namespace

// --precision on the command line: `attn train <task>` takes it for every task (and strips it
// before the task parses its own options), `attn embed` / `similarity` list it; bad values are
// reported with the accepted ones.
#include <gtest/gtest.h>

#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;
using attn::testing::run_attn;

TEST(PrecisionCli, TrainTakesPrecisionForEveryTask) {
  const CliRun help = run_attn("train --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--precision fp32|bf16"), std::string::npos) << help.out;
  // Accepted and removed: the task then complains about what it misses, not about --precision.
  for (const char* form : {"--precision bf16", "--precision=fp32"}) {
    const CliRun r = run_attn(std::string("train lm ") + form);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("--data FILE is required"), std::string::npos) << form << ": " << r.err;
    EXPECT_EQ(r.err.find("precision"), std::string::npos) << form << ": " << r.err;
  }
}

TEST(PrecisionCli, BadValuesNameTheChoices) {
  const CliRun r = run_attn("train lm --precision half");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("'half'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bf16"), std::string::npos) << r.err;
  const CliRun missing = run_attn("train lm --precision");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("--precision needs a value"), std::string::npos) << missing.err;
}

TEST(PrecisionCli, EmbedAndSimilarityListIt) {
  for (const char* cmd : {"embed --help", "similarity --help"}) {
    const CliRun r = run_attn(cmd);
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("--precision"), std::string::npos) << cmd << ": " << r.out;
  }
}

}  // namespace

// Smoke test of `attn serve` (the server itself is tested in tests/serve): its help, and the error
// when nothing is to be served. Skipped when attn was built without cpp-httplib.
#include <gtest/gtest.h>

#include "testing/cli_runner.h"

namespace attn {
namespace {

TEST(ServeCli, HelpListsTheLimitsAndNoModelIsAnError) {
  if (testing::run_attn("help").out.find("  serve ") == std::string::npos)
    GTEST_SKIP() << "attn was built without cpp-httplib (no serve command)";
  const auto help = testing::run_attn("serve --help");
  EXPECT_EQ(help.status, 0);
  for (const char* opt : {"--embed", "--generate", "--classify", "--port", "--max-body-bytes",
                          "--max-batch-tokens", "--max-wait-ms", "--parallel", "--context"})
    EXPECT_NE(help.out.find(opt), std::string::npos) << opt;
  const auto none = testing::run_attn("serve --port 0");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("nothing to serve"), std::string::npos) << none.err;
  const auto bad = testing::run_attn("serve --embed minilm --port 70000");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--port"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace attn

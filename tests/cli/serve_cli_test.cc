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
  // Every field of serve::Limits has its flag (issue 40: error messages name them).
  for (const char* opt : {"--embed",
                          "--generate",
                          "--classify",
                          "--port",
                          "--max-body-bytes",
                          "--max-inputs",
                          "--max-input-bytes",
                          "--max-batch-tokens",
                          "--max-wait-ms",
                          "--max-queued-inputs",
                          "--max-tokens",
                          "--default-max-tokens",
                          "--context",
                          "--max-queued-generations",
                          "--max-queue-wait",
                          "--max-attention-tokens",
                          "--max-attention-values",
                          "--http-threads",
                          "--read-timeout",
                          "--write-timeout",
                          "--parallel"})
    EXPECT_NE(help.out.find(std::string(opt) + " "), std::string::npos) << opt;
  // Each is read: a value out of range is an error naming it (before anything is loaded).
  for (const char* opt : {"--max-attention-values 0", "--default-max-tokens 0", "--max-queue-wait -1",
                          "--read-timeout 0", "--write-timeout 0"}) {
    const auto r = testing::run_attn(std::string("serve --embed minilm --port 0 ") + opt);
    EXPECT_EQ(r.status, 1) << opt;
    EXPECT_NE(r.err.find(std::string(opt).substr(0, std::string(opt).find(' '))), std::string::npos)
        << opt << ": " << r.err;
    EXPECT_EQ(r.err.find("unknown option"), std::string::npos) << opt << ": " << r.err;
  }
  const auto none = testing::run_attn("serve --port 0");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("nothing to serve"), std::string::npos) << none.err;
  const auto bad = testing::run_attn("serve --embed minilm --port 70000");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--port"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace attn

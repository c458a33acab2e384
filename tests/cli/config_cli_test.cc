// The ATTN_* variables seen from the command line: a bad value stops every command before it runs,
// with exit status 1 and the variable, what it accepts and what it got on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "testing/testing.h"

namespace {

struct EnvRun {
  int status = -1;
  std::string out, err;
};

// `attn <args>` with `env` (shell assignments, e.g. "ATTN_NUM_THREADS=abc") in front.
EnvRun run_with_env(const std::string& env, const std::string& args) {
  static int calls = 0;
  const std::string err_path = ::testing::TempDir() + "attn_config_cli_" + std::to_string(getpid()) + "_" +
                               std::to_string(calls++) + ".err";
  const std::string cmd = env + " '" + ATTN_CLI_PATH + "' " + args + " </dev/null 2>'" + err_path + "'";
  EnvRun r;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  r.err = attn::testing::read_text(err_path);
  std::remove(err_path.c_str());
  return r;
}

TEST(ConfigCli, BadThreadCountIsReportedNotAborted) {
  for (const std::string value : {"abc", "100000"}) {
    const EnvRun r = run_with_env("ATTN_NUM_THREADS=" + value, "explain");
    EXPECT_EQ(r.status, 1) << value << ": " << r.err;
    EXPECT_NE(r.err.find("ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '" + value + "'"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << value;
  }
}

TEST(ConfigCli, EveryCommandChecksFirst) {
  for (const char* cmd : {"quiz", "view --demo", "train lm"}) {
    const EnvRun r = run_with_env("ATTN_ISA=avx9", cmd);
    EXPECT_EQ(r.status, 1) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("ATTN_ISA: expected scalar, avx2 or avx512; got 'avx9'"), std::string::npos)
        << cmd << ": " << r.err;
  }
}

TEST(ConfigCli, GoodValuesRunAsWithout) {
  const EnvRun plain = run_with_env("", "explain");
  const EnvRun set = run_with_env("ATTN_NUM_THREADS=2 ATTN_SPIN_US=0", "explain");
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(set.status, 0) << set.err;
  EXPECT_FALSE(plain.out.empty());
  EXPECT_EQ(set.out, plain.out);
}

}  // namespace

#include "testing/cli_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "testing/testing.h"

namespace attn::testing {

CliRun run_attn(const std::string& args, const std::string& input) {
  static std::atomic<int> counter{0};
  const std::string base =
      ::testing::TempDir() + "attn_cli_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  const std::string in_path = base + ".stdin", err_path = base + ".stderr";
  std::ofstream(in_path, std::ios::binary) << input;
  const std::string cmd =
      std::string("'") + ATTN_CLI_PATH + "' " + args + " <'" + in_path + "' 2>'" + err_path + "'";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p) {
    char buf[4096];
    std::size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  r.err = read_text(err_path);
  std::remove(in_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

}  // namespace attn::testing

// Runs the built `attn` binary (ATTN_CLI_PATH) the way a person would, for the
// tests of tools/cli: arguments through the shell, stdin from a string,
// stdout and stderr captured separately.
#pragma once

#include <string>

namespace attn::testing {

struct CliRun {
  int status = -1;  // exit status (-1 when the process did not exit normally)
  std::string out;  // stdout
  std::string err;  // stderr
};

// `args` is appended to the binary's path as shell words (quote them as a
// shell would). stdin is `input` (empty when not given). Temporary files are
// named per process and per call, so ctest -j can run tests side by side.
CliRun run_attn(const std::string& args, const std::string& input = "");

}  // namespace attn::testing

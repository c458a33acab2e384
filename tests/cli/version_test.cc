// `attn --version` and `attn version` print "attn MAJOR.MINOR.PATCH", the
// version CMake generated into <attn/version.h> from project(VERSION ...).
#include <attn/version.h>
#include <gtest/gtest.h>

#include <string>

#include "testing/cli_runner.h"

namespace {

TEST(CliVersion, FlagAndCommandPrintTheProjectVersion) {
  const std::string expected = std::string("attn ") + ATTN_VERSION_STRING + "\n";
  for (const char* args : {"--version", "version"}) {
    const attn::testing::CliRun r = attn::testing::run_attn(args);
    EXPECT_EQ(r.status, 0) << args << ": " << r.err;
    EXPECT_EQ(r.out, expected) << args;
    EXPECT_EQ(r.err, "") << args;
  }
}

TEST(CliVersion, HelpListsTheVersionCommand) {
  const attn::testing::CliRun r = attn::testing::run_attn("help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("  version   print the version"), std::string::npos) << r.out;
}

}  // namespace

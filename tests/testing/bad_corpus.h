// Shared pieces of the bad-file regression tests (tests/io, tests/text): a
// table row (file → fragments its error must contain), the test-name rule, and
// the check that the table and the folder list the same files.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace attn::testing {

struct BadFile {
  std::string file;                   // relative to the corpus folder
  std::vector<std::string> expected;  // fragments of the error message
};
inline void PrintTo(const BadFile& b, std::ostream* os) { *os << b.file; }

// A gtest parameter name: the file name with every non-alphanumeric character as '_'.
std::string bad_file_test_name(const ::testing::TestParamInfo<BadFile>& info);

// Every file in `dir` (except those `skip` returns true for) has a table row,
// and every row names a file that exists, once.
void expect_table_lists_every_file(const std::string& dir, const std::vector<BadFile>& table,
                                   const std::function<bool(const std::string&)>& skip = {});

}  // namespace attn::testing

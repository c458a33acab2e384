// Helpers for the text and data tests: temporary files and the real corpus.
#pragma once

#include <attn/data/reader.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace attn::testing {

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("attn_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
             std::to_string(static_cast<long>(::getpid())));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name, const std::string& bytes) const {
    const std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// $ATTN_DATA_DIR, else <repo>/../shared/data (where CI and /work/main find it).
inline std::string real_data_dir() {
  const char* env = std::getenv("ATTN_DATA_DIR");
  if (env != nullptr && *env != '\0') return env;
  return std::string(ATTN_SOURCE_DIR) + "/../shared/data";
}

inline std::string real_data_path(const std::string& relative) { return real_data_dir() + "/" + relative; }

}  // namespace attn::testing

// Skips the test with a clear message when a real-data file is absent.
#define ATTN_REQUIRE_REAL_DATA(relative)                                                                    \
  do {                                                                                                      \
    if (!std::filesystem::exists(::attn::testing::real_data_path(relative)))                                \
      GTEST_SKIP() << "real data '" << ::attn::testing::real_data_path(relative)                            \
                   << "' not found: set ATTN_DATA_DIR to the folder holding reviews-zh/ and tatoeba-cmn/, " \
                      "or run scripts/fetch-reviews.sh";                                                    \
  } while (0)

// data::find_data_dir, the one data-folder lookup: $ATTN_DATA_DIR alone when it
// is set, else ../shared/data, <repo>/../shared/data and <repo>/data (the test
// binary runs inside the repository, so <repo> is found); a miss names every
// path looked at and scripts/fetch-reviews.sh.
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

TEST(DataDir, CandidatesAreTheEnvironmentOrTheThreeDefaultPlaces) {
  const data::DataDirCandidates c = data::data_dir_candidates();
  const char* env = std::getenv("ATTN_DATA_DIR");
  if (env != nullptr && *env != '\0') {
    EXPECT_TRUE(c.from_env);
    ASSERT_EQ(c.dirs.size(), 1u);
    EXPECT_EQ(c.dirs[0], env);
  } else {
    EXPECT_FALSE(c.from_env);
    const fs::path repo = fs::path(ATTN_SOURCE_DIR).lexically_normal();
    ASSERT_EQ(c.dirs.size(), 3u);
    EXPECT_EQ(c.dirs[0], "../shared/data");
    EXPECT_EQ(fs::weakly_canonical(c.dirs[1]), fs::weakly_canonical(repo / ".." / "shared" / "data"));
    EXPECT_EQ(fs::weakly_canonical(c.dirs[2]), fs::weakly_canonical(repo / "data"));
  }
  const std::string d = data::default_data_dir();
  EXPECT_NE(std::find(c.dirs.begin(), c.dirs.end(), d), c.dirs.end()) << d;
}

TEST(DataDir, AMissNamesEveryPathAndTheScript) {
  const data::DataDirCandidates c = data::data_dir_candidates();
  std::vector<std::string> parts = {"no test data found", "x.txt and y.txt", "scripts/fetch-reviews.sh",
                                    "or give --data FILE"};
  for (const auto& d : c.dirs) {
    parts.push_back((fs::path(d) / "no-such-folder" / "x.txt").lexically_normal().string());
    parts.push_back((fs::path(d) / "no-such-folder" / "y.txt").lexically_normal().string());
  }
  if (c.from_env) parts.push_back("(from ATTN_DATA_DIR)");
  EXPECT_ERROR_CONTAINS(data::find_data_dir({"no-such-folder/x.txt", "no-such-folder/y.txt"}, "test data",
                                            "or give --data FILE"),
                        parts);
}

TEST(DataDir, FindsTheFirstFolderHoldingEveryFile) {
  const data::DataDirCandidates c = data::data_dir_candidates();
  std::string first;
  for (const auto& d : c.dirs)
    if (first.empty() && fs::is_regular_file(fs::path(d) / "reviews-zh" / "pos.txt") &&
        fs::is_regular_file(fs::path(d) / "reviews-zh" / "neg.txt"))
      first = fs::path(d).lexically_normal().string();
  if (first.empty()) GTEST_SKIP() << "no data folder holds the reviews (set ATTN_DATA_DIR)";
  EXPECT_EQ(data::find_data_dir({"reviews-zh/pos.txt", "reviews-zh/neg.txt"}, "review data"), first);
}

}  // namespace
}  // namespace attn

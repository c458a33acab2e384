#include "testing/bad_corpus.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace attn::testing {

std::string bad_file_test_name(const ::testing::TestParamInfo<BadFile>& info) {
  std::string n = info.param.file;
  std::replace_if(
      n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return n;
}

void expect_table_lists_every_file(const std::string& dir, const std::vector<BadFile>& table,
                                   const std::function<bool(const std::string&)>& skip) {
  std::set<std::string> on_disk;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  while (const dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != ".." && !(skip && skip(n))) on_disk.insert(n);
  }
  closedir(d);
  std::set<std::string> listed;
  for (const BadFile& b : table) {
    EXPECT_TRUE(listed.insert(b.file).second) << "listed twice: " << b.file;
    EXPECT_TRUE(on_disk.count(b.file))
        << "listed but missing (run python/reference/make_bad_files.py): " << b.file;
  }
  for (const std::string& f : on_disk) EXPECT_TRUE(listed.count(f)) << "no table entry for " << f;
}

}  // namespace attn::testing

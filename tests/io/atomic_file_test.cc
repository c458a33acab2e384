// Atomic file writes: the target appears only on commit, an abandoned or
// failed write leaves the previous file and no temporary behind.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attn_atomic_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, CommitReplacesTheTarget) {
  const std::string target = (dir_ / "out.txt").string();
  io::write_file_atomically(target, "old\n");
  EXPECT_EQ(testing::read_text(target), "old\n");
  io::write_file_atomically(target, std::string(3 << 20, 'x'));
  EXPECT_EQ(testing::read_text(target), std::string(3 << 20, 'x'));
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, AbandonedWriteLeavesThePreviousFile) {
  const std::string target = (dir_ / "out.txt").string();
  io::write_file_atomically(target, "previous");
  {
    io::AtomicFile f(target, "test");
    f.write("half of a new fi");
    // destroyed without commit(), e.g. by an exception while producing the rest
  }
  EXPECT_EQ(testing::read_text(target), "previous");
  EXPECT_EQ(entries(), 1u) << "the temporary file was left behind";
}

TEST_F(AtomicFileTest, ErrorsNameTheFileAndLeaveNothing) {
  const std::string target = (dir_ / "missing-dir" / "out.txt").string();
  EXPECT_ERROR_CONTAINS(io::write_file_atomically(target, "x", "attn view"),
                        {"attn view: cannot create the temporary file", "out.txt", "No such file"});
  io::AtomicFile f((dir_ / "a.txt").string(), "test");
  f.write("x");
  f.commit();
  EXPECT_ERROR_CONTAINS(f.commit(), {"committed twice"});
  EXPECT_ERROR_CONTAINS(f.write("y"), {"after commit"});
}

}  // namespace
}  // namespace attn

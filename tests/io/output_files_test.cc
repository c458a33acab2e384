// Issue 18, items 4-6 and 11 (files): bounded reads, writers that replace only regular files and
// keep their permissions, folders of outputs that appear all at once, and the temporaries of
// killed runs removed by the next one.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attn_outfiles_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  static void put(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  fs::path dir_;
};

// The pid of a process that has exited (and been reaped): no process has it for now.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int st = 0;
  ::waitpid(child, &st, 0);
  return static_cast<long>(child);
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

// ---- item 4: every input read whole has a limit ----

TEST_F(OutputFilesTest, ReadFileRefusesAFileOverTheLimit) {
  put(p("big.txt"), std::string(1025, 'x'));
  EXPECT_EQ(io::read_file(p("big.txt"), "text file", 1025), std::string(1025, 'x'));
  EXPECT_ERROR_CONTAINS(io::read_file(p("big.txt"), "text file", 1024),
                        {"text file '", "big.txt' is too large", "expected at most 1024 bytes",
                         "found 1025 bytes", "attn --max-input-mb N raises it"});
}

TEST_F(OutputFilesTest, ReadFileStopsAnEndlessDeviceAtTheLimit) {
  EXPECT_ERROR_CONTAINS(
      io::read_file("/dev/zero", "--answers: answers file", 1 << 20),
      {"'/dev/zero' is too large", "expected at most 1048576 bytes (1 MiB", "found more than"});
  EXPECT_EQ(io::default_read_limit(), uint64_t{256} << 20);
  io::set_default_read_limit(1 << 20);
  EXPECT_ERROR_CONTAINS(io::read_file("/dev/zero", "input"), {"expected at most 1048576 bytes"});
  io::set_default_read_limit(0);
  EXPECT_EQ(io::default_read_limit(), io::kDefaultReadLimit);
}

TEST_F(OutputFilesTest, ReadStreamHasTheLimitToo) {
  std::istringstream in(std::string(3000, 'a'));
  EXPECT_ERROR_CONTAINS(io::read_stream(in, "standard input", 2048),
                        {"standard input is too large", "expected at most 2048 bytes"});
  std::istringstream small("abc");
  EXPECT_EQ(io::read_stream(small, "standard input"), "abc");
}

TEST_F(OutputFilesTest, ReadLineHasTheLimitToo) {
  std::istringstream in("ab\n\ncd\n" + std::string(100, 'x'));
  std::string line;
  ASSERT_TRUE(io::read_line(in, line, "standard input", 10));
  EXPECT_EQ(line, "ab");
  ASSERT_TRUE(io::read_line(in, line, "standard input", 10));
  EXPECT_EQ(line, "");
  ASSERT_TRUE(io::read_line(in, line, "standard input", 10));
  EXPECT_EQ(line, "cd");
  EXPECT_ERROR_CONTAINS(io::read_line(in, line, "standard input", 10),
                        {"standard input: a line is too long: expected at most 10 bytes"});
  std::istringstream last("end");
  ASSERT_TRUE(io::read_line(last, line, "x"));
  EXPECT_EQ(line, "end");
  EXPECT_FALSE(io::read_line(last, line, "x"));
}

TEST_F(OutputFilesTest, ReadFileNamesADirectoryAndDoesNotHangOnAFifo) {
  fs::create_directories(p("pos"));
  EXPECT_ERROR_CONTAINS(io::read_file(p("pos"), "data: data file"),
                        {"'", "pos' is a directory; expected a file"});
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0600), 0);
  EXPECT_EQ(io::read_file(p("fifo"), "text file"), "");  // no writer: end of file, not a hang
  EXPECT_ERROR_CONTAINS(io::require_regular_file(p("fifo"), "model"),
                        {"expected a regular file; found a FIFO"});
  EXPECT_ERROR_CONTAINS(io::read_file(p("absent"), "text file"),
                        {"cannot open text file '", "absent' for reading: No such file"});
}

// ---- item 6: writers replace only regular files and keep their permissions ----

TEST_F(OutputFilesTest, WritersRefuseDevicesFifosAndDirectories) {
  EXPECT_ERROR_CONTAINS(io::write_file_atomically("/dev/null", "x", "attn view"),
                        {"attn view: cannot write '/dev/null'", "expected a regular file or a new name",
                         "found a character device"});
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0600), 0);
  EXPECT_ERROR_CONTAINS(io::write_file_atomically(p("fifo"), "x"), {"found a FIFO", "nothing was written"});
  EXPECT_TRUE(fs::is_fifo(p("fifo")));
  fs::create_directories(p("folder"));
  EXPECT_ERROR_CONTAINS(io::write_file_atomically(p("folder"), "x"), {"found a directory"});
  EXPECT_TRUE(fs::is_directory(p("folder")));
  // A link to a device is refused too, naming what the link names.
  fs::create_symlink("/dev/null", p("null-link"));
  EXPECT_ERROR_CONTAINS(io::write_file_atomically(p("null-link"), "x"),
                        {"the link names '/dev/null'", "found a character device"});
  EXPECT_TRUE(fs::is_symlink(p("null-link")));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 3);  // no temporary left
}

TEST_F(OutputFilesTest, WritersFollowASymlinkAndReplaceItsTarget) {
  fs::create_directories(p("real"));
  put(p("real/page.html"), "old");
  fs::create_symlink("real/page.html", p("page.html"));
  io::write_file_atomically(p("page.html"), "new");
  EXPECT_TRUE(fs::is_symlink(p("page.html")));
  EXPECT_EQ(testing::read_text(p("real/page.html")), "new");
  // A dangling link: the file it names is created.
  fs::create_symlink("real/fresh.txt", p("fresh-link"));
  io::write_file_atomically(p("fresh-link"), "fresh");
  EXPECT_TRUE(fs::is_symlink(p("fresh-link")));
  EXPECT_EQ(testing::read_text(p("real/fresh.txt")), "fresh");
}

TEST_F(OutputFilesTest, WritersKeepThePermissionsOfTheFileTheyReplace) {
  put(p("secret.txt"), "old");
  ::chmod(p("secret.txt").c_str(), 0600);
  io::write_file_atomically(p("secret.txt"), "new");
  EXPECT_EQ(testing::read_text(p("secret.txt")), "new");
  EXPECT_EQ(mode_of(p("secret.txt")), mode_t{0600});
  ::chmod(p("secret.txt").c_str(), 0640);
  io::write_file_atomically(p("secret.txt"), "newer");
  EXPECT_EQ(mode_of(p("secret.txt")), mode_t{0640});
}

// Item 11: a failed write says why (the errno text), here EFBIG from a file size limit.
TEST_F(OutputFilesTest, WriteErrorsCarryTheSystemsReason) {
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* const previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    io::write_file_atomically(p("split.json"), std::string(10000, 'x'), "split");
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_NE(message.find("split: writing '"), std::string::npos) << message;
  EXPECT_NE(message.find("failed: File too large (the previous file, if any, is unchanged)"),
            std::string::npos)
      << message;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 0) << "the temporary file was left behind";
}

// ---- item 5: temporaries of killed saves are removed by the next save in the same place ----

TEST_F(OutputFilesTest, AtomicWriteRemovesTheTemporariesOfDeadProcesses) {
  const long dead = dead_pid();
  const std::string stale = p("model.attn.tmp." + std::to_string(dead) + ".0");
  const std::string old_stage = p("model.attn.new." + std::to_string(dead));
  const std::string live = p("model.attn.tmp." + std::to_string(::getpid()) + ".999");
  const std::string other = p("other.txt.tmp." + std::to_string(dead) + ".0");
  for (const auto& f : {stale, old_stage, live, other}) put(f, "half");
  io::write_file_atomically(p("model.attn"), "whole");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(old_stage));
  EXPECT_TRUE(fs::exists(live)) << "a temporary of a live process must stay";
  EXPECT_TRUE(fs::exists(other)) << "another target's temporaries are that target's business";
  EXPECT_EQ(io::remove_stale_temporaries(dir_.string()), 1);  // any name: other.txt's
  EXPECT_TRUE(fs::exists(live));
}

// ---- item 5: a folder of outputs appears all at once ----

TEST_F(OutputFilesTest, StagedFolderAppearsAllAtOnceAndKeepsOtherFiles) {
  const std::string run = p("run");
  fs::create_directories(run);
  put(run + "/model.attn", "old model");
  put(run + "/report.md", "old report");
  put(run + "/notes.txt", "mine");
  {
    io::StagedFolder stage(run, "train classify");
    EXPECT_EQ(fs::path(stage.staging()).parent_path(), fs::path(run).parent_path());
    io::write_file_atomically(stage.path("model.attn"), "new model");
    io::write_file_atomically(stage.path("report.md"), "new report");
    // Nothing of the new run is visible before commit().
    EXPECT_EQ(testing::read_text(run + "/model.attn"), "old model");
    EXPECT_EQ(testing::read_text(run + "/report.md"), "old report");
    stage.commit();
  }
  EXPECT_EQ(testing::read_text(run + "/model.attn"), "new model");
  EXPECT_EQ(testing::read_text(run + "/report.md"), "new report");
  EXPECT_EQ(testing::read_text(run + "/notes.txt"), "mine");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 1) << "staging or old folder left behind";
  // A new folder (missing before) appears on commit.
  {
    io::StagedFolder stage(p("fresh"), "");
    io::write_file_atomically(stage.path("a.txt"), "a");
    EXPECT_FALSE(fs::exists(p("fresh")));
    stage.commit();
  }
  EXPECT_EQ(testing::read_text(p("fresh/a.txt")), "a");
}

TEST_F(OutputFilesTest, AbandonedStagedFolderLeavesThePreviousOne) {
  const std::string run = p("run");
  fs::create_directories(run);
  put(run + "/model.attn", "old model");
  {
    io::StagedFolder stage(run, "");
    io::write_file_atomically(stage.path("model.attn"), "new model");
    // destroyed without commit(): a failed save
  }
  EXPECT_EQ(testing::read_text(run + "/model.attn"), "old model");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), {}), 1);
  put(p("file"), "x");
  EXPECT_ERROR_CONTAINS(io::StagedFolder(p("file"), "train"),
                        {"expected a folder or a new name; found a file"});
}

TEST_F(OutputFilesTest, StagedFolderRemovesWhatKilledRunsLeft) {
  const long dead = dead_pid();
  const std::string run = p("run");
  fs::create_directories(run);
  const std::string stale_stage = run + ".staging." + std::to_string(dead) + ".0";
  const std::string stale_old = run + ".old." + std::to_string(dead);
  const std::string live_stage = run + ".staging." + std::to_string(::getpid()) + ".999";
  for (const auto& d : {stale_stage, stale_old, live_stage}) {
    fs::create_directories(d);
    put(d + "/model.attn", "half");
  }
  const std::string stale_new = run + "/report.md.new." + std::to_string(dead);
  const std::string stale_tmp = run + "/model.attn.tmp." + std::to_string(dead) + ".3";
  put(stale_new, "half");
  put(stale_tmp, "half");
  {
    io::StagedFolder stage(run, "");
    io::write_file_atomically(stage.path("model.attn"), "m");
    stage.commit();
  }
  EXPECT_FALSE(fs::exists(stale_stage));
  EXPECT_FALSE(fs::exists(stale_old));
  EXPECT_FALSE(fs::exists(stale_new));
  EXPECT_FALSE(fs::exists(stale_tmp));
  EXPECT_TRUE(fs::exists(live_stage)) << "a live process's staging folder must stay";
  EXPECT_EQ(testing::read_text(run + "/model.attn"), "m");
}

}  // namespace
}  // namespace attn

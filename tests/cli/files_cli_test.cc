// Issue 18 at the command level: standard output flushed and checked at the end of every command
// (a write error is a clear message and a non-zero exit), inputs read with a limit, a FIFO as a
// model file refused at once, a directory as a data file named as such, and output paths that are
// not regular files refused (a link is followed, a file's permissions are kept).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using attn::testing::CliRun;
using attn::testing::run_attn;

class FilesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("attn_files_cli_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  std::string q(const std::string& name) const { return std::string("'").append(p(name)).append("'"); }

  // `env` before the binary and a time limit around it (a hang fails instead of blocking ctest).
  CliRun run_limited(const std::string& env, const std::string& args) const {
    const std::string err = p("stderr.txt"), out = p("stdout.txt");
    const std::string cmd =
        env + " timeout 60 '" + ATTN_CLI_PATH + "' " + args + " </dev/null >'" + out + "' 2>'" + err + "'";
    const int st = std::system(cmd.c_str());
    CliRun r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = attn::testing::read_text(out);
    r.err = attn::testing::read_text(err);
    return r;
  }
  fs::path dir_;
};

TEST_F(FilesCli, WriteErrorsOnStandardOutputAreReported) {
  for (const std::string& args : {std::string("version"), std::string("explain"),
                                  std::string("explain --json"), std::string("quiz --seed 1 --print-answers"),
                                  std::string("view --demo --terminal"), std::string("help")}) {
    const CliRun r = run_attn(args + " >/dev/full");
    EXPECT_EQ(r.status, 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("error: cannot write to standard output: No space left on device"),
              std::string::npos)
        << args << ": " << r.err;
  }
  // The same commands to a working stdout exit 0.
  EXPECT_EQ(run_attn("explain >/dev/null").status, 0);
}

TEST_F(FilesCli, AFifoAsTheModelIsRefusedWithoutWaiting) {
  ASSERT_EQ(::mkfifo(p("model.attn").c_str(), 0600), 0);
  const CliRun r = run_limited("", "classify --model " + q("model.attn") + " hello");
  EXPECT_EQ(r.status, 1) << "124 = it hung: " << r.err;
  EXPECT_NE(r.err.find("found a FIFO"), std::string::npos) << r.err;
  const CliRun g = run_limited("", "generate --model " + q("model.attn") + " --max-new 1 hi");
  EXPECT_EQ(g.status, 1) << "124 = it hung: " << g.err;
}

TEST_F(FilesCli, ADirectoryAsADataFileIsNamedAsOne) {
  fs::create_directories(p("pos"));
  const CliRun r = run_attn("train classify --pos " + q("pos") + " --neg " + q("pos") + " --out " + q("run"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("pos' is a directory; expected a file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("is empty"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("run")));
}

TEST_F(FilesCli, InputsAreReadWithALimit) {
  const CliRun a = run_limited("", "--max-input-mb 1 quiz --answers /dev/zero");
  EXPECT_EQ(a.status, 1) << a.err;
  EXPECT_NE(a.err.find("'/dev/zero' is too large: expected at most 1048576 bytes (1 MiB"), std::string::npos)
      << a.err;
  EXPECT_NE(a.err.find("attn --max-input-mb N raises it"), std::string::npos) << a.err;
  const CliRun t =
      run_limited("", "--max-input-mb=1 train classify --pos /dev/zero --neg /dev/zero --out " + q("run"));
  EXPECT_EQ(t.status, 1) << t.err;
  EXPECT_NE(t.err.find("is too large"), std::string::npos) << t.err;
  { std::ofstream(p("big.json"), std::ios::binary) << std::string((1 << 20) + 1, ' '); }
  const CliRun v = run_limited("", "--max-input-mb 1 view " + q("big.json") + " --terminal");
  EXPECT_EQ(v.status, 1) << v.err;
  EXPECT_NE(v.err.find("found 1048577 bytes"), std::string::npos) << v.err;
  const CliRun bad = run_limited("", "--max-input-mb 0 explain");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--max-input-mb: expected a whole number of MiB in [1, 1048576]; got '0'"),
            std::string::npos)
      << bad.err;
  // Raised, the same file is read (and then found not to be an export).
  const CliRun raised = run_limited("", "--max-input-mb 2 view " + q("big.json") + " --terminal");
  EXPECT_EQ(raised.status, 1);
  EXPECT_EQ(raised.err.find("too large"), std::string::npos) << raised.err;
}

TEST_F(FilesCli, OutputPathsThatAreNotRegularFilesAreRefused) {
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0600), 0);
  const CliRun f = run_limited("", "view --demo -o " + q("fifo"));
  EXPECT_EQ(f.status, 1) << f.err;
  EXPECT_NE(f.err.find("expected a regular file or a new name; found a FIFO"), std::string::npos) << f.err;
  EXPECT_TRUE(fs::is_fifo(p("fifo")));
  fs::create_directories(p("folder"));
  const CliRun d = run_attn("view --demo -o " + q("folder"));
  EXPECT_EQ(d.status, 1);
  EXPECT_NE(d.err.find("found a directory"), std::string::npos) << d.err;
  const CliRun n = run_attn("view --demo -o /dev/null");
  EXPECT_EQ(n.status, 1);
  EXPECT_NE(n.err.find("found a character device"), std::string::npos) << n.err;
  // A link is followed: the page replaces the file it names; a 0600 file stays 0600.
  std::ofstream(p("page.html")) << "old";
  ::chmod(p("page.html").c_str(), 0600);
  fs::create_symlink("page.html", p("link.html"));
  const CliRun l = run_attn("view --demo -o " + q("link.html"));
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_TRUE(fs::is_symlink(p("link.html")));
  EXPECT_NE(attn::testing::read_text(p("page.html")).find("<html"), std::string::npos);
  struct stat st {};
  ::stat(p("page.html").c_str(), &st);
  EXPECT_EQ(st.st_mode & 07777, mode_t{0600});
}

}  // namespace

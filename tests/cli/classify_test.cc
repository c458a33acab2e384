// Smoke tests of `attn train classify` and `attn classify`: the built binary on a
// small synthetic two-class set. What the recipe computes is tested in
// tests/tasks/classify_test.cc; here: exit codes, the key output lines, flags
// the library never sees (--quiet, stdin, --file), and the numbering from 0.
#include <attn/core/random.h>
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;

std::string q(const fs::path& p) { return std::string("'").append(p.string()).append("'"); }

// 200 lines per class, 14 characters each (test-sample.txt takes 12 to 40): filler around one cue.
void write_reviews(const fs::path& dir) {
  const std::vector<std::string> filler = {"这", "个", "东", "西", "物", "流", "包", "装", "价", "格"};
  Rng rng(5);
  std::set<std::string> seen;
  for (const auto& [name, cue] : {std::pair<const char*, const char*>{"pos.txt", "好"}, {"neg.txt", "差"}}) {
    std::ofstream f(dir / name, std::ios::binary);
    for (int n = 0; n < 200;) {
      std::string s;
      for (int i = 0; i < 14; ++i) s += i == 2 ? std::string(cue) : filler[rng.below(filler.size())];
      if (seen.insert(s).second) f << s << "\n", ++n;
    }
  }
}

class ClassifyCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("attn_classify_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_reviews(dir_);
    train_ = testing::run_attn(
        "train classify --pos " + q(dir_ / "pos.txt") + " --neg " + q(dir_ / "neg.txt") + " --out " +
        q(dir_ / "run") + " --epochs 1 --layers 1 --d-model 32 --heads 2 --batch-size 16 --seed 3 --quiet");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return q(dir_ / "run" / "model.attn"); }
  static fs::path dir_;
  static CliRun train_;
};
fs::path ClassifyCli::dir_;
CliRun ClassifyCli::train_;

TEST_F(ClassifyCli, TrainClassifySmoke) {
  ASSERT_EQ(train_.status, 0) << train_.err << train_.out;
  EXPECT_NE(train_.out.find("test accuracy"), std::string::npos) << train_.out;
  EXPECT_NE(train_.out.find("naive Bayes baseline"), std::string::npos) << train_.out;
  EXPECT_NE(train_.out.find("report " + (dir_ / "run" / "report.md").string()), std::string::npos);
  EXPECT_TRUE(train_.err.empty()) << "--quiet printed: " << train_.err;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "run" / "model.attn"));
  // A flag-level error: exit 1 and the message.
  const CliRun bad = testing::run_attn("train classify --format csv");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--format is only used with --data FILE"), std::string::npos) << bad.err;
}

TEST_F(ClassifyCli, ClassifySmoke) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  const CliRun h = testing::run_attn("classify --model " + model() + " '这个东西好棒'");
  ASSERT_EQ(h.status, 0) << h.err;
  EXPECT_NE(h.out.find("label  "), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("layer 0 (mean of 2 heads"), std::string::npos) << h.out;  // numbered from 0
  // --json, from stdin: one result per non-blank line, layers from 0.
  const CliRun j = testing::run_attn("classify --json --model " + model() + " -", "好\n\n差\n");
  ASSERT_EQ(j.status, 0) << j.err;
  const json::Value doc = json::parse(j.out);
  ASSERT_EQ(doc.at("results").size(), 2u);
  EXPECT_EQ(doc.at("results").at(0).at("attention").at(0).at("layer").as_int64(), 0);
  // --file.
  const CliRun f = testing::run_attn("classify --json --model " + model() + " --file " +
                                     q(dir_ / "run" / "test-sample.txt"));
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_GE(json::parse(f.out).at("results").size(), 1u);
  // No text, or two sources: exit 1.
  const CliRun none = testing::run_attn("classify --model " + model());
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("exactly one source"), std::string::npos) << none.err;
}

// Issue 18, item 11: control characters in a text are printed as '?', never sent to the terminal.
TEST_F(ClassifyCli, ControlCharactersAreNotEchoedToTheTerminal) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  const CliRun r = testing::run_attn("classify --model " + model() + " -",
                                     "\x1b[2J\x1b]0;owned\x07好\xc2\x9b"
                                     "31m\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("text   ?[2J?]0;owned?好?31m"), std::string::npos) << r.out;
  // The JSON keeps the text (escaped).
  const CliRun j = testing::run_attn("classify --json --model " + model() + " -", "\x1b[2J好\n");
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(json::parse(j.out).at("results").at(0).at("text").as_string(), "\x1b[2J好");
  // Standard output is checked: a full device is an error.
  const CliRun full = testing::run_attn("classify --model " + model() + " '好' >/dev/full");
  EXPECT_EQ(full.status, 1);
  EXPECT_NE(full.err.find("cannot write to standard output"), std::string::npos) << full.err;
}

// Issue 18, item 5: a run folder is swapped in whole; what a killed run left there is removed.
TEST_F(ClassifyCli, TrainingAgainRemovesWhatAKilledRunLeft) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  const fs::path run = dir_ / "again";
  fs::create_directories(run);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid no process has now: a run that was killed
  const std::string dead = std::to_string(child);
  for (const std::string& f :
       {"model.attn.new." + dead, "report.md.new." + dead, "report.json.tmp." + dead + ".0"})
    std::ofstream(run / f) << "half";
  fs::create_directories(dir_ / ("again.staging." + dead + ".0"));
  std::ofstream(run / "mine.txt") << "kept";
  const CliRun t = testing::run_attn(
      "train classify --pos " + q(dir_ / "pos.txt") + " --neg " + q(dir_ / "neg.txt") + " --out " + q(run) +
      " --epochs 1 --layers 1 --d-model 16 --heads 2 --batch-size 16 --seed 4 --quiet");
  ASSERT_EQ(t.status, 0) << t.err;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(run)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"mine.txt", "model.attn", "report.json", "report.md", "split.json",
                                          "test-sample.txt"}));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find("again."), std::string::npos) << e.path();
}

}  // namespace
}  // namespace attn

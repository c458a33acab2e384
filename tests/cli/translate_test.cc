// Smoke tests of `attn train translate` and `attn translate`: the built binary
// on a tiny grammar corpus. What the recipe computes is tested in
// tests/tasks/translate_test.cc; here: exit codes, the key output, and the
// export that `attn view` reads.
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::run_attn;

// 7 subjects x 5 verbs x 8 objects = 280 pairs, English <TAB> Chinese <TAB> attribution.
void write_corpus(const fs::path& p) {
  const std::vector<std::pair<std::string, std::string>> subj = {
      {"I", "我"},    {"You", "你"},    {"He", "他"},   {"She", "她"},
      {"We", "我们"}, {"They", "他们"}, {"Tom", "汤姆"}};
  const std::vector<std::pair<std::string, std::string>> verb = {
      {"like", "喜欢"}, {"see", "看见"}, {"want", "想要"}, {"have", "有"}, {"buy", "买"}};
  const std::vector<std::pair<std::string, std::string>> obj = {
      {"cats", "猫"},     {"dogs", "狗"}, {"books", "书"}, {"tea", "茶"},
      {"apples", "苹果"}, {"cars", "车"}, {"water", "水"}, {"rice", "米饭"}};
  std::ofstream f(p, std::ios::binary);
  int n = 0;
  for (const auto& s : subj)
    for (const auto& v : verb)
      for (const auto& o : obj) {
        const bool third = s.first == "He" || s.first == "She" || s.first == "Tom";
        const std::string en_verb = v.first == "have" && third ? "has" : v.first + (third ? "s" : "");
        f << s.first << " " << en_verb << " " << o.first << ".\t" << s.second << v.second << o.second
          << "。\tCC-BY 2.0 (France) Attribution: example #" << ++n << "\n";
      }
}

class TranslateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("attn_translate_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_corpus(dir_ / "corpus.txt");
    train_ = run_attn("train translate --data " + (dir_ / "corpus.txt").string() + " --out " +
                      (dir_ / "run").string() +
                      " --preset micro --steps 60 --batch-size 16 --warmup 30 --lr-scale 0.5 --max-len 16 "
                      "--src-vocab 80 --min-freq 1 --seed 3");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return (dir_ / "run" / "model.attn").string(); }
  static fs::path dir_;
  static CliRun train_;
};
fs::path TranslateCli::dir_;
CliRun TranslateCli::train_;

TEST_F(TranslateCli, TrainTranslateSmoke) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  EXPECT_NE(train_.out.find("test BLEU (sacreBLEU -tok zh"), std::string::npos) << train_.out;
  EXPECT_NE(train_.out.find("saved " + model()), std::string::npos) << train_.out;
  EXPECT_NE(train_.err.find("epoch 1: train loss"), std::string::npos) << train_.err;
  EXPECT_NE(train_.err.find("tok/s"), std::string::npos) << train_.err;
  EXPECT_TRUE(fs::is_regular_file(dir_ / "run" / "report.json"));
  const CliRun bad = run_attn("train translate --data " + (dir_ / "nope.txt").string() + " --out " +
                              (dir_ / "x").string() + " --steps 1");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("nope.txt"), std::string::npos) << bad.err;
}

TEST_F(TranslateCli, TranslateSmoke) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  const CliRun t = run_attn("translate --model " + model() + " \"She likes tea.\" --beam 1");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("attended most"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("cross-attention of the last decoder layer (1)"), std::string::npos) << t.out;
  const CliRun j = run_attn("translate --model " + model() + " \"She likes tea.\" --beam 1 --json");
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_NE(t.out.find(json::parse(j.out).at("translation").as_string()), std::string::npos) << t.out;
  // The export is what `attn view` reads.
  const std::string exp = (dir_ / "export.json").string();
  const CliRun r = run_attn("translate --model " + model() + " \"We buy books.\" --export " + exp);
  ASSERT_EQ(r.status, 0) << r.err;
  const json::Value e = json::parse(testing::read_text(exp));
  ASSERT_TRUE(e.find("cross_attention") && e.find("encoder_attention") && e.find("decoder_attention"));
  EXPECT_EQ(e.at("decoder_tokens").at(std::size_t{0}).as_string(), "<s>");
  EXPECT_EQ(e.at("cross_attention").size(), 2u);  // micro: 2 decoder layers
  const CliRun v = run_attn("view " + exp + " --terminal --set cross_attention --layer 1 --head 0");
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_NE(v.out.find("cross-attention"), std::string::npos) << v.out;
  // No sentence, or a bad flag value: exit 1.
  const CliRun none = run_attn("translate --model " + model());
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("expected an English sentence"), std::string::npos) << none.err;
  const CliRun beam = run_attn("translate --model " + model() + " \"Hi.\" --beam 0");
  EXPECT_EQ(beam.status, 1);
  EXPECT_NE(beam.err.find("--beam"), std::string::npos) << beam.err;
}

}  // namespace
}  // namespace attn

// `attn train translate` and `attn translate`, run as a person would: a micro
// model trained for a few steps on a small corpus written here (English <TAB>
// Chinese <TAB> attribution; a tiny grammar, so every run is the same), the
// loss falls, the model file loads, the printed alignment equals the captured
// cross-attention, the export is what `attn view` reads, and bad input fails
// with file and line.
#include <attn/io/json.h>
#include <attn/models/task_model.h>
#include <attn/models/translation.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"
#include "testing/tolerances.h"
#include "text/text_test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::run_attn;

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// 7 subjects x 5 verbs x 8 objects = 280 pairs.
std::string grammar_corpus() {
  const std::vector<std::pair<std::string, std::string>> subj = {
      {"I", "我"},    {"You", "你"},    {"He", "他"},   {"She", "她"},
      {"We", "我们"}, {"They", "他们"}, {"Tom", "汤姆"}};
  const std::vector<std::pair<std::string, std::string>> verb = {
      {"like", "喜欢"}, {"see", "看见"}, {"want", "想要"}, {"have", "有"}, {"buy", "买"}};
  const std::vector<std::pair<std::string, std::string>> obj = {
      {"cats", "猫"},     {"dogs", "狗"}, {"books", "书"}, {"tea", "茶"},
      {"apples", "苹果"}, {"cars", "车"}, {"water", "水"}, {"rice", "米饭"}};
  std::string out = "\xEF\xBB\xBF";
  int n = 0;
  for (const auto& s : subj)
    for (const auto& v : verb)
      for (const auto& o : obj) {
        const bool third = s.first == "He" || s.first == "She" || s.first == "Tom";
        std::string en_verb = v.first == "have" && third ? "has" : v.first + (third ? "s" : "");
        out += s.first + " " + en_verb + " " + o.first + ".\t" + s.second + v.second + o.second +
               "。\tCC-BY 2.0 (France) Attribution: example #" + std::to_string(++n) + "\n";
      }
  return out;
}

class TranslateCli : public ::testing::Test {
 protected:
  static fs::path dir_;
  static CliRun train_;

  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("attn_translate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_text(dir_ / "corpus.txt", grammar_corpus());
    train_ = run_attn("train translate --data " + (dir_ / "corpus.txt").string() + " --out " +
                      (dir_ / "run").string() +
                      " --preset micro --steps 60 --batch-size 16 --warmup 30 --lr-scale 0.5 --max-len 16 "
                      "--src-vocab 80 --min-freq 1 --seed 3");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return (dir_ / "run" / "model.attn").string(); }
};
fs::path TranslateCli::dir_;
CliRun TranslateCli::train_;

TEST_F(TranslateCli, TrainingWritesModelAndReportAndTheLossFalls) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  EXPECT_NE(train_.out.find("test BLEU (sacreBLEU -tok zh"), std::string::npos) << train_.out;
  EXPECT_NE(train_.err.find("epoch 1: train loss"), std::string::npos) << train_.err;
  EXPECT_NE(train_.err.find("tok/s"), std::string::npos) << train_.err;
  const json::Value r = json::parse(testing::read_text(dir_ / "run" / "report.json"));
  const json::Value& tr = r.at("training");
  EXPECT_EQ(tr.at("steps").as_int64(), 60);
  const double first = tr.at("first_loss").as_double(), last = tr.at("final_loss").as_double();
  EXPECT_LT(last, 0.8 * first) << "loss " << first << " -> " << last;
  EXPECT_GE(tr.at("epoch_log").size(), 1u);
  EXPECT_EQ(r.at("data").at("pairs").as_int64(), 280);
  EXPECT_EQ(r.at("test_bleu").at("pairs").as_int64(), 14);  // 5 % of 280
  const double bleu = r.at("test_bleu").at("score").as_double();
  EXPECT_TRUE(bleu >= 0 && bleu <= 100) << bleu;
  const std::string md = testing::read_text(dir_ / "run" / "report.md");
  EXPECT_NE(md.find("Test BLEU"), std::string::npos);
  EXPECT_NE(md.find("Attribution: example #"), std::string::npos);  // attribution shown with the pairs
  EXPECT_FALSE(fs::exists(dir_ / "run" / "report.json.tmp"));
  const models::TaskModelHeader h = models::read_task_model(model(), "translate");
  EXPECT_EQ(h.task, "translate");
  EXPECT_TRUE(h.data.find("split") != nullptr);
  EXPECT_TRUE(h.data.find("source_tokenizer") != nullptr);
}

TEST_F(TranslateCli, PrintedAlignmentEqualsCapturedCrossAttention) {
  ASSERT_EQ(train_.status, 0) << train_.err;
  const CliRun r = run_attn("translate --model " + model() + " \"She likes tea.\" --beam 1 --json --layers");
  ASSERT_EQ(r.status, 0) << r.err;
  const json::Value j = json::parse(r.out);
  auto tr = models::Translator::load(model());
  std::vector<int64_t> src_ids = tr->encode_source("She likes tea.");
  std::vector<int64_t> tgt_ids;
  const auto& tv = tr->tokenizers().tgt().vocab();
  std::vector<std::string> src_tokens;
  for (const auto& t : j.at("source_tokens").items()) src_tokens.push_back(t.as_string());
  ASSERT_EQ(src_tokens.size(), src_ids.size());
  for (std::size_t i = 0; i < src_ids.size(); ++i)
    EXPECT_EQ(src_tokens[i], tr->tokenizers().src().vocab().token(static_cast<int32_t>(src_ids[i])));
  const auto& rows = j.at("alignment").items();
  for (const auto& row : rows)
    if (row.at("token").as_string() != "</s>") tgt_ids.push_back(tv.id(row.at("token").as_string()));
  ASSERT_FALSE(rows.empty());
  const models::AttentionCapture cap = tr->capture(src_ids, tgt_ids);
  const Tensor last = cap.cross.back();  // [1, H, Lt, Ls]
  const int64_t H = last.size(1), Ls = last.size(3);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& w = rows[i].at("weights").items();
    ASSERT_EQ(static_cast<int64_t>(w.size()), Ls);
    int64_t argmax = 0;
    for (int64_t s = 0; s < Ls; ++s) {
      double mean = 0;
      for (int64_t h = 0; h < H; ++h) mean += last.at({0, h, static_cast<int64_t>(i), s}) / H;
      EXPECT_NEAR(w[s].as_double(), mean, testing::tol::kKvCache.abs + testing::tol::kKvCache.rel * mean)
          << "row " << i << " source " << s;
      if (w[s].as_double() > w[argmax].as_double()) argmax = s;
    }
    const json::Value& top = rows[i].at("top").at(std::size_t{0});
    EXPECT_EQ(top.at("index").as_int64(), argmax);
    EXPECT_EQ(top.at("weight").as_double(), w[argmax].as_double());
    EXPECT_EQ(top.at("source_token").as_string(), src_tokens[argmax]);
    // --layers: the last layer's entry is the same argmax.
    const auto& layers = rows[i].at("layers").items();
    ASSERT_EQ(layers.size(), cap.cross.size());
    EXPECT_EQ(layers.back().at("index").as_int64(), argmax);
  }
  // The table prints the same strongest token per character.
  const CliRun t = run_attn("translate --model " + model() + " \"She likes tea.\" --beam 1");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("attended most"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(j.at("translation").as_string()), std::string::npos) << t.out;
}

TEST_F(TranslateCli, ExportIsReadByView) {
  ASSERT_EQ(train_.status, 0) << train_.err;
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
}

// The first 300 pairs of the real corpus (when present): training runs, the
// loss falls, and the report shows Tatoeba's attribution next to the pairs.
TEST_F(TranslateCli, RealDataSliceTrainsAndKeepsAttribution) {
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  std::ifstream in(testing::real_data_path("tatoeba-cmn/cmn.txt"), std::ios::binary);
  std::string slice, line;
  for (int i = 0; i < 300 && std::getline(in, line); ++i) slice += line + "\n";
  write_text(dir_ / "slice.txt", slice);
  const CliRun r = run_attn(
      "train translate --data " + (dir_ / "slice.txt").string() + " --out " + (dir_ / "real").string() +
      " --preset micro --steps 40 --batch-size 16 --warmup 20 --lr-scale 0.5 --max-len 24 "
      "--src-vocab 200 --min-freq 1 --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  const json::Value rep = json::parse(testing::read_text(dir_ / "real" / "report.json"));
  EXPECT_EQ(rep.at("data").at("lines_read").as_int64(), 300);
  EXPECT_LT(rep.at("training").at("final_loss").as_double(),
            0.8 * rep.at("training").at("first_loss").as_double());
  EXPECT_NE(testing::read_text(dir_ / "real" / "report.md").find("Attribution: tatoeba.org #"),
            std::string::npos);
}

TEST_F(TranslateCli, BadInput) {
  const std::string d = dir_.string();
  CliRun r = run_attn("train translate --data " + d + "/nope.txt --out " + d + "/x --steps 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("nope.txt"), std::string::npos) << r.err;
  write_text(dir_ / "notab.txt", "Hi.\t嗨。\tA\nRun 跑。\n");
  r = run_attn("train translate --data " + d + "/notab.txt --out " + d + "/x --steps 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("notab.txt' line 2"), std::string::npos) << r.err;
  write_text(dir_ / "badutf8.txt", "Hi.\t嗨。\tA\nGo.\t走。\tA\nRun.\t\xff跑\tA\n");
  r = run_attn("train translate --data " + d + "/badutf8.txt --out " + d + "/x --steps 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("badutf8.txt line 3"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "x" / "model.attn"));

  ASSERT_EQ(train_.status, 0) << train_.err;
  const models::TaskModelHeader h = models::read_task_model(model());
  auto tr = models::Translator::load(model());
  models::save_task_model(d + "/other.attn", "classify", h.config, h.data, tr->model().named_parameters());
  r = run_attn("translate --model " + d + "/other.attn \"Hi.\"");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("classify"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("translate"), std::string::npos) << r.err;
  r = run_attn("translate --model " + d + "/missing.attn \"Hi.\"");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("missing.attn"), std::string::npos) << r.err;
  r = run_attn("translate --model " + model());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected an English sentence"), std::string::npos) << r.err;
  r = run_attn("translate --model " + model() + " \"  \"");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("source sentence is empty"), std::string::npos) << r.err;
  r = run_attn("translate --model " + model() + " \"Hi.\" --beam 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--beam"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace attn

// tasks::train_translator and tasks::translate_sentences (attn/tasks/translate.h):
// a micro model trained for a few steps on a small corpus written here (English
// <TAB> Chinese <TAB> attribution; a tiny grammar, so every run is the same), the
// loss falls, the model file loads, the alignment equals the captured
// cross-attention, and bad input fails with file and line.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/models/task_model.h>
#include <attn/models/translation.h>
#include <attn/tasks/translate.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"
#include "text/text_test_util.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

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

// The options of the fixture's run (the CLI test trains the same way).
tasks::TranslateTrainOptions micro_run(const fs::path& data, const fs::path& out) {
  tasks::TranslateTrainOptions o;
  o.data = data.string();
  o.out = out.string();
  o.preset = "micro";
  o.max_steps = 60;
  o.batch_size = 16;
  o.warmup = 30;
  o.lr_scale = 0.5;
  o.max_len = 16;
  o.tokenizer.src_vocab_size = 80;
  o.tokenizer.min_char_freq = 1;
  o.seed = 3;
  return o;
}

class Translate : public ::testing::Test {
 protected:
  static fs::path dir_;
  static tasks::TranslateTrainResult* train_;
  static std::string progress_, error_;

  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("attn_tasks_translate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_text(dir_ / "corpus.txt", grammar_corpus());
    tasks::TranslateTrainOptions o = micro_run(dir_ / "corpus.txt", dir_ / "run");
    o.progress.write = [](const std::string& s) { progress_ += s; };
    try {
      train_ = new tasks::TranslateTrainResult(tasks::train_translator(o));
    } catch (const Error& e) {
      error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(dir_);
    delete train_;
  }
  static std::string model() { return (dir_ / "run" / "model.attn").string(); }
};
fs::path Translate::dir_;
tasks::TranslateTrainResult* Translate::train_ = nullptr;
std::string Translate::progress_, Translate::error_;

TEST_F(Translate, TrainingWritesModelAndReportAndTheLossFalls) {
  ASSERT_NE(train_, nullptr) << error_;
  EXPECT_NE(train_->summary.find("test BLEU (sacreBLEU -tok zh"), std::string::npos) << train_->summary;
  EXPECT_NE(progress_.find("epoch 1: train loss"), std::string::npos) << progress_;
  EXPECT_NE(progress_.find("tok/s"), std::string::npos) << progress_;
  const json::Value r = json::parse(testing::read_text(dir_ / "run" / "report.json"));
  EXPECT_EQ(json::dump(r), json::dump(train_->report));
  const json::Value& tr = r.at("training");
  EXPECT_EQ(tr.at("steps").as_int64(), 60);
  const double first = tr.at("first_loss").as_double(), last = tr.at("final_loss").as_double();
  EXPECT_LT(last, 0.8 * first) << "loss " << first << " -> " << last;
  EXPECT_GE(tr.at("epoch_log").size(), 1u);
  EXPECT_EQ(r.at("data").at("pairs").as_int64(), 280);
  EXPECT_EQ(r.at("test_bleu").at("pairs").as_int64(), 14);  // 5 % of 280
  const double bleu = r.at("test_bleu").at("score").as_double();
  EXPECT_TRUE(bleu >= 0 && bleu <= 100) << bleu;
  EXPECT_EQ(bleu, train_->bleu);
  const std::string md = testing::read_text(dir_ / "run" / "report.md");
  EXPECT_NE(md.find("Test BLEU"), std::string::npos);
  EXPECT_NE(md.find("Attribution: example #"), std::string::npos);  // attribution shown with the pairs
  EXPECT_FALSE(fs::exists(dir_ / "run" / "report.json.tmp"));
  const models::TaskModelHeader h = models::read_task_model(model(), "translate");
  EXPECT_EQ(h.task, "translate");
  EXPECT_TRUE(h.data.find("split") != nullptr);
  EXPECT_TRUE(h.data.find("source_tokenizer") != nullptr);
}

TEST_F(Translate, AlignmentEqualsCapturedCrossAttention) {
  ASSERT_NE(train_, nullptr) << error_;
  tasks::TranslateOptions o;
  o.model = model();
  o.sentences = {"She likes tea."};
  o.beam = 1;
  o.layers = true;
  const tasks::TranslateResult res = tasks::translate_sentences(o);
  const json::Value j = json::parse(json::dump(res.json, json::DumpOptions{2, true}));
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
    // layers: the last layer's entry is the same argmax.
    const auto& layers = rows[i].at("layers").items();
    ASSERT_EQ(layers.size(), cap.cross.size());
    EXPECT_EQ(layers.back().at("index").as_int64(), argmax);
  }
  // The table prints the same strongest token per character.
  o.layers = false;
  const tasks::TranslateResult t = tasks::translate_sentences(o);
  EXPECT_NE(t.text.find("attended most"), std::string::npos) << t.text;
  EXPECT_NE(t.text.find(j.at("translation").as_string()), std::string::npos) << t.text;
  // Layers are numbered from 0: the alignment layer is the last, decoder_layers - 1.
  EXPECT_EQ(j.at("alignment_layer").as_int64(), tr->model().config().decoder_layers - 1);
}

// The first 300 pairs of the real corpus (when present): training runs, the
// loss falls, and the report shows Tatoeba's attribution next to the pairs.
TEST_F(Translate, RealDataSliceTrainsAndKeepsAttribution) {
  ATTN_REQUIRE_REAL_DATA("tatoeba-cmn/cmn.txt");
  std::ifstream in(testing::real_data_path("tatoeba-cmn/cmn.txt"), std::ios::binary);
  std::string slice, line;
  for (int i = 0; i < 300 && std::getline(in, line); ++i) slice += line + "\n";
  write_text(dir_ / "slice.txt", slice);
  tasks::TranslateTrainOptions o = micro_run(dir_ / "slice.txt", dir_ / "real");
  o.max_steps = 40;
  o.warmup = 20;
  o.max_len = 24;
  o.tokenizer.src_vocab_size = 200;
  o.seed = 1;
  tasks::train_translator(o);
  const json::Value rep = json::parse(testing::read_text(dir_ / "real" / "report.json"));
  EXPECT_EQ(rep.at("data").at("lines_read").as_int64(), 300);
  EXPECT_LT(rep.at("training").at("final_loss").as_double(),
            0.8 * rep.at("training").at("first_loss").as_double());
  EXPECT_NE(testing::read_text(dir_ / "real" / "report.md").find("Attribution: tatoeba.org #"),
            std::string::npos);
}

TEST_F(Translate, BadInput) {
  const std::string d = dir_.string();
  auto train_on = [&](const std::string& file) {
    tasks::TranslateTrainOptions o;
    o.data = d + "/" + file;
    o.out = d + "/x";
    o.max_steps = 1;
    tasks::train_translator(o);
  };
  EXPECT_ERROR_CONTAINS(train_on("nope.txt"), {"nope.txt"});
  write_text(dir_ / "notab.txt", "Hi.\t嗨。\tA\nRun 跑。\n");
  EXPECT_ERROR_CONTAINS(train_on("notab.txt"), {"notab.txt' line 2"});
  write_text(dir_ / "badutf8.txt", "Hi.\t嗨。\tA\nGo.\t走。\tA\nRun.\t\xff跑\tA\n");
  EXPECT_ERROR_CONTAINS(train_on("badutf8.txt"), {"badutf8.txt line 3"});
  EXPECT_FALSE(fs::exists(dir_ / "x" / "model.attn"));

  ASSERT_NE(train_, nullptr) << error_;
  const models::TaskModelHeader h = models::read_task_model(model());
  auto tr = models::Translator::load(model());
  models::save_task_model(d + "/other.attn", "classify", h.config, h.data, tr->model().named_parameters());
  tasks::TranslateOptions o;
  o.sentences = {"Hi."};
  o.model = d + "/other.attn";
  EXPECT_ERROR_CONTAINS(tasks::translate_sentences(o), {"classify", "translate"});
  o.model = d + "/missing.attn";
  EXPECT_ERROR_CONTAINS(tasks::translate_sentences(o), {"missing.attn"});
  o.model = model();
  o.sentences = {};
  EXPECT_ERROR_CONTAINS(tasks::translate_sentences(o), {"expected an English sentence"});
  o.sentences = {"  "};
  EXPECT_ERROR_CONTAINS(tasks::translate_sentences(o), {"source sentence is empty"});
  o.sentences = {"Hi."};
  o.beam = 0;
  EXPECT_ERROR_CONTAINS(tasks::translate_sentences(o), {"--beam"});
}

}  // namespace
}  // namespace attn

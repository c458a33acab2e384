// tasks::train_lm and tasks::generate_lm (attn/tasks/lm.h): a few training steps
// on a small fortune-format file (seconds), the loss falls, the file loads,
// generation is reproducible with a seed, bad input is an error.
#include <attn/core/error.h>
#include <attn/models/task_model.h>
#include <attn/tasks/lm.h>
#include <attn/text/vocab.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "attn_tasks_lm_test_" + std::to_string(::getpid()) + "_" + name;
}

// A small fortune file: ANSI-coloured titles and authors, '%' separators.
std::string write_fortunes() {
  const std::string path = temp_path("poems.txt");
  std::ofstream f(path, std::ios::binary);
  const char* poems[][3] = {
      {"静夜思", "床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"},
      {"春晓", "春眠不觉晓，处处闻啼鸟。", "夜来风雨声，花落知多少。"},
      {"登鹳雀楼", "白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。"},
  };
  for (int rep = 0; rep < 12; ++rep)
    for (const auto& p : poems)
      f << "\x1b[32m《" << p[0] << "》\x1b[m\n\x1b[33m作者：佚名\x1b[m\n" << p[1] << "\n" << p[2] << "\n%\n";
  return path;
}

double parse_loss(const std::string& text, const std::string& label) {
  const std::regex re(label + "[^\\n]*loss ([0-9.]+)");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return -1;
  return std::stod(m[1]);
}

tasks::LmTrainOptions small_run(const std::string& data, const std::string& out) {
  tasks::LmTrainOptions o;
  o.data = data;
  o.out = out;
  o.steps = 40;
  o.seq_len = 32;
  o.batch = 8;
  o.lr = 0.003;
  o.eval_windows = 4;
  o.val_fraction = 0.1;
  o.log_every = 10;
  o.min_freq = 1;
  o.dropout = 0;
  return o;
}

class Lm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new std::string(write_fortunes());
    model_ = new std::string(temp_path("lm.attn"));
    progress_ = new std::string;
    tasks::LmTrainOptions o = small_run(*data_, *model_);
    o.progress.write = [](const std::string& s) { *progress_ += s; };
    try {
      result_ = new tasks::LmTrainResult(tasks::train_lm(o));
    } catch (const Error& e) {
      *progress_ += e.what();
    }
  }
  static void TearDownTestSuite() {
    std::remove(data_->c_str());
    std::remove(model_->c_str());
    delete data_, delete model_, delete progress_, delete result_;
  }
  static tasks::LmGenerateOptions sampling(const std::string& prompt, uint64_t seed) {
    tasks::LmGenerateOptions g;
    g.model = *model_;
    g.prompt = prompt;
    g.generate.search = models::SearchKind::sample;
    g.generate.eos_id = text::Vocab::kEos;
    g.generate.max_new_tokens = 20;
    g.generate.temperature = 0.8;
    g.generate.top_k = 20;
    g.generate.top_p = 0.9;
    g.generate.seed = seed;
    return g;
  }
  static std::string* data_;
  static std::string* model_;
  static std::string* progress_;
  static tasks::LmTrainResult* result_;
};
std::string* Lm::data_ = nullptr;
std::string* Lm::model_ = nullptr;
std::string* Lm::progress_ = nullptr;
tasks::LmTrainResult* Lm::result_ = nullptr;

TEST_F(Lm, TrainingLowersTheHeldOutLossAndWritesOneFile) {
  ASSERT_NE(result_, nullptr) << *progress_;
  const std::string& err = *progress_;
  EXPECT_NE(err.find("fortune format"), std::string::npos) << err;
  EXPECT_NE(err.find("step 40/40"), std::string::npos) << err;
  EXPECT_NE(err.find("tokens/s"), std::string::npos);
  EXPECT_NE(err.find("ETA"), std::string::npos);
  const double before = parse_loss(err, "held-out before training:");
  const double after = parse_loss(err, "held-out after");
  ASSERT_GT(before, 0) << err;
  ASSERT_GT(after, 0) << err;
  EXPECT_LT(after, before - 1.0) << err;
  EXPECT_NE(err.find("perplexity"), std::string::npos);
  EXPECT_EQ(result_->steps, 40);
  EXPECT_NEAR(result_->loss_before, before, 1e-4);
  EXPECT_LT(result_->loss_after, result_->loss_before - 1.0);

  const models::TaskModelHeader h = models::read_task_model(*model_, "lm");
  EXPECT_EQ(h.config.max_len, 32);
  const json::Value* vocab = h.data.find("vocab");
  ASSERT_NE(vocab, nullptr);
  // The ANSI codes and '%' lines are gone: no ESC byte and no '%' token.
  for (const auto& t : vocab->items()) {
    EXPECT_EQ(t.as_string().find('\x1b'), std::string::npos);
    EXPECT_NE(t.as_string(), "%");
  }
  EXPECT_TRUE(h.data.find("held_out_perplexity") != nullptr);
  EXPECT_ERROR_CONTAINS(models::read_task_model(*model_, "classify"), {"lm", "classify"});
}

TEST_F(Lm, GenerateIsReproducibleWithASeed) {
  ASSERT_NE(result_, nullptr) << *progress_;
  std::string streamed;
  tasks::LmGenerateOptions g = sampling("床前", 1);
  g.stream = [&](const std::string& piece) { streamed += piece; };
  const tasks::LmGenerated a = tasks::generate_lm(g);
  const tasks::LmGenerated b = tasks::generate_lm(sampling("床前", 1));
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(streamed, a.text);  // the stream is the continuation, piece by piece
  EXPECT_FALSE(a.text.empty());
  // A few seeds: at least one differs from seed 1 (sampling depends on the seed).
  bool differs = false;
  for (int s = 2; s < 6 && !differs; ++s) differs = tasks::generate_lm(sampling("床前", s)).text != a.text;
  EXPECT_TRUE(differs);
  // Greedy and beam search run too (beam search is not streamed).
  tasks::LmGenerateOptions gr = sampling("春眠", 1);
  gr.generate.search = models::SearchKind::greedy;
  gr.generate.max_new_tokens = 10;
  EXPECT_NO_THROW(tasks::generate_lm(gr));
  tasks::LmGenerateOptions bm = gr;
  bm.generate.search = models::SearchKind::beam;
  bm.generate.beam = 3;
  std::string beam_stream;
  bm.stream = [&](const std::string& piece) { beam_stream += piece; };
  const tasks::LmGenerated bg = tasks::generate_lm(bm);
  EXPECT_TRUE(beam_stream.empty());
  EXPECT_LE(bg.generated.ids.size(), 10u);
}

TEST_F(Lm, BadInputIsAnError) {
  ASSERT_NE(result_, nullptr) << *progress_;
  const std::string bad = temp_path("bad.txt");
  {
    std::ofstream f(bad, std::ios::binary);
    f << "good line\nanother\nbad \xC3\x28 byte\n";
  }
  tasks::LmTrainOptions o;
  o.data = bad;
  o.steps = 1;
  o.out = temp_path("never.attn");
  EXPECT_ERROR_CONTAINS(tasks::train_lm(o), {bad, "line 3"});
  std::remove(bad.c_str());

  o.data = "";
  EXPECT_ERROR_CONTAINS(tasks::train_lm(o), {"--data FILE is required"});
  o.data = *data_;
  o.format = "poem";
  EXPECT_ERROR_CONTAINS(tasks::train_lm(o), {"auto, plain or fortune"});
  o.format = "auto";
  o.data = "/nonexistent/file.txt";
  EXPECT_ERROR_CONTAINS(tasks::train_lm(o), {"cannot open"});

  tasks::LmGenerateOptions g = sampling("x", 1);
  g.generate.top_p = 0;
  EXPECT_ERROR_CONTAINS(tasks::generate_lm(g), {"--top-p must be in (0, 1]; got 0"});
  g = sampling("x", 1);
  g.generate.temperature = 0;
  EXPECT_ERROR_CONTAINS(tasks::generate_lm(g), {"--temperature must be > 0"});
  g = sampling(std::string(40, 'a'), 1);
  EXPECT_ERROR_CONTAINS(tasks::generate_lm(g), {"the prompt has 40 characters"});
  g = sampling("x", 1);
  g.model = "/nonexistent/m.attn";
  EXPECT_THROW(tasks::generate_lm(g), Error);
  // A file that is not an attn model is named in the error.
  g.model = testing::source_path("README.md");
  EXPECT_ERROR_CONTAINS(tasks::generate_lm(g), {"README.md"});
}

}  // namespace
}  // namespace attn

// Fine-tuning a pretrained encoder (tasks::train_classifier with options.encoder):
// on the tiny e5 container of the io tests (1 layer, hidden 32, 10 pieces) and a
// separable two-class set written here. The pipeline, not the accuracy, is under
// test: the saved model classifies, frozen weights stay the container's bit for bit,
// embeddings left out of the file come back from the container, the clean-set
// scores are reported; and bad input gets a clear error.
#include <attn/core/error.h>
#include <attn/core/precision.h>
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/models/task_model.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tasks/tiny_e5_run.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

std::string tiny() { return testing::source_path("tests/io/data/e5_tiny.bin"); }

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / ("attn_finetune_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// pos: pieces ▁a / ▁ab; neg: ▁ b. 30 distinct lines each.
tasks::ClassifyTrainOptions tiny_run(const fs::path& dir) {
  std::ofstream(dir / "clean.tsv") << "label\ttext\npos\ta a\nneg\tb b\npos\ta ab\nneg\tb\n";
  tasks::ClassifyTrainOptions o = testing::tiny_e5_run(dir);
  o.eval = (dir / "clean.tsv").string();
  o.encoder_epochs = 8;
  return o;
}

TEST(ClassifyFinetune, TinyE5TrainsSavesAndClassifies) {
  const fs::path dir = temp_dir("train");
  tasks::ClassifyTrainOptions o = tiny_run(dir);
  o.freeze_layers = 0;  // embeddings frozen, the one layer and the head trained
  const tasks::ClassifyTrainResult r = tasks::train_classifier(o);
  EXPECT_TRUE(fs::exists(dir / "run" / "model.attn"));
  EXPECT_TRUE(fs::exists(dir / "run" / "report.md"));
  EXPECT_GE(r.eval_accuracy, 0.0);
  EXPECT_GE(r.lr_eval_accuracy, 0.0);
  const json::Value& enc = r.report.at("encoder");
  EXPECT_EQ(enc.at("frozen_layers").as_int64(), 0);
  EXPECT_TRUE(enc.at("frozen_embeddings").as_bool());
  {  // the report names what stayed frozen: the embeddings alone (there is no "layers 0--1")
    std::ifstream f(dir / "run" / "report.md");
    const std::string md((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(md.find("- frozen: embeddings, computed once"), std::string::npos) << md;
    EXPECT_EQ(md.find("layers 0--1"), std::string::npos) << md;
  }
  // The file leaves the frozen embedding table out; loading takes it from the container.
  const models::TaskModelHeader h = models::read_task_model(r.model_path, "classify");
  EXPECT_EQ(h.data.at("embeddings").as_string(), "base");
  EXPECT_EQ(h.data.at("tokenizer").at("kind").as_string(), "e5");
  auto clf = models::TextClassifier::load(r.model_path);
  const io::E5Container c = io::E5Container::open(tiny());
  bool found = false;
  for (const auto& [name, p] : clf->model().named_parameters()) {
    if (name != "embed.weight") continue;
    found = true;
    EXPECT_ALL_CLOSE(p, c.load_hf("embeddings.word_embeddings.weight"), (testing::Tolerance{0, 0}));
  }
  EXPECT_TRUE(found) << "the loaded classifier has no embed.weight parameter";
  const std::vector<models::Classification> out = clf->classify({"a a a", "b b b"}, true);
  EXPECT_EQ(clf->labels()[out[0].label], "pos");
  EXPECT_EQ(clf->labels()[out[1].label], "neg");
  EXPECT_EQ(out[0].tokens.front(), "<s>");
  EXPECT_EQ(out[0].tokens.back(), "</s>");
  EXPECT_EQ(out[0].attention.size(), 1u);  // one layer of real attention of <s>
  fs::remove_all(dir);
}

// `attn train --precision bf16` sets the process-wide precision, not ClassifyTrainOptions::bf16: the
// report says which precision the products had either way.
TEST(ClassifyFinetune, TheReportSaysBf16WhenTheProcessWidePrecisionIsBf16) {
  const fs::path dir = temp_dir("bf16");
  tasks::ClassifyTrainOptions o = testing::tiny_e5_run(dir);
  o.freeze_layers = 0;
  o.encoder_epochs = 1;
  EXPECT_FALSE(tasks::train_classifier(o).report.at("training").at("bf16").as_bool());
  set_matmul_precision(MatmulPrecision::bf16);
  o.out = (dir / "run_bf16").string();
  tasks::ClassifyTrainResult r;
  try {
    r = tasks::train_classifier(o);
  } catch (...) {
    reset_matmul_precision();
    throw;
  }
  reset_matmul_precision();
  EXPECT_TRUE(r.report.at("training").at("bf16").as_bool());
  std::ifstream f(dir / "run_bf16" / "report.md");
  const std::string md((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find(", bf16 products"), std::string::npos) << md;
  fs::remove_all(dir);
}

TEST(ClassifyFinetune, FrozenLayersStayThePretrainedWeights) {
  const fs::path dir = temp_dir("frozen");
  tasks::ClassifyTrainOptions o = tiny_run(dir);
  o.freeze_layers = 1;  // everything but the head
  o.encoder_epochs = 2;
  const tasks::ClassifyTrainResult r = tasks::train_classifier(o);
  auto clf = models::TextClassifier::load(r.model_path);
  const io::E5Container c = io::E5Container::open(tiny());
  int checked = 0;
  for (const auto& [name, p] : clf->model().named_parameters()) {
    if (name == "encoder.layers.0.ffn.w1.weight") {
      EXPECT_ALL_CLOSE(p, c.load_hf("encoder.layer.0.intermediate.dense.weight"), (testing::Tolerance{0, 0}));
      ++checked;
    }
    if (name == "encoder.layers.0.norm2.bias") {
      EXPECT_ALL_CLOSE(p, c.load_hf("encoder.layer.0.output.LayerNorm.bias"), (testing::Tolerance{0, 0}));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  fs::remove_all(dir);
}

TEST(ClassifyFinetune, LongTextsAreCutAndSaidSoEmptyTextIsAnError) {
  const fs::path dir = temp_dir("bad");
  tasks::ClassifyTrainOptions o = tiny_run(dir);
  o.encoder_epochs = 1;
  const tasks::ClassifyTrainResult r = tasks::train_classifier(o);
  auto clf = models::TextClassifier::load(r.model_path);
  // max_len 8 (the container's positions): <s> + 6 pieces + </s>
  const models::Classification c = clf->classify({"a a a a a a a a a a"}).at(0);
  EXPECT_TRUE(c.truncated);
  EXPECT_EQ(c.text_tokens, 10);
  EXPECT_EQ(c.tokens.size(), 8u);
  EXPECT_ERROR_CONTAINS(clf->classify({"a", "   "}), {"text 2 is empty after normalisation"});
  fs::remove_all(dir);
}

TEST(ClassifyFinetune, BadOptionsAreClearErrors) {
  const fs::path dir = temp_dir("opts");
  tasks::ClassifyTrainOptions o = tiny_run(dir);
  o.encoder = "bert-large";
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"--encoder must be e5", "got 'bert-large'"});
  o = tiny_run(dir);
  o.freeze_layers = 3;
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o),
                        {"--freeze-layers must be at most the encoder's 1 layers", "got 3"});
  o = tiny_run(dir);
  o.encoder_file = (dir / "pos.txt").string();  // not a container
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"pos.txt"});
  EXPECT_FALSE(fs::exists(dir / "run" / "model.attn"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn

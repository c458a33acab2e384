// The frozen part's on-disk cache of a fine-tune (ClassifyTrainOptions::cache_dir,
// src/tasks/classify_cache.h), on the tiny e5 container of the io tests: a second run reads
// every row and trains to the same numbers; a corrupt, truncated or stale file is reported
// and rebuilt, never used; the file format's own checks, one field at a time.
#include "tasks/classify_cache.h"

#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tasks/tiny_e5_run.h"
#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::path(::testing::TempDir()) / ("attn_fzcache_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Two separable classes of the tiny container's pieces (▁a / ▁ab against ▁b / ▁bb).
tasks::ClassifyTrainOptions tiny_run(const fs::path& dir, std::string* log) {
  tasks::ClassifyTrainOptions o = testing::tiny_e5_run(dir);
  o.freeze_layers = 1;  // the container's one layer frozen: the cache holds its output
  o.cache_dir = (dir / "cache").string();
  o.progress.write = [log](const std::string& s) { *log += s; };
  return o;
}

std::string cache_file(const fs::path& dir) { return (dir / "cache" / "e5-k1-len8.frozen").string(); }

int64_t hits(const tasks::ClassifyTrainResult& r) {
  return r.report.at("encoder").at("cache_hits").as_int64();
}

void flip_byte(const std::string& path, std::streamoff at_from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-at_from_end, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  f.seekp(-at_from_end, std::ios::end);
  c = static_cast<char>(c ^ 0x10);
  f.write(&c, 1);
}

TEST(FrozenCache, SecondRunReadsEveryRowAndTrainsTheSame) {
  const fs::path dir = temp_dir("reuse");
  std::string log;
  const tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  const tasks::ClassifyTrainResult a = tasks::train_classifier(o);
  EXPECT_EQ(hits(a), 0);
  ASSERT_TRUE(fs::is_regular_file(cache_file(dir))) << log;
  EXPECT_NE(log.find("0 examples read, 60 computed and saved"), std::string::npos) << log;
  log.clear();
  const tasks::ClassifyTrainResult b = tasks::train_classifier(o);
  EXPECT_EQ(hits(b), 60);
  EXPECT_NE(log.find("60 examples read, 0 computed"), std::string::npos) << log;
  EXPECT_EQ(b.report.at("encoder").at("prefix_tokens").as_int64(), 0);
  // The same hidden states, bit for bit, so the same training.
  EXPECT_EQ(a.test_accuracy, b.test_accuracy);
  EXPECT_EQ(a.report.at("valid").at("loss").as_double(), b.report.at("valid").at("loss").as_double());
  EXPECT_EQ(a.report.at("training").at("first_step_loss").as_double(),
            b.report.at("training").at("first_step_loss").as_double());
  fs::remove_all(dir);
}

TEST(FrozenCache, CorruptOrTruncatedFileIsReportedAndRebuilt) {
  const fs::path dir = temp_dir("corrupt");
  std::string log;
  const tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  const tasks::ClassifyTrainResult a = tasks::train_classifier(o);
  flip_byte(cache_file(dir), 100);  // inside the payload
  log.clear();
  const tasks::ClassifyTrainResult b = tasks::train_classifier(o);
  EXPECT_EQ(hits(b), 0);
  EXPECT_NE(log.find("not used (corrupt: the checksum does not match its contents); computing it again"),
            std::string::npos)
      << log;
  EXPECT_EQ(a.test_accuracy, b.test_accuracy);
  log.clear();
  EXPECT_EQ(hits(tasks::train_classifier(o)), 60) << log;  // rebuilt and valid again
  fs::resize_file(cache_file(dir), fs::file_size(cache_file(dir)) - 3);
  log.clear();
  EXPECT_EQ(hits(tasks::train_classifier(o)), 0);
  EXPECT_NE(log.find("bytes where its table says"), std::string::npos) << log;
  fs::remove_all(dir);
}

TEST(FrozenCache, StaleFileForOtherDataIsNotUsed) {
  const fs::path dir = temp_dir("stale");
  std::string log;
  tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  tasks::train_classifier(o);
  std::ofstream(dir / "pos.txt", std::ios::app) << "a a a a a a a a a a\n";  // one more example
  log.clear();
  EXPECT_EQ(hits(tasks::train_classifier(o)), 0);
  EXPECT_NE(log.find("not used (stale: made for another data set: 60 examples"), std::string::npos) << log;
  log.clear();
  EXPECT_EQ(hits(tasks::train_classifier(o)), 61) << log;
  fs::remove_all(dir);
}

// The reader's checks, one at a time, on a small file written here.
TEST(FrozenCache, ReaderChecksKeyAndSizes) {
  const fs::path dir = temp_dir("reader");
  tasks::detail::FrozenCacheKey key;
  key.encoder = "e5";
  key.model_bytes = 1000;
  key.model_hash = 42;
  key.frozen_layers = 2;
  key.max_len = 8;
  key.hidden = 4;
  key.rows = 3;
  key.data_hash = tasks::detail::hash_id_lists({{0, 5, 2}, {0, 6, 2}, {0, 2}});
  const std::vector<int64_t> lengths = {3, 3, 2};
  std::vector<Tensor> rows(3);
  rows[0] = Tensor::from(std::vector<float>(12, 1.5f), {3, 4});
  rows[2] = Tensor::from(std::vector<float>(8, -2.0f), {2, 4});
  const std::string path = tasks::detail::frozen_cache_path(dir.string(), key);
  EXPECT_EQ(fs::path(path).filename().string(), "e5-k2-len8.frozen");
  std::vector<Tensor> got;
  EXPECT_EQ(tasks::detail::load_frozen_cache(path, key, lengths, got), "no file yet");
  tasks::detail::save_frozen_cache(path, key, rows);
  ASSERT_EQ(tasks::detail::load_frozen_cache(path, key, lengths, got), "");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_FALSE(got[1].defined());
  EXPECT_ALL_CLOSE(got[0], rows[0], (testing::Tolerance{0, 0}));
  EXPECT_ALL_CLOSE(got[2], rows[2], (testing::Tolerance{0, 0}));
  auto why = [&](tasks::detail::FrozenCacheKey k, std::vector<int64_t> l = {3, 3, 2}) {
    std::vector<Tensor> g;
    std::string w = tasks::detail::load_frozen_cache(path, k, l, g);
    for (const Tensor& t : g) EXPECT_FALSE(t.defined()) << "a refused file filled a row";
    return w;
  };
  auto k = key;
  k.model_hash = 43;
  EXPECT_NE(why(k).find("stale: made for a model file of 1000 bytes"), std::string::npos) << why(k);
  k = key;
  k.frozen_layers = 3;
  EXPECT_EQ(why(k), "stale: made for frozen layers 2, this run has 3");
  k = key;
  k.max_len = 16;
  EXPECT_EQ(why(k), "stale: made for max length 8, this run has 16");
  k = key;
  k.data_hash ^= 1;
  EXPECT_NE(why(k).find("stale: made for another data set"), std::string::npos);
  EXPECT_EQ(why(key, {3, 3, 3}), "corrupt: row 2 has 2 pieces in the file, 3 in the data");
  std::ofstream(path, std::ios::binary) << std::string(100, 'x');  // long enough, but no cache
  EXPECT_EQ(why(key), "corrupt: not a frozen-part cache (bad magic)");
  std::ofstream(path, std::ios::binary) << "short";
  EXPECT_NE(why(key).find("shorter than the header"), std::string::npos);
  fs::remove_all(dir);
}

TEST(FrozenCache, LabelSmoothingLayerLrDecayAndPoolReachTheTraining) {
  const fs::path dir = temp_dir("levers");
  std::string log;
  tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  o.encoder_epochs = 1;
  const tasks::ClassifyTrainResult plain = tasks::train_classifier(o);
  EXPECT_EQ(plain.report.at("encoder").at("pool").as_string(), "mean");  // e5's own pooling
  o.label_smoothing = 0.2;
  const tasks::ClassifyTrainResult smooth = tasks::train_classifier(o);
  EXPECT_EQ(smooth.report.at("training").at("label_smoothing").as_double(), 0.2);
  EXPECT_NE(plain.report.at("training").at("first_step_loss").as_double(),
            smooth.report.at("training").at("first_step_loss").as_double());
  o.label_smoothing = 0;
  o.freeze_layers = 0;  // the one layer trains: at lr · 0.5 with the decay
  const tasks::ClassifyTrainResult flat = tasks::train_classifier(o);
  o.layer_lr_decay = 0.5;
  const tasks::ClassifyTrainResult decayed = tasks::train_classifier(o);
  EXPECT_EQ(decayed.report.at("training").at("layer_lr_decay").as_double(), 0.5);
  EXPECT_EQ(flat.report.at("training").at("first_step_loss").as_double(),
            decayed.report.at("training").at("first_step_loss").as_double());  // same start
  EXPECT_NE(flat.report.at("valid").at("loss").as_double(),
            decayed.report.at("valid").at("loss").as_double());
  o.layer_lr_decay = 0;
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"--layer-lr-decay must be in (0, 1]; got 0"});
  o.layer_lr_decay = 1;
  o.swa_from = 0.5;  // 6 steps of 8 rows in the epoch: the average of steps 3-6
  const tasks::ClassifyTrainResult avg = tasks::train_classifier(o);
  const json::Value& wa = avg.report.at("training").at("weight_average");
  EXPECT_EQ(wa.at("from_step").as_int64(), 3);
  EXPECT_EQ(wa.at("steps").as_int64(), 4);
  EXPECT_EQ(avg.report.at("valid").at("accuracy").as_double(),
            wa.at("used").as_bool() ? wa.at("valid_accuracy").as_double()
                                    : wa.at("kept_valid_accuracy").as_double());
  EXPECT_EQ(wa.at("kept_valid_accuracy").as_double(), flat.report.at("valid").at("accuracy").as_double());
  o.swa_from = 1;
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"--average-from must be in [0, 1); got 1"});
  o.swa_from = 0;
  o.freeze_layers = 1;
  o.pool = "cls";
  const tasks::ClassifyTrainResult cls = tasks::train_classifier(o);
  EXPECT_EQ(cls.report.at("encoder").at("pool").as_string(), "cls");
  EXPECT_EQ(cls.report.at("model").at("config").find("mean_pool"), nullptr);
  EXPECT_TRUE(plain.report.at("model").at("config").at("mean_pool").as_bool());
  fs::remove_all(dir);
}

TEST(FrozenCache, QueryPrefixIsSavedWithTheModelAndHasItsOwnCache) {
  const fs::path dir = temp_dir("prefix");
  std::string log;
  tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  o.encoder_epochs = 1;
  const tasks::ClassifyTrainResult plain = tasks::train_classifier(o);
  o.prefix = "query";
  o.out = (dir / "run-query").string();
  const tasks::ClassifyTrainResult q = tasks::train_classifier(o);
  EXPECT_EQ(q.report.at("encoder").at("prefix").as_string(), "query: ");
  EXPECT_EQ(hits(q), 0);  // not the unprefixed file: other ids
  EXPECT_TRUE(fs::is_regular_file(dir / "cache" / "e5-query-k1-len8.frozen"));
  EXPECT_EQ(hits(tasks::train_classifier(o)), 60);
  const auto a = models::TextClassifier::load(plain.model_path)->classify({"a a"}).at(0);
  const auto b = models::TextClassifier::load(q.model_path)->classify({"a a"}).at(0);
  EXPECT_GT(b.tokens.size(), a.tokens.size()) << "the saved model does not put the prefix before the text";
  EXPECT_EQ(b.tokens.front(), "<s>");
  fs::remove_all(dir);
}

// --frozen-vector: the head also reads a frozen copy of the trained layers. The copy is the
// pretrained layer, untouched by the training, saved with the model and reloaded; the saved model
// classifies and explains through the CLI; a second run with the cache trains to the same numbers.
TEST(FrozenCache, FrozenVectorHeadIsSavedReloadedAndExplained) {
  const fs::path dir = temp_dir("fvec");
  std::string log;
  tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  o.freeze_layers = 0;  // the container's one layer trains; its frozen copy reads the embeddings
  o.frozen_vector = true;
  o.encoder_epochs = 2;
  const tasks::ClassifyTrainResult r = tasks::train_classifier(o);
  EXPECT_TRUE(r.report.at("encoder").at("frozen_vector").as_bool());
  EXPECT_EQ(r.report.at("model").at("config").at("frozen_top").as_int64(), 1);
  EXPECT_NE(log.find("frozen vector (a frozen copy of layers 0-0, pooled) computed once"), std::string::npos)
      << log;
  EXPECT_NE(r.report.at("valid_short").find("count"), nullptr);
  const auto loaded = models::TextClassifier::load(r.model_path);
  ASSERT_EQ(loaded->model().config().frozen_top, 1);
  // The pretrained encoder as loaded from the container, to compare with.
  const io::E5Container c = io::E5Container::open(o.encoder_file);
  const models::BertConfig bc = models::BertConfig::from_e5(c.hf_config());
  models::EncoderClassifier base(models::bert_classifier_config(
      bc, 2, bc.max_position_embeddings - bc.position_offset, bc.position_offset, 0.0, 1, true));
  models::load_bert_weights(
      base, bc, [&](const std::string& n) { return c.load_hf(n); }, bc.position_offset);
  std::map<std::string, Tensor> pre, got;
  for (auto& [n, t] : base.named_parameters()) pre[n] = t;
  for (auto& [n, t] : loaded->model().named_parameters()) got[n] = t;
  int64_t compared = 0, trained_differ = 0;
  for (auto& [n, t] : got) {
    if (n.rfind("frozen_top.layers.0.", 0) != 0) continue;
    const std::string src = "encoder.layers.0." + n.substr(std::string("frozen_top.layers.0.").size());
    EXPECT_TRUE(testing::all_close(t, pre.at(src), {0, 0})) << n << " is not the pretrained " << src;
    trained_differ += !testing::all_close(got.at(src), pre.at(src), {0, 0});
    ++compared;
  }
  EXPECT_GT(compared, 10);
  EXPECT_GT(trained_differ, 0) << "the trained layer did not change";
  const testing::CliRun cls = testing::run_attn("classify --model " + r.model_path + " \"a a ab\" \"b bb\"");
  EXPECT_EQ(cls.status, 0) << cls.err;
  const testing::CliRun ex = testing::run_attn("classify --explain --model " + r.model_path + " \"a a ab\"");
  EXPECT_EQ(ex.status, 0) << ex.err;
  EXPECT_NE(ex.out.find("attribution"), std::string::npos) << ex.out;
  const tasks::ClassifyTrainResult again = tasks::train_classifier(o);
  EXPECT_EQ(hits(again), 60);
  EXPECT_EQ(again.test_accuracy, r.test_accuracy);
  EXPECT_EQ(again.report.at("valid").at("loss").as_double(), r.report.at("valid").at("loss").as_double());
  o.freeze_layers = 1;  // nothing left to train: no copy to make
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o),
                        {"--frozen-vector needs trained layers", "got --freeze-layers 1"});
  fs::remove_all(dir);
}

TEST(FrozenCache, BadOptionsAreClearErrors) {
  const fs::path dir = temp_dir("opts");
  std::string log;
  tasks::ClassifyTrainOptions o = tiny_run(dir, &log);
  o.label_smoothing = 1.0;
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"label smoothing must be in [0, 1); got 1"});
  o = tiny_run(dir, &log);
  o.pool = "max";
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"--pool must be mean or cls; got 'max'"});
  o = tiny_run(dir, &log);
  o.prefix = "question";
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o),
                        {"--prefix must be query, passage or none; got 'question'"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn

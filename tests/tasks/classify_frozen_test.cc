// The frozen part of a fine-tune through the inference path (detail::frozen_rows over models::BertModel,
// ClassifyTrainOptions::frozen_path "bert", the default) against the nn modules in eval mode
// (EncoderClassifier::hidden_after, frozen_path "nn"), on the tiny e5 container of the io tests: the same
// hidden states within 1e-5 (f32 rounding: the two paths sum in different orders), alone or in a padded
// batch; BertRunOptions::layers stops where the full forward's trace is; a tiny fine-tune through either
// path reaches the same accuracy and predictions; bad values are clear errors.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/tasks/classify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tasks/classify_cache.h"
#include "tasks/tiny_e5_run.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

std::string tiny() { return testing::source_path("tests/io/data/e5_tiny.bin"); }

// The nn modules' frozen part of one sequence: [len, C].
Tensor nn_rows(models::EncoderClassifier& m, const std::vector<int32_t>& ids, int64_t k) {
  NoGradGuard ng;
  m.eval();
  const std::vector<int64_t> flat(ids.begin(), ids.end());
  const auto n = static_cast<int64_t>(ids.size());
  return m.hidden_after(Tensor::from(flat, {1, n}), {n}, k).select(0, 0).contiguous();
}

TEST(ClassifyFrozen, InferencePathEqualsNnModules) {
  const io::E5Container c = io::E5Container::open(tiny());
  const models::BertConfig bc = models::BertConfig::from_e5(c.hf_config());
  const models::BertModel bert = models::BertModel::from_e5(c);
  const int64_t max_len = bc.max_tokens();  // 8 in the tiny container
  models::EncoderClassifier nn(
      models::bert_classifier_config(bc, 2, max_len, bc.position_offset, 0.0, 3, true));
  models::load_bert_weights(
      nn, bc, [&](const std::string& n) { return c.load_hf(n); }, bc.position_offset);
  // Lengths 2..8 in mixed order (padded batches of several lengths), ids over the whole vocabulary.
  std::vector<std::vector<int32_t>> ids;
  for (int i = 0; i < 14; ++i) {
    std::vector<int32_t> s{0};
    for (int l = 0; l < (i * 5) % 7; ++l) s.push_back(static_cast<int32_t>((i + 3 * l) % bc.vocab_size));
    s.push_back(2);
    ids.push_back(s);
  }
  for (int64_t k : {0, 1}) {
    int64_t tokens = 0;
    const std::vector<Tensor> rows = tasks::detail::frozen_rows(bert, ids, k, tokens, 4);
    ASSERT_EQ(rows.size(), ids.size());
    int64_t expected_tokens = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      expected_tokens += static_cast<int64_t>(ids[i].size());
      EXPECT_EQ(rows[i].shape(), (Shape{static_cast<int64_t>(ids[i].size()), bc.hidden_size}));
      EXPECT_ALL_CLOSE(rows[i], nn_rows(nn, ids[i], k), (testing::Tolerance{1e-5, 1e-5}))
          << "k " << k << ", sequence " << i;
    }
    EXPECT_EQ(tokens, expected_tokens);
    // One at a time gives the same rows as the padded batches (padding is masked).
    int64_t t1 = 0;
    const std::vector<Tensor> alone = tasks::detail::frozen_rows(bert, {ids[5]}, k, t1, 1);
    EXPECT_ALL_CLOSE(alone[0], rows[5], (testing::Tolerance{1e-6, 1e-6}));
  }
  int64_t unused = 0;
  EXPECT_ERROR_CONTAINS(tasks::detail::frozen_rows(bert, ids, 2, unused),
                        {"frozen part: k must be in [0, 1]; got 2"});
}

TEST(ClassifyFrozen, BertLayersOptionStopsWhereTheTraceIs) {
  const io::E5Container c = io::E5Container::open(tiny());
  const models::BertModel bert = models::BertModel::from_e5(c);
  models::BertInput in;
  in.ids = {{0, 5, 6, 7, 2}, {0, 8, 2}};
  models::BertRunOptions full;
  full.trace = true;
  const models::BertOutput all = bert.forward(in, full);
  ASSERT_EQ(all.hidden_states.size(), 2u);  // embeddings, the one layer
  for (int64_t k : {0, 1}) {
    models::BertRunOptions o;
    o.layers = k;
    const models::BertOutput part = bert.forward(in, o);
    EXPECT_ALL_CLOSE(part.hidden, all.hidden_states[static_cast<std::size_t>(k)], (testing::Tolerance{0, 0}));
  }
  models::BertRunOptions bad;
  bad.layers = 2;
  EXPECT_ERROR_CONTAINS(bert.forward(in, bad), {"bert: layers must be in [0, 1] (or -1 for all); got 2"});
  bad.layers = -2;
  EXPECT_ERROR_CONTAINS(bert.forward(in, bad), {"got -2"});
}

TEST(ClassifyFrozen, FineTuneThroughEitherPathReachesTheSameNumbers) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("attn_frozen_path_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  tasks::ClassifyTrainOptions o = testing::tiny_e5_run(dir);
  o.freeze_layers = 1;  // the one layer frozen: only the head trains on the frozen part's rows
  o.out = (dir / "bert").string();
  const tasks::ClassifyTrainResult a = tasks::train_classifier(o);
  o.frozen_path = "nn";
  o.out = (dir / "nn").string();
  const tasks::ClassifyTrainResult b = tasks::train_classifier(o);
  EXPECT_EQ(a.report.at("encoder").at("frozen_path").as_string(), "bert");
  EXPECT_EQ(b.report.at("encoder").at("frozen_path").as_string(), "nn");
  // Rows equal to 1e-5 feed the same head: the same accuracies (a few examples), losses within 1e-3.
  for (const char* split : {"valid", "test"})
    EXPECT_EQ(a.report.at(split).at("accuracy").as_double(), b.report.at(split).at("accuracy").as_double())
        << split;
  EXPECT_NEAR(a.report.at("valid").at("loss").as_double(), b.report.at("valid").at("loss").as_double(), 1e-3);
  EXPECT_GT(a.report.at("valid").at("accuracy").as_double(), 0.5);  // it learned the two classes
  o.frozen_path = "fast";
  EXPECT_ERROR_CONTAINS(tasks::train_classifier(o), {"--frozen-path must be bert or nn; got 'fast'"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn

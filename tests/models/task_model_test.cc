// One-file task models: save, read the header without the weights, load the
// weights into a fresh model, and reject files of another task or kind.
#include <attn/core/error.h>
#include <attn/models/task_model.h>
#include <attn/train/checkpoint.h>

#include <filesystem>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

using models::TransformerConfig;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attn_task_model_" + name)).string();
}

TEST(TaskModel, RoundTripsHeaderAndWeights) {
  TransformerConfig c = TransformerConfig::preset("micro");
  c.num_classes = 2;
  c.seed = 11;
  models::EncoderClassifier a(c);
  json::Value data = json::Value::object(
      {{"labels", json::Value::array({json::Value::string("neg"), json::Value::string("pos")})}});
  const std::string path = temp_path("roundtrip.attn");
  models::save_task_model(path, "classify", c, data, a.named_parameters());

  const models::TaskModelHeader h = models::read_task_model(path, "classify");
  EXPECT_EQ(h.task, "classify");
  EXPECT_TRUE(h.config == c);
  EXPECT_TRUE(h.data == data);

  TransformerConfig other = h.config;
  other.seed = 99;  // different initial weights
  models::EncoderClassifier b(other);
  models::load_task_model_weights(path, b.named_parameters());
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
  std::filesystem::remove(path);
}

TEST(TaskModel, RejectsAnotherTaskAndPlainCheckpoints) {
  TransformerConfig c = TransformerConfig::preset("micro");
  models::DecoderLM lm(c);
  const std::string path = temp_path("lm.attn");
  models::save_task_model(path, "lm", c, json::Value(), lm.named_parameters());
  EXPECT_ERROR_CONTAINS(models::read_task_model(path, "classify"),
                        {"is a 'lm' model", "expected a 'classify' model"});

  const std::string plain = temp_path("plain.attn");
  train::save_checkpoint(plain, lm.named_parameters(), nullptr, nullptr, train::TrainState{},
                         json::Value::object({{"d_model", json::Value::integer(32)}}));
  EXPECT_ERROR_CONTAINS(models::read_task_model(plain), {"not a task model"});

  // Weights for another architecture: every mismatch is named.
  TransformerConfig wide = c;
  wide.d_model = 64;
  models::DecoderLM big(wide);
  EXPECT_ERROR_CONTAINS(models::load_task_model_weights(path, big.named_parameters()),
                        {"does not match the model", "wrong shape"});
  std::filesystem::remove(path);
  std::filesystem::remove(plain);
}

}  // namespace
}  // namespace attn

// Issue 18, items 1, 2, 3 and 9: a task model file's checksum covers all of its content (a changed
// config, vocabulary or label is an error, not other predictions), version-1 files are refused with a
// message to retrain, a config size that does not match the tensors fails before anything is
// allocated, non-finite weights are an error naming the tensor, and a load reads one open mapping.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/io/finite.h>
#include <attn/io/safetensors.h>
#include <attn/models/task_model.h>
#include <attn/train/checkpoint.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using models::TransformerConfig;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("attn_task_integrity_" + name)).string();
}

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TransformerConfig micro_config() {
  TransformerConfig c = TransformerConfig::preset("micro");
  c.num_classes = 2;
  c.positions = models::Positions::learned;
  return c;
}

json::Value labels_data() {
  return json::Value::object(
      {{"labels", json::Value::array({json::Value::string("neg"), json::Value::string("pos")})},
       {"vocab", json::Value::array({json::Value::string("a"), json::Value::string("b")})}});
}

std::string save_micro(const std::string& name) {
  const TransformerConfig c = micro_config();
  models::EncoderClassifier m(c);
  const std::string path = temp_path(name);
  models::save_task_model(path, "classify", c, labels_data(), m.named_parameters());
  return path;
}

// Rewrites `path` with its tensors and the attn metadata text transformed by `edit`, re-checksummed
// (what a careful forger or a buggy writer would produce: the checksum matches, the content is wrong).
void rewrite_metadata(const std::string& path, const std::function<std::string(std::string)>& edit,
                      bool with_checksum = true) {
  const io::SafeTensorsFile f = io::SafeTensorsFile::open(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : f.names()) tensors.emplace_back(n, f.load(n));
  const std::string text = edit(f.metadata().at("attn.checkpoint"));
  io::Metadata md = {{"format", "attn.checkpoint"}, {"attn.checkpoint", text}};
  if (with_checksum) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(text)));
    md["attn.checkpoint.checksum"] = hex;
  }
  const std::string tmp = path + ".rewrite";
  io::save_safetensors(tmp, tensors, md);
  fs::rename(tmp, path);
}

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const std::size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not in the metadata";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(TaskModelIntegrity, ChangedConfigVocabularyOrLabelIsAnError) {
  const std::string path = save_micro("changed.attn");
  const std::string bytes = read_all(path);
  // One changed character each in the config (heads 4 -> 8), the vocabulary and the labels; the
  // byte count stays the same, so only the checksum can tell.
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"\\\"heads\\\":4", "\\\"heads\\\":8"},
                                                        {"\\\"a\\\",\\\"b\\\"", "\\\"a\\\",\\\"c\\\""},
                                                        {"\\\"neg\\\"", "\\\"nag\\\""}}) {
    const std::size_t at = bytes.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not found in the file";
    std::string c = bytes;
    c.replace(at, from.size(), to);
    const std::string bad = temp_path("changed_bad.attn");
    write_all(bad, c);
    EXPECT_ERROR_CONTAINS(models::read_task_model(bad, "classify"), {"is corrupt", "metadata", "checksum"});
    EXPECT_ERROR_CONTAINS(models::TaskModelFile::open(bad), {"is corrupt", "recorded"});
    fs::remove(bad);
  }
  EXPECT_NO_THROW(models::read_task_model(path, "classify"));
  fs::remove(path);
}

TEST(TaskModelIntegrity, VersionOneFilesAskForRetraining) {
  const std::string path = save_micro("v1.attn");
  rewrite_metadata(
      path, [](std::string t) { return replace_once(t, "\"version\":2", "\"version\":1"); },
      /*with_checksum=*/false);
  EXPECT_ERROR_CONTAINS(models::read_task_model(path), {"older version of attn", "version 1", "retrain"});
  fs::remove(path);
}

TEST(TaskModelIntegrity, HugeMaxLenFailsFastBeforeAllocating) {
  const std::string path = save_micro("maxlen.attn");
  rewrite_metadata(path,
                   [](std::string t) { return replace_once(t, "\"max_len\":64", "\"max_len\":4000000"); });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERROR_CONTAINS(models::TaskModelFile::open(path, "classify"),
                        {"max_len 4000000", "pos.weight", "[4000000, 32]", "[64, 32]"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  fs::remove(path);
}

TEST(TaskModelIntegrity, HugeLayerCountFailsFastBeforeAllocating) {
  const std::string path = save_micro("layers.attn");
  rewrite_metadata(path, [](std::string t) {
    return replace_once(t, "\"encoder_layers\":" + std::to_string(micro_config().encoder_layers),
                        "\"encoder_layers\":100000");
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERROR_CONTAINS(
      models::TaskModelFile::open(path, "classify"),
      {"encoder_layers 100000", "the file holds " + std::to_string(micro_config().encoder_layers)});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  fs::remove(path);
}

TEST(TaskModelIntegrity, NonFiniteWeightIsNamedWithItsIndex) {
  const TransformerConfig c = micro_config();
  models::EncoderClassifier m(c);
  NamedParams ps = m.named_parameters();
  std::string target;
  for (auto& [name, p] : ps)
    if (name.find("classifier") != std::string::npos && p.shape().size() == 1) {
      target = name;
      p.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
      break;
    }
  ASSERT_FALSE(target.empty());
  const std::string path = temp_path("nan.attn");
  models::save_task_model(path, "classify", c, labels_data(), ps);
  models::EncoderClassifier fresh(c);
  EXPECT_ERROR_CONTAINS(models::load_task_model_weights(path, fresh.named_parameters()),
                        {target, "non-finite", "element [1]", "nan"});
  fs::remove(path);
}

TEST(TaskModelIntegrity, OneOpenFileServesHeaderAndWeightsEvenIfThePathIsReplaced) {
  const TransformerConfig c = micro_config();
  models::EncoderClassifier a(c);
  const std::string path = temp_path("once.attn");
  models::save_task_model(path, "classify", c, labels_data(), a.named_parameters());
  const models::TaskModelFile file = models::TaskModelFile::open(path, "classify");
  // A training run replaces the path with another model (other vocabulary, other weights).
  TransformerConfig other = c;
  other.seed = 1234;
  models::EncoderClassifier b(other);
  json::Value d2 = labels_data();
  d2.set("note", json::Value::string("the second file"));
  models::save_task_model(path, "classify", other, d2, b.named_parameters());
  EXPECT_EQ(file.header().data.find("note"), nullptr) << "the header is the first file's";
  models::EncoderClassifier live(c);
  file.load_weights(live.named_parameters());
  const auto pa = a.named_parameters(), pl = live.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector(), pl[i].second.to_vector())
        << pa[i].first << ": weights of the first file";
  fs::remove(path);
}

TEST(FiniteCheck, FindsTheFirstNonFiniteValueInEveryBlockPosition) {
  std::vector<float> v(10000, 1.f);
  EXPECT_EQ(io::first_non_finite(v.data(), static_cast<int64_t>(v.size())), -1);
  for (int64_t at : {0, 4095, 4096, 9999}) {
    std::vector<float> w = v;
    w[static_cast<std::size_t>(at)] = at % 2 ? std::numeric_limits<float>::infinity() : NAN;
    EXPECT_EQ(io::first_non_finite(w.data(), static_cast<int64_t>(w.size())), at);
  }
  Tensor t = Tensor::zeros({3, 4});
  t.data<float>()[6] = -std::numeric_limits<float>::infinity();
  EXPECT_ERROR_CONTAINS(io::check_finite(t, "weight 'x'"), {"weight 'x'", "element [1, 2]", "-inf"});
  EXPECT_NO_THROW(io::check_finite(Tensor::zeros({5}), "zeros"));
}

}  // namespace
}  // namespace attn

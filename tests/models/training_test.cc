// The models in training mode: dropout (embeddings, residuals, FFN and
// attention probabilities) gives different but finite losses per step and
// none in eval mode; plain gradient steps lower the loss on a fixed batch.
#include <attn/core/autograd.h>
#include <attn/models/transformer.h>
#include <attn/ops/basic.h>

#include <cmath>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

using models::TransformerConfig;

Tensor ids_of(const std::vector<int64_t>& v, int64_t B, int64_t L) { return Tensor::from(v, {B, L}); }

TEST(Training, DropoutOnlyInTrainModeAndBackwardRuns) {
  TransformerConfig c = TransformerConfig::preset("micro");
  c.dropout = 0.2;
  c.attention_dropout = 0.2;
  c.label_smoothing = 0.1;
  models::EncoderDecoder m(c);
  Tensor src = ids_of({3, 4, 5, 6, 7, 8, 9, 0}, 2, 4), tgt = ids_of({1, 2, 3, 1, 4, 5}, 2, 3);
  Tensor targets = ids_of({2, 3, 9, 4, 5, 0}, 2, 3);
  ASSERT_TRUE(m.is_training());
  const double l1 = m.forward(src, {4, 3}, tgt, targets).loss.to_vector()[0];
  auto out = m.forward(src, {4, 3}, tgt, targets);
  const double l2 = out.loss.to_vector()[0];
  EXPECT_TRUE(std::isfinite(l1) && std::isfinite(l2));
  EXPECT_NE(l1, l2) << "two training steps drew the same dropout masks";
  out.loss.backward();
  for (const auto& [n, p] : m.named_parameters()) EXPECT_TRUE(p.grad().defined()) << n;
  m.eval();
  NoGradGuard no_grad;
  EXPECT_EQ(m.forward(src, {4, 3}, tgt, targets).loss.to_vector(),
            m.forward(src, {4, 3}, tgt, targets).loss.to_vector());
}

TEST(Training, GradientStepsLowerTheLoss) {
  TransformerConfig c = TransformerConfig::preset("micro");
  c.positions = models::Positions::rope;
  c.pre_norm = true;
  c.seed = 3;
  models::DecoderLM lm(c);
  lm.eval();
  Tensor ids = ids_of({5, 9, 13, 17, 21, 25, 7, 7, 8, 8, 9, 9}, 2, 6);
  Tensor targets = ids_of({9, 13, 17, 21, 25, 29, 7, 8, 8, 9, 9, 0}, 2, 6);
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    lm.zero_grad();
    Tensor loss = lm.forward(ids, targets).loss;
    (step == 0 ? first : last) = loss.to_vector()[0];
    loss.backward();
    NoGradGuard no_grad;
    for (auto& [n, p] : lm.named_parameters()) {
      Tensor w = p.detach();
      w.copy_from(w - 0.05 * p.grad());
    }
  }
  EXPECT_LT(last, 0.8 * first) << "first " << first << ", last " << last;
}

}  // namespace
}  // namespace attn

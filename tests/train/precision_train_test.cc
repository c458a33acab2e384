// Training with MatmulPrecision::bf16 (bf16 GEMM operands, fp32 accumulation): the tiny
// attention model, trained 30 AdamW steps on fixed data, ends within a few percent of the
// fp32 loss, while the run does take the bf16 path (the loss curve is not bit-identical).
#include <attn/core/autograd.h>
#include <attn/core/precision.h>
#include <attn/train/optim.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/cpu/gemm_bf16.h"
#include "tiny_model.h"

namespace attn {
namespace {

using testing::TinyModel;

std::vector<double> train_losses(MatmulPrecision p, int steps) {
  const MatmulPrecision saved = matmul_precision();
  set_matmul_precision(p);
  const int64_t N = 16, L = 6;
  const Tensor x = testing::random_uniform({N, L, TinyModel::C}, 21);  // [N, L, C]
  Tensor y = Tensor::empty({N, L}, DType::i64);                        // [N, L]
  for (int64_t i = 0; i < N * L; ++i) y.data<int64_t>()[i] = (i * 7 + i / 5) % TinyModel::V;
  TinyModel m(4);
  train::AdamWOptions ao;
  ao.lr = 3e-2;
  train::AdamW opt(m.params, ao);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    const Tensor loss = m.loss(x, y, 0.0, 0);
    loss.backward();
    opt.step();
    losses.push_back(loss.to_vector()[0]);
  }
  set_matmul_precision(saved);
  return losses;
}

TEST(PrecisionTraining, Bf16LossTracksFp32) {
  const std::vector<double> fp32 = train_losses(MatmulPrecision::highest, 30);
  const std::vector<double> bf = train_losses(MatmulPrecision::bf16, 30);
  ASSERT_LT(fp32.back(), 0.8 * fp32.front()) << "the fp32 run should learn";
  for (std::size_t s = 0; s < fp32.size(); ++s) EXPECT_NEAR(bf[s], fp32[s], 0.03 * fp32[s]) << "step " << s;
  if (kernels::cpu::bf16_gemm_available()) {
    EXPECT_NE(bf, fp32) << "bf16 precision did not change any product";
  }
  std::printf("loss fp32 %.5f -> %.5f, bf16 %.5f -> %.5f\n", fp32.front(), fp32.back(), bf.front(),
              bf.back());
}

}  // namespace
}  // namespace attn

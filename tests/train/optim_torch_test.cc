// AdamW and SGD against torch.optim on a fixed 2-layer MLP
// (fixture: python/reference/optim_fixtures.py -> tests/train/data/optim_torch.safetensors).
#include <attn/core/autograd.h>
#include <attn/io/safetensors.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>
#include <attn/train/optim.h>

#include <cmath>
#include <memory>
#include <string>

#include "testing/tolerances.h"

namespace attn {
namespace {

const char* const kNames[] = {"w1", "b1", "w2", "b2"};

const io::SafeTensorsFile& fixture() {
  static const io::SafeTensorsFile f =
      io::SafeTensorsFile::open(testing::source_path("tests/train/data/optim_torch.safetensors"));
  return f;
}

// loss = cross_entropy(linear(gelu(linear(x, w1, b1)), w2, b2), y); x: [16, 4], y: [16]
Tensor mlp_loss(const NamedParams& p, const Tensor& x, const Tensor& y) {
  return cross_entropy(linear(gelu(linear(x, p[0].second, p[1].second)), p[2].second, p[3].second), y);
}

std::unique_ptr<train::Optimizer> make_optimizer(const std::string& c, const NamedParams& params) {
  if (c == "adamw" || c == "adamw_clip") {
    train::AdamWOptions o;
    o.lr = 1e-2;
    o.beta1 = 0.9;
    o.beta2 = 0.99;
    o.eps = 1e-8;
    o.weight_decay = 0.1;
    o.no_decay = [](const std::string& n) { return n == "b1" || n == "b2"; };  // torch: a wd=0 group
    return std::make_unique<train::AdamW>(params, o);
  }
  train::SgdOptions o;
  if (c == "sgd") {
    o.lr = 0.1;
    o.momentum = 0.9;
    o.weight_decay = 1e-3;
  } else {
    o.lr = 0.05;
    o.momentum = 0.9;
    o.nesterov = true;
  }
  return std::make_unique<train::Sgd>(params, o);
}

class OptimTorch : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimTorch, FollowsTheLossCurveAndEndsAtTheSameWeights) {
  const std::string c = GetParam();
  const io::SafeTensorsFile& f = fixture();
  const Tensor x = f.load("x"), y = f.load("y", DType::i64);
  NamedParams params;
  for (const char* n : kNames) {
    Tensor p = f.load(std::string("init.") + n);
    p.set_requires_grad(true);
    params.emplace_back(n, p);
  }
  auto opt = make_optimizer(c, params);
  const Tensor losses = f.load(c + "/loss", DType::f64);  // [steps]
  const int64_t steps = losses.numel();
  ASSERT_EQ(steps, 10);
  Tensor ours = Tensor::empty({steps}, DType::f64), norms = Tensor::empty({steps}, DType::f64);
  for (int64_t t = 0; t < steps; ++t) {
    opt->zero_grad();
    const Tensor loss = mlp_loss(params, x, y);
    ours.set({t}, loss.at({}));
    loss.backward();
    norms.set({t}, c == "adamw_clip" ? train::clip_grad_norm(params, 0.5) : 0.0);
    opt->step();
  }
  EXPECT_EQ(opt->steps(), steps);
  EXPECT_ALL_CLOSE(ours, losses, testing::tol::kOptimTorch) << c << " loss curve";
  if (c == "adamw_clip") {
    EXPECT_ALL_CLOSE(norms, f.load(c + "/norm", DType::f64), testing::tol::kOptimTorch);
  }
  for (const auto& [n, p] : params)
    EXPECT_ALL_CLOSE(p, f.load(c + "/final." + n), testing::tol::kOptimTorch) << c << " final " << n;
  for (const auto& [n, s] : opt->state_tensors())
    EXPECT_ALL_CLOSE(s, f.load(c + "/" + n), testing::tol::kOptimTorch) << c << " state " << n;
  // the loss went down: the fixture is a real training run
  EXPECT_LT(ours.at({steps - 1}), ours.at({0}));
}

INSTANTIATE_TEST_SUITE_P(Cases, OptimTorch, ::testing::Values("adamw", "adamw_clip", "sgd", "sgd_nesterov"));

}  // namespace
}  // namespace attn

// Optimizer updates against independent double-precision formulas, gradient
// clipping, NaN/Inf detection and the no-decay rule.
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/train/optim.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "testing/tolerances.h"

namespace attn {
namespace {

struct AdamCase {
  const char* name;
  Shape shape;  // > 2^15 elements takes the parallel path
  double lr, beta1, beta2, eps, weight_decay;
  bool no_decay;
};

class AdamWFormula : public ::testing::TestWithParam<AdamCase> {};

// Three steps with fresh random gradients; expected values from the paper's
// formulas evaluated in double on the same inputs.
TEST_P(AdamWFormula, MatchesTheUpdateRuleInDouble) {
  const AdamCase& c = GetParam();
  Tensor p = testing::random_uniform(c.shape, 11);
  p.set_requires_grad(true);
  train::AdamWOptions o{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, {}};
  if (c.no_decay) o.no_decay = [](const std::string& n) { return n == "w"; };
  train::AdamW opt({{"w", p}}, o);
  const int64_t n = p.numel();
  std::vector<double> ep = p.to_vector(), em(n, 0.0), ev(n, 0.0);
  const double wd = c.no_decay ? 0.0 : c.weight_decay;
  for (int t = 1; t <= 3; ++t) {
    const Tensor g = testing::random_uniform(c.shape, 100 + t, -2.0, 2.0);
    p.set_grad(g);
    opt.step();
    const std::vector<double> gv = g.to_vector();
    for (int64_t j = 0; j < n; ++j) {
      ep[j] *= 1 - c.lr * wd;
      em[j] = c.beta1 * em[j] + (1 - c.beta1) * gv[j];
      ev[j] = c.beta2 * ev[j] + (1 - c.beta2) * gv[j] * gv[j];
      const double mhat = em[j] / (1 - std::pow(c.beta1, t)), vhat = ev[j] / (1 - std::pow(c.beta2, t));
      ep[j] -= c.lr * mhat / (std::sqrt(vhat) + c.eps);
    }
  }
  EXPECT_EQ(opt.steps(), 3);
  Tensor expect = Tensor::from(ep, c.shape);
  EXPECT_ALL_CLOSE(p, expect.to(DType::f32), testing::tol::kOptimFormula);
  const NamedParams st = opt.state_tensors();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].first, "m.w");
  EXPECT_EQ(st[1].first, "v.w");
  EXPECT_ALL_CLOSE(st[0].second, Tensor::from(em, c.shape).to(DType::f32), testing::tol::kOptimFormula);
  EXPECT_ALL_CLOSE(st[1].second, Tensor::from(ev, c.shape).to(DType::f32), testing::tol::kOptimFormula);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AdamWFormula,
    ::testing::Values(AdamCase{"small", {3, 5}, 1e-2, 0.9, 0.999, 1e-8, 0.01, false},
                      AdamCase{"no_decay", {7}, 3e-3, 0.8, 0.99, 1e-6, 0.5, true},
                      AdamCase{"large_parallel", {300, 257}, 1e-3, 0.9, 0.95, 1e-8, 0.1, false},
                      AdamCase{"zero_decay", {1, 1}, 0.1, 0.0, 0.5, 1e-3, 0.0, false}),
    [](const auto& info) { return std::string(info.param.name); });

// The update is elementwise: the thread count must not change a single bit.
TEST(AdamW, BitIdenticalForAnyThreadCount) {
  const Shape shape{513, 257};
  std::vector<std::vector<float>> results;
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    Tensor p = testing::random_uniform(shape, 5);
    p.set_requires_grad(true);
    train::AdamW opt({{"w", p}}, {});
    for (int t = 0; t < 3; ++t) {
      p.set_grad(testing::random_uniform(shape, 50 + t));
      opt.step();
    }
    results.emplace_back(p.data<float>(), p.data<float>() + p.numel());
    EXPECT_EQ(train::grad_norm({{"w", p}}), train::grad_norm({{"w", p}}));
  }
  set_num_threads(saved);
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4));
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[2].data(), results[0].size() * 4));
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  Tensor a = Tensor::full({4}, 1.0), b = Tensor::full({4}, 2.0);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  train::AdamW opt({{"a", a}, {"b", b}}, {});
  a.set_grad(Tensor::full({4}, 1.0));
  opt.step();
  EXPECT_NE(a.at({0}), 1.0);
  EXPECT_EQ(b.at({0}), 2.0);
}

TEST(Optimizer, RejectsBadParameters) {
  EXPECT_THROW(train::AdamW({{"x", Tensor::zeros({2}, DType::f64)}}, {}), Error);
  EXPECT_THROW(train::AdamW({{"x", Tensor::zeros({2})}, {"x", Tensor::zeros({2})}}, {}), Error);
  EXPECT_THROW(train::AdamW({{"x", Tensor::zeros({2, 3}).transpose(0, 1)}}, {}), Error);
  train::AdamWOptions bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(train::AdamW({{"x", Tensor::zeros({2})}}, bad), Error);
  train::SgdOptions nes;
  nes.nesterov = true;
  EXPECT_THROW(train::Sgd({{"x", Tensor::zeros({2})}}, nes), Error);
}

TEST(Optimizer, LoadStateListsEveryMismatch) {
  Tensor w = Tensor::zeros({2, 3}), b = Tensor::zeros({3});
  train::AdamW opt({{"w", w}, {"b", b}}, {});
  const NamedParams bad{{"m.w", Tensor::zeros({2, 3})},
                        {"m.b", Tensor::zeros({4})},
                        {"v.w", Tensor::zeros({2, 3})},
                        {"extra", Tensor::zeros({1})}};
  try {
    opt.load_state_tensors(bad, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing 'v.b'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'m.b' has shape [4], expected [3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected 'extra'"), std::string::npos) << msg;
  }
  EXPECT_EQ(opt.steps(), 0);
}

TEST(NoDecay, DefaultRule) {
  struct Row {
    const char* name;
    bool no_decay;
  };
  for (const Row& r :
       {Row{"layers.0.attn.wq", false}, Row{"layers.0.attn.bias", true}, Row{"bias", true},
        Row{"layers.1.norm1.weight", true}, Row{"ln_f.weight", true}, Row{"final_layernorm.weight", true},
        Row{"embed.weight", false}, Row{"biased.weight", false}})
    EXPECT_EQ(train::default_no_decay(r.name), r.no_decay) << r.name;
}

// ---- gradients ------------------------------------------------------------------------------

NamedParams params_with_grads(uint64_t seed, double scale) {
  NamedParams ps;
  const Shape shapes[] = {{3, 4}, {70000}, {5}};
  int i = 0;
  for (const Shape& s : shapes) {
    Tensor p = Tensor::zeros(s);
    p.set_requires_grad(true);
    p.set_grad(testing::random_uniform(s, seed + i, -scale, scale));
    ps.emplace_back("p" + std::to_string(i++), p);
  }
  return ps;
}

double norm_in_test(const NamedParams& ps) {
  long double s = 0;
  for (const auto& [n, p] : ps)
    for (double g : p.grad().to_vector()) s += static_cast<long double>(g) * g;
  return std::sqrt(static_cast<double>(s));
}

TEST(Clip, ReturnsThePreClipNormAndScalesToMaxNorm) {
  const NamedParams ps = params_with_grads(1, 1.0);
  const double expect = norm_in_test(ps);
  EXPECT_NEAR(train::grad_norm(ps), expect, 1e-12 * expect);
  const double max_norm = expect / 4;
  const double got = train::clip_grad_norm(ps, max_norm);
  EXPECT_NEAR(got, expect, 1e-12 * expect);
  EXPECT_NEAR(norm_in_test(ps), max_norm, 1e-6 * max_norm);
}

TEST(Clip, BelowTheThresholdNothingChanges) {
  const NamedParams ps = params_with_grads(2, 1e-3);
  std::vector<std::vector<double>> before;
  for (const auto& [n, p] : ps) before.push_back(p.grad().to_vector());
  const double norm = train::clip_grad_norm(ps, 1e3);
  EXPECT_GT(norm, 0);
  for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(ps[i].second.grad().to_vector(), before[i]);
}

TEST(Clip, NonFiniteGradientsAreReportedAndLeftAlone) {
  const NamedParams ps = params_with_grads(3, 1.0);
  EXPECT_TRUE(train::nonfinite_grads(ps).empty());
  Tensor g1 = ps[1].second.grad();
  g1.data<float>()[12345] = std::numeric_limits<float>::quiet_NaN();
  Tensor g2 = ps[2].second.grad();
  g2.data<float>()[4] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(train::nonfinite_grads(ps), (std::vector<std::string>{"p1", "p2"}));
  const float before = ps[0].second.grad().data<float>()[0];
  EXPECT_FALSE(std::isfinite(train::clip_grad_norm(ps, 1e-3)));
  EXPECT_EQ(ps[0].second.grad().data<float>()[0], before);
  EXPECT_THROW(train::clip_grad_norm(ps, 0.0), Error);
}

}  // namespace
}  // namespace attn

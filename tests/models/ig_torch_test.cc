// Integrated gradients with the midpoint rule (models/attribution.h, AttributionRule::midpoint) against
// the same integral taken by PyTorch in float64 on the same tiny classifiers
// (python/reference/ig_fixtures.py, tests/models/data/ig_torch.safetensors): pre-norm and post-norm,
// baselines [PAD], zeros and [PAD] with the first and last tokens kept (AttributionOptions::keep), m = 20.
// Also f(x), f(baseline) and the completeness of the sum.
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/models/attribution.h>
#include <attn/models/transformer.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

const char* kFixture = "tests/models/data/ig_torch.safetensors";

class IgTorch : public ::testing::TestWithParam<std::string> {};

TEST_P(IgTorch, MidpointIntegratedGradientsEqualTorch) {
  const io::SafeTensorsFile f = io::SafeTensorsFile::open(testing::source_path(kFixture));
  const std::string name = GetParam();
  const auto& meta = f.metadata();
  const int64_t steps = std::stoll(meta.at("steps"));
  models::EncoderClassifier m(models::TransformerConfig::from_json(json::parse(meta.at(name + "/config"))));
  std::map<std::string, Tensor> params;
  const std::string pre = name + "/param/";
  for (const auto& n : f.names())
    if (n.rfind(pre, 0) == 0) params[n.substr(pre.size())] = f.load(n);
  m.load_parameters(params);
  std::vector<int64_t> ids;
  for (double v : f.load(name + "/in/ids", DType::i64).to_vector()) ids.push_back(static_cast<int64_t>(v));
  const auto target = static_cast<int64_t>(f.load(name + "/target", DType::i64).to_vector()[0]);
  for (const std::string base : {"pad", "zeros", "pad_keep"}) {
    SCOPED_TRACE(name + ", baseline " + base);
    models::AttributionOptions o;
    o.steps = steps;
    o.rule = models::AttributionRule::midpoint;
    o.baseline = models::parse_baseline(base == "pad_keep" ? "pad" : base);
    if (base == "pad_keep") o.keep = {static_cast<int64_t>(ids.size()) - 1, 0};  // any order
    o.batch = 7;  // the points in three batches of unequal size
    const models::Attribution a = models::attribute(m, ids, o);
    EXPECT_EQ(a.predicted, target);
    EXPECT_EQ(a.target, target);
    const std::vector<double> ig = f.load(name + "/" + base + "/ig", DType::f64).to_vector();
    const double fe = f.load(name + "/" + base + "/f_input", DType::f64).to_vector()[0];
    const double fb = f.load(name + "/" + base + "/f_baseline", DType::f64).to_vector()[0];
    ASSERT_EQ(a.integrated_gradients.size(), ig.size());
    double scale = 0;
    for (double v : ig) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 1e-3) << "the fixture's attribution is all but zero: the test could not fail";
    for (std::size_t i = 0; i < ig.size(); ++i)
      EXPECT_NEAR(a.integrated_gradients[i], ig[i], 2e-5 + 1e-4 * scale) << "token " << i;
    EXPECT_NEAR(a.f_input, fe, 1e-5 + 1e-5 * std::fabs(fe));
    EXPECT_NEAR(a.f_baseline, fb, 1e-5 + 1e-5 * std::fabs(fb));
    // torch's own sum misses f(e) - f(b) by the midpoint rule's error; attn's by the same amount.
    double torch_sum = 0;
    for (double v : ig) torch_sum += v;
    EXPECT_NEAR(a.completeness_error, torch_sum - (fe - fb), 1e-4 + 1e-4 * std::fabs(fe - fb));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, IgTorch, ::testing::Values("prenorm", "postnorm"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace attn

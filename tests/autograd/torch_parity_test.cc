// Layer 3 of the test plan for the differentiable ops: attn against PyTorch.
//
// tests/autograd/data/ops_torch.safetensors is written by
// python/reference/ops_fixtures.py (torch ops and autograd, fp32 and fp64,
// seeded). For every case this test runs the attn op on the same inputs,
// backpropagates the stored dout and compares the output and every float
// input's gradient:
//   * f32 inputs against torch's f32 results with tol::kTorchParity;
//   * f64 inputs (the same f32 values widened) against torch's f64 results
//     with tol::kTorchParityF64: the same math in double.
// ParityDetectsAChangedConvention shows the fixture catches a semantic slip.
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;
using V = std::vector<Tensor>;
using Op = std::function<Tensor(const V&)>;

const io::SafeTensorsFile& fixture() {
  static const io::SafeTensorsFile f =
      io::SafeTensorsFile::open(testing::source_path("tests/autograd/data/ops_torch.safetensors"));
  return f;
}

// The attn side of each case, in the generator's order.
const std::vector<std::pair<std::string, Op>>& ops() {
  static const std::vector<std::pair<std::string, Op>> o = {
      {"matmul_broadcast", [](const V& x) { return matmul(x[0], x[1]); }},
      {"linear", [](const V& x) { return linear(x[0], x[1], x[2]); }},
      {"layer_norm", [](const V& x) { return layer_norm(x[0], x[1], x[2], 1e-5); }},
      {"rms_norm", [](const V& x) { return rms_norm(x[0], x[1], 1e-6); }},
      {"gelu", [](const V& x) { return gelu(x[0]); }},
      {"gelu_tanh", [](const V& x) { return gelu(x[0], "tanh"); }},
      {"silu", [](const V& x) { return silu(x[0]); }},
      {"swiglu", [](const V& x) { return swiglu(x[0], x[1]); }},
      {"softmax", [](const V& x) { return softmax(x[0]); }},
      {"log_softmax", [](const V& x) { return log_softmax(x[0]); }},
      {"cross_entropy", [](const V& x) { return cross_entropy(x[0], x[1]); }},
      {"cross_entropy_smoothing",
       [](const V& x) {
         return cross_entropy(x[0], x[1], {-100, 0.1});
       }},
      {"embedding", [](const V& x) { return embedding(x[0], x[1]); }},
  };
  return o;
}

const Op& op_of(const std::string& name) {
  for (const auto& [n, op] : ops())
    if (n == name) return op;
  throw Error("no attn op for fixture case " + name);
}

TEST(TorchParityOps, FixtureListsTheCasesThisTestRuns) {
  const json::Value cases = json::parse(fixture().metadata().at("cases"));
  std::vector<std::string> names;
  for (const json::Value& c : cases.items()) names.push_back(c.as_string());
  std::vector<std::string> ours;
  for (const auto& [n, op] : ops()) ours.push_back(n);
  EXPECT_EQ(names, ours);
}

struct Outcome {
  Tensor out;
  std::vector<Tensor> grads;  // undefined for integer inputs
};

Outcome run(const std::string& name, DType dt, const Op& op) {
  std::vector<Tensor> in;
  for (int i = 0; fixture().contains(name + "/in" + std::to_string(i)); ++i) {
    const std::string key = name + "/in" + std::to_string(i);
    const bool is_int = fixture().info(key).dtype == io::StDType::I64;
    Tensor t = fixture().load(key, is_int ? DType::i64 : dt);
    if (!is_int) t.set_requires_grad(true);
    in.push_back(t);
  }
  Outcome o;
  o.out = op(in);
  o.out.backward(fixture().load(name + "/dout", dt));
  for (const Tensor& t : in) o.grads.push_back(t.dtype() == DType::i64 ? Tensor() : t.grad());
  return o;
}

class TorchParityOps : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchParityOps, OutputAndGradientsMatchTorch) {
  const std::string& name = GetParam();
  for (const auto& [dt, suffix, t] : {std::tuple{DType::f32, std::string(""), tol::kTorchParity},
                                      std::tuple{DType::f64, std::string("64"), tol::kTorchParityF64}}) {
    SCOPED_TRACE(dtype_name(dt));
    const Outcome o = run(name, dt, op_of(name));
    EXPECT_ALL_CLOSE(o.out, fixture().load(name + "/out" + suffix, dt), t);
    int compared = 0;
    for (std::size_t i = 0; i < o.grads.size(); ++i) {
      const std::string key = name + "/grad" + std::to_string(i) + suffix;
      if (!fixture().contains(key)) {
        EXPECT_FALSE(o.grads[i].defined()) << "input " << i;
        continue;
      }
      SCOPED_TRACE("gradient of input " + std::to_string(i));
      EXPECT_ALL_CLOSE(o.grads[i], fixture().load(key, dt), t);
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TorchParityOps, ::testing::ValuesIn([] {
                           std::vector<std::string> n;
                           for (const auto& [name, op] : ops()) n.push_back(name);
                           return n;
                         }()));

TEST(TorchParityOps, ParityDetectsAChangedConvention) {
  // Each of these is a plausible slip; the fixture must reject every one.
  const std::vector<std::pair<std::string, Op>> wrong = {
      {"layer_norm", [](const V& x) { return layer_norm(x[0], x[1], x[2], 1e-2); }},
      {"gelu", [](const V& x) { return gelu(x[0], "tanh"); }},
      {"cross_entropy_smoothing", [](const V& x) { return cross_entropy(x[0], x[1]); }},
      {"cross_entropy",
       [](const V& x) {
         return cross_entropy(x[0], x[1], {-1, 0.0});
       }},
      {"rms_norm", [](const V& x) { return rms_norm(x[0], Tensor(), 1e-6); }},
  };
  for (const auto& [name, op] : wrong) {
    SCOPED_TRACE(name);
    bool differs = false;
    try {
      const Outcome o = run(name, DType::f64, op);
      differs = !testing::all_close(o.out, fixture().load(name + "/out64", DType::f64), tol::kTorchParityF64);
    } catch (const Error&) {
      differs = true;  // e.g. a target that is no longer ignored is out of range
    }
    EXPECT_TRUE(differs);
  }
}

}  // namespace
}  // namespace attn

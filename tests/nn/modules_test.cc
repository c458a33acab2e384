// nn modules: parameter names and shapes, deterministic init, train/eval,
// load_parameters, attention capture, and each module against the same
// computation written with the differentiable ops in f64.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/nn/transformer.h>
#include <attn/ops/basic.h>

#include <cmath>
#include <map>
#include <string>

#include "testing/tolerances.h"

namespace attn {
namespace {

using testing::random_uniform;

std::map<std::string, Shape> shapes(const nn::Module& m) {
  std::map<std::string, Shape> out;
  for (const auto& [n, t] : m.named_parameters()) out[n] = t.shape();
  return out;
}

TEST(Module, HierarchicalNamesAndGqaShapes) {
  nn::InitRng rng(1);
  nn::LayerConfig c;
  c.d_model = 16, c.heads = 4, c.kv_heads = 2, c.d_ff = 24, c.pre_norm = true;
  nn::Decoder dec(c, 2, true, rng, 3);
  const auto s = shapes(dec);
  EXPECT_EQ(s.at("layers.0.self_attn.w_q.weight"), (Shape{16, 16}));
  EXPECT_EQ(s.at("layers.0.self_attn.w_k.weight"), (Shape{8, 16}));  // 2 kv heads of size 4
  EXPECT_EQ(s.at("layers.1.cross_attn.w_v.bias"), (Shape{8}));
  EXPECT_EQ(s.at("layers.1.ffn.w1.weight"), (Shape{24, 16}));
  EXPECT_EQ(s.at("layers.1.norm3.bias"), (Shape{16}));
  EXPECT_EQ(s.at("norm.weight"), (Shape{16}));
  EXPECT_EQ(s.count("layers.0.ffn.w3.weight"), 0u);
  // 2 layers × (2 attentions × 4 linears × 2 + ffn 2 × 2 + 3 norms × 2) + final norm 2.
  EXPECT_EQ(dec.named_parameters().size(), 2u * (16 + 4 + 6) + 2);
  for (const auto& [n, t] : dec.named_parameters()) EXPECT_TRUE(t.requires_grad()) << n;
}

TEST(Module, InitIsDeterministicPerSeedAndXavierBounded) {
  auto values = [](uint64_t seed) {
    nn::InitRng rng(seed);
    nn::Linear l(30, 20, true, rng);
    return l.weight().to_vector();
  };
  EXPECT_EQ(values(5), values(5));
  EXPECT_NE(values(5), values(6));
  const double a = std::sqrt(6.0 / 50.0);
  for (double v : values(5)) EXPECT_LE(std::abs(v), a);
}

TEST(Module, TrainEvalPropagatesAndDropoutOnlyInTraining) {
  nn::InitRng rng(2);
  nn::LayerConfig c;
  c.d_model = 8, c.heads = 2, c.d_ff = 16, c.dropout = 0.3;
  nn::EncoderLayer layer(c, rng, 9);
  Tensor x = random_uniform({2, 5, 8}, 4);
  NoGradGuard no_grad;
  EXPECT_TRUE(layer.is_training());
  Tensor a = layer.forward(x, {}), b = layer.forward(x, {});
  EXPECT_NE(a.to_vector(), b.to_vector()) << "two training steps drew the same dropout masks";
  layer.eval();
  EXPECT_FALSE(layer.is_training());
  EXPECT_EQ(layer.forward(x, {}).to_vector(), layer.forward(x, {}).to_vector());
}

TEST(Module, LoadParametersChecksNamesAndShapes) {
  nn::InitRng rng(3);
  nn::Linear l(4, 3, true, rng);
  std::map<std::string, Tensor> v = {{"weight", random_uniform({3, 4}, 1)}, {"bias", random_uniform({3}, 2)}};
  l.load_parameters(v);
  EXPECT_EQ(l.weight().to_vector(), v["weight"].to_vector());
  auto missing = v;
  missing.erase("bias");
  EXPECT_THROW(l.load_parameters(missing), Error);
  l.load_parameters(missing, /*strict=*/false);
  auto extra = v;
  extra["w"] = random_uniform({1}, 3);
  EXPECT_THROW(l.load_parameters(extra), Error);
  auto wrong = v;
  wrong["weight"] = random_uniform({4, 3}, 1);
  try {
    l.load_parameters(wrong);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'weight' has shape [3, 4]"), std::string::npos) << e.what();
  }
}

// MultiHeadAttention against the formula written with the ops in f64:
// softmax(q kᵀ / sqrt(D) + mask) v with GQA head sharing, then W_O.
struct MhaCase {
  std::string name;
  int64_t heads, kv_heads;
  bool causal, cross, padding;
};
void PrintTo(const MhaCase& c, std::ostream* os) { *os << c.name; }

class Mha : public ::testing::TestWithParam<MhaCase> {};

TEST_P(Mha, MatchesTheFormulaInDoubleAndCapturesWeights) {
  const MhaCase& p = GetParam();
  const int64_t B = 2, Lq = 5, Lk = p.cross ? 6 : 5, C = 16, H = p.heads, Hkv = p.kv_heads, D = C / H;
  nn::InitRng rng(11);
  nn::MhaConfig mc;
  mc.d_model = C, mc.heads = H, mc.kv_heads = Hkv;
  nn::MultiHeadAttention mha(mc, rng, 0);
  mha.eval();
  // Non-zero biases so that they are tested too.
  std::map<std::string, Tensor> params;
  uint64_t seed = 100;
  for (const auto& [n, t] : mha.named_parameters()) params[n] = random_uniform(t.shape(), seed++, -0.5, 0.5);
  mha.load_parameters(params);
  Tensor x = random_uniform({B, Lq, C}, 1), mem = random_uniform({B, Lk, C}, 2);
  nn::MhaCall call;
  call.causal = p.causal;
  if (p.padding) call.key_lengths = {Lk, Lk - 2};
  call.capture = true;
  NoGradGuard no_grad;
  nn::MhaResult r = mha.forward(x, p.cross ? mem : Tensor(), call, nullptr, p.cross);

  auto f64 = [](const Tensor& t) { return t.to(DType::f64); };
  auto P = [&](const std::string& n) { return f64(params.at(n)); };
  const Tensor kv_src = f64(p.cross ? mem : x);
  Tensor q = linear(f64(x), P("w_q.weight"), P("w_q.bias")).reshape({B, Lq, H, D}).permute({0, 2, 1, 3});
  Tensor k = linear(kv_src, P("w_k.weight"), P("w_k.bias")).reshape({B, Lk, Hkv, D}).permute({0, 2, 1, 3});
  Tensor v = linear(kv_src, P("w_v.weight"), P("w_v.bias")).reshape({B, Lk, Hkv, D}).permute({0, 2, 1, 3});
  Tensor out = Tensor::zeros({B, Lq, C}, DType::f64);
  Tensor probs = Tensor::zeros({B, H, Lq, Lk}, DType::f64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      Tensor s = scale(matmul(q.select(0, b).select(0, h), transpose(k.select(0, b).select(0, g), 0, 1)),
                       1.0 / std::sqrt(static_cast<double>(D)));  // [Lq, Lk]
      Tensor s2 = s.clone();
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t j = 0; j < Lk; ++j) {
          const bool masked = (p.causal && j > i + Lk - Lq) || (p.padding && b == 1 && j >= Lk - 2);
          if (masked) s2.set({i, j}, -INFINITY);
        }
      Tensor pr = softmax(s2);
      probs.select(0, b).select(0, h).copy_from(pr);
      Tensor o = matmul(pr, v.select(0, b).select(0, g));  // [Lq, D]
      out.select(0, b).slice(1, h * D, (h + 1) * D).copy_from(o);
    }
  Tensor expected = linear(out, P("w_o.weight"), P("w_o.bias"));
  EXPECT_ALL_CLOSE(r.out, expected, testing::tol::kOpsFloatForward);
  ASSERT_TRUE(r.weights.defined());
  EXPECT_ALL_CLOSE(r.weights, probs, testing::tol::kWeights);
}

INSTANTIATE_TEST_SUITE_P(Cases, Mha,
                         ::testing::Values(MhaCase{"self", 4, 4, false, false, false},
                                           MhaCase{"self_causal_gqa", 4, 2, true, false, false},
                                           MhaCase{"self_padding_mqa", 4, 1, false, false, true},
                                           MhaCase{"cross_padding_gqa", 4, 2, false, true, true}),
                         [](const auto& info) { return info.param.name; });

TEST(Mha, BadConfigs) {
  nn::InitRng rng(1);
  nn::MhaConfig c;
  c.d_model = 10, c.heads = 4;
  EXPECT_THROW(nn::MultiHeadAttention(c, rng, 0), Error);
  c.d_model = 16, c.heads = 4, c.kv_heads = 3;
  EXPECT_THROW(nn::MultiHeadAttention(c, rng, 0), Error);
}

TEST(Mha, GradientsReachEveryParameter) {
  nn::InitRng rng(4);
  nn::LayerConfig c;
  c.d_model = 8, c.heads = 2, c.kv_heads = 1, c.d_ff = 16, c.activation = nn::Activation::swiglu;
  c.norm = nn::NormKind::rms_norm;
  nn::DecoderLayer layer(c, true, rng, 1);
  Tensor x = random_uniform({2, 3, 8}, 1), mem = random_uniform({2, 4, 8}, 2);
  Tensor y = layer.forward(x, mem, {});
  sum(y * y).backward();
  for (const auto& [n, t] : layer.named_parameters()) {
    ASSERT_TRUE(t.grad().defined()) << n;
    double norm = 0;
    for (double g : t.grad().to_vector()) norm += g * g;
    EXPECT_GT(norm, 0) << n;
  }
}

}  // namespace
}  // namespace attn

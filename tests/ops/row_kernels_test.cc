// The fast fp32 row and elementwise kernels (src/kernels/cpu/row_kernels.h)
// through their ops, on every instruction set this CPU has (force_isa) and
// 1 or 2 threads: forward output and every input gradient in f32 against the
// same op in f64 (the scalar templates of nn_kernels.h, statistics in double)
// from the same seeded inputs. Row lengths cover every tail of the 16-lane
// loop (1, 15, 16, 17, 31, 33, ...) and element counts cross the threads'
// chunk boundaries. A new op is new rows in cases().
#include "kernels/cpu/row_kernels.h"

#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/isa_test_util.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;
using kernels::cpu::Isa;
using Inputs = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Inputs&)>;

struct RowCase {
  std::string name;
  std::vector<Shape> inputs;  // differentiable inputs, uniform in [lo, hi)
  OpFn fn;
  double lo = -1.0, hi = 1.0;
  int threads = 1;
  // Makes some entries -inf (softmax masking): every 3rd element of row 1, all of row 0.
  bool mask_rows = false;
};

Tensor targets_for(int64_t N, int64_t V, bool with_ignored) {
  Tensor t = Tensor::empty({N}, DType::i64);
  for (int64_t i = 0; i < N; ++i) t.data<int64_t>()[i] = with_ignored && i % 3 == 1 ? -100 : (i * 7 + 3) % V;
  return t;
}

std::vector<RowCase> cases() {
  std::vector<RowCase> c;
  const std::vector<int64_t> row_lens = {1, 3, 15, 16, 17, 31, 33, 64, 100, 256};
  for (int64_t C : row_lens) {
    const std::string s = std::to_string(C);
    c.push_back({"layer_norm_C" + s, {{5, C}, {C}, {C}}, [](const Inputs& x) {
                   return layer_norm(x[0], x[1], x[2]);
                 }});
    c.push_back({"rms_norm_C" + s, {{5, C}, {C}}, [](const Inputs& x) { return rms_norm(x[0], x[1]); }});
    c.push_back({"softmax_C" + s, {{5, C}}, [](const Inputs& x) { return softmax(x[0]); }, -4, 4});
    c.push_back({"log_softmax_C" + s, {{5, C}}, [](const Inputs& x) { return log_softmax(x[0]); }, -4, 4});
    c.push_back({"cross_entropy_smooth_V" + s,
                 {{7, C}},
                 [C](const Inputs& x) {
                   CrossEntropyOptions o;
                   o.label_smoothing = 0.1;
                   return cross_entropy(x[0], targets_for(7, C, true), o);
                 },
                 -4,
                 4});
  }
  c.push_back({"layer_norm_no_affine", {{6, 40}}, [](const Inputs& x) {
                 return layer_norm(x[0], Tensor(), Tensor());
               }});
  c.push_back({"layer_norm_weight_only_3d", {{2, 3, 24}, {24}}, [](const Inputs& x) {
                 return layer_norm(x[0], x[1], Tensor(), 1e-3);
               }});
  c.push_back({"layer_norm_offset_inputs", {{4, 48}, {48}, {48}}, [](const Inputs& x) {
                 return layer_norm(x[0] + Tensor::full({1}, 3.0, x[0].dtype()), x[1], x[2]);
               }});
  c.push_back({"rms_norm_no_weight", {{6, 40}}, [](const Inputs& x) { return rms_norm(x[0], Tensor()); }});
  c.push_back({"layer_norm_2threads",
               {{300, 256}, {256}, {256}},
               [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); },
               -1,
               1,
               2});
  c.push_back({"rms_norm_2threads",
               {{300, 96}, {96}},
               [](const Inputs& x) { return rms_norm(x[0], x[1]); },
               -1,
               1,
               2});
  c.push_back(
      {"softmax_masked_rows", {{4, 37}}, [](const Inputs& x) { return softmax(x[0]); }, -4, 4, 1, true});
  c.push_back({"log_softmax_masked_rows",
               {{4, 37}},
               [](const Inputs& x) { return log_softmax(x[0]); },
               -4,
               4,
               1,
               true});
  c.push_back({"softmax_2threads", {{200, 130}}, [](const Inputs& x) { return softmax(x[0]); }, -4, 4, 2});
  c.push_back({"cross_entropy_plain",
               {{9, 50}},
               [](const Inputs& x) { return cross_entropy(x[0], targets_for(9, 50, false)); },
               -4,
               4});
  c.push_back({"cross_entropy_all_ignored", {{3, 20}}, [](const Inputs& x) {
                 CrossEntropyOptions o;
                 o.ignore_index = 5;
                 o.label_smoothing = 0.2;
                 return cross_entropy(x[0], Tensor::full({3}, 5.0, DType::i64), o);
               }});
  c.push_back({"cross_entropy_large_logits",
               {{6, 300}},
               [](const Inputs& x) {
                 CrossEntropyOptions o;
                 o.label_smoothing = 0.1;
                 return cross_entropy(x[0], targets_for(6, 300, false), o);
               },
               -60,
               60});
  c.push_back({"cross_entropy_2threads",
               {{64, 1000}},
               [](const Inputs& x) {
                 CrossEntropyOptions o;
                 o.label_smoothing = 0.1;
                 return cross_entropy(x[0], targets_for(64, 1000, true), o);
               },
               -4,
               4,
               2});
  for (int64_t n : {1, 15, 16, 17, 33, 1000, 40000}) {
    const std::string s = std::to_string(n);
    const int th = n > 16384 ? 2 : 1;
    c.push_back({"relu_n" + s, {{n}}, [](const Inputs& x) { return relu(x[0]); }, -4, 4, th});
    c.push_back({"gelu_erf_n" + s, {{n}}, [](const Inputs& x) { return gelu(x[0]); }, -6, 6, th});
    c.push_back({"gelu_tanh_n" + s, {{n}}, [](const Inputs& x) { return gelu(x[0], "tanh"); }, -6, 6, th});
    c.push_back({"silu_n" + s, {{n}}, [](const Inputs& x) { return silu(x[0]); }, -8, 8, th});
    c.push_back({"swiglu_n" + s, {{n}, {n}}, [](const Inputs& x) { return swiglu(x[0], x[1]); }, -6, 6, th});
    c.push_back(
        {"dropout_n" + s, {{n}}, [](const Inputs& x) { return dropout(x[0], 0.3, true, 77); }, -1, 1, th});
  }
  c.push_back({"activations_extreme",
               {{64}},
               [](const Inputs& x) { return gelu(x[0]) + gelu(x[0], "tanh") + silu(x[0]); },
               -120,
               120});
  return c;
}

// Runs the case in `dtype` on copies of the inputs: the output, then the
// gradient of every input for the seed (0.7 for a scalar output, a seeded
// random tensor otherwise).
std::vector<Tensor> run(const RowCase& rc, const Inputs& base, DType dtype) {
  Inputs in;
  for (const Tensor& b : base) {
    Tensor t = b.to(dtype);
    t.set_requires_grad(true);
    in.push_back(t);
  }
  Tensor out = rc.fn(in);
  const Tensor seed = out.numel() == 1 ? Tensor::full(out.shape(), 0.7, dtype)
                                       : testing::random_uniform(out.shape(), 99).to(dtype);
  out.backward(seed);
  std::vector<Tensor> r{out.detach()};
  for (const Tensor& t : in) r.push_back(t.grad());
  return r;
}

Inputs make_inputs(const RowCase& rc) {
  Inputs base;
  uint64_t seed = 1000;
  for (const Shape& s : rc.inputs)
    base.push_back(testing::random_uniform(s, seed++, rc.lo, rc.hi, DType::f64));
  if (rc.mask_rows) {
    Tensor& x = base[0];
    const int64_t C = x.size(-1);
    const double ninf = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < C; ++j) x.set({0, j}, ninf);
    for (int64_t j = 0; j < C; j += 3) x.set({1, j}, ninf);
  }
  return base;
}

using RowKernels = testing::IsaCaseTest<RowCase>;

TEST_P(RowKernels, F32MatchesF64Reference) {
  const auto& [rc, isa] = GetParam();
  set_num_threads(rc.threads);
  const Inputs base = make_inputs(rc);
  const std::vector<Tensor> ref = run(rc, base, DType::f64);
  kernels::cpu::force_isa(isa);
  const std::vector<Tensor> got = run(rc, base, DType::f32);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_ALL_CLOSE(got[0].to(DType::f64), ref[0], tol::kOpsFloatForward) << "output";
  for (std::size_t i = 1; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << "gradient of input " << i - 1;
    EXPECT_ALL_CLOSE(got[i].to(DType::f64), ref[i], tol::kOpsFloatBackward) << "gradient of input " << i - 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RowKernels,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<RowCase>);

// The AVX-512 and AVX2 dropout recompute the scalar keep decision and rounding: the
// same bits as the scalar kernel, for p near 0, near 1 and in between, on 1 and 2 threads (the
// threads' chunks start the vector loops at other elements) and for lengths with every tail of the
// 8- and 4-element groups.
TEST(RowKernelsDropout, VectorPathsAreBitIdenticalToScalar) {
  int tested = 0;
  for (const Isa isa : {Isa::avx512, Isa::avx2}) {
    if (!kernels::cpu::isa_available(isa)) continue;
    ++tested;
    for (const int64_t n : {int64_t{16384 * 2 + 13}, int64_t{1}, int64_t{3}, int64_t{7}, int64_t{9}}) {
      const Tensor x = testing::random_uniform({n}, 5, -3, 3);
      for (int threads : {1, 2}) {
        const int saved = num_threads();
        set_num_threads(threads);
        for (double p : {1e-9, 0.1, 0.5, 0.999}) {
          kernels::cpu::force_isa(Isa::scalar);
          const Tensor a = dropout(x, p, true, 1234);
          kernels::cpu::force_isa(isa);
          const Tensor b = dropout(x, p, true, 1234);
          kernels::cpu::force_isa(std::nullopt);
          int64_t diff = 0;
          for (int64_t i = 0; i < x.numel(); ++i) diff += a.data<float>()[i] != b.data<float>()[i];
          EXPECT_EQ(diff, 0) << kernels::cpu::isa_str(isa) << ", n " << n << ", " << threads
                             << " threads, p = " << p;
        }
        set_num_threads(saved);
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
}

// The AVX2 elementwise kernels do per element what the AVX-512 ones do (the same erf, tanh, sigmoid,
// and an exp with the same bits: vec_avx2.h), so activations and their gradients have the same bits on
// both, over [-100, 100] (exp overflowing and underflowing inside) and at 0, -0, ±inf, subnormals.
TEST(RowKernelsElementwise, Avx2AndAvx512GiveTheSameBits) {
  if (!kernels::cpu::isa_available(Isa::avx512)) GTEST_SKIP() << "needs AVX-512 and AVX2";
  const Tensor xt = testing::random_uniform({200003}, 21, -100, 100);
  std::vector<float> x(xt.data<float>(), xt.data<float>() + xt.numel());
  const float specials[] = {0.f,
                            -0.f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            -1e-39f,
                            88.7f,
                            -87.4f,
                            1e-30f};
  for (std::size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
  const Tensor gt = testing::random_uniform({static_cast<int64_t>(x.size())}, 22, -1, 1);
  const float* g = gt.data<float>();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> a(x.size()), b(x.size());
  auto diff = [&] {
    int64_t d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], 4) != 0;
    return d;
  };
  using kernels::cpu::Act;
  for (const Act act : {Act::relu, Act::gelu_erf, Act::gelu_tanh, Act::silu}) {
    kernels::cpu::row_kernels_avx512().act_fwd(act, x.data(), a.data(), 0, n);
    kernels::cpu::row_kernels_avx2().act_fwd(act, x.data(), b.data(), 0, n);
    EXPECT_EQ(diff(), 0) << "forward of act " << static_cast<int>(act);
    kernels::cpu::row_kernels_avx512().act_bwd(act, x.data(), g, a.data(), 0, n);
    kernels::cpu::row_kernels_avx2().act_bwd(act, x.data(), g, b.data(), 0, n);
    EXPECT_EQ(diff(), 0) << "backward of act " << static_cast<int>(act);
  }
  kernels::cpu::row_kernels_avx512().swiglu_fwd(x.data(), g, a.data(), 0, n);
  kernels::cpu::row_kernels_avx2().swiglu_fwd(x.data(), g, b.data(), 0, n);
  EXPECT_EQ(diff(), 0) << "swiglu";
}

// relu_dropout and add_dropout run dropout and its neighbour in one pass: forward and every input
// gradient have the bits of the two operations run one after the other (the fused kernel does the
// same operations per element), on every ISA, 1 and 2 threads, with 0, -0, NaN, ±inf and subnormals among the
// inputs.
TEST(RowKernelsDropout, FusedNeighboursMatchTheTwoOperationsBitForBit) {
  const int64_t n = 16384 * 2 + 13;
  auto same_bits = [](const Tensor& a, const Tensor& b, const std::string& what) {
    ASSERT_TRUE(a.defined() && b.defined()) << what;
    ASSERT_EQ(a.shape(), b.shape()) << what;
    int64_t diff = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      uint32_t u, v;
      std::memcpy(&u, a.data<float>() + i, 4);
      std::memcpy(&v, b.data<float>() + i, 4);
      diff += u != v;
    }
    EXPECT_EQ(diff, 0) << what;
  };
  for (Isa isa : testing::available_isas()) {
    for (int threads : {1, 2}) {
      kernels::cpu::force_isa(isa);
      const int saved = num_threads();
      set_num_threads(threads);
      const std::string where =
          std::string(kernels::cpu::isa_str(isa)) + ", " + std::to_string(threads) + " threads";
      Tensor x0 = testing::random_uniform({n}, 11, -2, 2), r0 = testing::random_uniform({n}, 12, -2, 2);
      x0.data<float>()[3] = 0.f, x0.data<float>()[4] = -0.f, x0.data<float>()[5] = std::nanf("");
      x0.data<float>()[6] = std::numeric_limits<float>::infinity();
      x0.data<float>()[7] = -std::numeric_limits<float>::infinity();
      x0.data<float>()[8] = std::numeric_limits<float>::denorm_min();  // z > 0 and z / (1 - p) still > 0
      x0.data<float>()[9] = 1e-39f;
      const Tensor dy = testing::random_uniform({n}, 13, -1, 1);
      for (double p : {0.1, 0.5}) {
        const std::string w = where + ", p " + std::to_string(p);
        {  // relu_dropout vs dropout(relu(x))
          Tensor xa = x0.clone().set_requires_grad(true), xb = x0.clone().set_requires_grad(true);
          const Tensor ya = relu_dropout(xa, p, true, 99), yb = dropout(relu(xb), p, true, 99);
          same_bits(ya, yb, "relu_dropout forward, " + w);
          ya.backward(dy);
          yb.backward(dy);
          same_bits(xa.grad(), xb.grad(), "relu_dropout dx, " + w);
        }
        {  // add_dropout vs r + dropout(x)
          Tensor xa = x0.clone().set_requires_grad(true), xb = x0.clone().set_requires_grad(true);
          Tensor ra = r0.clone().set_requires_grad(true), rb = r0.clone().set_requires_grad(true);
          const Tensor ya = add_dropout(ra, xa, p, true, 99), yb = rb + dropout(xb, p, true, 99);
          same_bits(ya, yb, "add_dropout forward, " + w);
          ya.backward(dy);
          yb.backward(dy);
          same_bits(xa.grad(), xb.grad(), "add_dropout dx, " + w);
          same_bits(ra.grad(), rb.grad(), "add_dropout dr, " + w);
        }
      }
      // Not training, or p = 0: the neighbour alone.
      same_bits(relu_dropout(x0, 0.3, false, 1), relu(x0), "relu_dropout eval, " + where);
      same_bits(add_dropout(r0, x0, 0.0, true, 1), r0 + x0, "add_dropout p 0, " + where);
      set_num_threads(saved);
      kernels::cpu::force_isa(std::nullopt);
    }
  }
  EXPECT_THROW(relu_dropout(Tensor::zeros({4}, DType::f32), 1.0, true, 1), Error);
  EXPECT_THROW(add_dropout(Tensor::zeros({4}, DType::f32), Tensor::zeros({3}, DType::f32), 0.1, true, 1),
               Error);
}

}  // namespace
}  // namespace attn

// Training-step cost of the differentiable ops: forward + backward time and
// GFLOP/s of linear (BLAS) next to a bare sgemm of the same product, and the
// row ops of a Transformer block (layer_norm, gelu, softmax, cross_entropy).
//
//   build/release/bench/ops_bench [rows=2048] [C=768]
#include <attn/core/autograd.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench_util.h"
#include "kernels/cpu/gemm.h"

using namespace attn;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, bool grad) {
  Tensor t = Tensor::empty(s);
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  if (grad) t.set_requires_grad(true);
  return t;
}

void report(const char* what, double s, double flops) {
  if (flops > 0) {
    std::printf("%-44s %9.3f ms  %7.1f GFLOP/s\n", what, s * 1e3, flops / s * 1e-9);
  } else {
    std::printf("%-44s %9.3f ms\n", what, s * 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t R = argc > 1 ? std::atoll(argv[1]) : 2048, C = argc > 2 ? std::atoll(argv[2]) : 768;
  const int64_t F = 4 * C;
  std::printf("threads %d, x [%lld, %lld], w [%lld, %lld], BLAS %s\n", num_threads(), (long long)R,
              (long long)C, (long long)F, (long long)C, kernels::cpu::blas_name());
  const Tensor x = rnd({R, C}, 1, true), w = rnd({F, C}, 2, true), b = rnd({F}, 3, true);
  const double mm = 2.0 * R * C * F;

  Tensor out = Tensor::empty({R, F});
  report("sgemm x·wᵀ (bare)", bench::time_median([&] {
           kernels::cpu::sgemm(false, true, R, F, C, 1.f, x.data<float>(), C, w.data<float>(), C, 0.f,
                               out.data<float>(), F);
         }),
         mm);
  {
    NoGradGuard ng;
    report("linear forward (no grad)", bench::time_median([&] { linear(x, w, b); }), mm);
  }
  const Tensor seed = rnd({R, F}, 4, false);
  report("linear forward + backward (dx, dw, db)",
         bench::time_median([&] { linear(x, w, b).backward(seed); }), 3 * mm);
  const Tensor h = rnd({R, C}, 5, true), lw = rnd({C}, 6, true), lb = rnd({C}, 7, true);
  const Tensor hs = rnd({R, C}, 8, false);
  report("layer_norm forward + backward", bench::time_median([&] { layer_norm(h, lw, lb).backward(hs); }), 0);
  const Tensor a = rnd({R, F}, 9, true);
  report("gelu forward + backward", bench::time_median([&] { gelu(a).backward(seed); }), 0);
  report("softmax forward + backward", bench::time_median([&] { softmax(a).backward(seed); }), 0);
  Tensor tg = Tensor::empty({R}, DType::i64);
  for (int64_t i = 0; i < R; ++i) tg.data<int64_t>()[i] = (i * 7919) % F;
  report("cross_entropy forward + backward", bench::time_median([&] { cross_entropy(a, tg).backward(); }), 0);
  return 0;
}

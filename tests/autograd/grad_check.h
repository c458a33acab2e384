// The generic gradient checker of the autograd tests.
//
// An op case is a function of a few input tensors. check_gradients builds
// seeded inputs in f64, computes loss = sum(out ∘ R) for a random R, runs
// loss.backward() and compares every differentiable input's analytic .grad
// to central finite differences (L(x + h) − L(x − h)) / 2h taken element by
// element. check_f32 runs the same case in f32 (BLAS, fused kernels) and
// compares its output and gradients to the f64 ones.
#pragma once

#include <attn/core/autograd.h>
#include <attn/core/tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::testing {

struct InputSpec {
  Shape shape;
  bool differentiable = true;
  // The input is a non-contiguous view: its last two dims transposed (rank >= 2)
  // or every other element of dim 0 (rank 1).
  bool noncontiguous = false;
  double lo = -1.0, hi = 1.0;
};

using OpFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// Seeded inputs of the given dtype; the f32 and f64 sets of one seed hold the same values.
std::vector<Tensor> make_inputs(const std::vector<InputSpec>& specs, DType dtype, uint64_t seed);

// Analytic gradients (f64) against central finite differences with step h.
::testing::AssertionResult check_gradients(const OpFn& fn, const std::vector<InputSpec>& specs, uint64_t seed,
                                           Tolerance tol, double h = 1e-6);

// f32 output and gradients against the f64 ones (same inputs, same R).
::testing::AssertionResult check_f32(const OpFn& fn, const std::vector<InputSpec>& specs, uint64_t seed,
                                     Tolerance fwd, Tolerance bwd);

}  // namespace attn::testing

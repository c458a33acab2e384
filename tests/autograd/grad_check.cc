#include "autograd/grad_check.h"

#include <attn/ops/basic.h>

#include <cmath>
#include <sstream>

namespace attn::testing {
namespace {

Tensor make_input(const InputSpec& s, DType dtype, uint64_t seed) {
  if (!s.noncontiguous) return random_uniform(s.shape, seed, s.lo, s.hi, DType::f64).to(dtype);
  if (s.shape.size() >= 2) {
    Shape st = s.shape;
    std::swap(st[st.size() - 1], st[st.size() - 2]);
    return random_uniform(st, seed, s.lo, s.hi, DType::f64).to(dtype).transpose(-1, -2);
  }
  Shape st = s.shape;
  st[0] = 2 * st[0];
  return random_uniform(st, seed, s.lo, s.hi, DType::f64).to(dtype).slice(0, 0, st[0], 2);
}

// sum(out ∘ R) in double, with no recording.
double weighted_sum(const Tensor& out, const Tensor& r) {
  const std::vector<double> a = out.to_vector(), b = r.to_vector();
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

struct Run {
  Tensor out;
  std::vector<Tensor> grads;
};

Run forward_backward(const OpFn& fn, const std::vector<InputSpec>& specs, DType dtype, uint64_t seed) {
  std::vector<Tensor> in = make_inputs(specs, dtype, seed);
  for (std::size_t i = 0; i < in.size(); ++i)
    if (specs[i].differentiable) in[i].set_requires_grad(true);
  Run r;
  r.out = fn(in);
  const Tensor R = random_uniform(r.out.shape(), seed ^ 0x5151, -1, 1, DType::f64).to(dtype);
  const Tensor loss = sum(mul(r.out, R));
  loss.backward();
  for (std::size_t i = 0; i < in.size(); ++i)
    r.grads.push_back(specs[i].differentiable ? in[i].grad() : Tensor());
  return r;
}

}  // namespace

std::vector<Tensor> make_inputs(const std::vector<InputSpec>& specs, DType dtype, uint64_t seed) {
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < specs.size(); ++i) in.push_back(make_input(specs[i], dtype, seed * 131 + i));
  return in;
}

::testing::AssertionResult check_gradients(const OpFn& fn, const std::vector<InputSpec>& specs, uint64_t seed,
                                           Tolerance tol, double h) {
  const Run run = forward_backward(fn, specs, DType::f64, seed);
  std::vector<Tensor> in = make_inputs(specs, DType::f64, seed);
  const Tensor R = random_uniform(run.out.shape(), seed ^ 0x5151, -1, 1, DType::f64);
  NoGradGuard no_grad;
  int checked = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].differentiable) continue;
    const Tensor& g = run.grads[i];
    if (!g.defined())
      return ::testing::AssertionFailure() << "input " << i << ": backward left its .grad undefined";
    Tensor numeric = Tensor::empty(in[i].shape(), DType::f64);
    for (int64_t f = 0; f < in[i].numel(); ++f) {
      const std::vector<int64_t> idx = unravel(f, in[i].shape());
      const double x0 = in[i].at(idx);
      in[i].set(idx, x0 + h);
      const double lp = weighted_sum(fn(in), R);
      in[i].set(idx, x0 - h);
      const double lm = weighted_sum(fn(in), R);
      in[i].set(idx, x0);
      numeric.data<double>()[f] = (lp - lm) / (2 * h);
    }
    ::testing::AssertionResult r = all_close(g, numeric, tol);
    if (!r)
      return ::testing::AssertionFailure()
             << "input " << i << " " << shape_str(in[i].shape()) << ": " << r.message();
    ++checked;
  }
  if (checked == 0) return ::testing::AssertionFailure() << "the case has no differentiable input";
  return ::testing::AssertionSuccess() << checked << " inputs checked";
}

::testing::AssertionResult check_f32(const OpFn& fn, const std::vector<InputSpec>& specs, uint64_t seed,
                                     Tolerance fwd, Tolerance bwd) {
  const Run r64 = forward_backward(fn, specs, DType::f64, seed);
  const Run r32 = forward_backward(fn, specs, DType::f32, seed);
  if (r32.out.dtype() != DType::f32)
    return ::testing::AssertionFailure() << "f32 inputs gave a " << dtype_name(r32.out.dtype()) << " output";
  ::testing::AssertionResult o = all_close(r32.out, r64.out, fwd);
  if (!o) return ::testing::AssertionFailure() << "forward: " << o.message();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].differentiable) continue;
    if (!r32.grads[i].defined() || r32.grads[i].dtype() != DType::f32)
      return ::testing::AssertionFailure() << "input " << i << ": f32 gradient missing or not f32";
    ::testing::AssertionResult g = all_close(r32.grads[i], r64.grads[i], bwd);
    if (!g) return ::testing::AssertionFailure() << "gradient of input " << i << ": " << g.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace attn::testing

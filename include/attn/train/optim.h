// Optimizers (AdamW, SGD with momentum) and gradient utilities (global-norm
// clipping, NaN/Inf detection, scaling for accumulation).
//
// Optimizers update f32 parameters in place from their accumulated .grad
// (include/attn/core/autograd.h), under NoGradGuard. Updates are elementwise,
// run in fp32 in the same operation order as torch.optim (single-tensor
// implementation), and are split over the thread pool (parallel_for) for large
// tensors. An elementwise update gives bit-identical results for any thread
// count. Parameters whose grad is undefined (never reached by a backward) are
// skipped, as in PyTorch.
//
// State (AdamW m and v, SGD momentum buffers) is exposed as named tensors for
// checkpoints: state_tensors() returns {"m.<param>", m}, {"v.<param>", v}, ...
// and load_state_tensors() copies them back (shapes validated).
#pragma once

#include <attn/core/params.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::train {

// Returns true for parameters that take no weight decay (e.g. biases, norms).
using NoDecayFn = std::function<bool(const std::string& name)>;

// The usual rule: true when the last name component is "bias", or any
// component contains "norm" or starts with "ln" (ln_1, ln_f). Shape-based rules
// (every rank-1 tensor) need a predicate of your own.
bool default_no_decay(const std::string& name);

class Optimizer {
 public:
  explicit Optimizer(NamedParams params);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from the current .grad of every parameter; increments step().
  virtual void step() = 0;
  // zero_grad() on every parameter (grad buffers are kept). With set_to_none
  // the gradients are cleared instead (torch's default): the next backward
  // then hands its fresh gradient tensors over as the .grad without a zero fill
  // or an add, and step() skips a parameter that got no gradient.
  void zero_grad(bool set_to_none = false);

  double lr() const { return lr_; }
  void set_lr(double lr);
  // Number of step() calls so far (restored by load_state_tensors).
  int64_t steps() const { return steps_; }

  const NamedParams& params() const { return params_; }
  // "adamw" or "sgd".
  virtual std::string kind() const = 0;
  // State tensors named "<slot>.<param name>" (handles to the live state).
  virtual NamedParams state_tensors() const = 0;
  // Copies `state` (as returned by state_tensors of an optimizer of the same
  // kind over the same parameters) into this one and sets steps(). Throws
  // attn::Error listing every missing, unexpected or mis-shaped tensor.
  void load_state_tensors(const NamedParams& state, int64_t steps);

 protected:
  NamedParams params_;
  double lr_ = 0;
  int64_t steps_ = 0;
};

// torch.optim.AdamW: for each parameter p with gradient g, at step t (from 1):
//   p ← p · (1 − lr · wd)                       (decoupled decay; wd = 0 for no_decay names)
//   m ← m + (1 − β1) · (g − m)
//   v ← β2 · v + (1 − β2) · g · g
//   p ← p − lr / (1 − β1^t) · m / (sqrt(v) / sqrt(1 − β2^t) + eps)
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  NoDecayFn no_decay;  // empty: every parameter decays
};

class AdamW final : public Optimizer {
 public:
  AdamW(NamedParams params, const AdamWOptions& options);
  void step() override;
  std::string kind() const override { return "adamw"; }
  NamedParams state_tensors() const override;
  const AdamWOptions& options() const { return options_; }
  // Whether weight decay applies to parameter i.
  bool decays(std::size_t i) const { return decay_[i]; }

 private:
  AdamWOptions options_;
  std::vector<bool> decay_;
  std::vector<Tensor> m_, v_;  // [param shape] each, zeros at start
};

// torch.optim.SGD:
//   g ← g + wd · p;   buf ← g (first step) else momentum · buf + (1 − dampening) · g
//   g ← nesterov ? g + momentum · buf : buf;   p ← p − lr · g
struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class Sgd final : public Optimizer {
 public:
  Sgd(NamedParams params, const SgdOptions& options);
  void step() override;
  std::string kind() const override { return "sgd"; }
  NamedParams state_tensors() const override;  // "momentum.<name>" when momentum != 0

 private:
  SgdOptions options_;
  std::vector<Tensor> buf_;
};

// ---- gradients ------------------------------------------------------------------------
// Global L2 norm of all defined gradients, accumulated in double in a fixed
// order (deterministic for any thread count).
double grad_norm(const NamedParams& params);

// torch.nn.utils.clip_grad_norm_: when the global norm exceeds max_norm,
// multiplies every gradient by max_norm / (norm + 1e-6). Returns the norm
// before clipping. A non-finite norm leaves the gradients untouched.
double clip_grad_norm(const NamedParams& params, double max_norm);

// Multiplies every defined gradient by s (e.g. 1/k after k accumulated micro-batches).
void scale_grads(const NamedParams& params, double s);

// Names of parameters whose gradient holds a NaN or an Inf (empty when all finite).
std::vector<std::string> nonfinite_grads(const NamedParams& params);

}  // namespace attn::train

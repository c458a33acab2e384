// Optimizers and gradient utilities (include/attn/train/optim.h).
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/ops/optimizer.h>
#include <attn/train/optim.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace attn::train {
namespace {

// Elements per parallel_for chunk: small tensors run on the calling thread.
constexpr int64_t kGrain = 1 << 15;

// Runs fn(begin, end) over [0, n), in parallel when n is large.
template <typename Fn>
void for_chunks(int64_t n, Fn&& fn) {
  if (n <= kGrain) {
    fn(int64_t{0}, n);
    return;
  }
  parallel_for(n, kGrain, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

void check_param(const std::string& who, const std::string& name, const Tensor& p) {
  ATTN_CHECK(p.defined(), who, ": parameter '", name, "' is undefined");
  ATTN_CHECK(p.dtype() == DType::f32, who, ": parameter '", name, "' must be f32; got ",
             dtype_name(p.dtype()));
  ATTN_CHECK(p.is_contiguous(), who, ": parameter '", name, "' must be contiguous; got strides ",
             shape_str(p.strides()), " for shape ", shape_str(p.shape()));
}

// The gradient of p as a contiguous f32 tensor of p's shape, or undefined.
Tensor grad_of(const std::string& who, const std::string& name, const Tensor& p) {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  ATTN_CHECK(g.shape() == p.shape(), who, ": gradient of '", name, "' has shape ", shape_str(g.shape()),
             "; expected ", shape_str(p.shape()));
  ATTN_CHECK(g.dtype() == DType::f32, who, ": gradient of '", name, "' must be f32; got ",
             dtype_name(g.dtype()));
  return g.is_contiguous() ? g : g.contiguous();
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool default_no_decay(const std::string& name) {
  std::size_t start = 0;
  std::string last;
  while (true) {
    const std::size_t dot = name.find('.', start);
    const std::string part = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.find("norm") != std::string::npos || starts_with(part, "ln")) return true;
    last = part;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return last == "bias";
}

// ---- Optimizer ---------------------------------------------------------------------------

Optimizer::Optimizer(NamedParams params) : params_(std::move(params)) {
  std::set<std::string> seen;
  for (const auto& [name, p] : params_) {
    check_param("optimizer", name, p);
    ATTN_CHECK(seen.insert(name).second, "optimizer: parameter name '", name, "' appears twice");
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& [name, p] : params_) {
    Tensor q = p;
    if (set_to_none) {
      q.set_grad(Tensor());
    } else {
      q.zero_grad();
    }
  }
}

void Optimizer::set_lr(double lr) {
  ATTN_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: lr must be finite and >= 0; got ", lr);
  lr_ = lr;
}

void Optimizer::load_state_tensors(const NamedParams& state, int64_t steps) {
  ATTN_CHECK(steps >= 0, "optimizer: steps must be >= 0; got ", steps);
  const NamedParams mine = state_tensors();
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) given[name] = &t;
  std::vector<std::string> problems;
  for (const auto& [name, t] : mine) {
    auto it = given.find(name);
    if (it == given.end()) {
      problems.push_back("missing '" + name + "'");
      continue;
    }
    const Tensor& s = *it->second;
    if (s.shape() != t.shape())
      problems.push_back("'" + name + "' has shape " + shape_str(s.shape()) + ", expected " +
                         shape_str(t.shape()));
    given.erase(it);
  }
  for (const auto& [name, t] : given) problems.push_back("unexpected '" + name + "'");
  if (!problems.empty()) {
    std::string msg = kind() + ": cannot load optimizer state:";
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : state) by_name[name] = &t;
  for (const auto& [name, t] : mine) {
    Tensor dst = t;
    dst.copy_from(*by_name[name]);
  }
  steps_ = steps;
}

// ---- AdamW ---------------------------------------------------------------------------------

AdamW::AdamW(NamedParams params, const AdamWOptions& options)
    : Optimizer(std::move(params)), options_(options) {
  ATTN_CHECK(options.beta1 >= 0 && options.beta1 < 1, "adamw: beta1 must be in [0, 1); got ", options.beta1);
  ATTN_CHECK(options.beta2 >= 0 && options.beta2 < 1, "adamw: beta2 must be in [0, 1); got ", options.beta2);
  ATTN_CHECK(options.eps >= 0, "adamw: eps must be >= 0; got ", options.eps);
  ATTN_CHECK(options.weight_decay >= 0, "adamw: weight_decay must be >= 0; got ", options.weight_decay);
  set_lr(options.lr);
  for (const auto& [name, p] : params_) {
    decay_.push_back(options.weight_decay != 0 && !(options.no_decay && options.no_decay(name)));
    m_.push_back(Tensor::zeros(p.shape()));
    v_.push_back(Tensor::zeros(p.shape()));
  }
}

void AdamW::step() {
  NoGradGuard no_grad;
  ++steps_;
  const double t = static_cast<double>(steps_);
  const double bc1 = 1.0 - std::pow(options_.beta1, t);
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, t));
  // Scalars rounded to fp32 once, as torch passes them to its fp32 kernels.
  ops::AdamWScalars s{};
  s.decay = static_cast<float>(1.0 - lr_ * options_.weight_decay);
  s.w1 = static_cast<float>(1.0 - options_.beta1);
  s.b2 = static_cast<float>(options_.beta2);
  s.w2 = static_cast<float>(1.0 - options_.beta2);
  s.bc2_sqrt = static_cast<float>(bc2_sqrt);
  s.eps = static_cast<float>(options_.eps);
  s.neg_step = static_cast<float>(-(lr_ / bc1));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, param] = params_[i];
    const Tensor gt = grad_of("adamw", name, param);
    if (!gt.defined()) continue;
    ops::AdamWScalars si = s;
    si.do_decay = decay_[i];
    float* p = param.data<float>();     // p: [numel]
    const float* g = gt.data<float>();  // g: [numel]
    float* m = m_[i].data<float>();     // m: [numel]
    float* v = v_[i].data<float>();     // v: [numel]
    for_chunks(param.numel(),
               [&](int64_t b, int64_t e) { ops::adamw_update(p + b, g + b, m + b, v + b, e - b, si); });
  }
}

NamedParams AdamW::state_tensors() const {
  NamedParams out;
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back("m." + params_[i].first, m_[i]);
  for (std::size_t i = 0; i < params_.size(); ++i) out.emplace_back("v." + params_[i].first, v_[i]);
  return out;
}

// ---- SGD -----------------------------------------------------------------------------------

Sgd::Sgd(NamedParams params, const SgdOptions& options) : Optimizer(std::move(params)), options_(options) {
  ATTN_CHECK(options.momentum >= 0, "sgd: momentum must be >= 0; got ", options.momentum);
  ATTN_CHECK(options.weight_decay >= 0, "sgd: weight_decay must be >= 0; got ", options.weight_decay);
  ATTN_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
             "sgd: nesterov needs momentum > 0 and dampening 0; got momentum ", options.momentum,
             ", dampening ", options.dampening);
  set_lr(options.lr);
  if (options.momentum != 0)
    for (const auto& [name, p] : params_) buf_.push_back(Tensor::zeros(p.shape()));
}

void Sgd::step() {
  NoGradGuard no_grad;
  // The momentum buffer starts as a copy of the first gradient (torch).
  const bool first = steps_ == 0;
  ++steps_;
  const float wd = static_cast<float>(options_.weight_decay);
  const float mom = static_cast<float>(options_.momentum);
  const float keep = static_cast<float>(1.0 - options_.dampening);
  const float neg_lr = static_cast<float>(-lr_);
  const bool use_mom = options_.momentum != 0, nesterov = options_.nesterov, use_wd = wd != 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, param] = params_[i];
    const Tensor gt = grad_of("sgd", name, param);
    if (!gt.defined()) continue;
    float* p = param.data<float>();                          // p: [numel]
    const float* g = gt.data<float>();                       // g: [numel]
    float* buf = use_mom ? buf_[i].data<float>() : nullptr;  // buf: [numel]
    for_chunks(param.numel(), [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        float d = g[j];
        if (use_wd) d = d + wd * p[j];
        if (use_mom) {
          buf[j] = first ? d : buf[j] * mom + keep * d;
          d = nesterov ? d + mom * buf[j] : buf[j];
        }
        p[j] = p[j] + neg_lr * d;
      }
    });
  }
}

NamedParams Sgd::state_tensors() const {
  NamedParams out;
  for (std::size_t i = 0; i < buf_.size(); ++i) out.emplace_back("momentum." + params_[i].first, buf_[i]);
  return out;
}

// ---- gradients -----------------------------------------------------------------------------

double grad_norm(const NamedParams& params) {
  // Fixed chunks, partial sums in chunk order: the same result for any thread count.
  double total = 0;
  for (const auto& [name, p] : params) {
    const Tensor gt = grad_of("grad_norm", name, p);
    if (!gt.defined()) continue;
    const float* g = gt.data<float>();  // g: [numel]
    const int64_t n = gt.numel();
    const int64_t chunks = (n + kGrain - 1) / kGrain;
    std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
    auto body = [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double s = 0;
        const int64_t e = std::min(n, (c + 1) * kGrain);
        for (int64_t j = c * kGrain; j < e; ++j) s += static_cast<double>(g[j]) * g[j];
        partial[static_cast<std::size_t>(c)] = s;
      }
    };
    if (chunks <= 1)
      body(0, chunks);
    else
      parallel_for(chunks, 1, [&](int64_t b, int64_t e, int) { body(b, e); });
    for (double s : partial) total += s;
  }
  return std::sqrt(total);
}

void scale_grads(const NamedParams& params, double s) {
  const float f = static_cast<float>(s);
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    ATTN_CHECK(g.dtype() == DType::f32 && g.is_contiguous(), "scale_grads: gradient of '", name,
               "' must be contiguous f32");
    float* d = g.data<float>();  // d: [numel]
    for_chunks(g.numel(), [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) d[j] *= f;
    });
  }
}

double clip_grad_norm(const NamedParams& params, double max_norm) {
  ATTN_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be > 0; got ", max_norm);
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return norm;
}

std::vector<std::string> nonfinite_grads(const NamedParams& params) {
  std::vector<std::string> bad;
  for (const auto& [name, p] : params) {
    const Tensor gt = grad_of("nonfinite_grads", name, p);
    if (!gt.defined()) continue;
    const float* g = gt.data<float>();  // g: [numel]
    bool ok = true;
    for (int64_t j = 0; j < gt.numel() && ok; ++j) ok = std::isfinite(g[j]);
    if (!ok) bad.push_back(name);
  }
  return bad;
}

}  // namespace attn::train

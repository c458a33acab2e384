#include <attn/core/error.h>
#include <attn/nn/module.h>

#include <cmath>
#include <set>

namespace attn::nn {

void InitRng::uniform(Tensor& t, double lo, double hi) {
  ATTN_CHECK(t.dtype() == DType::f32 && t.is_contiguous(), "init: expected a contiguous f32 tensor; got ",
             t.str());
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(lo + (hi - lo) * rng_.uniform());
}

void InitRng::normal(Tensor& t, double mean, double std) {
  ATTN_CHECK(t.dtype() == DType::f32 && t.is_contiguous(), "init: expected a contiguous f32 tensor; got ",
             t.str());
  float* p = t.data<float>();
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < t.numel(); i += 2) {
    // Box-Muller: two independent N(0, 1) from two uniforms (u1 in (0, 1]).
    const double u1 = 1.0 - rng_.uniform(), u2 = rng_.uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    p[i] = static_cast<float>(mean + std * r * std::cos(kTwoPi * u2));
    if (i + 1 < t.numel()) p[i + 1] = static_cast<float>(mean + std * r * std::sin(kTwoPi * u2));
  }
}

void InitRng::xavier_uniform(Tensor& t) {
  ATTN_CHECK(t.rank() == 2, "init: xavier_uniform needs a [fan_out, fan_in] matrix; got ", t.str());
  const double a = std::sqrt(6.0 / static_cast<double>(t.size(0) + t.size(1)));
  uniform(t, -a, a);
}

NamedParams Module::named_parameters() const {
  NamedParams out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::collect(const std::string& prefix, NamedParams& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::load_parameters(const std::map<std::string, Tensor>& values, bool strict) {
  std::set<std::string> used;
  for (auto& [name, p] : named_parameters()) {
    auto it = values.find(name);
    if (it == values.end()) {
      ATTN_CHECK(!strict, "load_parameters: parameter '", name, "' ", shape_str(p.shape()), " is missing");
      continue;
    }
    ATTN_CHECK(it->second.shape() == p.shape(), "load_parameters: parameter '", name, "' has shape ",
               shape_str(p.shape()), "; the value given has ", shape_str(it->second.shape()));
    Tensor dst = p.detach();
    dst.copy_from(it->second.to(DType::f32));
    used.insert(name);
  }
  if (strict) {
    for (auto& [name, t] : values)
      ATTN_CHECK(used.count(name) == 1, "load_parameters: '", name,
                 "' does not name a parameter of the model");
  }
}

void Module::zero_grad() {
  for (auto& [name, p] : named_parameters()) {
    Tensor q = p;
    q.zero_grad();
  }
}

Tensor& Module::register_parameter(const std::string& name, const Shape& shape) {
  for (auto& [n, t] : params_) ATTN_CHECK(n != name, "module: parameter '", name, "' registered twice");
  params_.emplace_back(name, Tensor::zeros(shape, DType::f32));
  params_.back().second.set_requires_grad(true);
  return params_.back().second;
}

void Module::register_module(const std::string& name, Module* child) {
  for (auto& [n, c] : children_) ATTN_CHECK(n != name, "module: child '", name, "' registered twice");
  children_.emplace_back(name, child);
}

uint64_t DropoutSeeds::next() {
  uint64_t s = base_ ^ (0x9E3779B97F4A7C15ull * (++calls_));
  return attn::splitmix64(s);
}

}  // namespace attn::nn

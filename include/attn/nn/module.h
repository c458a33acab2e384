// Neural-network modules: a Module owns named parameters (leaf tensors that
// require grad) and named child modules; named_parameters() walks the tree
// and returns hierarchical names such as "encoder.layers.0.self_attn.w_q.weight".
//
// Children are members of their parent (or elements of a vector of
// unique_ptr), registered by pointer in the parent's constructor, so a Module
// is neither copyable nor movable. Parameters are attn::Tensor handles: the
// tensors returned by named_parameters() share storage and autograd state with
// the module's own, so an optimizer updating them in place updates the model.
//
// Initialisation is deterministic: every module draws from an InitRng seeded by
// the model (see docs/models_transformer.md for the scheme per module).
#pragma once

#include <attn/core/params.h>
#include <attn/core/random.h>
#include <attn/core/tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace attn::nn {

using attn::NamedParams;  // include/attn/core/params.h: shared with optimizers and checkpoints

// Deterministic parameter initialisation (portable: xoshiro256** + Box-Muller).
class InitRng {
 public:
  explicit InitRng(uint64_t seed) : rng_(seed) {}
  // In-place fills of an f32 tensor.
  void uniform(Tensor& t, double lo, double hi);
  void normal(Tensor& t, double mean, double std);
  // Glorot/Xavier uniform for a [fan_out, fan_in] matrix: U(±sqrt(6 / (fan_in + fan_out))).
  void xavier_uniform(Tensor& t);

 private:
  attn::Rng rng_;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // All parameters of this module and its children, depth first in
  // registration order, with "child.param" names.
  NamedParams named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;

  // Training mode (dropout on) for this module and all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Copies each parameter's values from `values` (by full name); shapes must
  // match. strict: every parameter must be present and every entry of
  // `values` must name a parameter. Throws attn::Error naming the parameter.
  void load_parameters(const std::map<std::string, Tensor>& values, bool strict = true);
  // Sets every parameter's .grad to undefined/zero.
  void zero_grad();

 protected:
  // Registers a new f32 parameter (requires grad) and returns it.
  Tensor& register_parameter(const std::string& name, const Shape& shape);
  void register_module(const std::string& name, Module* child);

 private:
  void collect(const std::string& prefix, NamedParams& out) const;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
};

// A seed for one dropout call: mixes a module's base seed with a call counter,
// so successive training steps draw different masks, deterministically.
class DropoutSeeds {
 public:
  explicit DropoutSeeds(uint64_t base = 0) : base_(base) {}
  uint64_t next();
  void reset(uint64_t base) { base_ = base, calls_ = 0; }

 private:
  uint64_t base_;
  uint64_t calls_ = 0;
};

}  // namespace attn::nn

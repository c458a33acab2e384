// Named parameters: the currency between models, optimizers and checkpoints.
//
// A model exposes its trainable tensors as (hierarchical name, tensor) pairs,
// e.g. {"encoder.layers.0.attn.wq", w}. Tensors are handles (copies share
// storage and autograd state), so an optimizer holding a NamedParams updates
// the model's own weights in place.
#pragma once

#include <attn/core/tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace attn {

using NamedParams = std::vector<std::pair<std::string, Tensor>>;

}  // namespace attn

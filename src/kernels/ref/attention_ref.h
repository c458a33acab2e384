// Reference attention: scalar loops that read like the formula.
// The oracle for every test and the fallback for every shape. T is float or double.
#pragma once

#include "kernels/attention_args.h"

namespace attn::kernels::ref {

template <typename T>
void attention_forward(const AttnArgs<T>& a, AttnOut<T>& o);

template <typename T>
void attention_backward(const AttnArgs<T>& a, const AttnGradArgs<T>& g);

}  // namespace attn::kernels::ref

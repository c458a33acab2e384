// Built by scripts/test-install.sh with: c++ -std=c++20 check.cc $(pkg-config --cflags --libs attn)
// A softmax through the ops floor and the version, so the link pulls in several floors.
#include <attn/ops/attention.h>
#include <attn/version.h>

#include <cstdio>
#include <string>

int main() {
  const attn::Tensor q = attn::Tensor::full({1, 1, 3, 4}, 0.5);
  attn::AttentionOptions options;
  options.causal = true;
  options.capture.enabled = true;
  const attn::AttentionResult r = attn::attention(q, q, q, options);
  // Equal logits: the last row spreads its weight evenly over the 3 keys.
  std::printf("attn %s via pkg-config: weights %s, w[2][0] = %.4f\n", std::string(attn::version()).c_str(),
              attn::shape_str(r.weights.shape()).c_str(), r.weights.at({0, 0, 2, 0}));
  return r.weights.at({0, 0, 2, 0}) > 0.333 && r.weights.at({0, 0, 2, 0}) < 0.334 ? 0 : 1;
}

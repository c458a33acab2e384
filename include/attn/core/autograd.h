// Reverse-mode automatic differentiation.
//
// Every differentiable op (include/attn/ops/basic.h, nn_functional.h) records,
// when grad mode is on and some input requires grad, one Node on its output:
// the op's backward, holding what it saved from the forward and edges to the
// inputs (their grad_fn, or the leaf's AutogradMeta for accumulation into
// .grad). Tensor::backward() runs the nodes reachable from the root in reverse
// topological order, sums gradients that reach a tensor along several paths
// and accumulates into the leaves' .grad (+= across backward calls until
// zero_grad). After a node has run, its saved tensors are released (PyTorch's
// retain_graph=false): a graph is used by one backward, then run the forward
// again.
//
// Writing an op (see docs/autograd.md):
//
//   Tensor y = ...;                                  // forward, grad mode irrelevant
//   if (needs_grad(x, w)) {                          // cheap, no allocation when false
//     record("my_op", y, {x, w},
//            [xs = x.detach(), ws = w.detach()](const Tensor& dy, const GradNeeds& need) {
//              return std::vector<Tensor>{need[0] ? ... : Tensor{}, need[1] ? ... : Tensor{}};
//            });
//   }
//
// The backward returns one gradient per recorded input, with the input's
// shape and dtype (undefined = no gradient). It runs with grad mode off, so it
// may call other ops freely. Save tensors with .detach(): a saved output that
// kept its history would form a reference cycle through its own node.
#pragma once

#include <attn/core/tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attn {

// Autograd state of a tensor, shared by its copies.
struct AutogradMeta {
  bool requires_grad = false;     // set on leaves by Tensor::set_requires_grad
  Tensor grad;                    // accumulated gradient (leaves only)
  std::shared_ptr<Node> grad_fn;  // the op that produced the tensor; null for leaves
};

// Where a node sends the gradient of one of its inputs: the input's grad_fn,
// or the leaf's meta, or nowhere (the input does not require grad).
struct Edge {
  std::shared_ptr<Node> fn;
  std::shared_ptr<AutogradMeta> leaf;
  Shape shape;  // the input's shape: its gradient must have it
  bool defined() const { return fn != nullptr || leaf != nullptr; }
};

// need[i]: whether input i's gradient is wanted (its edge is defined).
using GradNeeds = std::vector<bool>;
// Given d(loss)/d(output), returns d(loss)/d(input_i) for each recorded input.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out, const GradNeeds& need)>;

class Node {
 public:
  Node(std::string name, std::vector<Edge> next, BackwardFn fn);
  // Iterative: dropping the last reference to a long chain of nodes does not
  // recurse once per node.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  const std::string& name() const { return name_; }
  const std::vector<Edge>& next_edges() const { return next_; }
  const GradNeeds& needs() const { return needs_; }
  // True once the node has run (its saved tensors are gone).
  bool released() const { return !fn_; }
  // Runs the backward; throws attn::Error when the node was released.
  std::vector<Tensor> apply(const Tensor& grad_out);
  // Frees the saved tensors (destroys the backward closure).
  void release() { fn_ = nullptr; }
  // Moves the edges out (the engine drops them once their gradients are sent,
  // so a graph is freed progressively during backward).
  std::vector<Edge> take_edges() { return std::move(next_); }

 private:
  std::string name_;
  std::vector<Edge> next_;
  GradNeeds needs_;
  BackwardFn fn_;
};

// ---- grad mode ---------------------------------------------------------------
// Thread-local switch; on by default. When off, ops record nothing.
bool grad_mode_enabled();
void set_grad_mode_enabled(bool on);

// RAII: turns recording off in this thread for its lifetime (inference).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode_enabled(false); }
  ~NoGradGuard() { set_grad_mode_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// ---- recording (for op implementers) -------------------------------------------
// True when grad mode is on and any of the tensors requires grad.
template <typename... Ts>
bool needs_grad(const Ts&... ts) {
  return grad_mode_enabled() && (ts.requires_grad() || ...);
}
bool needs_grad_any(const std::vector<Tensor>& ts);

// Attaches a new node named `name` to `out` (which must not have history yet)
// with one edge per tensor in `inputs`, in the order `fn` returns gradients.
void record(const std::string& name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn);

// Runs the engine: d(loss)/d(root) = seed. Tensor::backward calls this.
void run_backward(const Tensor& root, const Tensor& seed);

}  // namespace attn

// The autograd engine and the Tensor autograd methods.
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>

#include <unordered_map>
#include <utility>

namespace attn {
namespace {

thread_local bool tls_grad_enabled = true;

bool is_float(DType t) { return t == DType::f32 || t == DType::f64; }

// Elements per parallel_for chunk of the gradient sums below.
constexpr int64_t kAddGrain = int64_t{1} << 15;

// dst += src elementwise; dst is contiguous and owned by the caller. Each
// element is one addition, so the chunking over threads does not change a bit.
template <typename T>
void add_into_t(Tensor& dst, const Tensor& src) {
  const Tensor s = src.dtype() == dst.dtype() ? src.contiguous() : src.to(dst.dtype());
  T* __restrict d = dst.data<T>();
  const T* __restrict p = s.data<T>();
  parallel_for(dst.numel(), kAddGrain, [d, p](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) d[i] += p[i];
  });
}

void add_into(Tensor& dst, const Tensor& src) {
  if (dst.dtype() == DType::f64) {
    add_into_t<double>(dst, src);
  } else {
    add_into_t<float>(dst, src);
  }
}

// True when no other Tensor (view, copy, saved tensor, the caller's handle) can
// see t's memory: t may then be written in place or kept as it is.
bool exclusive(const Tensor& t) {
  return t.defined() && t.storage().use_count() == 1 && t.is_contiguous() && is_float(t.dtype());
}

// acc = acc + g for two gradients of the same tensor. Adds into whichever of
// them nobody else sees (x + y == y + x exactly in IEEE arithmetic); only when
// both are shared is a new tensor allocated. Either may alias memory that other
// tensors still use, so a shared one is never modified.
void sum_into(Tensor& acc, Tensor& g) {
  if (exclusive(acc)) {  // acc keeps its dtype, as a new sum would
    add_into(acc, g);
  } else if (exclusive(g) && g.dtype() == acc.dtype()) {
    add_into(g, acc);
    acc = std::move(g);
  } else {
    Tensor r = acc.clone();
    add_into(r, g);
    acc = std::move(r);
  }
}

// meta.grad += g. A first gradient nobody else sees becomes the .grad as it is
// (no copy); a shared one is copied (it may alias another gradient).
void accumulate_leaf(AutogradMeta& meta, Tensor& g) {
  if (!meta.grad.defined()) {
    meta.grad = exclusive(g) ? std::move(g) : g.clone();
  } else {
    add_into(meta.grad, g);
  }
}

}  // namespace

Node::Node(std::string name, std::vector<Edge> next, BackwardFn fn)
    : name_(std::move(name)), next_(std::move(next)), fn_(std::move(fn)) {
  needs_.reserve(next_.size());
  for (const Edge& e : next_) needs_.push_back(e.defined());
}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  auto detach_children = [&stack](std::vector<Edge>& edges) {
    for (Edge& e : edges)
      if (e.fn && e.fn.use_count() == 1) stack.push_back(std::move(e.fn));
  };
  detach_children(next_);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    detach_children(n->next_);
  }  // n dies here with no child left to recurse into
}

std::vector<Tensor> Node::apply(const Tensor& grad_out) {
  ATTN_CHECK(fn_ != nullptr, "backward: node '", name_,
             "' already ran and released its saved tensors; graphs are single-use, run the forward again");
  return fn_(grad_out, needs_);
}

bool grad_mode_enabled() { return tls_grad_enabled; }
void set_grad_mode_enabled(bool on) { tls_grad_enabled = on; }

bool needs_grad_any(const std::vector<Tensor>& ts) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : ts)
    if (t.requires_grad()) return true;
  return false;
}

void record(const std::string& name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn) {
  ATTN_CHECK(!out.grad_fn(), "autograd: record('", name, "') on a tensor that already has a grad_fn ('",
             out.grad_fn() ? out.grad_fn()->name() : "", "')");
  std::vector<Edge> next;
  next.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    Edge e;
    e.shape = in.shape();
    const auto& m = in.autograd_meta();
    if (m && m->grad_fn) {
      e.fn = m->grad_fn;
    } else if (m && m->requires_grad) {
      e.leaf = m;
    }
    next.push_back(std::move(e));
  }
  auto meta = std::make_shared<AutogradMeta>();
  meta->grad_fn = std::make_shared<Node>(name, std::move(next), std::move(fn));
  out.set_autograd_meta(std::move(meta));
}

void run_backward(const Tensor& root, const Tensor& seed_in) {
  ATTN_CHECK(root.defined(), "backward: called on an undefined tensor");
  ATTN_CHECK(root.requires_grad(), "backward: tensor ", root.str(),
             " does not require grad (no leaf with set_requires_grad(true) reached it, or it was made "
             "under NoGradGuard)");
  Tensor seed = seed_in;
  if (!seed.defined()) {
    ATTN_CHECK(root.numel() == 1, "backward: a seed gradient is required for a non-scalar output; got ",
               root.str(), " with ", root.numel(), " elements (pass d(loss)/d(output) of the same shape)");
    seed = Tensor::full(root.shape(), 1.0, root.dtype());
  } else {
    ATTN_CHECK(seed.shape() == root.shape(), "backward: seed must have the output's shape ",
               shape_str(root.shape()), "; got ", shape_str(seed.shape()));
    ATTN_CHECK(is_float(seed.dtype()), "backward: seed must be f32 or f64; got ", dtype_name(seed.dtype()));
    if (seed.dtype() != root.dtype()) seed = seed.to(root.dtype());
  }
  NoGradGuard no_grad;  // backward functions never record
  const std::shared_ptr<AutogradMeta>& meta = root.autograd_meta();
  if (!meta->grad_fn) {    // the root is itself a leaf
    Tensor shared = seed;  // the caller's seed: never kept as the .grad itself
    accumulate_leaf(*meta, shared);
    return;
  }

  // Count, for every node reachable from the root, how many edges enter it.
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> stack{meta->grad_fn};
  deps[meta->grad_fn.get()] = 0;
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.fn) continue;
      auto [it, inserted] = deps.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.fn);
    }
  }

  // Kahn's algorithm: a node runs when every consumer has sent its gradient.
  std::unordered_map<Node*, Tensor> pending;
  pending[meta->grad_fn.get()] = seed;
  std::vector<std::shared_ptr<Node>> ready{meta->grad_fn};
  while (!ready.empty()) {
    std::shared_ptr<Node> node = std::move(ready.back());
    ready.pop_back();
    std::vector<Tensor> grads;
    {
      Tensor g = std::move(pending[node.get()]);
      pending.erase(node.get());
      // No consumer sent a gradient: nothing flows on, but the inputs' nodes
      // still count this node as done.
      grads = g.defined() ? node->apply(g) : std::vector<Tensor>(node->next_edges().size());
    }
    node->release();  // retain_graph=false: the saved tensors go now
    const std::vector<Edge> next = node->take_edges();
    ATTN_CHECK(grads.size() == next.size(), "backward: node '", node->name(), "' returned ", grads.size(),
               " gradients for ", next.size(), " inputs");
    for (std::size_t i = 0; i < next.size(); ++i) {
      const Edge& e = next[i];
      if (!e.defined()) continue;
      Tensor& gi = grads[i];
      if (gi.defined()) {
        ATTN_CHECK(gi.shape() == e.shape, "backward: node '", node->name(), "' returned a gradient of shape ",
                   shape_str(gi.shape()), " for input ", i, " of shape ", shape_str(e.shape));
        ATTN_CHECK(is_float(gi.dtype()), "backward: node '", node->name(), "' returned a ",
                   dtype_name(gi.dtype()), " gradient for input ", i, "; expected f32 or f64");
      }
      if (e.leaf) {
        if (gi.defined()) accumulate_leaf(*e.leaf, gi);
        continue;
      }
      Node* target = e.fn.get();
      if (gi.defined()) {
        auto it = pending.find(target);
        if (it == pending.end() || !it->second.defined()) {
          pending[target] = std::move(gi);
        } else {
          sum_into(it->second, gi);
        }
      }
      if (--deps[target] == 0) ready.push_back(e.fn);
    }
  }
}

// ---- Tensor methods --------------------------------------------------------------

bool Tensor::requires_grad() const {
  return autograd_ && (autograd_->requires_grad || autograd_->grad_fn != nullptr);
}

Tensor& Tensor::set_requires_grad(bool on) {
  ATTN_CHECK(defined(), "set_requires_grad: undefined tensor");
  ATTN_CHECK(!on || is_float(dtype_), "set_requires_grad: only f32 and f64 tensors can require grad; got ",
             dtype_name(dtype_));
  if (autograd_ && autograd_->grad_fn) {
    ATTN_CHECK(false, "set_requires_grad: only leaves can be marked; this tensor was produced by '",
               autograd_->grad_fn->name(), "' (use detach() to get a leaf)");
  }
  if (!autograd_) {
    if (!on) return *this;
    autograd_ = std::make_shared<AutogradMeta>();
  }
  autograd_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return autograd_ ? autograd_->grad : Tensor(); }

void Tensor::zero_grad() {
  if (autograd_ && autograd_->grad.defined()) autograd_->grad.fill(0.0);
}

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) {
    if (autograd_) autograd_->grad = Tensor();
    return;
  }
  ATTN_CHECK(g.shape() == shape_, "set_grad: expected shape ", shape_str(shape_), "; got ",
             shape_str(g.shape()));
  if (!autograd_) autograd_ = std::make_shared<AutogradMeta>();
  autograd_->grad = g.to(dtype_);  // a copy: accumulation writes into it
}

std::shared_ptr<Node> Tensor::grad_fn() const { return autograd_ ? autograd_->grad_fn : nullptr; }

Tensor Tensor::detach() const { return alias(); }

void Tensor::backward() const { run_backward(*this, Tensor()); }
void Tensor::backward(const Tensor& seed) const { run_backward(*this, seed); }

}  // namespace attn

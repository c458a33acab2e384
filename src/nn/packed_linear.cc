#include "nn/packed_linear.h"

#include <attn/core/autograd.h>
#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/ops/basic.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/linear_packed.h"

namespace attn::nn {

namespace {
thread_local PackedWeightScope* tls_scope = nullptr;
}  // namespace

PackedWeightScope::PackedWeightScope() : outer_(tls_scope) { tls_scope = this; }
PackedWeightScope::~PackedWeightScope() { tls_scope = outer_; }
PackedWeightScope* PackedWeightScope::active() { return tls_scope; }

const float* PackedWeightScope::packed(const Tensor& w) {
  ATTN_CHECK(w.defined() && w.dtype() == DType::f32 && w.rank() == 2 && w.is_contiguous(),
             "PackedWeightScope: weight must be a contiguous f32 [N, K]; got ",
             w.defined() ? w.str() : "none");
  const void* data = w.data<float>();
  const int64_t N = w.size(0), K = w.size(1);
  for (const Entry& e : entries_)
    if (e.data == data && e.N == N && e.K == K) return e.buf.data<float>();
  auto use = std::find_if(uses_.begin(), uses_.end(), [&](const auto& u) { return u.first == data; });
  if (use == uses_.end()) use = uses_.insert(uses_.end(), {data, 0});
  if (++use->second < kPackAfter) return nullptr;
  uses_.erase(use);
  Tensor buf = Tensor::empty({kernels::cpu::linear_packed_size(N, K)}, DType::f32);
  kernels::cpu::pack_linear_weight(w.data<float>(), N, K, buf.data<float>());
  entries_.push_back({data, N, K, buf});
  return buf.data<float>();
}

int64_t packed_linear_max_rows() {
  static const int64_t rows = runtime_config().linear_packed;
  return rows;
}

Tensor inference_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  PackedWeightScope* scope = PackedWeightScope::active();
  if (scope == nullptr || grad_mode_enabled() || !x.defined() || !w.defined() || x.dtype() != DType::f32 ||
      w.dtype() != DType::f32 || w.rank() != 2 || !w.is_contiguous() || !x.is_contiguous() || x.rank() < 1 ||
      x.size(-1) != w.size(1) || w.size(1) == 0 ||
      (b.defined() &&
       (b.dtype() != DType::f32 || b.rank() != 1 || b.size(0) != w.size(0) || !b.is_contiguous())) ||
      kernels::cpu::active_isa() != kernels::cpu::Isa::avx512)
    return linear(x, w, b);  // validates and reports bad shapes
  const int64_t K = w.size(1), N = w.size(0), M = x.numel() / K;
  // One row stays on linear(): its matrix-vector product streams the weight in place, and packing
  // a copy did not pay (decode_bench batch 1, 2 threads: 2,120 tokens/s packed, 2,801 not).
  if (M < 2 || M > packed_linear_max_rows()) return linear(x, w, b);
  const float* packed = scope->packed(w);
  if (packed == nullptr) return linear(x, w, b);  // not used often enough yet
  Shape shape = x.shape();
  shape.back() = N;
  Tensor y = Tensor::empty(shape, DType::f32);  // y: [..., N]
  kernels::cpu::linear_packed(x.data<float>(), K, packed, b.defined() ? b.data<float>() : nullptr,
                              y.data<float>(), N, M, N, K);
  return y;
}

}  // namespace attn::nn

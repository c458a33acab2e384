// Pre-packed weights for decoding (models::generate): while a PackedWeightScope is alive on
// the calling thread, nn::inference_linear multiplies small inputs (2..max rows, fp32, grad
// mode off) by a packed copy of the weight (kernels/cpu/linear_packed.h), made on the
// kPackAfter-th use of that weight in the scope and reused by every later step of the scope.
//
// Invalidation: the packed copies live exactly as long as the scope, and models::generate
// opens one scope per call, so a weight changed between two calls is repacked by the next
// call. Nothing may change the weights while a scope is open (e.g. from a token callback).
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <vector>

namespace attn::nn {

class PackedWeightScope {
 public:
  PackedWeightScope();  // becomes the calling thread's active scope (nested scopes restore the outer one)
  ~PackedWeightScope();
  PackedWeightScope(const PackedWeightScope&) = delete;
  PackedWeightScope& operator=(const PackedWeightScope&) = delete;

  // The thread's active scope, or null.
  static PackedWeightScope* active();
  // The packed form of w: [N, K] (f32, contiguous), or null for the first kPackAfter - 1 calls for this
  // weight (the caller then multiplies unpacked): packing costs a few unpacked products, so a call of
  // generate() that makes only one or two steps never pays for it.
  static constexpr int kPackAfter = 3;
  const float* packed(const Tensor& w);
  // How many weights this scope has packed (for the tests).
  int64_t packs() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    const void* data;
    int64_t N, K;
    Tensor buf;  // [linear_packed_size(N, K)] f32 (tensor storage is 64-byte aligned)
  };
  std::vector<Entry> entries_;
  std::vector<std::pair<const void*, int>> uses_;  // calls of packed() per weight not packed yet
  PackedWeightScope* outer_;
};

// Largest row count that takes the packed path (default 48; env ATTN_LINEAR_PACKED=<rows>, 0 = off).
int64_t packed_linear_max_rows();

// y = x · wᵀ + b (as ops::linear). x: [..., in], w: [out, in], b: [out] or undefined -> [..., out].
// Uses the packed kernel when a PackedWeightScope is active, grad mode is off, x and w are f32,
// x is contiguous with 2..packed_linear_max_rows() rows and the CPU has AVX-512; else ops::linear.
Tensor inference_linear(const Tensor& x, const Tensor& w, const Tensor& b);

}  // namespace attn::nn

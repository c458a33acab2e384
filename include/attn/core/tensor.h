// Tensor: shared storage + shape + strides + dtype.
//
// Row-major, outermost dimension first. Views (slice, transpose, permute,
// view of a contiguous tensor) share storage and never copy; strides are in
// elements. Storage is 64-byte aligned so SIMD kernels may use aligned loads
// on the base pointer of a fresh tensor.
#pragma once

#include <attn/core/dtype.h>
#include <attn/core/error.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace attn {

struct AutogradMeta;  // include/attn/core/autograd.h
class Node;

using Shape = std::vector<int64_t>;

// Returns "[2, 3, 4]".
std::string shape_str(const Shape& s);

// Owns one aligned allocation.
class Storage {
 public:
  explicit Storage(std::size_t bytes);
  // Adopts `bytes` bytes at `data` that someone else owns (a numpy array or a
  // DLPack tensor in the Python package): nothing is allocated or copied, and
  // `release` runs when the last tensor using the storage is destroyed. The
  // memory need not be 64-byte aligned.
  Storage(void* data, std::size_t bytes, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::function<void()> release_;  // set for adopted memory
};

class Tensor {
 public:
  Tensor() = default;  // undefined tensor: defined() == false

  // Allocation. `empty` leaves the memory uninitialised.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  // Copies `values` (numel must match) into a new contiguous tensor.
  template <typename T>
  static Tensor from(const std::vector<T>& values, const Shape& shape);
  // A view of memory someone else owns (zero-copy): element [i0, i1, ...] is at
  // data + sum(i_d * strides[d]) elements (strides may be 0 or any positive
  // value; negative strides are rejected). `release` runs when the last tensor
  // using the memory goes. Throws attn::Error on a rank mismatch between shape
  // and strides or a negative size or stride.
  static Tensor borrow(void* data, DType dtype, const Shape& shape, const Shape& strides,
                       std::function<void()> release);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  // Negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  bool is_contiguous() const;
  int64_t offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Typed pointer to element [0, 0, ...]; throws if T does not match dtype().
  template <typename T>
  T* data() const;
  void* raw_data() const;

  // Element access by multi-index, converted to double (for tests and tools).
  double at(std::initializer_list<int64_t> idx) const;
  double at(const std::vector<int64_t>& idx) const;
  void set(const std::vector<int64_t>& idx, double value);

  // Views (no copy). These raw views (and contiguous/reshape/clone/to) are not
  // differentiable: the result carries no autograd history. The differentiable
  // versions are ops (include/attn/ops/basic.h: attn::slice, attn::transpose, ...).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  // Size-1 dims may be expanded to any size (stride 0); others must match.
  Tensor expand(const Shape& shape) const;
  // Reinterprets a contiguous tensor; one dim may be -1. Throws if not contiguous.
  Tensor view(const Shape& shape) const;

  // Copies.
  Tensor contiguous() const;  // a view of *this (no history) when already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;              // converting copy (always a new tensor)
  Tensor reshape(const Shape& shape) const;  // view if possible, else copy
  // Copies src (same shape, any dtype and strides) into *this.
  void copy_from(const Tensor& src);
  void fill(double value);

  // All elements as doubles in row-major order.
  std::vector<double> to_vector() const;

  std::string str() const;  // "Tensor(f32, [2, 3])"

  // ---- autograd (engine: include/attn/core/autograd.h, src/core/autograd.cc) ----
  // Every defined tensor (fresh allocation, raw view, detach) has its own
  // AutogradMeta, and copies of a Tensor share it, like PyTorch handles:
  // marking one copy marks them all.
  //
  // True for a leaf marked with set_requires_grad(true) and for any op output
  // that recorded a grad_fn.
  bool requires_grad() const;
  // Marks a leaf (a tensor with no grad_fn) of dtype f32 or f64; returns *this.
  Tensor& set_requires_grad(bool on = true);
  // Accumulated gradient of a leaf; undefined until a backward reached it.
  Tensor grad() const;
  // Fills the accumulated gradient with zeros in place (no-op when undefined).
  void zero_grad();
  // Replaces the accumulated gradient with a copy of g (converted to this
  // tensor's dtype); an undefined g clears it.
  void set_grad(const Tensor& g);
  // The backward node of the op that produced this tensor; null for leaves.
  std::shared_ptr<Node> grad_fn() const;
  // Same storage, shape and strides, no autograd history.
  Tensor detach() const;
  // Runs reverse-mode autodiff from this tensor. `seed` is d(loss)/d(this);
  // it defaults to 1 when numel() == 1 and is required otherwise.
  void backward() const;
  void backward(const Tensor& seed) const;
  const std::shared_ptr<AutogradMeta>& autograd_meta() const { return autograd_; }
  void set_autograd_meta(std::shared_ptr<AutogradMeta> meta) { autograd_ = std::move(meta); }

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
  std::shared_ptr<AutogradMeta> autograd_;

  Tensor alias() const;  // *this without autograd history
  int64_t wrap_dim(int64_t d, int64_t rank_for_check) const;
};

Shape contiguous_strides(const Shape& shape);

// Broadcast two shapes (numpy rules); throws with both shapes on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b);

template <typename T>
T* Tensor::data() const {
  ATTN_CHECK(defined(), "tensor: data() on an undefined tensor");
  ATTN_CHECK(dtype_of<T>::value == dtype_, "tensor: data<", dtype_name(dtype_of<T>::value),
             ">() on a tensor of dtype ", dtype_name(dtype_));
  return static_cast<T*>(storage_->data()) + offset_;
}

template <typename T>
Tensor Tensor::from(const std::vector<T>& values, const Shape& shape) {
  Tensor t = empty(shape, dtype_of<T>::value);
  ATTN_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "tensor: from() got ", values.size(),
             " values for shape ", shape_str(shape), " which holds ", t.numel());
  T* p = t.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

}  // namespace attn

#include <attn/core/autograd.h>
#include <attn/core/tensor.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

#include "core/allocator.h"

namespace attn {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

// Blocks come from the caching allocator (src/core/allocator.h): 64-byte
// aligned, uninitialised, reused across training steps.
Storage::Storage(std::size_t bytes) : bytes_(bytes) { data_ = core::storage_allocator().allocate(bytes); }

Storage::Storage(void* data, std::size_t bytes, std::function<void()> release)
    : data_(data), bytes_(bytes), release_(std::move(release)) {
  if (!release_) release_ = [] {};
}

Storage::~Storage() {
  if (release_) {
    release_();
  } else {
    core::storage_allocator().deallocate(data_, bytes_);
  }
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t s = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    st[d] = s;
    ATTN_CHECK(shape[d] >= 0, "tensor: sizes must be >= 0; got shape ", shape_str(shape));
    // A size-0 dim does not zero the outer strides (numpy / torch keep them), so
    // the product of the other sizes must fit in int64 even for an empty tensor.
    if (shape[d] != 0)
      ATTN_CHECK(!__builtin_mul_overflow(s, shape[d], &s), "tensor: the strides of shape ", shape_str(shape),
                 " overflow int64");
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ATTN_CHECK(x == y || x == 1 || y == 1, "broadcast: shapes ", shape_str(a), " and ", shape_str(b),
               " do not broadcast (dim ", i, ": ", x, " vs ", y, ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Element count of `shape`, checked: every size >= 0, and the product of the
// non-zero sizes (which the strides multiply, even when a size is 0) at most
// 2^48 elements, so that neither the strides nor the byte size of any dtype
// can overflow int64. Throws naming the shape.
static int64_t checked_numel(const Shape& shape) {
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t nonzero = 1;
  bool empty = false, too_many = false;
  for (int64_t s : shape) {
    ATTN_CHECK(s >= 0, "tensor: sizes must be >= 0; got shape ", shape_str(shape));
    if (s == 0) {
      empty = true;
    } else if (!too_many) {
      too_many = __builtin_mul_overflow(nonzero, s, &nonzero) || nonzero > kMaxElements;
    }
  }
  ATTN_CHECK(!too_many, "tensor: shape ", shape_str(shape), " has too many elements (at most 2^48",
             empty ? " counting only its non-zero sizes, which its strides multiply" : "", ")");
  return empty ? 0 : nonzero;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  Tensor t;
  const int64_t n = checked_numel(shape);
  int64_t bytes = 0;
  ATTN_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes), "tensor: shape ",
             shape_str(shape), " of ", dtype_name(dtype), " overflows int64 bytes");
  t.storage_ = std::make_shared<Storage>(static_cast<std::size_t>(bytes));
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  t.autograd_ = std::make_shared<AutogradMeta>();
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data(), 0, static_cast<std::size_t>(t.numel()) * dtype_size(dtype));
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::borrow(void* data, DType dtype, const Shape& shape, const Shape& strides,
                      std::function<void()> release) {
  ATTN_CHECK(shape.size() == strides.size(), "tensor: borrow() got shape ", shape_str(shape), " and strides ",
             shape_str(strides), " of different ranks");
  const int64_t n = checked_numel(shape);
  int64_t last = 0;  // the largest element offset
  for (std::size_t d = 0; d < shape.size(); ++d) {
    ATTN_CHECK(strides[d] >= 0, "tensor: borrow() needs strides >= 0; got strides ", shape_str(strides));
    if (n > 0) last += (shape[d] - 1) * strides[d];
  }
  Tensor t;
  const std::size_t bytes = n > 0 ? static_cast<std::size_t>(last + 1) * dtype_size(dtype) : 0;
  t.storage_ = std::make_shared<Storage>(data, bytes, std::move(release));
  t.shape_ = shape;
  t.strides_ = strides;
  t.dtype_ = dtype;
  t.autograd_ = std::make_shared<AutogradMeta>();
  return t;
}

int64_t Tensor::wrap_dim(int64_t d, int64_t r) const {
  const int64_t w = d < 0 ? d + r : d;
  ATTN_CHECK(w >= 0 && w < r, "tensor: dimension ", d, " out of range for rank ", r);
  return w;
}

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d, rank())]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, rank())]; }

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  // No elements: any strides describe the same (empty) row-major layout, and
  // contiguous_strides() keeps the outer strides non-zero past a size-0 dim.
  for (int64_t s : shape_)
    if (s == 0) return true;
  int64_t expect = 1;
  for (int64_t d = rank() - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != expect) return false;
    expect *= shape_[d];
  }
  return true;
}

void* Tensor::raw_data() const {
  ATTN_CHECK(defined(), "tensor: raw_data() on an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

namespace {
double load(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::f64:
      return static_cast<const double*>(base)[i];
    case DType::bf16:
      return bf16::to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(base)[i];
    case DType::i64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::u8:
      return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}
void store(void* base, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(base)[i] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = bf16::from_float(static_cast<float>(v));
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DType::i64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
  }
}

// Calls fn(offset_in_elements) for every element in row-major order.
template <typename Fn>
void for_each_offset(const Shape& shape, const Shape& strides, Fn&& fn) {
  const int64_t r = static_cast<int64_t>(shape.size());
  for (int64_t s : shape)
    if (s == 0) return;
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  while (true) {
    fn(off);
    int64_t d = r - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
}  // namespace

double Tensor::at(std::initializer_list<int64_t> idx) const { return at(std::vector<int64_t>(idx)); }

double Tensor::at(const std::vector<int64_t>& idx) const {
  ATTN_CHECK(static_cast<int64_t>(idx.size()) == rank(), "tensor: at() got ", idx.size(),
             " indices for a tensor of rank ", rank());
  int64_t off = 0;
  for (int64_t d = 0; d < rank(); ++d) {
    ATTN_CHECK(idx[d] >= 0 && idx[d] < shape_[d], "tensor: index ", idx[d], " out of range [0, ", shape_[d],
               ") in dim ", d);
    off += idx[d] * strides_[d];
  }
  return load(raw_data(), dtype_, off);
}

void Tensor::set(const std::vector<int64_t>& idx, double value) {
  ATTN_CHECK(static_cast<int64_t>(idx.size()) == rank(), "tensor: set() got ", idx.size(),
             " indices for a tensor of rank ", rank());
  int64_t off = 0;
  for (int64_t d = 0; d < rank(); ++d) {
    ATTN_CHECK(idx[d] >= 0 && idx[d] < shape_[d], "tensor: index ", idx[d], " out of range [0, ", shape_[d],
               ") in dim ", d);
    off += idx[d] * strides_[d];
  }
  store(raw_data(), dtype_, off, value);
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  const int64_t d = wrap_dim(dim, rank());
  ATTN_CHECK(step >= 1, "tensor: slice step must be >= 1; got ", step);
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Tensor t = alias();
  t.offset_ += start * strides_[d];
  t.shape_[d] = (end - start + step - 1) / step;
  t.strides_[d] *= step;
  return t;
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  const int64_t d = wrap_dim(dim, rank());
  ATTN_CHECK(index >= 0 && index < shape_[d], "tensor: select index ", index, " out of range [0, ", shape_[d],
             ")");
  Tensor t = alias();
  t.offset_ += index * strides_[d];
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  Tensor t = alias();
  const int64_t a = wrap_dim(d0, rank()), b = wrap_dim(d1, rank());
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  ATTN_CHECK(static_cast<int64_t>(dims.size()) == rank(), "tensor: permute got ", dims.size(),
             " dims for rank ", rank());
  std::vector<bool> seen(rank(), false);
  Tensor t = alias();
  for (int64_t i = 0; i < rank(); ++i) {
    const int64_t d = wrap_dim(dims[i], rank());
    ATTN_CHECK(!seen[d], "tensor: permute repeats dimension ", d);
    seen[d] = true;
    t.shape_[i] = shape_[d];
    t.strides_[i] = strides_[d];
  }
  return t;
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  const int64_t d = wrap_dim(dim, rank() + 1);
  Tensor t = alias();
  const int64_t st = d < rank() ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(t.shape_.begin() + d, 1);
  t.strides_.insert(t.strides_.begin() + d, st);
  return t;
}

Tensor Tensor::expand(const Shape& shape) const {
  ATTN_CHECK(static_cast<int64_t>(shape.size()) >= rank(), "tensor: cannot expand ", shape_str(shape_),
             " to fewer dims ", shape_str(shape));
  Tensor t = alias();
  const std::size_t lead = shape.size() - shape_.size();
  t.shape_ = shape;
  t.strides_.assign(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) continue;
    const int64_t s = shape_[i - lead];
    ATTN_CHECK(s == shape[i] || s == 1, "tensor: cannot expand ", shape_str(shape_), " to ",
               shape_str(shape));
    t.strides_[i] = s == 1 && shape[i] != 1 ? 0 : strides_[i - lead];
  }
  return t;
}

Tensor Tensor::view(const Shape& shape) const {
  ATTN_CHECK(is_contiguous(), "tensor: view() needs a contiguous tensor; got strides ", shape_str(strides_),
             " for shape ", shape_str(shape_), " (use reshape)");
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ATTN_CHECK(infer < 0, "tensor: view() allows one -1; got ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      ATTN_CHECK(s[i] >= 0 && !__builtin_mul_overflow(known, s[i], &known), "tensor: cannot view ",
                 shape_str(shape_), " as ", shape_str(shape),
                 " (sizes must be >= 0 and their product fit int64)");
    }
  }
  if (infer >= 0) {
    ATTN_CHECK(known > 0 && numel() % known == 0, "tensor: cannot view ", shape_str(shape_), " as ",
               shape_str(shape));
    s[infer] = numel() / known;
  }
  ATTN_CHECK(checked_numel(s) == numel(), "tensor: cannot view ", shape_str(shape_), " (", numel(),
             " elements) as ", shape_str(shape));
  Tensor t = alias();
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::alias() const {
  Tensor t = *this;
  t.autograd_ = std::make_shared<AutogradMeta>();  // raw views carry no autograd history
  return t;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? alias() : clone(); }

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  Tensor t = empty(shape_, dtype);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const { return contiguous().view(shape); }

void Tensor::copy_from(const Tensor& src) {
  ATTN_CHECK(src.shape_ == shape_, "tensor: copy_from expects shape ", shape_str(shape_), "; got ",
             shape_str(src.shape_));
  const void* sb = src.raw_data();
  void* db = raw_data();
  if (src.dtype_ == dtype_ && src.is_contiguous() && is_contiguous()) {
    std::memmove(db, sb, static_cast<std::size_t>(numel()) * dtype_size(dtype_));
    return;
  }
  const int64_t r = rank();
  for (int64_t s : shape_)
    if (s == 0) return;
  // Walks the dims [0, outer) of both tensors in lockstep (an odometer over the index), calling
  // body(src_offset, dst_offset) at every position: the offsets differ only by their strides.
  auto walk = [&](int64_t outer, auto&& body) {
    std::vector<int64_t> idx(r, 0);
    int64_t so = 0, dof = 0;
    while (true) {
      body(so, dof);
      int64_t d = outer - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < shape_[d]) {
          so += src.strides_[d];
          dof += strides_[d];
          break;
        }
        so -= src.strides_[d] * (shape_[d] - 1);
        dof -= strides_[d] * (shape_[d] - 1);
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  };
  if (src.dtype_ == dtype_ && r >= 1 && strides_[r - 1] == 1 && src.strides_[r - 1] == 1) {
    // Same dtype, unit-stride rows in both: one memcpy per row of the last dim
    // (KV-cache appends, head splits and transposed copies take this path).
    const int64_t esz = static_cast<int64_t>(dtype_size(dtype_));
    const std::size_t row = static_cast<std::size_t>(shape_[r - 1] * esz);
    auto* d8 = static_cast<unsigned char*>(db);
    const auto* s8 = static_cast<const unsigned char*>(sb);
    walk(r - 1, [&](int64_t so, int64_t dof) { std::memmove(d8 + dof * esz, s8 + so * esz, row); });
    return;
  }
  walk(r, [&](int64_t so, int64_t dof) { store(db, dtype_, dof, load(sb, src.dtype_, so)); });
}

void Tensor::fill(double value) {
  void* db = raw_data();
  if (is_contiguous() && (dtype_ == DType::f32 || dtype_ == DType::f64)) {
    // One typed pass (zero_grad fills every gradient each step).
    const int64_t n = numel();
    if (dtype_ == DType::f32) {
      std::fill_n(static_cast<float*>(db), n, static_cast<float>(value));
    } else {
      std::fill_n(static_cast<double*>(db), n, value);
    }
    return;
  }
  for_each_offset(shape_, strides_, [&](int64_t o) { store(db, dtype_, o, value); });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(numel()));
  const void* b = raw_data();
  for_each_offset(shape_, strides_, [&](int64_t o) { out.push_back(load(b, dtype_, o)); });
  return out;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return std::string("Tensor(") + dtype_name(dtype_) + ", " + shape_str(shape_) + ")";
}

}  // namespace attn

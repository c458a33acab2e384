#include "convert.h"

#include <attn/core/f16.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace attn::python {

namespace {

bool is_f16(const nb::dlpack::dtype& t) {
  return static_cast<nb::dlpack::dtype_code>(t.code) == nb::dlpack::dtype_code::Float && t.bits == 16 &&
         t.lanes == 1;
}

// A row-major copy of a (the layouts and dtypes attn cannot borrow: negative
// strides, float16). float16 becomes float32.
Tensor copied(const AnyArray& a, DType dt, bool f16) {
  Shape shape(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = static_cast<int64_t>(a.shape(d));
  Tensor t = Tensor::empty(shape, f16 ? DType::f32 : dt);
  const size_t es = f16 ? 2 : dtype_size(dt);
  const int64_t n = t.numel(), rank = static_cast<int64_t>(shape.size());
  const char* base = static_cast<const char*>(a.data());
  char* out = static_cast<char*>(t.raw_data());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d) off += idx[d] * a.stride(d);
    const char* src = base + off * static_cast<int64_t>(es);
    if (f16) {
      uint16_t bits;
      std::memcpy(&bits, src, 2);
      const float f = f16_to_f32(bits);
      std::memcpy(out + i * 4, &f, 4);
    } else {
      std::memcpy(out + i * static_cast<int64_t>(es), src, es);
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return t;
}

DType dtype_of_array(const nb::dlpack::dtype& t, const char* what) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DType::f32;
    if (code == Code::Float && t.bits == 64) return DType::f64;
    if (code == Code::Float && t.bits == 16) return DType::f32;  // copied to float32
    if (code == Code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == Code::Bool && t.bits == 8) return DType::u8;
    if (code == Code::UInt && t.bits == 8) return DType::u8;
    if (code == Code::Int && t.bits == 32) return DType::i32;
    if (code == Code::Int && t.bits == 64) return DType::i64;
  }
  const char* kind = code == Code::Float     ? "float"
                     : code == Code::Bfloat  ? "bfloat"
                     : code == Code::Int     ? "int"
                     : code == Code::UInt    ? "uint"
                     : code == Code::Bool    ? "bool"
                     : code == Code::Complex ? "complex"
                                             : "unknown";
  throw nb::value_error(
      detail::concat(what, ": dtype ", kind, int(t.bits),
                     " is not supported; expected float32, float64, bfloat16, float16 or bool")
          .c_str());
}

bool names_a_file_problem(std::string_view m) {
  for (std::string_view s :
       {"cannot open", "not found", "No such file", "does not hold", "does not exist", "could not read",
        "could not write", "cannot write", "cannot read", "cannot create", "Permission denied"})
    if (m.find(s) != std::string_view::npos) return true;
  return false;
}

}  // namespace

Tensor to_tensor(const AnyArray& a, const char* what) {
  const DType dt = dtype_of_array(a.dtype(), what);
  if (is_f16(a.dtype())) return copied(a, dt, true);
  Shape shape(a.ndim()), strides(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) shape[d] = static_cast<int64_t>(a.shape(d));
  // A size-1 dimension's stride is never used to step; it gets the row-major
  // value so that layout checks (unit stride in D, contiguity) see the truth.
  const Shape row_major = contiguous_strides(shape);
  for (size_t d = 0; d < a.ndim(); ++d) {
    strides[d] = a.shape(d) == 1 ? row_major[d] : static_cast<int64_t>(a.stride(d));
    if (strides[d] < 0) return copied(a, dt, false);
  }
  // The handle keeps the Python object alive; it is released with the GIL held.
  auto* keep = new AnyArray(a);
  return Tensor::borrow(const_cast<void*>(a.data()), dt, shape, strides, [keep] {
    nb::gil_scoped_acquire gil;
    delete keep;
  });
}

nb::object to_numpy(const Tensor& t) {
  ATTN_CHECK(t.defined(), "internal: to_numpy on an undefined tensor");
  Tensor c = t.is_contiguous() ? t : t.contiguous();
  nb::dlpack::dtype dt;
  switch (c.dtype()) {
    case DType::f32:
      dt = nb::dtype<float>();
      break;
    case DType::f64:
      dt = nb::dtype<double>();
      break;
    case DType::i32:
      dt = nb::dtype<int32_t>();
      break;
    case DType::i64:
      dt = nb::dtype<int64_t>();
      break;
    case DType::u8:
      dt = nb::dtype<uint8_t>();
      break;
    default:
      c = c.to(DType::f32);
      dt = nb::dtype<float>();
      break;
  }
  std::vector<size_t> shape(c.shape().begin(), c.shape().end());
  std::vector<int64_t> strides(c.strides().begin(), c.strides().end());
  auto* keep = new Tensor(c);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  return nb::ndarray<nb::numpy>(c.raw_data(), shape.size(), shape.data(), owner, strides.data(), dt).cast();
}

void raise_from(const attn::Error& e, ErrorKind kind) {
  const std::string_view m = e.what();
  if (names_a_file_problem(m)) {
    PyErr_SetString(PyExc_OSError, e.what());
    throw nb::python_error();
  }
  if (kind == ErrorKind::value) throw nb::value_error(e.what());
  throw std::runtime_error(e.what());
}

}  // namespace attn::python

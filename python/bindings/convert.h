// Conversions between Python arrays and attn::Tensor for the nanobind module.
//
//  * to_tensor: a numpy array or any object with __dlpack__ (a CPU torch tensor)
//    becomes a Tensor that borrows its memory (no copy, any non-negative strides);
//    the Python object is kept alive until the last Tensor using it goes.
//    dtypes: float32, float64, bfloat16, bool (as u8), uint8, int32, int64;
//    float16 and negative strides are copied (float16 to float32).
//  * to_numpy: a Tensor becomes a numpy array that owns it (no copy when it is
//    contiguous).
//  * Errors: attn::Error raised from the library becomes ValueError (bad
//    arguments), OSError (files) or RuntimeError, carrying attn's message.
#pragma once

#include <attn/core/error.h>
#include <attn/core/tensor.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>
#include <utility>

namespace attn::python {

namespace nb = nanobind;

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;

// `what` names the argument in errors ("q", "attn_mask").
Tensor to_tensor(const AnyArray& a, const char* what);
nb::object to_numpy(const Tensor& t);

// Which Python exception an attn::Error from a call becomes, unless its message
// names a file problem (then OSError).
enum class ErrorKind { value, runtime };

[[noreturn]] void raise_from(const attn::Error& e, ErrorKind kind);

// Runs fn() with the GIL released; an attn::Error becomes the Python exception
// of `kind`. Returns what fn returns.
template <typename Fn>
auto without_gil(ErrorKind kind, Fn&& fn) -> decltype(fn()) {
  try {
    nb::gil_scoped_release release;
    return fn();
  } catch (const attn::Error& e) {
    raise_from(e, kind);
  }
}

}  // namespace attn::python

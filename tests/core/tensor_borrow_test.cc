// Tensor::borrow: a view of memory someone else owns (the Python package's
// numpy and DLPack buffers). No copy, the owner's release runs once, when the
// last tensor using the memory goes; bad layouts are errors.
#include <attn/core/tensor.h>

#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

TEST(TensorBorrow, ViewsTheCallersMemoryAndReleasesOnce) {
  std::vector<float> buf(24);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i);
  int released = 0;
  {
    Tensor t = Tensor::borrow(buf.data(), DType::f32, {2, 3, 4}, {12, 4, 1}, [&] { ++released; });
    EXPECT_EQ(t.data<float>(), buf.data());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.at({1, 2, 3}), 23.0);
    Tensor view = t.transpose(0, 2);  // shares the storage
    t = Tensor();
    EXPECT_EQ(released, 0);
    buf[5] = 100.0f;  // the view reads the caller's memory, not a copy
    EXPECT_EQ(view.at({1, 1, 0}), 100.0);
  }
  EXPECT_EQ(released, 1);
}

TEST(TensorBorrow, StridedAndBroadcastLayouts) {
  std::vector<double> buf(10);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<double>(i);
  // every other element of the buffer, as [5]; a stride-0 dimension broadcasts
  Tensor t = Tensor::borrow(buf.data(), DType::f64, {3, 5}, {0, 2}, nullptr);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.at({2, 4}), 8.0);
  Tensor c = t.contiguous();
  EXPECT_EQ(c.to_vector(), (std::vector<double>{0, 2, 4, 6, 8, 0, 2, 4, 6, 8, 0, 2, 4, 6, 8}));
  Tensor empty = Tensor::borrow(nullptr, DType::f32, {0, 3}, {3, 1}, nullptr);
  EXPECT_EQ(empty.numel(), 0);
}

// The message of the attn::Error fn throws ("" when it throws none).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorBorrow, BadLayoutsAreErrors) {
  float x = 0;
  EXPECT_NE(error_of([&] {
              Tensor::borrow(&x, DType::f32, {2, 2}, {1}, nullptr);
            }).find("different ranks"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Tensor::borrow(&x, DType::f32, {2, 2}, {-2, 1}, nullptr);
            }).find("strides >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::borrow(&x, DType::f32, {-1}, {1}, nullptr); }).find("sizes must be >= 0"),
            std::string::npos);
}

}  // namespace
}  // namespace attn

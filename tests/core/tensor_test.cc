#include <attn/core/parallel.h>
#include <attn/core/tensor.h>

#include <atomic>
#include <numeric>

#include "testing/testing.h"

namespace attn {
namespace {

Tensor iota(const Shape& s) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

TEST(Tensor, ContiguousStridesAndAlignment) {
  Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Tensor, TransposeIsAViewThatSharesStorage) {
  Tensor t = iota({2, 3});
  Tensor tt = t.transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.storage(), t.storage());
  EXPECT_EQ(tt.at({2, 1}), 5.0);
  t.set({1, 2}, 42);
  EXPECT_EQ(tt.at({2, 1}), 42.0);
  Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector(), (std::vector<double>{0, 3, 1, 4, 2, 42}));
}

TEST(Tensor, SliceSelectPermuteExpand) {
  Tensor t = iota({4, 5});
  Tensor s = t.slice(1, 1, 5, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{4, 2}));
  EXPECT_EQ(s.at({2, 1}), 13.0);
  EXPECT_EQ(t.select(0, 3).to_vector(), (std::vector<double>{15, 16, 17, 18, 19}));
  Tensor p = iota({2, 3, 4}).permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.at({3, 1, 2}), 23.0);
  Tensor e = Tensor::from<float>({1, 2, 3}, {3}).expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.to_vector(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
}

TEST(Tensor, ViewNeedsContiguous) {
  Tensor t = iota({2, 6});
  EXPECT_EQ(t.view({3, -1}).shape(), (Shape{3, 4}));
  EXPECT_THROW(t.transpose(0, 1).view({12}), Error);
  EXPECT_EQ(t.transpose(0, 1).reshape({12}).at({1}), 6.0);
  EXPECT_THROW(t.view({5, -1}), Error);
}

TEST(Tensor, Bf16RoundTripAndRounding) {
  Tensor t = Tensor::from<float>({1.0f, -2.5f, 3.14159f, 1e-3f}, {4});
  Tensor b = t.to(DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  Tensor back = b.to(DType::f32);
  EXPECT_EQ(back.at({0}), 1.0);
  EXPECT_EQ(back.at({1}), -2.5);
  EXPECT_NEAR(back.at({2}), 3.14159, 3.14159 / 128);
  EXPECT_EQ(bf16::from_float(1.0f + 1.0f / 256), bf16::from_float(1.0f));  // ties to even
}

TEST(Tensor, ErrorsNameExpectedAndActual) {
  Tensor t = iota({2, 3});
  try {
    t.at({0, 3});
    FAIL() << "expected attn::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[0, 3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_THROW(broadcast_shapes({2, 3}, {4, 3}), Error);
  EXPECT_EQ(broadcast_shapes({1, 3}, {4, 1}), (Shape{4, 3}));
}

// Shapes whose element count, byte size or strides overflow int64 (or pass the
// 2^48-element cap); a size-0 dim does not excuse the others, since the strides
// still multiply them.
struct HugeShapeCase {
  const char* name;
  Shape shape;
  std::string message;    // the shape as the error names it
  bool strides_overflow;  // contiguous_strides alone must refuse it too
};

void PrintTo(const HugeShapeCase& c, std::ostream* os) { *os << c.name; }

class TensorHugeShape : public ::testing::TestWithParam<HugeShapeCase> {};

TEST_P(TensorHugeShape, EmptyThrowsNamingTheShape) {
  const HugeShapeCase& c = GetParam();
  for (DType dt : {DType::u8, DType::f32, DType::f64}) {
    EXPECT_ERROR_CONTAINS(Tensor::empty(c.shape, dt), {c.message, "too many elements"}) << dtype_name(dt);
  }
  if (c.strides_overflow) {
    EXPECT_ERROR_CONTAINS(contiguous_strides(c.shape), {c.message, "overflow int64"});
  } else {
    EXPECT_NO_THROW(contiguous_strides(c.shape));
  }
}

constexpr int64_t kBig = int64_t{1} << 62;

INSTANTIATE_TEST_SUITE_P(
    Cases, TensorHugeShape,
    ::testing::Values(
        HugeShapeCase{"ZeroThenOverflow", {0, kBig, 4}, "[0, 4611686018427387904, 4]", true},
        HugeShapeCase{"OverflowThenZero", {kBig, 4, 0}, "[4611686018427387904, 4, 0]", true},
        HugeShapeCase{"ZeroMaxTimesTwo", {0, INT64_MAX, 2}, "[0, 9223372036854775807, 2]", true},
        HugeShapeCase{
            "NoZeroOverflow", {int64_t{1} << 32, int64_t{1} << 32}, "[4294967296, 4294967296]", true},
        HugeShapeCase{
            "ZeroAboveCap", {0, int64_t{1} << 30, int64_t{1} << 30}, "[0, 1073741824, 1073741824]", false}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Tensor, EmptyShapesWithLargeSizesAreLegal) {
  // 2^24 * 2^24 = 2^48 elements' worth of strides: fits, and has no elements.
  Tensor t = Tensor::empty({int64_t{1} << 24, 0, int64_t{1} << 24}, DType::f64);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.strides(), (Shape{int64_t{1} << 24, int64_t{1} << 24, 1}));
  EXPECT_TRUE(t.to_vector().empty());
  EXPECT_EQ(t.view({-1, int64_t{1} << 24}).shape(), (Shape{0, int64_t{1} << 24}));
  // A view whose known sizes overflow when multiplied is refused, not wrapped around.
  EXPECT_ERROR_CONTAINS(t.view({-1, kBig, 4}), {"cannot view", "[-1, 4611686018427387904, 4]"});
  EXPECT_ERROR_CONTAINS(Tensor::empty({2, -3}), {"sizes must be >= 0", "[2, -3]"});
}

TEST(Parallel, CoversRangeOnceForEveryThreadCount) {
  const int saved = num_threads();
  for (int t = 1; t <= 4; ++t) {
    set_num_threads(t);
    std::vector<std::atomic<int>> hits(1000);
    std::atomic<int> max_tid{0};
    parallel_for(1000, 7, [&](int64_t b, int64_t e, int tid) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
      int m = max_tid.load();
      while (tid > m && !max_tid.compare_exchange_weak(m, tid)) {
      }
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    EXPECT_LT(max_tid.load(), t);
  }
  set_num_threads(saved);
  EXPECT_THROW(set_num_threads(0), Error);
}

TEST(Parallel, RethrowsOnCaller) {
  EXPECT_THROW(parallel_for(100, 1,
                            [](int64_t b, int64_t, int) {
                              if (b == 57) throw Error("boom");
                            }),
               Error);
}

}  // namespace
}  // namespace attn

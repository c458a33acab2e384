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

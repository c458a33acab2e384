// ops::GreedyPicker (include/attn/ops/weight_matrix.h): the greedy pick of one row of logits over a
// WeightMatrix, with the screened product where it applies. On every instruction set this CPU has: the
// pick is std::max_element over linear_rows' product of the row alone (index and logit, bit for bit),
// full picks until `screen_after`, then screened ones (fewer candidates) where the screen applies —
// forced on here with only_where_fast = false, since it pays only with AVX-512 VNNI
// (greedy_screen_fast()), which this test does not require; never for other formats or f32
// activations; a non-finite row is no pick.
#include <attn/core/parallel.h>
#include <attn/ops/weight_matrix.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/cpu/isa.h"
#include "kernels/isa_test_util.h"
#include "ops/quant_blocks_util.h"

namespace attn::ops {
namespace {

using kernels::cpu::Isa;

// An activation row: normal values with `spikes` coordinates 50-100x larger (Gemma 3's massive channels).
std::vector<float> hidden(int64_t K, uint32_t seed, int spikes) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(K));
  for (float& v : x) v = nd(rng);
  for (int i = 0; i < spikes; ++i)
    x[rng() % K] = (rng() & 1 ? 1.0f : -1.0f) * (50.0f + 50.0f * static_cast<float>(rng() % 100) / 100.0f);
  return x;
}

// linear_rows' logits of x alone and their first maximum.
GreedyPicker::Pick full(const WeightMatrix& w, const std::vector<float>& x, bool q8) {
  std::vector<float> y(static_cast<std::size_t>(w.rows()));
  LinearScratch s;
  const LinearJob job{&w, y.data(), w.rows()};
  linear_rows({&job, 1}, x.data(), 1, w.cols(), s, q8);
  const auto best = std::max_element(y.begin(), y.end()) - y.begin();
  return {best, y[static_cast<std::size_t>(best)], w.rows()};
}

class GreedyPickerIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { kernels::cpu::force_isa(GetParam()); }
  void TearDown() override { kernels::cpu::force_isa(std::nullopt); }
};

TEST_P(GreedyPickerIsa, PicksTheFullProductsArgmaxScreenedOrNot) {
  const int64_t N = 3000, K = 640;
  const std::vector<std::byte> wb = testing::quant_blocks(QuantFormat::q8_0, N, K, 7);
  const GreedyPickOptions o{.screen_after = 3, .only_where_fast = false};
  ASSERT_TRUE(GreedyPicker::keeps_stored_blocks(QuantFormat::q8_0, K, o));
  // as a loader makes the vocabulary matrix a screening picker reads: no repacked copy
  const WeightMatrix w = WeightMatrix::quantized(QuantFormat::q8_0, wb.data(), N, K, false);
  GreedyPicker picker(o);
  const bool applies = GreedyPicker::screen_applies(w, true);
  // Q8_0 rows of 640: the screen applies wherever the one-row product runs the 8-bit kernel.
  EXPECT_EQ(applies, quant_dot_fast());
  EXPECT_EQ(picker.screens(w, true), applies);
  LinearScratch s;
  int64_t pruned = 0;
  for (uint32_t t = 0; t < 12; ++t) {
    const std::vector<float> x = hidden(K, 100 + t, static_cast<int>(t % 5));
    const GreedyPicker::Pick want = full(w, x, true);
    const GreedyPicker::Pick got = picker.pick(w, x.data(), s, true);
    EXPECT_EQ(got.index, want.index) << t;
    EXPECT_EQ(got.logit, want.logit) << t;
    if (t < 3 || !applies) {
      EXPECT_EQ(got.candidates, N) << t;  // full picks first, and always where the screen does not apply
    } else {
      EXPECT_TRUE(got.candidates >= 1 && got.candidates <= N) << got.candidates;
      pruned += N - got.candidates;
    }
  }
  EXPECT_EQ(picker.screen_built(), applies);
  if (applies) {
    EXPECT_GT(pruned, 0) << "the screen never pruned a row";
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GreedyPickerIsa, ::testing::ValuesIn(testing::available_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return kernels::cpu::isa_str(i.param);
                         });

TEST(GreedyPicker, OnlyWhereItAppliesAndPays) {
  const int64_t N = 64, K = 128;
  const std::vector<std::byte> q8 = testing::quant_blocks(QuantFormat::q8_0, N, K, 1);
  const std::vector<std::byte> q4 = testing::quant_blocks(QuantFormat::q4_0, N, K, 2);
  const WeightMatrix w8 = WeightMatrix::quantized(QuantFormat::q8_0, q8.data(), N, K);
  const WeightMatrix w4 = WeightMatrix::quantized(QuantFormat::q4_0, q4.data(), N, K);
  EXPECT_FALSE(GreedyPicker::screen_applies(w8, false));  // f32 activations: another product
  EXPECT_FALSE(GreedyPicker::screen_applies(w4, true));   // the screen reads Q8_0 blocks only
  std::vector<float> dense(static_cast<std::size_t>(N * K), 0.5f);
  EXPECT_FALSE(GreedyPicker::screen_applies(WeightMatrix::dense(dense, N, K), true));
  EXPECT_EQ(GreedyPicker().screens(w8, true), GreedyPicker::screen_applies(w8, true) && greedy_screen_fast());
  EXPECT_FALSE(GreedyPicker({.screen_after = -1, .only_where_fast = false}).screens(w8, true));
  // A matrix that multiplies panels is never screened; one kept in place is where the 8-bit one-row
  // product runs. keeps_stored_blocks tells a loader which to make.
  if (w8.has_panels()) {
    EXPECT_FALSE(GreedyPicker::screen_applies(w8, true));
  }
  const WeightMatrix kept = WeightMatrix::quantized(QuantFormat::q8_0, q8.data(), N, K, false);
  EXPECT_FALSE(kept.has_panels());
  EXPECT_EQ(GreedyPicker::screen_applies(kept, true), quant_dot_fast());
  const GreedyPickOptions forced{.screen_after = 0, .only_where_fast = false};
  EXPECT_TRUE(GreedyPicker::keeps_stored_blocks(QuantFormat::q8_0, K, forced));
  EXPECT_FALSE(GreedyPicker::keeps_stored_blocks(QuantFormat::q4_0, K, forced));
  EXPECT_FALSE(GreedyPicker::keeps_stored_blocks(QuantFormat::q8_0, 96, forced));  // K % 64
  EXPECT_FALSE(GreedyPicker::keeps_stored_blocks(QuantFormat::q8_0, K, {.screen_after = -1}));
  EXPECT_EQ(GreedyPicker::keeps_stored_blocks(QuantFormat::q8_0, K, {}), greedy_screen_fast());
  // Every kind of matrix still gets its argmax, with f32 or 8-bit activations.
  LinearScratch s;
  const std::vector<float> x = hidden(K, 9, 1);
  for (const WeightMatrix* w : {&w8, &kept, &w4})
    for (bool q8a : {true, false}) {
      GreedyPicker p({.screen_after = 0, .only_where_fast = false});
      EXPECT_EQ(p.pick(*w, x.data(), s, q8a).index, full(*w, x, q8a).index);
    }
}

// pick_rows gives each row what pick() gives it alone: one product for all rows where the screen does
// not run (packed, kept in place and Q4_0 matrices, 8-bit and f32 activations), row by row where it
// does; a row with a non-finite value is no pick and leaves the others alone.
TEST(GreedyPicker, RowsPickAsEachRowAlone) {
  const int64_t N = 96, K = 128, P = 11;
  const std::vector<std::byte> q8 = testing::quant_blocks(QuantFormat::q8_0, N, K, 4);
  const std::vector<std::byte> q4 = testing::quant_blocks(QuantFormat::q4_0, N, K, 5);
  const WeightMatrix packed = WeightMatrix::quantized(QuantFormat::q8_0, q8.data(), N, K);
  const WeightMatrix kept = WeightMatrix::quantized(QuantFormat::q8_0, q8.data(), N, K, false);
  const WeightMatrix w4 = WeightMatrix::quantized(QuantFormat::q4_0, q4.data(), N, K);
  std::vector<float> X;
  for (int64_t r = 0; r < P; ++r) {
    const std::vector<float> x = hidden(K, 40 + static_cast<uint32_t>(r), static_cast<int>(r % 3));
    X.insert(X.end(), x.begin(), x.end());
  }
  LinearScratch s;
  for (const bool bad : {false, true}) {
    if (bad) X[3 * K + 7] = std::numeric_limits<float>::infinity();
    for (const WeightMatrix* w : {&packed, &kept, &w4})
      for (bool q8a : {true, false})
        for (const GreedyPickOptions o :
             {GreedyPickOptions{}, GreedyPickOptions{.screen_after = 0, .only_where_fast = false}}) {
          GreedyPicker batched(o), alone(o);
          std::vector<GreedyPicker::Pick> got(P);
          batched.pick_rows(*w, X.data(), P, K, s, q8a, got.data());
          for (int64_t r = 0; r < P; ++r) {
            const GreedyPicker::Pick want = alone.pick(*w, X.data() + r * K, s, q8a);
            EXPECT_EQ(got[static_cast<std::size_t>(r)].index, want.index) << r;
            if (want.index >= 0) {
              EXPECT_EQ(got[static_cast<std::size_t>(r)].logit, want.logit) << r;
            }
          }
          EXPECT_EQ(got[3].index == -1, bad);
        }
  }
}

TEST(GreedyPicker, ANonFiniteRowIsNoPick) {
  const int64_t N = 64, K = 128;
  const std::vector<std::byte> q8 = testing::quant_blocks(QuantFormat::q8_0, N, K, 1);
  const WeightMatrix w = WeightMatrix::quantized(QuantFormat::q8_0, q8.data(), N, K);
  std::vector<float> x = hidden(K, 3, 0);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  LinearScratch s;
  for (int64_t after : {0, 128}) {
    GreedyPicker p({.screen_after = after, .only_where_fast = false});
    EXPECT_EQ(p.pick(w, x.data(), s, true).index, -1);
  }
  x[5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(GreedyPicker().pick(w, x.data(), s, true).index, -1);
}

}  // namespace
}  // namespace attn::ops

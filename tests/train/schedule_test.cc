// Learning-rate schedules against their formulas, evaluated independently here.
#include <attn/train/schedule.h>

#include <cmath>
#include <memory>

#include "testing/testing.h"

namespace attn {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct NoamRow {
  int64_t d_model, warmup;
  double scale;
  int64_t step;
};

class Noam : public ::testing::TestWithParam<NoamRow> {};

TEST_P(Noam, EqualsThePaperFormula) {
  const NoamRow r = GetParam();
  const train::NoamSchedule s(r.d_model, r.warmup, r.scale);
  const double t = static_cast<double>(r.step);
  const double expect =
      r.scale * std::pow(r.d_model, -0.5) * std::min(std::pow(t, -0.5), t * std::pow(r.warmup, -1.5));
  EXPECT_NEAR(s.lr(r.step), expect, 1e-15 * expect) << "step " << r.step;
}

INSTANTIATE_TEST_SUITE_P(Steps, Noam,
                         ::testing::Values(NoamRow{512, 4000, 1.0, 1}, NoamRow{512, 4000, 1.0, 2000},
                                           NoamRow{512, 4000, 1.0, 3999}, NoamRow{512, 4000, 1.0, 4000},
                                           NoamRow{512, 4000, 1.0, 4001}, NoamRow{512, 4000, 1.0, 100000},
                                           NoamRow{64, 10, 2.0, 7}, NoamRow{64, 10, 2.0, 55}));

TEST(Noam, PeaksAtWarmupAndStepZeroIsStepOne) {
  const train::NoamSchedule s(512, 4000);
  // at t = warmup both branches agree: d^-0.5 · warmup^-0.5
  EXPECT_NEAR(s.lr(4000), 1.0 / std::sqrt(512.0 * 4000.0), 1e-18);
  EXPECT_LT(s.lr(3999), s.lr(4000));
  EXPECT_LT(s.lr(4001), s.lr(4000));
  EXPECT_EQ(s.lr(0), s.lr(1));
  EXPECT_THROW(train::NoamSchedule(0, 10), Error);
  EXPECT_THROW(train::NoamSchedule(8, 0), Error);
}

class WarmupCosine : public ::testing::TestWithParam<int64_t> {};

TEST_P(WarmupCosine, EqualsTheFormula) {
  const double peak = 3e-4, floor = 3e-5;
  const int64_t warmup = 100, total = 1000, t = GetParam();
  const train::WarmupCosineSchedule s(peak, warmup, total, floor);
  double expect;
  if (t <= warmup) {
    expect = peak * static_cast<double>(t) / warmup;
  } else {
    const double progress = std::min(1.0, static_cast<double>(t - warmup) / (total - warmup));
    expect = floor + 0.5 * (peak - floor) * (1 + std::cos(kPi * progress));
  }
  EXPECT_NEAR(s.lr(t), expect, 1e-15) << "step " << t;
}

INSTANTIATE_TEST_SUITE_P(Steps, WarmupCosine,
                         ::testing::Values(1, 50, 99, 100, 101, 333, 550, 999, 1000, 5000));

TEST(WarmupCosine, LandmarksAndErrors) {
  const train::WarmupCosineSchedule s(1.0, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(10), 1.0);      // end of warmup: the peak
  EXPECT_DOUBLE_EQ(s.lr(60), 0.55);     // half way: (peak + floor) / 2
  EXPECT_DOUBLE_EQ(s.lr(110), 0.1);     // the floor at total
  EXPECT_DOUBLE_EQ(s.lr(100000), 0.1);  // and after
  const train::WarmupCosineSchedule no_warmup(2.0, 0, 4);
  EXPECT_DOUBLE_EQ(no_warmup.lr(2), 1.0);
  EXPECT_THROW(train::WarmupCosineSchedule(1.0, 10, 10), Error);
  EXPECT_THROW(train::WarmupCosineSchedule(1.0, 1, 10, 2.0), Error);
}

TEST(Schedule, JsonRoundTripGivesTheSameRates) {
  const train::ConstantSchedule c(0.25);
  const train::NoamSchedule n(256, 300, 0.7);
  const train::WarmupCosineSchedule w(1e-3, 20, 200, 1e-5);
  for (const train::Schedule* s : std::initializer_list<const train::Schedule*>{&c, &n, &w}) {
    const std::unique_ptr<train::Schedule> back =
        train::schedule_from_json(json::parse(json::dump(s->to_json())));
    for (int64_t t : {1, 2, 19, 20, 21, 150, 300, 301, 5000})
      EXPECT_EQ(back->lr(t), s->lr(t)) << json::dump(s->to_json());
  }
  EXPECT_EQ(c.lr(1), 0.25);
  EXPECT_EQ(c.lr(1000000), 0.25);
  EXPECT_THROW(train::schedule_from_json(json::parse(R"({"type":"linear"})")), Error);
  EXPECT_THROW(train::schedule_from_json(json::parse(R"({"type":"noam","d_model":8})")), Error);
  EXPECT_THROW(train::schedule_from_json(json::parse("[1]")), Error);
}

}  // namespace
}  // namespace attn

// Learning-rate schedules: pure functions of the optimizer step (1-based: the
// rate used by the t-th update is lr(t)), so a checkpoint only needs the step
// and the schedule's parameters (to_json / schedule_from_json).
#pragma once

#include <attn/io/json.h>

#include <cstdint>
#include <memory>

namespace attn::train {

class Schedule {
 public:
  virtual ~Schedule() = default;
  // Rate for update number `step` (>= 1; step 0 gives lr(1)).
  virtual double lr(int64_t step) const = 0;
  // {"type": "...", parameters...}; schedule_from_json reads it back.
  virtual json::Value to_json() const = 0;
};

// lr(t) = value.
class ConstantSchedule final : public Schedule {
 public:
  explicit ConstantSchedule(double value);
  double lr(int64_t step) const override;
  json::Value to_json() const override;

 private:
  double value_;
};

// "Attention Is All You Need", eq. (3), with a scale factor:
//   lr(t) = scale · d_model^-0.5 · min(t^-0.5, t · warmup^-1.5)
class NoamSchedule final : public Schedule {
 public:
  NoamSchedule(int64_t d_model, int64_t warmup_steps, double scale = 1.0);
  double lr(int64_t step) const override;
  json::Value to_json() const override;

 private:
  int64_t d_model_, warmup_;
  double scale_;
};

// Linear warmup from 0 to peak over warmup steps, then cosine decay to floor
// at total_steps, constant floor afterwards:
//   t <= warmup:  peak · t / warmup
//   t >  warmup:  floor + (peak − floor) · (1 + cos(π · min(1, (t − warmup) / (total − warmup)))) / 2
class WarmupCosineSchedule final : public Schedule {
 public:
  WarmupCosineSchedule(double peak, int64_t warmup_steps, int64_t total_steps, double floor = 0.0);
  double lr(int64_t step) const override;
  json::Value to_json() const override;

 private:
  double peak_;
  int64_t warmup_, total_;
  double floor_;
};

// Rebuilds a schedule from to_json(); throws attn::Error on an unknown type or
// missing/invalid parameters.
std::unique_ptr<Schedule> schedule_from_json(const json::Value& v);

}  // namespace attn::train

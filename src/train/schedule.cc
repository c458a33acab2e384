// Learning-rate schedules (include/attn/train/schedule.h).
#include <attn/core/error.h>
#include <attn/train/schedule.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace attn::train {
namespace {

int64_t at_least_one(int64_t step) { return std::max<int64_t>(step, 1); }

double number(const json::Value& v, const char* key) {
  const json::Value* x = v.find(key);
  ATTN_CHECK(x && x->is_number(), "schedule: '", key, "' must be a number in ", json::dump(v));
  return x->as_double();
}
int64_t integer(const json::Value& v, const char* key) {
  const json::Value* x = v.find(key);
  ATTN_CHECK(x && x->is_integer(), "schedule: '", key, "' must be an integer in ", json::dump(v));
  return x->as_int64();
}

}  // namespace

ConstantSchedule::ConstantSchedule(double value) : value_(value) {
  ATTN_CHECK(std::isfinite(value) && value >= 0, "constant schedule: lr must be finite and >= 0; got ",
             value);
}
double ConstantSchedule::lr(int64_t) const { return value_; }
json::Value ConstantSchedule::to_json() const {
  return json::Value::object(
      {{"type", json::Value::string("constant")}, {"lr", json::Value::number(value_)}});
}

NoamSchedule::NoamSchedule(int64_t d_model, int64_t warmup_steps, double scale)
    : d_model_(d_model), warmup_(warmup_steps), scale_(scale) {
  ATTN_CHECK(d_model > 0, "noam schedule: d_model must be > 0; got ", d_model);
  ATTN_CHECK(warmup_steps > 0, "noam schedule: warmup_steps must be > 0; got ", warmup_steps);
  ATTN_CHECK(std::isfinite(scale) && scale > 0, "noam schedule: scale must be > 0; got ", scale);
}
double NoamSchedule::lr(int64_t step) const {
  const double t = static_cast<double>(at_least_one(step));
  const double w = static_cast<double>(warmup_);
  return scale_ / std::sqrt(static_cast<double>(d_model_)) *
         std::min(1.0 / std::sqrt(t), t / (w * std::sqrt(w)));
}
json::Value NoamSchedule::to_json() const {
  return json::Value::object({{"type", json::Value::string("noam")},
                              {"d_model", json::Value::integer(d_model_)},
                              {"warmup_steps", json::Value::integer(warmup_)},
                              {"scale", json::Value::number(scale_)}});
}

WarmupCosineSchedule::WarmupCosineSchedule(double peak, int64_t warmup_steps, int64_t total_steps,
                                           double floor)
    : peak_(peak), warmup_(warmup_steps), total_(total_steps), floor_(floor) {
  ATTN_CHECK(std::isfinite(peak) && peak >= 0, "warmup-cosine schedule: peak must be >= 0; got ", peak);
  ATTN_CHECK(std::isfinite(floor) && floor >= 0 && floor <= peak,
             "warmup-cosine schedule: floor must be in [0, peak = ", peak, "]; got ", floor);
  ATTN_CHECK(warmup_steps >= 0, "warmup-cosine schedule: warmup_steps must be >= 0; got ", warmup_steps);
  ATTN_CHECK(total_steps > warmup_steps,
             "warmup-cosine schedule: total_steps must be > warmup_steps = ", warmup_steps, "; got ",
             total_steps);
}
double WarmupCosineSchedule::lr(int64_t step) const {
  const int64_t t = at_least_one(step);
  if (t <= warmup_) return peak_ * static_cast<double>(t) / static_cast<double>(warmup_);
  const double progress =
      std::min(1.0, static_cast<double>(t - warmup_) / static_cast<double>(total_ - warmup_));
  return floor_ + (peak_ - floor_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}
json::Value WarmupCosineSchedule::to_json() const {
  return json::Value::object({{"type", json::Value::string("warmup_cosine")},
                              {"peak", json::Value::number(peak_)},
                              {"warmup_steps", json::Value::integer(warmup_)},
                              {"total_steps", json::Value::integer(total_)},
                              {"floor", json::Value::number(floor_)}});
}

std::unique_ptr<Schedule> schedule_from_json(const json::Value& v) {
  ATTN_CHECK(v.is_object(), "schedule: expected a JSON object; got ", json::type_name(v.type()));
  const json::Value* type = v.find("type");
  ATTN_CHECK(type && type->is_string(), "schedule: missing string 'type' in ", json::dump(v));
  const std::string& t = type->as_string();
  if (t == "constant") return std::make_unique<ConstantSchedule>(number(v, "lr"));
  if (t == "noam")
    return std::make_unique<NoamSchedule>(integer(v, "d_model"), integer(v, "warmup_steps"),
                                          number(v, "scale"));
  if (t == "warmup_cosine")
    return std::make_unique<WarmupCosineSchedule>(number(v, "peak"), integer(v, "warmup_steps"),
                                                  integer(v, "total_steps"), number(v, "floor"));
  throw Error("schedule: unknown type '" + t + "' (expected constant, noam or warmup_cosine)");
}

}  // namespace attn::train

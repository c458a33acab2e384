// Small formatting helpers shared by the task recipes (private to src/tasks).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

namespace attn::tasks::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// printf of one number with format `f`.
inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// printf into a string (at most 1023 bytes: the progress and report lines).
inline std::string strf(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string strf(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

inline std::string pct(double v) { return fmt("%.2f%%", 100.0 * v); }

// m:ss of a duration in seconds ("?" when not finite).
inline std::string duration(double s) {
  if (!std::isfinite(s)) return "?";
  const auto t = static_cast<int64_t>(std::lround(std::max(0.0, s)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                static_cast<long long>(t % 60));
  return buf;
}

}  // namespace attn::tasks::detail

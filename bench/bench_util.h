// Small helpers shared by the benchmark programs: timing, the machine's
// measured FMA peak, peak-RSS tracking, and comma-list parsing.
#pragma once

#include <attn/core/parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace attn::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs fn once to warm up, then repeatedly until min_time seconds have passed
// (at least min_reps times); returns the median seconds per call.
inline double time_median(const std::function<void()>& fn, double min_time = 0.5, int min_reps = 3) {
  fn();
  std::vector<double> t;
  const double start = now_s();
  while (static_cast<int>(t.size()) < min_reps || now_s() - start < min_time) {
    const double a = now_s();
    fn();
    t.push_back(now_s() - a);
    if (t.size() >= 1000) break;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One thread's share of the FMA peak loop: 12 independent 512-bit FMA chains.
__attribute__((target("avx512f"))) inline void fma_chains(int64_t iters, float* sink16) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_storeu_ps(sink16, s);
}

// Measured single-precision FMA peak of this machine on num_threads()
// threads, in GFLOP/s.
inline double measure_fma_peak_gflops() {
  const int64_t iters = 20'000'000;
  const int threads = num_threads();
  std::vector<float> sink(threads * 16, 0.f);
  auto run = [&] {
    parallel_for(threads, 1, [&](int64_t b, int64_t, int) { fma_chains(iters, &sink[b * 16]); });
  };
  const double sec = time_median(run, 0.3, 3);
  return 2.0 * 16 * 12 * static_cast<double>(iters) * threads / sec / 1e9;
}

// Peak resident memory tracking through /proc (Linux): reset_peak() clears
// VmHWM; peak_growth_bytes() is VmHWM minus the RSS at the reset.
inline long proc_status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::string(key).size());
  return -1;
}
struct PeakRss {
  long base_kb = 0;
  void reset() {
    std::ofstream("/proc/self/clear_refs") << "5";
    base_kb = proc_status_kb("VmRSS:");
  }
  double growth_mib() const { return (proc_status_kb("VmHWM:") - base_kb) / 1024.0; }
};

inline std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::size_t p = 0;
  while (p < s.size()) {
    std::size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    out.push_back(std::atoll(s.substr(p, q - p).c_str()));
    p = q + 1;
  }
  return out;
}

}  // namespace attn::bench

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
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace attn::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): with 1 thread the
// kernels run on the caller, so this is the compute time without the time
// other processes on a shared machine took from us.
inline double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU time of the whole process (all threads), seconds: at 1 thread robust to other jobs sharing the
// cores; at more threads it also counts time that threads spin waiting for each other.
inline double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The clock time_median measures with (--clock wall|thread in the benchmarks).
inline bool& use_thread_clock() {
  static bool v = false;
  return v;
}

// --clock process: the process's CPU time divided by the thread count (what each thread computed per
// second it ran; idle pool threads spin for ATTN_SPIN_US before they sleep, and that spinning counts).
inline bool& use_process_clock() {
  static bool v = false;
  return v;
}

// time_median in the process's CPU time per thread (--clock process); busy (if not null): the median
// call's process CPU time over threads x its wall time.
inline double time_median_process(const std::function<void()>& fn, double min_time, int min_reps,
                                  double* busy = nullptr) {
  fn();
  std::vector<std::pair<double, double>> t;  // (cpu per thread, wall)
  const double start = now_s();
  const double threads = attn::num_threads();
  while (static_cast<int>(t.size()) < min_reps || now_s() - start < min_time) {
    const double c0 = process_cpu_s(), w0 = now_s();
    fn();
    const double c1 = process_cpu_s(), w1 = now_s();
    t.emplace_back((c1 - c0) / threads, w1 - w0);
    if (t.size() >= 1000) break;
  }
  std::sort(t.begin(), t.end());
  const auto& m = t[t.size() / 2];
  if (busy) *busy = m.second > 0 ? m.first / m.second : 0;
  return m.first;
}

// The time now on the clock the benchmark measures with: process CPU time per thread, the calling
// thread's CPU time, or wall time.
inline double clock_now_s() {
  if (use_process_clock()) return process_cpu_s() / attn::num_threads();
  return use_thread_clock() ? thread_cpu_s() : now_s();
}

inline const char* clock_name() {
  return use_process_clock() ? "process" : use_thread_clock() ? "thread" : "wall";
}

// Runs fn once to warm up, then repeatedly until min_time seconds have passed
// (at least min_reps times); returns the median seconds per call, in wall time
// or, with use_thread_clock(), in the calling thread's CPU time.
inline double time_median(const std::function<void()>& fn, double min_time = 0.5, int min_reps = 3) {
  fn();
  std::vector<double> t;
  const double start = now_s();
  auto clock = use_thread_clock() ? thread_cpu_s : now_s;
  while (static_cast<int>(t.size()) < min_reps || now_s() - start < min_time) {
    const double a = clock();
    fn();
    t.push_back(clock() - a);
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

// The same loop with 256-bit FMAs, for CPUs without AVX-512.
__attribute__((target("avx2,fma"))) inline void fma_chains_avx2(int64_t iters, float* sink16) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(sink16, s);
}

// Measured single-precision FMA peak of this machine on num_threads()
// threads, in GFLOP/s (512-bit FMAs where the CPU has AVX-512, else 256-bit).
inline double measure_fma_peak_gflops() {
  const int64_t iters = 20'000'000;
  const int threads = num_threads();
  const bool wide = __builtin_cpu_supports("avx512f");
  std::vector<float> sink(threads * 16, 0.f);
  auto run = [&] {
    parallel_for(threads, 1, [&](int64_t b, int64_t, int) {
      if (wide)
        fma_chains(iters, &sink[b * 16]);
      else
        fma_chains_avx2(iters, &sink[b * 16]);
    });
  };
  const double sec = time_median(run, 0.3, 3);
  return 2.0 * (wide ? 16 : 8) * 12 * static_cast<double>(iters) * threads / sec / 1e9;
}

// One thread's share of the bf16 dot-product peak loop: 12 independent vdpbf16ps chains
// (AVX512_BF16). Each instruction is 16 lanes x 2 products + 2 adds = 64 FLOP.
__attribute__((target("avx512f,avx512bf16"))) inline void dpbf16_chains(int64_t iters, float* sink16) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // (1.0, 1.0) as bf16 pairs
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x33d633d6);  // ~1e-7 each
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_storeu_ps(sink16, s);
}

// Measured bf16 dot-product (vdpbf16ps) peak on num_threads() threads, in GFLOP/s (2 FLOP per
// bf16 product-add), or 0 when the CPU has no AVX512_BF16. What a bf16 kernel's throughput is
// a fraction of (the fp32 FMA peak is not its ceiling: one vdpbf16ps does twice an FMA's work).
inline double measure_bf16_dot_peak_gflops() {
  if (!__builtin_cpu_supports("avx512bf16")) return 0.0;
  const int64_t iters = 20'000'000;
  const int threads = num_threads();
  std::vector<float> sink(threads * 16, 0.f);
  auto run = [&] {
    parallel_for(threads, 1, [&](int64_t b, int64_t, int) { dpbf16_chains(iters, &sink[b * 16]); });
  };
  const double sec = time_median(run, 0.3, 3);
  return 64.0 * 12 * static_cast<double>(iters) * threads / sec / 1e9;
}

// Streaming-read bandwidth of one thread in GB/s (1e9 bytes/s): sums a 512 MiB
// buffer (far beyond the caches) with 4 independent AVX-512 accumulators.
__attribute__((target("avx512f"))) inline float sum_buffer(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0.f;
  for (float x : lanes) s += x;
  return s;
}
inline double measure_read_bandwidth_gbs() {
  const int64_t n = int64_t{128} << 20;  // floats
  std::vector<float> buf(n, 1.f);
  volatile float sink = 0;
  const double sec = time_median([&] { sink = sink + sum_buffer(buf.data(), n); }, 0.5, 3);
  return 4.0 * static_cast<double>(n) / sec / 1e9;
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

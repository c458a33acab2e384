// attention_bench: GFLOP/s of the attention operator (reference and fused
// backends), forward and backward, over a sweep of sizes; prints one JSON
// object per measurement (one per line) and a readable table on stderr.
//
//   attention_bench [--n 128,512,1024] [--d 64,128] [--causal 0,1] [--window 0,512]
//                   [--batch 1] [--heads 8] [--backward 0,1] [--backends fused,reference]
//                   [--decode-lk 1024,32768] [--threads N] [--min-time 0.5] [--ref-max-n 1024]
//                   [--peak] [--memory] [--bandwidth] [--clock wall|thread|process] [--decode-lq 1]
//                   [--dtype f32|bf16]
//
// FLOP counts: forward 4·B·H·Lq·Lk·D (halved for causal, for a window of w keys
// 4·B·H·Lq·min(Lk, w+1)·D), backward 2.5× forward. --decode-lk runs Lq = 1
// against the listed Lk (--decode-lq: other short query lengths). --peak prints the measured fp32 FMA
// peak and the bf16 dot-product (vdpbf16ps) peak first.
// --memory reports the growth of peak resident memory during one call.
// --bandwidth prints one thread's streaming-read bandwidth (GB/s) first.
// --clock thread times in the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID;
// meaningful with --threads 1), default wall time. --clock process times in the process's CPU time
// divided by the thread count (CLOCK_PROCESS_CPUTIME_ID): at several threads, what each thread computes
// per second it ran, without the time other processes took from it, and the table adds busy = process
// CPU time / (threads x wall time) (below 1: threads slept, waiting for work or preempted; spinning
// counts as busy). --peak under --clock process times the peak loops the same way. --dtype bf16 passes q, k,
// v as bf16 tensors (the fused kernel's AVX512_BF16 path where it applies).
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"

using namespace attn;
using attn::bench::parse_list;

namespace {

Tensor rand_tensor(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

// The benchmark's timing: bench::time_median, or time_median_process under --clock process.
double timed(const std::function<void()>& fn, double min_time, int min_reps, double* busy) {
  if (busy) *busy = -1;
  if (bench::use_process_clock()) return bench::time_median_process(fn, min_time, min_reps, busy);
  return bench::time_median(fn, min_time, min_reps);
}

bool& bf16_inputs() {
  static bool v = false;
  return v;
}

struct Config {
  int64_t B, H, Lq, Lk, D;
  bool causal;
  int64_t window;  // 0 = none; else left window (causal) or symmetric
  bool backward;
  Backend backend;
};

double flops(const Config& c) {
  double per_row_keys = static_cast<double>(c.Lk);
  if (c.window > 0)
    per_row_keys = std::min<double>(c.Lk, c.window + 1);
  else if (c.causal)
    per_row_keys = c.Lq == 1 ? c.Lk : (c.Lk + 1) / 2.0;
  const double f = 4.0 * c.B * c.H * c.Lq * per_row_keys * c.D;
  return c.backward ? 2.5 * f : f;
}

void run(const Config& c, double min_time, bool memory) {
  Tensor q = rand_tensor({c.B, c.H, c.Lq, c.D}, 1);
  Tensor k = rand_tensor({c.B, c.H, c.Lk, c.D}, 2);
  Tensor v = rand_tensor({c.B, c.H, c.Lk, c.D}, 3);
  AttentionOptions o;
  o.causal = c.causal;
  o.align = Align::bottom_right;  // decode-style alignment; equals top-left when Lq = Lk
  if (c.window > 0) o.window_left = c.window;
  o.backend = c.backend;
  if (bf16_inputs()) q = q.to(DType::bf16), k = k.to(DType::bf16), v = v.to(DType::bf16);
  double mem = -1, busy = -1;
  double sec;
  if (!c.backward) {
    bench::PeakRss rss;
    if (memory) rss.reset();
    sec = timed([&] { attention(q, k, v, o); }, min_time, memory ? 1 : 3, &busy);
    if (memory) mem = rss.growth_mib();
  } else {
    AttentionResult r = attention(q, k, v, o);
    Tensor dout = rand_tensor(q.shape(), 4);
    bench::PeakRss rss;
    if (memory) rss.reset();
    sec = timed([&] { attention_backward(q, k, v, r.out, r.lse, dout, o); }, min_time, memory ? 1 : 3, &busy);
    if (memory) mem = rss.growth_mib();
  }
  const double gf = flops(c) / sec / 1e9;
  const char* be = c.backend == Backend::reference ? "reference" : "fused";
  std::printf(
      "{\"engine\":\"attn-%s\",\"pass\":\"%s\",\"B\":%lld,\"H\":%lld,\"Lq\":%lld,\"Lk\":%lld,\"D\":%lld,"
      "\"dtype\":\"%s\",\"causal\":%d,\"window\":%lld,\"threads\":%d,\"seconds\":%.6g,\"gflops\":%.4g,\"peak_"
      "rss_growth_mib\":"
      "%.1f}\n",
      be, c.backward ? "backward" : "forward", (long long)c.B, (long long)c.H, (long long)c.Lq,
      (long long)c.Lk, (long long)c.D, bf16_inputs() ? "bf16" : "f32", c.causal ? 1 : 0, (long long)c.window,
      num_threads(), sec, gf, mem);
  if (busy >= 0) std::printf("{\"engine\":\"busy\",\"threads\":%d,\"busy\":%.4g}\n", num_threads(), busy);
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "%-10s %-8s B=%lld H=%lld Lq=%-6lld Lk=%-6lld D=%-4lld %-4s causal=%d window=%-5lld %9.3f ms %8.2f "
      "GFLOP/s%s%s\n",
      be, c.backward ? "bwd" : "fwd", (long long)c.B, (long long)c.H, (long long)c.Lq, (long long)c.Lk,
      (long long)c.D, bf16_inputs() ? "bf16" : "f32", c.causal ? 1 : 0, (long long)c.window, sec * 1e3, gf,
      mem >= 0 ? (" peak-RSS +" + std::to_string(static_cast<int>(mem)) + " MiB").c_str() : "",
      busy >= 0 ? (" busy " + std::to_string(busy).substr(0, 5)).c_str() : "");
}

// The fp32 FMA and bf16 dot-product peaks on num_threads() threads under --clock process (the same loops
// as bench::measure_*_peak_gflops, timed in CPU time per thread).
double process_peak_gflops(bool bf16) {
  if (bf16 && !__builtin_cpu_supports("avx512bf16")) return 0.0;
  const int64_t iters = 20'000'000;
  const int threads = num_threads();
  std::vector<float> sink(threads * 16, 0.f);
  const double sec = timed(
      [&] {
        parallel_for(threads, 1, [&](int64_t b, int64_t, int) {
          if (bf16)
            bench::dpbf16_chains(iters, &sink[b * 16]);
          else
            bench::fma_chains(iters, &sink[b * 16]);
        });
      },
      0.3, 3, nullptr);
  return (bf16 ? 64.0 : 32.0) * 12 * static_cast<double>(iters) * threads / sec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> ns{128, 512, 1024, 2048}, ds{64, 128}, causals{0, 1}, windows{0}, bwds{0}, decode,
      decode_lq{1};
  std::vector<std::string> backends{"fused"};
  int64_t B = 1, H = 8, ref_max_n = 1024;
  double min_time = 0.5;
  bool peak = false, memory = false, bandwidth = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "attention_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--n")
      ns = parse_list(next());
    else if (a == "--d")
      ds = parse_list(next());
    else if (a == "--causal")
      causals = parse_list(next());
    else if (a == "--window")
      windows = parse_list(next());
    else if (a == "--backward")
      bwds = parse_list(next());
    else if (a == "--decode-lk")
      decode = parse_list(next());
    else if (a == "--decode-lq")
      decode_lq = parse_list(next());
    else if (a == "--batch")
      B = std::atoll(next().c_str());
    else if (a == "--heads")
      H = std::atoll(next().c_str());
    else if (a == "--threads")
      set_num_threads(std::atoi(next().c_str()));
    else if (a == "--min-time")
      min_time = std::atof(next().c_str());
    else if (a == "--ref-max-n")
      ref_max_n = std::atoll(next().c_str());
    else if (a == "--peak")
      peak = true;
    else if (a == "--memory")
      memory = true;
    else if (a == "--dtype")
      bf16_inputs() = next() == "bf16";
    else if (a == "--bandwidth")
      bandwidth = true;
    else if (a == "--clock") {
      const std::string c = next();
      bench::use_thread_clock() = c == "thread";
      bench::use_process_clock() = c == "process";
    } else if (a == "--backends") {
      backends.clear();
      std::string s = next();
      std::size_t p = 0;
      while (p <= s.size()) {
        std::size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        backends.push_back(s.substr(p, q - p));
        p = q + 1;
      }
    } else {
      std::fprintf(
          stderr,
          "attention_bench: unknown option %s (see the comment at the top of bench/attention_bench.cc)\n",
          a.c_str());
      return 2;
    }
  }
  if (peak) {
    const double p =
        bench::use_process_clock() ? process_peak_gflops(false) : bench::measure_fma_peak_gflops();
    std::printf("{\"engine\":\"fma-peak\",\"threads\":%d,\"gflops\":%.4g}\n", num_threads(), p);
    std::fprintf(stderr, "measured fp32 FMA peak on %d threads: %.1f GFLOP/s\n", num_threads(), p);
    // The ceiling of the bf16 kernels (--dtype bf16): vdpbf16ps, two products per lane.
    const double pb =
        bench::use_process_clock() ? process_peak_gflops(true) : bench::measure_bf16_dot_peak_gflops();
    std::printf("{\"engine\":\"bf16-dot-peak\",\"threads\":%d,\"gflops\":%.4g}\n", num_threads(), pb);
    std::fprintf(stderr, "measured bf16 dot-product (vdpbf16ps) peak on %d threads: %.1f GFLOP/s%s\n",
                 num_threads(), pb, pb == 0 ? " (no AVX512_BF16)" : "");
  }
  if (bandwidth) {
    const double bw = bench::measure_read_bandwidth_gbs();
    std::printf("{\"engine\":\"read-bandwidth\",\"threads\":1,\"gbs\":%.4g}\n", bw);
    std::fprintf(stderr, "streaming read, 1 thread: %.1f GB/s\n", bw);
  }
  for (const std::string& bname : backends) {
    const Backend be = bname == "reference" ? Backend::reference : Backend::fused;
    for (int64_t bwd : bwds)
      for (int64_t d : ds) {
        for (int64_t n : ns)
          for (int64_t causal : causals)
            for (int64_t w : windows) {
              if (be == Backend::reference && n > ref_max_n) continue;
              run({B, H, n, n, d, causal != 0, w, bwd != 0, be}, min_time, memory);
            }
        for (int64_t lk : decode) {
          if (be == Backend::reference && lk > ref_max_n * 8) continue;
          for (int64_t lq : decode_lq) run({B, H, lq, lk, d, false, 0, bwd != 0, be}, min_time, memory);
        }
      }
  }
  return 0;
}

// One decode step of attention: ops::paged_attention over a paged KV cache (blocks of 16 positions in
// a shuffled order, read through the block table) against the contiguous decode entries of today:
// ops::group_decode_attention, what the former Llama engine called (one call per kv head over [Lk, D] rows,
// split over the same threads as the paged one's work items; AVX-512 or scalar, no AVX2 body), and
// for f32 ops::decode_attention, nn::MultiHeadAttention's (AVX-512 and AVX2 bodies, rows over the
// pool). Same queries, keys and values, same threads. A q8 row (--q8 1, the default) times the int8
// pool against group_decode_attention over the same rows dequantized to f32.
//
//   paged_attention_bench [--lk 1024,8192,32768] [--d 64,128] [--hkv 4] [--g 4] [--block 16]
//                         [--threads 1] [--min-time 0.5] [--f16 0|1|2 (2: both)] [--q8 1|0]
//                         [--clock wall|thread]
//                         [--shuffle 1|0 (0: blocks in pool order)] [--prefill 512,2048]
//
// --prefill L,...: causal prompt passes of L tokens against attn::attention instead (--prefill-kv
// f32|f16|q8: the paged pool's type).
//
// --clock thread times the calling thread's CPU time (with --threads 1 every kernel runs on it), which
// other jobs on a shared machine disturb far less.
// FLOPs of a step: 4 · H · Lk · D (q·k and p·v). Prints the CPU model, then one line per shape.
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>
#include <attn/ops/paged_attention.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/isa.h"

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return v;
}

// The pool's description for ops::paged_attention.
attn::ops::PagedKv pool_view(const void* data, attn::ops::KvDtype dtype, int64_t blocks, int64_t bt,
                             int64_t Hkv, int64_t D, int64_t stride) {
  attn::ops::PagedKv kv;
  kv.data = data;
  kv.dtype = dtype;
  kv.num_blocks = blocks;
  kv.block_tokens = bt;
  kv.kv_heads = Hkv;
  kv.head_dim = D;
  kv.block_stride = stride;
  return kv;
}

struct Result {
  double contiguous_s, decode_s, paged_s, max_diff;
};

template <typename T>
Result run(int64_t Lk, int64_t D, int64_t Hkv, int64_t G, int64_t bt, bool f16, bool shuffle,
           double min_time) {
  const int64_t H = Hkv * G, nb = (Lk + bt - 1) / bt, stride = 2 * Hkv * bt * D;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto store = [&](float x) -> T {
    if constexpr (sizeof(T) == 2)
      return attn::f32_to_f16(x);
    else
      return x;
  };
  // The same values in both layouts: contiguous [Hkv][Lk][D] (K and V), paged blocks in shuffled order.
  std::vector<T> kc(static_cast<std::size_t>(Hkv * Lk * D)), vc(kc.size());
  for (auto& x : kc) x = store(u(rng));
  for (auto& x : vc) x = store(u(rng));
  std::vector<int32_t> table(static_cast<std::size_t>(nb));
  std::iota(table.begin(), table.end(), 0);
  if (shuffle) std::shuffle(table.begin(), table.end(), rng);
  std::vector<T> pool(static_cast<std::size_t>(nb * stride));
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < Lk; ++j) {
      const int64_t off = table[static_cast<std::size_t>(j / bt)] * stride + (h * bt + j % bt) * D;
      std::memcpy(&pool[static_cast<std::size_t>(off)], &kc[static_cast<std::size_t>((h * Lk + j) * D)],
                  D * sizeof(T));
      std::memcpy(&pool[static_cast<std::size_t>(off + Hkv * bt * D)],
                  &vc[static_cast<std::size_t>((h * Lk + j) * D)], D * sizeof(T));
    }
  std::vector<float> q(static_cast<std::size_t>(H * D)), o1(q.size()), o2(q.size());
  for (auto& x : q) x = u(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int threads = attn::num_threads();
  std::vector<std::vector<float>> scratch(static_cast<std::size_t>(threads),
                                          std::vector<float>(static_cast<std::size_t>(G * Lk)));
  auto contiguous = [&] {
    attn::parallel_for(Hkv, 1, [&](int64_t h0, int64_t h1, int tid) {
      for (int64_t h = h0; h < h1; ++h) {
        const float* qh = q.data() + h * G * D;
        float* oh = o1.data() + h * G * D;
        float* sc = scratch[static_cast<std::size_t>(tid)].data();
        if constexpr (sizeof(T) == 2)
          attn::ops::group_decode_attention_f16(qh, G, kc.data() + h * Lk * D, vc.data() + h * Lk * D, D, Lk,
                                                D, scale, sc, oh);
        else
          attn::ops::group_decode_attention(qh, G, kc.data() + h * Lk * D, vc.data() + h * Lk * D, D, Lk, D,
                                            scale, sc, oh);
      }
    });
  };
  const attn::ops::PagedKv kv =
      pool_view(pool.data(), f16 ? attn::ops::KvDtype::f16 : attn::ops::KvDtype::f32, nb, bt, Hkv, D, stride);
  const attn::ops::PagedSequence seq{table.data(), nb, Lk, 1};
  attn::ops::PagedAttentionOptions opt;
  opt.scale = scale;
  auto paged = [&] { attn::ops::paged_attention(q.data(), H, kv, {&seq, 1}, opt, o2.data()); };
  Result r;
  r.decode_s = 0;
  if constexpr (sizeof(T) == 4) {
    using attn::Tensor;
    const Tensor qt = Tensor::borrow(q.data(), attn::DType::f32, {1, H, 1, D}, {H * D, D, D, 1}, [] {});
    const Tensor kt =
        Tensor::borrow(kc.data(), attn::DType::f32, {1, Hkv, Lk, D}, {Hkv * Lk * D, Lk * D, D, 1}, [] {});
    const Tensor vt =
        Tensor::borrow(vc.data(), attn::DType::f32, {1, Hkv, Lk, D}, {Hkv * Lk * D, Lk * D, D, 1}, [] {});
    r.decode_s =
        attn::bench::time_median([&] { (void)attn::ops::decode_attention(qt, kt, vt); }, min_time, 5);
  }
  r.contiguous_s = attn::bench::time_median(contiguous, min_time, 5);
  r.paged_s = attn::bench::time_median(paged, min_time, 5);
  r.max_diff = 0;
  for (std::size_t i = 0; i < o1.size(); ++i)
    r.max_diff = std::max<double>(r.max_diff, std::abs(o1[i] - o2[i]));
  return r;
}

// q8: the same step over an int8 pool (each row with its scale), against group_decode_attention over
// the rows it holds, dequantized to f32 (the group column).
Result run_q8(int64_t Lk, int64_t D, int64_t Hkv, int64_t G, int64_t bt, bool shuffle, double min_time) {
  const int64_t H = Hkv * G, nb = (Lk + bt - 1) / bt, stride = attn::ops::q8_block_bytes(Hkv, bt, D);
  const int64_t soff = attn::ops::q8_scales_offset(Hkv, bt, D);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<int32_t> table(static_cast<std::size_t>(nb));
  std::iota(table.begin(), table.end(), 0);
  if (shuffle) std::shuffle(table.begin(), table.end(), rng);
  std::vector<int8_t> pool(static_cast<std::size_t>(nb * stride));
  std::vector<float> kc(static_cast<std::size_t>(Hkv * Lk * D)), vc(kc.size()),
      row(static_cast<std::size_t>(D));
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < Lk; ++j)
      for (int v = 0; v < 2; ++v) {
        for (auto& x : row) x = u(rng);
        const int64_t b = table[static_cast<std::size_t>(j / bt)], r = h * bt + j % bt;
        int8_t* q = pool.data() + b * stride + (v ? Hkv * bt * D : 0) + r * D;
        float d;
        attn::ops::store_q8_row(row.data(), D, q, &d);
        std::memcpy(pool.data() + b * stride + soff + ((v ? Hkv * bt : 0) + r) * 4, &d, 4);
        float* deq = (v ? vc : kc).data() + (h * Lk + j) * D;
        for (int64_t i = 0; i < D; ++i) deq[i] = static_cast<float>(q[i]) * d;
      }
  std::vector<float> q(static_cast<std::size_t>(H * D)), o1(q.size()), o2(q.size());
  for (auto& x : q) x = u(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<std::vector<float>> scratch(static_cast<std::size_t>(attn::num_threads()),
                                          std::vector<float>(static_cast<std::size_t>(G * Lk)));
  auto contiguous = [&] {
    attn::parallel_for(Hkv, 1, [&](int64_t h0, int64_t h1, int tid) {
      for (int64_t h = h0; h < h1; ++h)
        attn::ops::group_decode_attention(
            q.data() + h * G * D, G, kc.data() + h * Lk * D, vc.data() + h * Lk * D, D, Lk, D, scale,
            scratch[static_cast<std::size_t>(tid)].data(), o1.data() + h * G * D);
    });
  };
  const attn::ops::PagedKv kv = pool_view(pool.data(), attn::ops::KvDtype::q8, nb, bt, Hkv, D, stride);
  const attn::ops::PagedSequence seq{table.data(), nb, Lk, 1};
  attn::ops::PagedAttentionOptions opt;
  opt.scale = scale;
  Result r;
  r.decode_s = 0;
  r.contiguous_s = attn::bench::time_median(contiguous, min_time, 5);
  r.paged_s = attn::bench::time_median(
      [&] {
        attn::ops::paged_attention(q.data(), H, kv, {&seq, 1}, opt, o2.data());
      },
      min_time, 5);
  r.max_diff = 0;
  for (std::size_t i = 0; i < o1.size(); ++i)
    r.max_diff = std::max<double>(r.max_diff, std::abs(o1[i] - o2[i]));
  return r;
}

// A prompt pass: L queries over L keys (causal), f32, the paged chunk against attn::attention (the
// fused op a model called for prompts before issue 37) on the same data. Returns (fused s, paged s).
// The pool holds the same values as f32, f16 or q8 (type; the fused op reads the f32 ones).
std::pair<double, double> prefill(int64_t L, int64_t D, int64_t Hkv, int64_t G, int64_t bt, double min_time,
                                  attn::ops::KvDtype type) {
  const int64_t H = Hkv * G, nb = (L + bt - 1) / bt, stride = 2 * Hkv * bt * D;
  const attn::Tensor q = attn::Tensor::empty({1, H, L, D}), k = attn::Tensor::empty({1, Hkv, L, D}),
                     v = attn::Tensor::empty({1, Hkv, L, D});
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const attn::Tensor* t : {&q, &k, &v})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = u(rng);
  std::vector<int32_t> table(static_cast<std::size_t>(nb));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> pool(static_cast<std::size_t>(nb * stride)), qr(static_cast<std::size_t>(L * H * D)),
      out(qr.size());
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < L; ++j) {
      const int64_t off = table[static_cast<std::size_t>(j / bt)] * stride + (h * bt + j % bt) * D;
      std::memcpy(&pool[static_cast<std::size_t>(off)], k.data<float>() + (h * L + j) * D, D * sizeof(float));
      std::memcpy(&pool[static_cast<std::size_t>(off + Hkv * bt * D)], v.data<float>() + (h * L + j) * D,
                  D * sizeof(float));
    }
  for (int64_t h = 0; h < H; ++h)  // q [1, H, L, D] -> [L, H, D]
    for (int64_t i = 0; i < L; ++i)
      std::memcpy(&qr[static_cast<std::size_t>((i * H + h) * D)], q.data<float>() + (h * L + i) * D,
                  D * sizeof(float));
  attn::AttentionOptions ao;
  ao.causal = true;
  ao.align = attn::Align::bottom_right;
  const double fused = attn::bench::time_median([&] { (void)attn::attention(q, k, v, ao); }, min_time, 3);
  attn::ops::PagedKv kv = pool_view(pool.data(), type, nb, bt, Hkv, D, stride);
  std::vector<uint16_t> pool16;
  std::vector<int8_t> pool8;
  if (type == attn::ops::KvDtype::f16) {
    pool16.resize(pool.size());
    attn::ops::store_f16(pool.data(), static_cast<int64_t>(pool.size()), pool16.data());
    kv.data = pool16.data();
  } else if (type == attn::ops::KvDtype::q8) {  // each row of D values with its scale
    const int64_t qs = attn::ops::q8_block_bytes(Hkv, bt, D), so = attn::ops::q8_scales_offset(Hkv, bt, D);
    pool8.resize(static_cast<std::size_t>(nb * qs));
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < 2 * Hkv * bt; ++r) {
        float d;
        attn::ops::store_q8_row(pool.data() + b * stride + r * D, D, pool8.data() + b * qs + r * D, &d);
        std::memcpy(pool8.data() + b * qs + so + r * 4, &d, 4);
      }
    kv.data = pool8.data();
    kv.block_stride = qs;
  }
  const attn::ops::PagedSequence seq{table.data(), nb, L, L};
  const double paged = attn::bench::time_median(
      [&] {
        attn::ops::paged_attention(qr.data(), H, kv, {&seq, 1}, {}, out.data());
      },
      min_time, 3);
  return {fused, paged};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> lks = {1024, 8192, 32768}, ds = {64, 128};
  int64_t Hkv = 4, G = 4, bt = 16, threads = 1, f16_mode = 2, shuffle = 1, q8 = 1;
  std::vector<int64_t> prefill_lengths;  // --prefill: prompt passes instead of decode steps
  attn::ops::KvDtype prefill_kv = attn::ops::KvDtype::f32;
  double min_time = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--lk")
      lks = parse_list(argv[i + 1]);
    else if (a == "--d")
      ds = parse_list(argv[i + 1]);
    else if (a == "--hkv")
      Hkv = std::atoll(argv[i + 1]);
    else if (a == "--g")
      G = std::atoll(argv[i + 1]);
    else if (a == "--block")
      bt = std::atoll(argv[i + 1]);
    else if (a == "--threads")
      threads = std::atoll(argv[i + 1]);
    else if (a == "--min-time")
      min_time = std::atof(argv[i + 1]);
    else if (a == "--prefill")
      prefill_lengths = parse_list(argv[i + 1]);
    else if (a == "--shuffle")
      shuffle = std::atoll(argv[i + 1]);
    else if (a == "--clock")
      attn::bench::use_thread_clock() = std::string(argv[i + 1]) == "thread";
    else if (a == "--f16")
      f16_mode = std::atoll(argv[i + 1]);
    else if (a == "--q8")
      q8 = std::atoll(argv[i + 1]);
    else if (a == "--prefill-kv")
      prefill_kv = attn::ops::parse_kv_dtype(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  attn::set_num_threads(static_cast<int>(threads));
  std::printf("cpu: %s, isa %s, %lld threads, Hkv %lld, G %lld, block %lld, clock %s\n", cpu_model().c_str(),
              attn::kernels::cpu::isa_str(attn::kernels::cpu::active_isa()), static_cast<long long>(threads),
              static_cast<long long>(Hkv), static_cast<long long>(G), static_cast<long long>(bt),
              attn::bench::clock_name());
  if (!prefill_lengths.empty()) {
    std::printf(
        "GFLOP/s of a causal prompt pass (paged: a %s pool); fused = attn::attention (f32), ratio = "
        "paged / fused\n",
        attn::ops::kv_dtype_name(prefill_kv));
    std::printf("%4s %6s %8s %8s %7s\n", "D", "L", "fused", "paged", "ratio");
    for (int64_t D : ds)
      for (int64_t L : prefill_lengths) {
        const auto [fused, paged] = prefill(L, D, Hkv, G, bt, min_time, prefill_kv);
        const double flops = 2.0 * static_cast<double>(Hkv * G * L * L * D);  // causal: half of 4·H·L²·D
        std::printf("%4lld %6lld %8.1f %8.1f %7.2f\n", static_cast<long long>(D), static_cast<long long>(L),
                    flops / fused / 1e9, flops / paged / 1e9, fused / paged);
      }
    return 0;
  }
  std::printf(
      "GFLOP/s of one decode step; ratio = paged / contiguous (group: group_decode_attention, mha: "
      "decode_attention)\n");
  std::printf("%-5s %4s %6s %8s %8s %8s %8s %8s %9s\n", "kv", "D", "Lk", "group", "mha", "paged", "/group",
              "/mha", "max|diff|");
  for (int64_t D : ds)
    for (int64_t Lk : lks)
      for (int type = 0; type < 3; ++type) {  // f32, f16, q8
        const bool f16 = type == 1;
        if (type == 2 ? !q8 : (f16_mode == 0 && f16) || (f16_mode == 1 && !f16)) continue;
        const Result r = type == 2 ? run_q8(Lk, D, Hkv, G, bt, shuffle != 0, min_time)
                         : f16     ? run<uint16_t>(Lk, D, Hkv, G, bt, true, shuffle != 0, min_time)
                                   : run<float>(Lk, D, Hkv, G, bt, false, shuffle != 0, min_time);
        const double flops = 4.0 * static_cast<double>(Hkv * G * Lk * D);
        char mha[16] = "       -", vs_mha[16] = "       -";  // no f16 contiguous MHA entry
        if (r.decode_s > 0) {
          std::snprintf(mha, sizeof mha, "%8.1f", flops / r.decode_s / 1e9);
          std::snprintf(vs_mha, sizeof vs_mha, "%8.2f", r.decode_s / r.paged_s);
        }
        std::printf("%-5s %4lld %6lld %8.1f %s %8.1f %8.2f %s %9.1e\n",
                    type == 2 ? "q8"
                    : f16     ? "f16"
                              : "f32",
                    static_cast<long long>(D), static_cast<long long>(Lk), flops / r.contiguous_s / 1e9, mha,
                    flops / r.paged_s / 1e9, r.contiguous_s / r.paged_s, vs_mha, r.max_diff);
      }
  return 0;
}

// The 8-bit-activation products (kernels/cpu/qdot.h) on the shapes of SmolLM2's matrices, for the
// prompt pass (many activation rows) and batched decoding (a few): the product as ops calls it
// (detail::qdot_rows_with, cut into cache tiles) against the same kernel called on the whole range
// at once (the loop order before the tiles), rows split over the pool the same way, and the two
// results compared bit for bit. GMAC/s counts M·N·K multiply-adds per second.
//
//   qdot_bench [--format q4_1|q8_0] [--m 1,4,16,64,256,512] [--threads N] [--time S] [--clock wall|thread]
// With --format q8_0 also the GGUF blocks as stored through the q8k kernels one activation row at a
// time (the runtime's path for Q8_0 weights where no repacked copy pays), and through ops' 8-bit GEMM
// over int8 panels (ops::QuantPanels / quant_matmul, activations quantized in the timed call), which the
// runtime does not use: its results differ from the one-row kernel's by f32 rounding.
// (--clock thread with --threads 1: the calling thread's CPU time, robust to other jobs on the cores)
#include <attn/core/parallel.h>
#include <attn/ops/quantized.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/q8k.h"
#include "kernels/cpu/qdot.h"

using namespace attn;
namespace k = attn::kernels;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::size_t p = 0;
  while (p < s.size()) {
    const std::size_t c = s.find(',', p);
    v.push_back(std::stoll(s.substr(p, c == std::string::npos ? std::string::npos : c - p)));
    if (c == std::string::npos) break;
    p = c + 1;
  }
  return v;
}

// Random GGUF blocks of format f: [N, K / 32] with f16 scales in a sane range.
std::vector<std::byte> random_blocks(k::QFormat f, int64_t N, int64_t K, std::mt19937& rng) {
  const int64_t bb = k::qformat_block_bytes(f), nb = N * (K / k::kQBlock);
  std::vector<std::byte> w(static_cast<std::size_t>(nb * bb));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : w) b = static_cast<std::byte>(byte(rng));
  const uint16_t d = 0x2000, m = 0xa000;  // f16 0.0078125 and -0.0078125
  for (int64_t b = 0; b < nb; ++b) {
    std::byte* p = w.data() + b * bb;
    std::memcpy(p, &d, 2);
    if (f == k::QFormat::q4_1) std::memcpy(p + 2, &m, 2);
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  std::string fmt = "q4_1", ms = "1,4,16,64,256,512";
  double min_time = 0.3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--format")
      fmt = v;
    else if (a == "--m")
      ms = v;
    else if (a == "--threads")
      set_num_threads(std::stoi(v));
    else if (a == "--time")
      min_time = std::stod(v);
    else if (a == "--clock")
      bench::use_thread_clock() = v == "thread";
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const k::QFormat f = fmt == "q8_0" ? k::QFormat::q8_0 : k::QFormat::q4_1;
  const k::cpu::QdotKernel kern = k::cpu::qdot_kernel();
  const char* kname = kern == k::cpu::QdotKernel::vnni   ? "vnni"
                      : kern == k::cpu::QdotKernel::avx2 ? "avx2"
                                                         : "scalar";
  std::printf("# qdot %s, kernel %s, %d threads, FMA peak %.1f GFLOP/s\n", fmt.c_str(), kname, num_threads(),
              bench::measure_fma_peak_gflops());
  std::printf("%-12s %5s %12s %12s %8s %9s%s\n", "N x K", "M", "whole GMAC/s", "tiled GMAC/s", "ratio",
              "same bits", f == k::QFormat::q8_0 ? "  gguf q8k GMAC/s  panels GEMM GMAC/s" : "");
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{576, 576}, {1536, 576}, {576, 1536}};
  std::mt19937 rng(7);
  for (const auto& [N, K] : shapes) {
    const std::vector<std::byte> blocks = random_blocks(f, N, K, rng);
    std::vector<std::byte> packed(static_cast<std::size_t>(N * k::qdot_row_bytes(f, K)));
    k::qdot_pack(f, blocks.data(), N, K, packed.data());
    for (const int64_t M : parse_list(ms)) {
      std::vector<float> x(static_cast<std::size_t>(M * K));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (float& v : x) v = nd(rng);
      const int64_t nbp = k::q8_padded_blocks(K), ldq = nbp * k::kQBlock;
      std::vector<int8_t> q(static_cast<std::size_t>(M * ldq));
      std::vector<float> d(static_cast<std::size_t>(M * nbp)), s(d.size()), sum(d.size());
      const k::Q8Rows xr{q.data(), d.data(), s.data(), sum.data(), ldq, nbp};
      k::cpu::quantize_q8(x.data(), M, K, K, xr);
      std::vector<float> y0(static_cast<std::size_t>(M * N)), y1(y0.size());
      const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(1, K * M));
      const auto whole = [&] {
        parallel_for(N, grain, [&](int64_t b, int64_t e, int) {
          if (kern == k::cpu::QdotKernel::vnni)
            k::cpu::detail::qdot_rows_vnni(f, packed.data(), b, e, K, xr, M, y0.data(), N, false);
          else if (kern == k::cpu::QdotKernel::avx2)
            k::cpu::detail::qdot_rows_avx2(f, packed.data(), b, e, K, xr, M, y0.data(), N, false);
          else
            k::cpu::detail::qdot_rows_scalar(f, packed.data(), b, e, K, xr, M, y0.data(), N, false);
        });
      };
      const auto tiled = [&] { k::cpu::qdot_matmul(f, packed.data(), N, K, xr, M, y1.data(), N, false); };
      const double tw = bench::time_median(whole, min_time), tt = bench::time_median(tiled, min_time);
      // Q8_0 only: the GGUF blocks as stored, one activation row at a time (the runtime's path)
      double tk = 0;
      if (f == k::QFormat::q8_0) {
        std::vector<int8_t> kq(static_cast<std::size_t>(M * K));
        std::vector<float> kd(static_cast<std::size_t>(M * K / 32));
        std::vector<int32_t> kb(static_cast<std::size_t>(M * K / 16));
        k::cpu::q8k_quantize(k::Q8Kind::q8_0, x.data(), M, K, K, kq.data(), kd.data(), kb.data());
        std::vector<float> y2(y0.size());
        tk = bench::time_median(
            [&] {
              parallel_for(N, grain, [&](int64_t b, int64_t e, int) {
                for (int64_t m = 0; m < M; ++m) {
                  k::Q8KRows one;
                  one.kind = k::Q8Kind::q8_0, one.M = 1, one.K = K;
                  one.q = kq.data() + m * K, one.d = kd.data() + m * (K / 32),
                  one.bsum = kb.data() + m * (K / 16);
                  one.ldq = K, one.ldd = K / 32, one.ldb = K / 16;
                  k::cpu::q8k_dot_rows(k::KFormat::q8_0, blocks.data(), b, e, K, one, y2.data() + m * N, N,
                                       false);
                }
              });
            },
            min_time);
      }
      // Q8_0 only: the same blocks through ops' 8-bit GEMM over int8 panels (ops::QuantPanels, quant_matmul:
      // the old Gemma 3 engine's prompt products, not used by the runtime), activations quantized in the
      // call.
      double tg = 0;
      if (f == k::QFormat::q8_0) {
        const ops::QuantPanels panels(ops::QuantMatrix(ops::QuantFormat::q8_0, blocks.data(), N, K));
        ops::QuantActivations act;
        std::vector<float> y3(y0.size());
        tg = bench::time_median(
            [&] {
              act.quantize(ops::QuantFormat::q8_0, x.data(), M, K, K);
              ops::quant_matmul(panels, act, y3.data(), N, false);
            },
            min_time);
      }
      const double macs = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
      const bool same = std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)) == 0;
      std::printf("%5lld x %-5lld %5lld %12.1f %12.1f %7.2fx %9s", static_cast<long long>(N),
                  static_cast<long long>(K), static_cast<long long>(M), macs / tw * 1e-9, macs / tt * 1e-9,
                  tw / tt, same ? "yes" : "NO");
      if (tk > 0) std::printf(" %16.1f %16.1f", macs / tk * 1e-9, macs / tg * 1e-9);
      std::printf("\n");
    }
  }
  return 0;
}

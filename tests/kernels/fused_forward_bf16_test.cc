// The fused CPU forward on bf16 q/k/v against the reference computed in f64
// from the same bf16-rounded inputs. On a CPU with AVX512_BF16 and the AVX-512
// kernels active, tiles of more than 4 query rows run the vdpbf16ps kernels
// (P rounded to bf16 for P·V); other ISAs and small tiles convert to f32. Every
// case runs on every available instruction set (force_isa) with 1..4 threads.
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/isa.h"
#include "kernels/isa_test_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using kernels::cpu::Isa;
using testing::random_mask;
using testing::random_uniform;

enum class Layout { contiguous, permuted };

struct Case {
  std::string name;
  int64_t B = 1, H = 1, Hkv = 1, Lq = 1, Lk = 1, D = 16;
  bool causal = false;
  Align align = Align::top_left;
  int64_t window_left = -1;
  std::vector<int64_t> key_lengths = {};
  Shape allow_shape = {};
  Shape bias_shape = {};
  double softcap = 0;
  double dropout = 0;
  Layout layout = Layout::contiguous;
  int64_t key_step = -1;  // key rows j >= key_step multiplied by 1024 (exact): logits jump by hundreds there
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// [B, H, L, D] bf16 tensor, uniform in [-1, 1), optionally stored as [B, L, H, D].
Tensor make_input(int64_t B, int64_t H, int64_t L, int64_t D, uint64_t seed, Layout layout) {
  Tensor t = random_uniform({B, H, L, D}, seed, -1, 1, DType::f64).to(DType::bf16);
  if (layout == Layout::permuted) {
    Tensor s = Tensor::empty({B, L, H, D}, DType::bf16);
    s.copy_from(t.permute({0, 2, 1, 3}));
    return s.permute({0, 2, 1, 3});
  }
  return t;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(std::move(c)); };
  // Head sizes odd and off the SIMD width (pairs along D), odd key counts (pairs along keys).
  for (int64_t D : {1, 2, 7, 16, 33, 64, 80, 128}) {
    Case c;
    c.name = std::string("D").append(std::to_string(D));
    c.B = 2, c.H = 2, c.Hkv = 2, c.Lq = 37, c.Lk = 45, c.D = D;
    add(c);
  }
  add({.name = "ManyTiles", .B = 1, .H = 2, .Hkv = 2, .Lq = 200, .Lk = 333, .D = 64});
  // Unmasked tiles take P's pairs from the scores kernel's epilogue (AVX-512 scores_exp_pairs) against the
  // running maxima; a jump of hundreds inside a key tile overflows exp there unless the tile is redone
  // with scores + softmax_pairs. Odd key counts (the last pair padded with 0) and an odd D.
  add({.name = "KeyStep", .B = 1, .H = 2, .Hkv = 2, .Lq = 70, .Lk = 401, .D = 64, .key_step = 250});
  // The jump inside the first key tile, past the first block of keys that seeds the maxima there.
  add({.name = "KeyStepFirstTile", .B = 1, .H = 2, .Hkv = 2, .Lq = 70, .Lk = 150, .D = 64, .key_step = 13});
  add({.name = "KeyStepOddD", .B = 2, .H = 1, .Hkv = 1, .Lq = 20, .Lk = 301, .D = 33, .key_step = 100});
  add({.name = "OddKeysOneKey", .B = 1, .H = 1, .Hkv = 1, .Lq = 20, .Lk = 1, .D = 8});
  add({.name = "CausalSquare", .B = 1, .H = 2, .Hkv = 2, .Lq = 130, .Lk = 130, .D = 64, .causal = true});
  add({.name = "CausalBottomRightTall",
       .B = 1,
       .H = 2,
       .Hkv = 1,
       .Lq = 150,
       .Lk = 70,
       .D = 32,
       .causal = true,
       .align = Align::bottom_right});
  add({.name = "WindowKeyLengths",
       .B = 2,
       .H = 2,
       .Hkv = 2,
       .Lq = 90,
       .Lk = 97,
       .D = 48,
       .causal = true,
       .window_left = 30,
       .key_lengths = {97, 0}});
  // Values paired once per call (several query tiles per kv head): key ranges starting at odd and even
  // keys (the window), tiles that end inside the range with an odd count, and the last tile at Lk.
  add({.name = "WindowManyTilesPrepackedValues",
       .B = 1,
       .H = 4,
       .Hkv = 2,
       .Lq = 300,
       .Lk = 301,
       .D = 64,
       .causal = true,
       .align = Align::bottom_right,
       .window_left = 101});
  // GQA decode: 8 query heads per kv head fill one tile, long keys split across threads.
  add({.name = "GqaDecodeLong", .B = 1, .H = 16, .Hkv = 2, .Lq = 1, .Lk = 2001, .D = 128});
  // Decode without GQA: converted to f32 (row path).
  add({.name = "DecodeNoGqa", .B = 1, .H = 2, .Hkv = 2, .Lq = 1, .Lk = 300, .D = 64});
  add({.name = "MasksBiasSoftcap",
       .B = 2,
       .H = 2,
       .Hkv = 1,
       .Lq = 33,
       .Lk = 65,
       .D = 40,
       .allow_shape = {2, 1, 33, 65},
       .bias_shape = {1, 2, 1, 65},
       .softcap = 3.0});
  add({.name = "Dropout", .B = 1, .H = 2, .Hkv = 2, .Lq = 40, .Lk = 61, .D = 24, .dropout = 0.3});
  add({.name = "Permuted",
       .B = 2,
       .H = 3,
       .Hkv = 3,
       .Lq = 35,
       .Lk = 50,
       .D = 20,
       .causal = true,
       .layout = Layout::permuted});
  return v;
}

using testing::available_isas;
using FusedForwardBf16 = testing::IsaCaseTest<Case>;

TEST_P(FusedForwardBf16, MatchesReferenceOnRoundedInputs) {
  const auto& [c, isa] = GetParam();
  Tensor q = make_input(c.B, c.H, c.Lq, c.D, 1, c.layout);
  Tensor k = make_input(c.B, c.Hkv, c.Lk, c.D, 2, c.layout);
  Tensor v = make_input(c.B, c.Hkv, c.Lk, c.D, 3, c.layout);
  if (c.key_step >= 0) {
    ASSERT_EQ(c.layout, Layout::contiguous);
    Tensor kf = k.to(DType::f32);
    float* p = kf.data<float>();
    for (int64_t row = 0; row < c.B * c.Hkv * c.Lk; ++row)
      if (row % c.Lk >= c.key_step)
        for (int64_t d = 0; d < c.D; ++d) p[row * c.D + d] *= 1024.f;
    k = kf.to(DType::bf16);  // exact: a power of two
  }
  AttentionOptions o;
  o.causal = c.causal;
  o.align = c.align;
  o.window_left = c.window_left;
  o.key_lengths = c.key_lengths;
  o.softcap = c.softcap;
  o.dropout_p = c.dropout;
  o.dropout_seed = 99;
  if (!c.allow_shape.empty()) o.allow = random_mask(c.allow_shape, 77, 0.8);
  if (!c.bias_shape.empty()) o.bias = random_uniform(c.bias_shape, 88, -2, 2);
  o.backend = Backend::reference;
  // bf16 -> f64 is exact: the reference sees exactly the values the kernel reads.
  const AttentionResult ref = attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), o);
  o.backend = Backend::fused;
  kernels::cpu::force_isa(isa);
  for (int threads = 1; threads <= 4; ++threads) {
    SCOPED_TRACE("threads = " + std::to_string(threads));
    set_num_threads(threads);
    const AttentionResult r = attention(q, k, v, o);
    EXPECT_EQ(r.out.dtype(), DType::f32);
    EXPECT_ALL_CLOSE(r.out, ref.out, testing::tol::kFusedForwardBf16Out);
    EXPECT_ALL_CLOSE(r.lse, ref.lse, testing::tol::kFusedForward);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, FusedForwardBf16,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(available_isas())),
                         testing::isa_case_name<Case>);

// The bf16 kernels are offered exactly when AVX-512 is active and the CPU has AVX512_BF16.
TEST(FusedForwardBf16Edge, AvailabilityFollowsIsaAndCpu) {
  __builtin_cpu_init();
  const bool cpu_bf16 = __builtin_cpu_supports("avx512bf16");
  for (Isa isa : available_isas()) {
    kernels::cpu::force_isa(isa);
    EXPECT_EQ(kernels::cpu::fused_bf16_available(), isa == Isa::avx512 && cpu_bf16)
        << kernels::cpu::isa_str(isa);
  }
  kernels::cpu::force_isa(std::nullopt);
}

}  // namespace
}  // namespace attn

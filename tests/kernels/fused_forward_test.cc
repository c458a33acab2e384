// The fused CPU forward kernel against the reference computed in f64 from the
// same seeded inputs. One table of cases; every case runs on every available
// instruction set (force_isa) and with 1..4 threads, and checks out, lse and,
// where asked, the captured weights.
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>
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

enum class Capture { none, all, subset };
enum class Layout { contiguous, permuted, strided };
enum class Values { uniform, huge };

struct Case {
  std::string name;
  int64_t B = 1, H = 1, Hkv = 1, Lq = 1, Lk = 1, D = 16;
  bool causal = false;
  Align align = Align::top_left;
  int64_t window_left = -1, window_right = -1;
  std::vector<int64_t> key_lengths = {};
  Shape allow_shape = {};  // empty: no allow mask
  double allow_p = 0.8;
  bool allow_masks_row = false;  // additionally zero one whole row of the allow mask
  Shape bias_shape = {};         // empty: no bias
  bool bias_has_neg_inf = false;
  double softcap = 0;
  double dropout = 0;
  std::optional<double> scale = std::nullopt;
  Layout layout = Layout::contiguous;
  Values values = Values::uniform;
  Capture capture = Capture::none;
  double rising = 0;      // key row j multiplied by 1 + rising * j (logits that grow along the keys)
  int64_t key_step = -1;  // key rows j < key_step multiplied by 1/64 (exact: with huge values, logits
                          // jump from ~±156 to ~±1e4 at key_step)
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// [B, H, L, D] tensor of the requested layout (same values for every layout).
Tensor make_input(int64_t B, int64_t H, int64_t L, int64_t D, uint64_t seed, const Case& c, bool is_query) {
  Tensor t;
  if (c.values == Values::huge) {
    // Logits near ±1e4 that fp32 computes exactly: component 0 is ±100, the rest are multiples of 1/8
    // in [-1, 1], and scale = 1. Row signs are random, so both +1e4 and −1e4 logits occur.
    t = Tensor::empty({B, H, L, D}, DType::f64);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> eighth(-8, 8), sign(0, 1);
    double* p = t.data<double>();
    for (int64_t r = 0; r < B * H * L; ++r)
      for (int64_t d = 0; d < D; ++d)
        p[r * D + d] = d == 0 ? (sign(rng) ? 100.0 : -100.0) : eighth(rng) / 8.0;
    (void)is_query;
  } else {
    t = random_uniform({B, H, L, D}, seed, -1, 1, DType::f64);
  }
  t = t.to(DType::f32);
  if (c.layout == Layout::permuted) {
    // Stored as [B, L, H, D], viewed as [B, H, L, D].
    Tensor s = Tensor::empty({B, L, H, D});
    s.copy_from(t.permute({0, 2, 1, 3}));
    return s.permute({0, 2, 1, 3});
  }
  if (c.layout == Layout::strided) {
    // Every other row of a [B, H, 2L, D + 3] buffer, first D columns.
    Tensor s = random_uniform({B, H, 2 * L, D + 3}, seed + 99);
    Tensor view = s.slice(2, 0, 2 * L, 2).slice(3, 0, D);
    view.copy_from(t);
    return view;
  }
  return t;
}

AttentionOptions make_options(const Case& c) {
  AttentionOptions o;
  o.scale = c.values == Values::huge ? std::optional<double>(1.0) : c.scale;
  o.causal = c.causal;
  o.align = c.align;
  o.window_left = c.window_left;
  o.window_right = c.window_right;
  o.key_lengths = c.key_lengths;
  o.softcap = c.softcap;
  o.dropout_p = c.dropout;
  o.dropout_seed = 1234;
  if (!c.allow_shape.empty()) {
    o.allow = random_mask(c.allow_shape, 77, c.allow_p);
    if (c.allow_masks_row) {  // the last "row" of the mask (all keys of one query) is blocked
      std::vector<int64_t> idx(c.allow_shape.size(), 0);
      if (idx.size() >= 2) idx[idx.size() - 2] = c.allow_shape[idx.size() - 2] - 1;
      for (int64_t j = 0; j < c.allow_shape.back(); ++j) {
        idx.back() = j;
        o.allow.set(idx, 0);
      }
    }
  }
  if (!c.bias_shape.empty()) {
    o.bias = random_uniform(c.bias_shape, 88, -2, 2);
    if (c.bias_has_neg_inf) {
      float* p = o.bias.data<float>();
      for (int64_t x = 0; x < o.bias.numel(); x += 3) p[x] = -std::numeric_limits<float>::infinity();
    }
  }
  if (c.capture != Capture::none) {
    o.capture.enabled = true;
    if (c.capture == Capture::subset) {
      o.capture.batches = {c.B - 1};
      o.capture.heads = c.H > 1 ? std::vector<int64_t>{c.H - 1, 0} : std::vector<int64_t>{0};
      o.capture.rows = c.Lq > 2 ? std::vector<int64_t>{c.Lq - 1, 0, c.Lq / 2, 0} : std::vector<int64_t>{0};
    }
  }
  return o;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(std::move(c)); };
  // Head sizes off the SIMD width, size 1 everywhere, Lq != Lk both ways.
  for (int64_t D : {1, 7, 16, 33, 64, 65, 80, 128}) {
    Case c;
    c.name = std::string("D").append(std::to_string(D));
    c.B = 2, c.H = 2, c.Hkv = 2, c.Lq = 37, c.Lk = 45, c.D = D;
    add(c);
  }
  add({.name = "AllOnes", .B = 1, .H = 1, .Hkv = 1, .Lq = 1, .Lk = 1, .D = 1});
  add({.name = "LqGreaterLk", .B = 1, .H = 2, .Hkv = 2, .Lq = 150, .Lk = 70, .D = 32});
  add({.name = "LqLessLk", .B = 2, .H = 1, .Hkv = 1, .Lq = 9, .Lk = 201, .D = 40});
  add({.name = "ManyTiles", .B = 1, .H = 3, .Hkv = 3, .Lq = 200, .Lk = 333, .D = 64});
  // Unmasked tiles exponentiate against the rows' running maxima in the scores kernel (AVX-512
  // scores_exp) unless a logit passes its row's maximum by more than the headroom; then the tile is redone
  // with a plain softmax. Keys scaled along j: slowly (the maxima creep up inside the headroom: no
  // fallback, maxima that are not the exact ones), fast (jumps of ~20 per key tile: fallback on most tiles),
  // and in between (both paths in one row), with a query tail, a short last key tile and 128-row tiles.
  // HugeStep: a jump of ~1e4 inside a key tile, which overflows exp unless the tile is redone.
  // HugeStepFirstTile: the jump inside the first key tile, past its first block of keys (whose logits seed
  // the maxima there), so the first tile is redone from maxima set back to −inf.
  add({.name = "RisingSlow", .B = 1, .H = 2, .Hkv = 2, .Lq = 70, .Lk = 700, .D = 64, .rising = 0.01});
  add({.name = "RisingMixed", .B = 1, .H = 2, .Hkv = 2, .Lq = 130, .Lk = 500, .D = 64, .rising = 0.06});
  add({.name = "RisingFast", .B = 2, .H = 1, .Hkv = 1, .Lq = 33, .Lk = 400, .D = 32, .rising = 0.25});
  // Dropout after P from the scores kernel's epilogue (l stays pre-dropout).
  add({.name = "DropoutManyTiles", .B = 1, .H = 2, .Hkv = 2, .Lq = 70, .Lk = 400, .D = 32, .dropout = 0.3});
  add({.name = "HugeStep",
       .B = 1,
       .H = 2,
       .Hkv = 2,
       .Lq = 70,
       .Lk = 400,
       .D = 32,
       .values = Values::huge,
       .key_step = 200});
  add({.name = "HugeStepFirstTile",
       .B = 1,
       .H = 2,
       .Hkv = 2,
       .Lq = 70,
       .Lk = 150,
       .D = 32,
       .values = Values::huge,
       .key_step = 11});
  add({.name = "RisingDoubleTiles",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 150,
       .Lk = 2100,
       .D = 128,
       .rising = 0.004});
  // Long keys at D >= 96 (K and V of a head over 2 MiB): tiles of twice the query rows; a partial second
  // tile, the causal diagonal across both 64-row halves of a tile, and GQA 2.
  add({.name = "LongKeysDoubleTiles",
       .B = 1,
       .H = 2,
       .Hkv = 1,
       .Lq = 150,
       .Lk = 2100,
       .D = 128,
       .causal = true,
       .align = Align::bottom_right});
  // The scores kernels fetch the next key tile's keys (the range's first tile after its last) and the tile's
  // values: key ranges that start and end inside tiles (window, key lengths), a short last key tile, and a D
  // whose rows are not whole cache lines; results must not depend on any of it.
  add({.name = "KeyStreamsWindowTail",
       .B = 2,
       .H = 2,
       .Hkv = 1,
       .Lq = 130,
       .Lk = 1000,
       .D = 72,
       .causal = true,
       .window_left = 300,
       .key_lengths = {1000, 517},
       .layout = Layout::strided});
  // Decode: Lq = 1 with long Lk (split-KV when threads > 1), with and without GQA packing.
  add({.name = "DecodeLong", .B = 1, .H = 2, .Hkv = 2, .Lq = 1, .Lk = 3000, .D = 64});
  add({.name = "DecodeLongCausalBR",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 1,
       .Lk = 2500,
       .D = 48,
       .causal = true,
       .align = Align::bottom_right});
  add({.name = "DecodeGqaKeyLengths",
       .B = 2,
       .H = 8,
       .Hkv = 2,
       .Lq = 1,
       .Lk = 1800,
       .D = 64,
       .key_lengths = {1799, 3}});
  add({.name = "DecodeGqaLq3",
       .B = 1,
       .H = 8,
       .Hkv = 2,
       .Lq = 3,
       .Lk = 600,
       .D = 32,
       .causal = true,
       .align = Align::bottom_right});
  add({.name = "DecodeGqaBiasAllowSoftcap",
       .B = 2,
       .H = 8,
       .Hkv = 2,
       .Lq = 2,
       .Lk = 300,
       .D = 32,
       .allow_shape = {8, 1, 300},
       .bias_shape = {1, 8, 2, 300},
       .softcap = 4.0,
       .capture = Capture::subset});
  // Row path (tiles of at most 4 (scalar) or 8 (AVX-512) query rows: decode without GQA, GQA 2 with Lq = 1,
  // the last rows of a long query): head sizes and key counts off the SIMD width, every mask kind, dropout,
  // layouts.
  for (int64_t Lq : {1, 2, 3, 4, 5, 8, 9}) {
    for (int64_t D : {1, 15, 16, 33, 80, 128}) {
      Case c;
      c.name = "RowsLq" + std::to_string(Lq) + "D" + std::to_string(D);
      c.B = 2, c.H = 2, c.Hkv = 2, c.Lq = Lq, c.Lk = 17 + 31 * D % 211, c.D = D;
      add(c);
    }
  }
  add({.name = "RowsCausalTopLeft", .B = 1, .H = 2, .Hkv = 2, .Lq = 3, .Lk = 200, .D = 64, .causal = true});
  add({.name = "RowsWindowKeyLengths",
       .B = 2,
       .H = 2,
       .Hkv = 2,
       .Lq = 2,
       .Lk = 500,
       .D = 32,
       .causal = true,
       .align = Align::bottom_right,
       .window_left = 100,
       .key_lengths = {400, 0}});
  add({.name = "RowsGqa2", .B = 1, .H = 4, .Hkv = 2, .Lq = 1, .Lk = 333, .D = 64});
  add({.name = "RowsBiasAllowSoftcap",
       .B = 2,
       .H = 2,
       .Hkv = 2,
       .Lq = 3,
       .Lk = 250,
       .D = 40,
       .allow_shape = {2, 1, 3, 250},
       .allow_masks_row = true,
       .bias_shape = {1, 2, 1, 250},
       .bias_has_neg_inf = true,
       .softcap = 3.0});
  add({.name = "RowsDropout", .B = 1, .H = 3, .Hkv = 3, .Lq = 2, .Lk = 300, .D = 24, .dropout = 0.4});
  add({.name = "RowsPermuted",
       .B = 2,
       .H = 3,
       .Hkv = 3,
       .Lq = 1,
       .Lk = 150,
       .D = 48,
       .layout = Layout::permuted});
  add({.name = "RowsStrided",
       .B = 1,
       .H = 2,
       .Hkv = 2,
       .Lq = 4,
       .Lk = 99,
       .D = 33,
       .layout = Layout::strided});
  add({.name = "RowsHugeLogits",
       .B = 1,
       .H = 2,
       .Hkv = 2,
       .Lq = 1,
       .Lk = 130,
       .D = 4,
       .values = Values::huge});
  add({.name = "RowsLongSplit", .B = 1, .H = 1, .Hkv = 1, .Lq = 1, .Lk = 5000, .D = 128});
  // GQA ratios and MQA.
  for (int64_t Hkv : {8, 4, 2, 1}) {
    Case c;
    c.name = std::string("Gqa").append(std::to_string(8 / Hkv));
    c.B = 1, c.H = 8, c.Hkv = Hkv, c.Lq = 20, c.Lk = 31, c.D = 24;
    add(c);
  }
  // Causal, both alignments, Lq vs Lk both ways (bottom-right with Lq > Lk has fully masked rows).
  add({.name = "CausalSquare", .B = 1, .H = 2, .Hkv = 2, .Lq = 130, .Lk = 130, .D = 64, .causal = true});
  add({.name = "CausalTopLeftWide", .B = 1, .H = 1, .Hkv = 1, .Lq = 70, .Lk = 150, .D = 32, .causal = true});
  add({.name = "CausalBottomRightWide",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 70,
       .Lk = 150,
       .D = 32,
       .causal = true,
       .align = Align::bottom_right});
  add({.name = "CausalBottomRightTall",
       .B = 1,
       .H = 2,
       .Hkv = 1,
       .Lq = 150,
       .Lk = 70,
       .D = 32,
       .causal = true,
       .align = Align::bottom_right});
  add({.name = "CausalTopLeftTall", .B = 1, .H = 1, .Hkv = 1, .Lq = 150, .Lk = 70, .D = 20, .causal = true});
  // Windows.
  add({.name = "WindowLeft",
       .B = 1,
       .H = 2,
       .Hkv = 2,
       .Lq = 140,
       .Lk = 140,
       .D = 32,
       .causal = true,
       .window_left = 17});
  add({.name = "WindowBoth",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 100,
       .Lk = 160,
       .D = 16,
       .window_left = 5,
       .window_right = 9});
  add({.name = "WindowBottomRight",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 50,
       .Lk = 90,
       .D = 16,
       .align = Align::bottom_right,
       .window_left = 20,
       .window_right = 0});
  add({.name = "WindowRightOnly", .B = 1, .H = 1, .Hkv = 1, .Lq = 80, .Lk = 80, .D = 8, .window_right = 3});
  // Key lengths, including 0 (every row of that batch fully masked).
  add({.name = "KeyLengths",
       .B = 3,
       .H = 2,
       .Hkv = 2,
       .Lq = 30,
       .Lk = 77,
       .D = 32,
       .key_lengths = {77, 0, 13}});
  add({.name = "KeyLengthsCausal",
       .B = 2,
       .H = 1,
       .Hkv = 1,
       .Lq = 90,
       .Lk = 90,
       .D = 32,
       .causal = true,
       .key_lengths = {50, 1}});
  // allow and bias masks with broadcast shapes.
  add({.name = "AllowLqLk", .B = 2, .H = 2, .Hkv = 2, .Lq = 40, .Lk = 70, .D = 32, .allow_shape = {40, 70}});
  add({.name = "AllowB11Lk",
       .B = 2,
       .H = 3,
       .Hkv = 3,
       .Lq = 40,
       .Lk = 70,
       .D = 32,
       .allow_shape = {2, 1, 1, 70},
       .allow_p = 0.6});
  add({.name = "Allow1HLqLk",
       .B = 2,
       .H = 2,
       .Hkv = 1,
       .Lq = 33,
       .Lk = 65,
       .D = 16,
       .allow_shape = {1, 2, 33, 65},
       .allow_masks_row = true});
  add({.name = "AllowFull",
       .B = 2,
       .H = 2,
       .Hkv = 2,
       .Lq = 17,
       .Lk = 90,
       .D = 16,
       .allow_shape = {2, 2, 17, 90},
       .allow_p = 0.3,
       .allow_masks_row = true});
  add({.name = "AllowLk", .B = 1, .H = 2, .Hkv = 2, .Lq = 20, .Lk = 50, .D = 16, .allow_shape = {50}});
  add({.name = "BiasLqLk", .B = 2, .H = 2, .Hkv = 2, .Lq = 40, .Lk = 70, .D = 32, .bias_shape = {40, 70}});
  add({.name = "BiasB11Lk",
       .B = 2,
       .H = 2,
       .Hkv = 2,
       .Lq = 40,
       .Lk = 70,
       .D = 32,
       .bias_shape = {2, 1, 1, 70}});
  add({.name = "Bias1HLqLkNegInf",
       .B = 2,
       .H = 2,
       .Hkv = 2,
       .Lq = 24,
       .Lk = 66,
       .D = 32,
       .bias_shape = {1, 2, 24, 66},
       .bias_has_neg_inf = true});
  add({.name = "BiasH11", .B = 1, .H = 4, .Hkv = 2, .Lq = 24, .Lk = 66, .D = 32, .bias_shape = {4, 1, 1}});
  // Combinations.
  add({.name = "CombinedMasks",
       .B = 2,
       .H = 4,
       .Hkv = 2,
       .Lq = 70,
       .Lk = 90,
       .D = 48,
       .causal = true,
       .align = Align::bottom_right,
       .window_left = 40,
       .key_lengths = {90, 60},
       .allow_shape = {2, 1, 70, 90},
       .allow_p = 0.85,
       .bias_shape = {1, 4, 1, 90},
       .softcap = 5.0});
  add({.name = "CombinedDropout",
       .B = 2,
       .H = 2,
       .Hkv = 1,
       .Lq = 40,
       .Lk = 60,
       .D = 24,
       .causal = true,
       .key_lengths = {60, 31},
       .bias_shape = {40, 60},
       .dropout = 0.3});
  // Softcap, dropout, scale.
  add({.name = "Softcap",
       .B = 1,
       .H = 2,
       .Hkv = 2,
       .Lq = 50,
       .Lk = 70,
       .D = 64,
       .softcap = 2.0,
       .scale = 3.0});
  add({.name = "Dropout", .B = 2, .H = 2, .Hkv = 2, .Lq = 33, .Lk = 47, .D = 16, .dropout = 0.25});
  add({.name = "DropoutCausalLong",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 100,
       .Lk = 100,
       .D = 32,
       .causal = true,
       .dropout = 0.6});
  add({.name = "DropoutDecode", .B = 1, .H = 1, .Hkv = 1, .Lq = 1, .Lk = 1200, .D = 16, .dropout = 0.5});
  // Huge logits (±1e4, exact in fp32) must not overflow.
  add({.name = "HugeLogits", .B = 1, .H = 2, .Hkv = 2, .Lq = 40, .Lk = 90, .D = 4, .values = Values::huge});
  add({.name = "HugeLogitsCausal",
       .B = 1,
       .H = 1,
       .Hkv = 1,
       .Lq = 70,
       .Lk = 70,
       .D = 3,
       .causal = true,
       .values = Values::huge});
  // Non-contiguous q/k/v.
  add({.name = "Permuted",
       .B = 2,
       .H = 3,
       .Hkv = 3,
       .Lq = 35,
       .Lk = 50,
       .D = 20,
       .layout = Layout::permuted});
  add({.name = "PermutedGqaCausal",
       .B = 1,
       .H = 4,
       .Hkv = 2,
       .Lq = 70,
       .Lk = 70,
       .D = 64,
       .causal = true,
       .layout = Layout::permuted});
  add({.name = "Strided", .B = 1, .H = 2, .Hkv = 1, .Lq = 30, .Lk = 45, .D = 33, .layout = Layout::strided});
  // Weight capture: all rows, and a subset with repeated, unsorted indices.
  add({.name = "CaptureAll",
       .B = 2,
       .H = 2,
       .Hkv = 1,
       .Lq = 70,
       .Lk = 80,
       .D = 16,
       .causal = true,
       .align = Align::bottom_right,
       .capture = Capture::all});
  add({.name = "CaptureSubsetMasked",
       .B = 2,
       .H = 3,
       .Hkv = 3,
       .Lq = 33,
       .Lk = 90,
       .D = 16,
       .key_lengths = {90, 40},
       .allow_shape = {33, 90},
       .allow_masks_row = true,
       .bias_shape = {3, 1, 90},
       .softcap = 3.0,
       .capture = Capture::subset});
  add({.name = "CaptureDecode",
       .B = 1,
       .H = 4,
       .Hkv = 2,
       .Lq = 1,
       .Lk = 700,
       .D = 32,
       .dropout = 0.2,
       .capture = Capture::all});
  return v;
}

using testing::available_isas;
using FusedForward = testing::IsaCaseTest<Case>;

TEST_P(FusedForward, MatchesReference) {
  const auto& [c, isa] = GetParam();
  Tensor q = make_input(c.B, c.H, c.Lq, c.D, 1, c, true);
  Tensor k = make_input(c.B, c.Hkv, c.Lk, c.D, 2, c, false);
  Tensor v = make_input(c.B, c.Hkv, c.Lk, c.D, 3, c, false);
  if (c.key_step >= 0) {
    ASSERT_EQ(c.layout, Layout::contiguous);
    float* p = k.data<float>();
    for (int64_t row = 0; row < c.B * c.Hkv * c.Lk; ++row)
      if (row % c.Lk < c.key_step)
        for (int64_t d = 0; d < c.D; ++d) p[row * c.D + d] *= 1.f / 64;
  }
  if (c.rising > 0) {
    ASSERT_EQ(c.layout, Layout::contiguous);
    float* p = k.data<float>();
    for (int64_t row = 0; row < c.B * c.Hkv * c.Lk; ++row)
      for (int64_t d = 0; d < c.D; ++d) p[row * c.D + d] *= static_cast<float>(1 + c.rising * (row % c.Lk));
  }
  AttentionOptions o = make_options(c);
  o.backend = Backend::reference;
  const AttentionResult ref = attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), o);
  o.backend = Backend::fused;
  kernels::cpu::force_isa(isa);
  ASSERT_STREQ(kernels::cpu::isa_name(), kernels::cpu::isa_str(isa));
  for (int threads = 1; threads <= 4; ++threads) {
    SCOPED_TRACE("threads = " + std::to_string(threads));
    set_num_threads(threads);
    const AttentionResult r = attention(q, k, v, o);
    EXPECT_ALL_CLOSE(r.out, ref.out, testing::tol::kFusedForward);
    EXPECT_ALL_CLOSE(r.lse, ref.lse, testing::tol::kFusedForward);
    if (c.capture != Capture::none) {
      EXPECT_ALL_CLOSE(r.weights, ref.weights, testing::tol::kWeights);
    }
    for (double x : r.out.to_vector()) ASSERT_FALSE(std::isnan(x));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, FusedForward,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(available_isas())),
                         testing::isa_case_name<Case>);

// Structural facts the table relies on, checked directly on the fused output.
TEST(FusedForwardEdge, FullyMaskedRowsGiveZeroAndMinusInf) {
  Tensor q = random_uniform({1, 2, 6, 16}, 5), k = random_uniform({1, 2, 4, 16}, 6),
         v = random_uniform({1, 2, 4, 16}, 7);
  AttentionOptions o;
  o.backend = Backend::fused;
  o.causal = true;
  o.align = Align::bottom_right;  // p(i) = i - 2: rows 0 and 1 see no key
  const AttentionResult r = attention(q, k, v, o);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 6; ++i) {
      const double lse = r.lse.at({0, h, i});
      if (i < 2) {
        EXPECT_EQ(lse, -std::numeric_limits<double>::infinity());
        for (int64_t d = 0; d < 16; ++d) EXPECT_EQ(r.out.at({0, h, i, d}), 0.0);
      } else {
        EXPECT_TRUE(std::isfinite(lse));
      }
    }
}

TEST(FusedForwardEdge, ForceIsaRestoresAutomaticChoice) {
  const std::string automatic = kernels::cpu::isa_name();
  kernels::cpu::force_isa(Isa::scalar);
  EXPECT_STREQ(kernels::cpu::isa_name(), "scalar");
  kernels::cpu::force_isa(std::nullopt);
  EXPECT_EQ(kernels::cpu::isa_name(), automatic);
  EXPECT_TRUE(kernels::cpu::isa_available(kernels::cpu::detected_isa()));
}

}  // namespace
}  // namespace attn

// ops::paged_attention on every instruction set this CPU has, at 1 and 2 threads (where a long
// decode row's keys are split into shares that are merged), with its weight capture, against the
// double oracle
// (kernels/ref/paged_attention_ref.h) reading the same pool, and against attn::attention
// (Backend::reference, causal bottom-right, window, softcap) over the same keys gathered into
// contiguous tensors. The pools hold every sequence's blocks in a shuffled order among spare blocks of
// garbage, and the blocks a window leaves behind are -1 in the tables, so a kernel that read past its
// table, its block or its window would differ.
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>
#include <attn/ops/paged_attention.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/isa_test_util.h"
#include "kernels/ref/paged_attention_ref.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using kernels::cpu::Isa;
constexpr testing::Tolerance kUntouched{0.0, 0.0};  // rows the call must not write

struct PagedCase {
  std::string name;
  int64_t bt, Hkv, G, D;
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (keys, queries)
  int64_t window = 0;
  float softcap = 0.0f;
  bool f16 = false;
  bool q8 = false;  // int8 rows with an f32 scale each
};

// A pool with the case's sequences in shuffled blocks, the queries and the tables.
struct PagedSetup {
  ops::PagedKv kv;
  std::vector<float> pool_f32;
  std::vector<uint16_t> pool_f16;
  std::vector<int8_t> pool_q8;
  std::vector<std::vector<int32_t>> tables;
  std::vector<ops::PagedSequence> seqs;
  Tensor q;  // [rows, H, D]
  int64_t rows = 0;

  // Element d of the key (is_v false) or value row of kv head g at slot i of block b, as stored.
  float value(int64_t b, int64_t g, int64_t i, int64_t d, bool is_v) const {
    const int64_t bt = kv.block_tokens, D = kv.head_dim, Hkv = kv.kv_heads, row = g * bt + i;
    const int64_t off = b * kv.block_stride + (is_v ? Hkv * bt * D : 0) + row * D + d;
    if (kv.dtype == ops::KvDtype::q8) {
      float scale;
      std::memcpy(&scale,
                  pool_q8.data() + b * kv.block_stride + ops::q8_scales_offset(Hkv, bt, D) +
                      ((is_v ? Hkv * bt : 0) + row) * 4,
                  4);
      return static_cast<float>(pool_q8[off]) * scale;
    }
    return kv.dtype == ops::KvDtype::f16 ? f16_to_f32(pool_f16[off]) : pool_f32[off];
  }
};

PagedSetup make_setup(const PagedCase& c, uint64_t seed) {
  PagedSetup s;
  const int64_t H = c.G * c.Hkv, stride = 2 * c.Hkv * c.bt * c.D;
  int64_t blocks = 3;  // spares
  for (auto [keys, queries] : c.seqs) blocks += (keys + c.bt - 1) / c.bt;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const auto n = static_cast<std::size_t>(blocks * stride);
  if (c.q8) {  // values in [-127, 127], each row's scale in [0.5, 1] / 127 (spares too)
    const int64_t qstride = ops::q8_block_bytes(c.Hkv, c.bt, c.D),
                  off = ops::q8_scales_offset(c.Hkv, c.bt, c.D);
    s.pool_q8.resize(static_cast<std::size_t>(blocks * qstride));
    std::uniform_int_distribution<int> qi(-127, 127);
    for (auto& x : s.pool_q8) x = static_cast<int8_t>(qi(rng));
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t r = 0; r < 2 * c.Hkv * c.bt; ++r) {
        const float d = (0.75f + 0.25f * u(rng)) / 127.0f;
        std::memcpy(s.pool_q8.data() + b * qstride + off + r * 4, &d, 4);
      }
  } else if (c.f16) {
    s.pool_f16.resize(n);
    for (auto& x : s.pool_f16) x = f32_to_f16(u(rng));
  } else {
    s.pool_f32.resize(n);
    for (auto& x : s.pool_f32) x = u(rng);
  }
  std::vector<int32_t> ids(static_cast<std::size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::size_t next = 0;
  for (auto [keys, queries] : c.seqs) {
    std::vector<int32_t> t;
    const int64_t first_pos = keys - queries;
    const int64_t lo = c.window > 0 ? std::max<int64_t>(0, first_pos - c.window + 1) : 0;
    for (int64_t b = 0; b < (keys + c.bt - 1) / c.bt; ++b)
      t.push_back((b + 1) * c.bt <= lo ? -1 : ids[next++]);  // a window's released blocks: -1
    s.tables.push_back(std::move(t));
    s.rows += queries;
  }
  for (std::size_t i = 0; i < c.seqs.size(); ++i)
    s.seqs.push_back(
        {s.tables[i].data(), static_cast<int64_t>(s.tables[i].size()), c.seqs[i].first, c.seqs[i].second});
  s.kv.data = c.q8    ? static_cast<const void*>(s.pool_q8.data())
              : c.f16 ? static_cast<const void*>(s.pool_f16.data())
                      : s.pool_f32.data();
  s.kv.dtype = c.q8 ? ops::KvDtype::q8 : c.f16 ? ops::KvDtype::f16 : ops::KvDtype::f32;
  s.kv.num_blocks = blocks;
  s.kv.block_tokens = c.bt;
  s.kv.kv_heads = c.Hkv;
  s.kv.head_dim = c.D;
  s.kv.block_stride = c.q8 ? ops::q8_block_bytes(c.Hkv, c.bt, c.D) : stride;
  s.q = testing::random_uniform({std::max<int64_t>(s.rows, 1), H, c.D}, seed + 1);
  return s;
}

using PagedAttentionTest = testing::IsaCaseTest<PagedCase>;

TEST_P(PagedAttentionTest, MatchesTheOracleAndContiguousAttention) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const PagedSetup s = make_setup(c, 17);
  const int64_t H = c.G * c.Hkv, D = c.D;
  ops::PagedAttentionOptions opt;
  opt.scale = 0.7f / std::sqrt(static_cast<float>(D));
  opt.window = c.window;
  opt.softcap = c.softcap;

  // The double oracle on the same pool.
  std::vector<kernels::PagedSeqArgs> sargs;
  int64_t row0 = 0;
  for (const auto& ps : s.seqs) {
    sargs.push_back({ps.blocks, ps.keys, ps.queries, row0});
    row0 += ps.queries;
  }
  Tensor want = Tensor::zeros({s.rows, H, D}), want_lse = Tensor::zeros({s.rows, H});
  kernels::PagedAttnArgs ra;
  ra.q = s.q.data<float>();
  ra.out = want.data<float>();
  ra.lse = want_lse.data<float>();
  ra.H = H;
  ra.Hkv = c.Hkv;
  ra.D = D;
  ra.kv = s.kv.data;
  ra.f16 = c.f16;
  ra.q8 = c.q8;
  ra.q8_scales = ops::q8_scales_offset(c.Hkv, c.bt, D);
  ra.block_tokens = c.bt;
  ra.block_stride = s.kv.block_stride;
  ra.seqs = sargs.data();
  ra.n_seqs = static_cast<int64_t>(sargs.size());
  ra.scale = opt.scale;
  ra.window = c.window;
  ra.softcap = c.softcap;
  kernels::ref::paged_attention(ra);

  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor out = Tensor::full({s.rows, H, D}, 123.0), lse = Tensor::full({s.rows, H}, 123.0);
    ops::paged_attention(s.q.data<float>(), H, s.kv, s.seqs, opt, out.data<float>(), lse.data<float>());
    // f16 and q8 storage: both read the same values, so the tolerance is the f32 kernel's.
    EXPECT_ALL_CLOSE(out, want, testing::tol::kFusedForward) << threads << " threads";
    EXPECT_ALL_CLOSE(lse, want_lse, testing::tol::kFusedForward) << threads << " threads";
  }

  // One kv head's query heads only (a caller splitting heads over its threads): the others' rows stay.
  if (c.Hkv >= 2) {
    ops::PagedAttentionOptions one_head = opt;
    one_head.kv_head_begin = 1;
    one_head.kv_head_end = 2;
    Tensor out = Tensor::full({s.rows, H, D}, 123.0);
    ops::paged_attention(s.q.data<float>(), H, s.kv, s.seqs, one_head, out.data<float>());
    const Tensor mine = out.slice(1, c.G, 2 * c.G), others = out.slice(1, 2 * c.G, H);
    EXPECT_ALL_CLOSE(mine.contiguous(), want.slice(1, c.G, 2 * c.G).contiguous(),
                     testing::tol::kFusedForward);
    EXPECT_ALL_CLOSE(out.slice(1, 0, c.G).contiguous(), Tensor::full({s.rows, c.G, D}, 123.0), kUntouched);
    EXPECT_ALL_CLOSE(others.contiguous(), Tensor::full({s.rows, H - 2 * c.G, D}, 123.0), kUntouched);
  }

  // attn::attention over each sequence's keys gathered into [1, Hkv, Lk, D].
  for (std::size_t i = 0; i < s.seqs.size(); ++i) {
    const auto& ps = s.seqs[i];
    if (ps.queries == 0) continue;
    const int64_t Lk = ps.keys, Lq = ps.queries;
    Tensor k = Tensor::zeros({1, c.Hkv, Lk, D}), v = Tensor::zeros({1, c.Hkv, Lk, D});
    for (int64_t g = 0; g < c.Hkv; ++g)
      for (int64_t j = 0; j < Lk; ++j) {
        const int32_t b = ps.blocks[j / c.bt];
        for (int64_t d = 0; d < D; ++d) {
          const bool seen = b >= 0;  // released blocks are never seen: leave them 0
          k.data<float>()[(g * Lk + j) * D + d] = seen ? s.value(b, g, j % c.bt, d, false) : 0.0f;
          v.data<float>()[(g * Lk + j) * D + d] = seen ? s.value(b, g, j % c.bt, d, true) : 0.0f;
        }
      }
    const Tensor q =
        s.q.slice(0, sargs[i].row0, sargs[i].row0 + Lq).permute({1, 0, 2}).unsqueeze(0).contiguous();
    AttentionOptions ao;
    ao.scale = opt.scale;
    ao.causal = true;
    ao.align = Align::bottom_right;
    if (c.window) ao.window_left = c.window - 1;
    ao.softcap = c.softcap;
    ao.backend = Backend::reference;
    ao.capture.enabled = true;
    const AttentionResult r = attention(q, k, v, ao);  // [1, H, Lq, D]
    Tensor out = Tensor::zeros({Lq, H, D}), lse = Tensor::zeros({Lq, H});
    Tensor weights = Tensor::full({Lq, H, Lk}, 7.0);
    ops::PagedSequence one = ps;
    one.weights = weights.data<float>();
    // Every other sequence without lse: the entry keeps its own for the weights.
    ops::paged_attention(s.q.data<float>() + sargs[i].row0 * H * D, H, s.kv, {&one, 1}, opt,
                         out.data<float>(), i % 2 ? lse.data<float>() : nullptr);
    EXPECT_ALL_CLOSE(out, r.out.select(0, 0).permute({1, 0, 2}).contiguous(), testing::tol::kFusedForward)
        << "sequence " << i;
    EXPECT_ALL_CLOSE(weights, r.weights.select(0, 0).permute({1, 0, 2}).contiguous(), testing::tol::kWeights)
        << "sequence " << i;
    if (i % 2 == 0) continue;
    EXPECT_ALL_CLOSE(lse, r.lse.select(0, 0).permute({1, 0}).contiguous(), testing::tol::kFusedForward)
        << "sequence " << i;
  }
}

std::vector<PagedCase> paged_cases() {
  return {
      {"decode_bt16", 16, 2, 3, 64, {{100, 1}, {16, 1}, {1, 1}}},
      {"decode_bt1", 1, 1, 4, 32, {{37, 1}, {5, 1}}},
      {"decode_bt32_mha", 32, 4, 1, 128, {{70, 1}}},
      {"decode_window", 16, 2, 2, 64, {{200, 1}, {9, 1}}, 40},
      {"decode_softcap", 16, 1, 8, 64, {{90, 1}}, 0, 2.0f},
      {"decode_f16", 16, 2, 4, 128, {{150, 1}, {3, 1}}, 0, 0.0f, true},
      {"decode_d_off_simd", 16, 2, 2, 20, {{45, 1}, {17, 1}}},
      {"decode_d_odd_f16", 8, 1, 3, 13, {{29, 1}}, 0, 0.0f, true},
      {"chunk_whole_prompt", 16, 2, 2, 64, {{37, 37}}},
      {"chunk_after_cache", 16, 2, 3, 32, {{90, 11}, {20, 5}}},
      {"chunk_bt1", 1, 1, 2, 24, {{19, 7}}},
      {"chunk_bt32_window", 32, 2, 2, 64, {{150, 40}}, 24},
      {"chunk_window_1", 16, 1, 2, 16, {{40, 9}}, 1},
      {"chunk_softcap_f16", 16, 2, 2, 64, {{70, 13}}, 0, 1.5f, true},
      {"ragged_mixed", 16, 3, 2, 48, {{33, 1}, {64, 16}, {5, 5}, {80, 1}, {7, 0}}, 0, 0.0f, false},
      {"ragged_window_softcap_f16", 16, 2, 4, 40, {{120, 1}, {50, 20}, {3, 3}}, 17, 3.0f, true},
      // Few items for 2 threads: the decode rows' keys are split into shares and merged.
      {"decode_split_long", 16, 1, 4, 64, {{3000, 1}}},
      {"decode_split_f16_softcap", 16, 2, 2, 40, {{1500, 1}}, 0, 2.0f, true},
      {"decode_split_window", 32, 1, 2, 48, {{5000, 1}}, 1200},
      {"ragged_split", 16, 1, 2, 32, {{2000, 1}, {30, 4}}},
      // q8: int8 rows, each with its scale after the block's values.
      {"decode_q8", 16, 2, 3, 64, {{100, 1}, {16, 1}, {1, 1}}, 0, 0.0f, false, true},
      {"decode_q8_d_odd_bt1", 1, 1, 4, 13, {{37, 1}, {5, 1}}, 0, 0.0f, false, true},
      {"chunk_q8_window_softcap", 32, 2, 2, 64, {{150, 40}}, 24, 1.5f, false, true},
      {"ragged_q8_d40", 16, 3, 2, 40, {{33, 1}, {64, 16}, {5, 5}, {80, 1}, {7, 0}}, 0, 0.0f, false, true},
      {"decode_split_q8_window", 8, 1, 4, 256, {{3000, 1}, {20, 3}}, 1200, 0.0f, false, true},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedAttentionTest,
                         ::testing::Combine(::testing::ValuesIn(paged_cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<PagedCase>);

// A row's output is the same bits whatever rows share its call: a prompt chunk of 40 rows against the
// same rows in chunks of 1 (each a decode row), 3, 7 and 16 and beside another sequence (the runtime's
// batched step relies on it; items of few rows once took another summation order for their scores).
// Also with a window (rows of a chunk start at other keys than the chunk's first row) and over 2,600
// keys, where a decode row is split into shares run as items of their own and a chunk's item splits
// its rows at the same bounds: the cache a preempted sequence recomputes in chunks is the one its
// decode wrote.
TEST(PagedAttention, EachRowIsTheSameWhateverRowsShareItsCall) {
  struct Shape {
    int64_t keys, window;
  };
  for (const Shape shape : {Shape{90, 0}, Shape{90, 37}, Shape{2600, 0}, Shape{2600, 1100}, Shape{1500, 700}})
    for (int type : {0, 1, 2}) {  // f32, f16, q8
      const bool f16 = type == 1;
      const int64_t Lq = 40, first = shape.keys - Lq;
      const PagedCase c{"rows",       16,   2,   3,        64, {{shape.keys, Lq}, {33, 1}},
                        shape.window, 0.0f, f16, type == 2};
      const PagedSetup s = make_setup(c, 21);
      const int64_t H = c.G * c.Hkv, D = c.D;
      ops::PagedAttentionOptions opt;
      opt.window = shape.window;
      for (Isa isa : testing::available_isas()) {
        kernels::cpu::force_isa(isa);
        std::vector<float> whole(static_cast<std::size_t>(Lq * H * D));
        ops::paged_attention(s.q.data<float>(), H, s.kv, {&s.seqs[0], 1}, opt, whole.data());
        for (int64_t chunk : {1, 3, 7, 16}) {
          std::vector<float> out(whole.size(), 5.0f);
          for (int64_t r0 = 0; r0 < Lq; r0 += chunk) {
            const int64_t r1 = std::min(Lq, r0 + chunk);
            ops::PagedSequence part = s.seqs[0];
            part.keys = first + r1;
            part.queries = r1 - r0;
            // beside the other sequence's decode row (its queries follow this part's in q)
            std::vector<float> q(static_cast<std::size_t>((r1 - r0 + 1) * H * D));
            std::copy_n(s.q.data<float>() + r0 * H * D, (r1 - r0) * H * D, q.begin());
            std::copy_n(s.q.data<float>() + Lq * H * D, H * D, q.begin() + (r1 - r0) * H * D);
            const ops::PagedSequence both[2] = {part, s.seqs[1]};
            std::vector<float> o(q.size());
            ops::paged_attention(q.data(), H, s.kv, both, opt, o.data());
            std::copy_n(o.begin(), (r1 - r0) * H * D, out.begin() + r0 * H * D);
          }
          for (int64_t i = 0; i < Lq * H * D; ++i)
            ASSERT_EQ(out[i], whole[i])
                << isa_str(isa) << (f16 ? " f16" : " f32") << ", " << shape.keys << " keys, window "
                << shape.window << ", chunks of " << chunk << ", row " << i / (H * D);
        }
      }
    }
  kernels::cpu::force_isa(std::nullopt);
}

// A long decode row (split into shares) is the same bits alone and beside other rows, on 1 and 2
// threads: its shares depend on its keys only.
TEST(PagedAttention, ALongDecodeRowIsTheSameAloneAndInABatch) {
  const PagedCase c{"long", 16, 1, 4, 64, {{2500, 1}, {40, 1}, {700, 1}}};
  const PagedSetup s = make_setup(c, 8);
  const int64_t H = c.G * c.Hkv, D = c.D;
  const int threads0 = num_threads();
  for (Isa isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    std::vector<float> alone(static_cast<std::size_t>(H * D)), all(static_cast<std::size_t>(3 * H * D));
    set_num_threads(2);
    ops::paged_attention(s.q.data<float>(), H, s.kv, {&s.seqs[0], 1}, {}, alone.data());
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      ops::paged_attention(s.q.data<float>(), H, s.kv, s.seqs, {}, all.data());
      for (int64_t i = 0; i < H * D; ++i)
        ASSERT_EQ(all[i], alone[i]) << isa_str(isa) << ", " << threads << " threads, value " << i;
    }
  }
  set_num_threads(threads0);
  kernels::cpu::force_isa(std::nullopt);
}

TEST(PagedAttention, HugeLogitsStayFinite) {
  // Scores of ±1e4: the online softmax's rescaling must not overflow or lose the winner.
  PagedCase c{"huge", 16, 1, 2, 16, {{50, 3}}};
  PagedSetup s = make_setup(c, 5);
  for (int64_t i = 0; i < s.q.numel(); ++i) s.q.data<float>()[i] *= 3000.0f;
  for (Isa isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    Tensor out = Tensor::zeros({s.rows, 2, 16}), lse = Tensor::zeros({s.rows, 2});
    ops::paged_attention(s.q.data<float>(), 2, s.kv, s.seqs, {}, out.data<float>(), lse.data<float>());
    for (int64_t i = 0; i < out.numel(); ++i)
      ASSERT_TRUE(std::isfinite(out.data<float>()[i])) << isa_str(isa);
    for (int64_t i = 0; i < lse.numel(); ++i)
      ASSERT_TRUE(std::isfinite(lse.data<float>()[i])) << isa_str(isa);
  }
  kernels::cpu::force_isa(std::nullopt);
}

TEST(PagedAttention, RejectsBadArguments) {
  PagedCase c{"bad", 16, 2, 2, 32, {{40, 1}}};
  PagedSetup s = make_setup(c, 9);
  Tensor out = Tensor::zeros({1, 4, 32});
  auto run = [&](const ops::PagedKv& kv, std::vector<ops::PagedSequence> seqs, int64_t H,
                 ops::PagedAttentionOptions opt = {}) {
    ops::paged_attention(s.q.data<float>(), H, kv, seqs, opt, out.data<float>());
  };
  EXPECT_ERROR_CONTAINS(run(s.kv, s.seqs, 3), {"H must be a positive multiple of Hkv = 2", "got H = 3"});
  ops::PagedSequence bad = s.seqs[0];
  bad.queries = 41;
  EXPECT_ERROR_CONTAINS(run(s.kv, {bad}, 4), {"0 <= queries <= keys", "queries 41, keys 40"});
  bad = s.seqs[0];
  bad.table_size = 2;
  EXPECT_ERROR_CONTAINS(run(s.kv, {bad}, 4), {"needs a table of >= 3 blocks", "got 2"});
  std::vector<int32_t> released = s.tables[0];
  released[0] = -1;  // no window: position 0 is seen
  bad = s.seqs[0];
  bad.blocks = released.data();
  EXPECT_ERROR_CONTAINS(run(s.kv, {bad}, 4), {"block 0", "got -1"});
  ops::PagedKv kv = s.kv;
  kv.block_stride = 10;
  EXPECT_ERROR_CONTAINS(run(kv, s.seqs, 4),
                        {"block_stride must be >= 2 · Hkv · block_tokens · D = 2048", "got 10"});
  PagedCase cq = c;
  cq.q8 = true;
  PagedSetup sq = make_setup(cq, 9);
  kv = sq.kv;
  kv.block_stride -= 4;
  EXPECT_ERROR_CONTAINS(
      ops::paged_attention(s.q.data<float>(), 4, kv, sq.seqs, {}, out.data<float>()),
      {"q8 pool's block_stride must be a multiple of 4 and >= q8_block_bytes = 2304", "got 2300"});
  EXPECT_ERROR_CONTAINS(ops::parse_kv_dtype("q4"), {"must be f32, f16 or q8", "got 'q4'"});
  ops::PagedAttentionOptions opt;
  opt.window = -2;
  EXPECT_ERROR_CONTAINS(run(s.kv, s.seqs, 4, opt), {"window must be >= 0", "got -2"});
  opt.window = 0;
  opt.kv_head_begin = 2;
  EXPECT_ERROR_CONTAINS(run(s.kv, s.seqs, 4, opt), {"non-empty range in [0, 2]", "got [2, 0)"});
}

// The q8 row: every value within half a step (d / 2) of its own, the largest exact, names and sizes.
TEST(PagedAttention, Q8RowsRoundToTheirScale) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int64_t n : {1, 13, 64, 256}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = nd(rng);
    x[static_cast<std::size_t>(n / 2)] = -9.0f;  // the largest magnitude, negative
    std::vector<int8_t> q(x.size());
    float d = -1.0f;
    ops::store_q8_row(x.data(), n, q.data(), &d);
    ASSERT_FLOAT_EQ(d, 9.0f / 127.0f);
    EXPECT_EQ(q[static_cast<std::size_t>(n / 2)], -127);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(q[static_cast<std::size_t>(i)] * d - x[static_cast<std::size_t>(i)]),
                0.5f * d * 1.0001f)
          << "n " << n << ", value " << i;
  }
  std::vector<float> zero(8, 0.0f), bad = {1.0f, NAN, 2.0f};
  std::vector<int8_t> q(8, 5);
  float d = -1.0f;
  ops::store_q8_row(zero.data(), 8, q.data(), &d);
  EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(std::count(q.begin(), q.end(), 0), 8);
  ops::store_q8_row(bad.data(), 3, q.data(), &d);
  EXPECT_TRUE(std::isnan(d));  // read back as NaN, as an f32 cache would give it
  EXPECT_EQ(ops::kv_position_bytes(ops::KvDtype::q8, 3, 64), 2 * 3 * 68);
  EXPECT_EQ(ops::kv_position_bytes(ops::KvDtype::f16, 3, 64), 2 * 3 * 128);
  EXPECT_EQ(ops::kv_position_bytes(ops::KvDtype::f32, 3, 64), 2 * 3 * 256);
  EXPECT_EQ(ops::q8_scales_offset(1, 1, 13), 64);  // 26 bytes of values, rounded up to 64
  EXPECT_EQ(ops::q8_block_bytes(1, 1, 13), 128);
  for (auto t : {ops::KvDtype::f32, ops::KvDtype::f16, ops::KvDtype::q8})
    EXPECT_EQ(ops::parse_kv_dtype(ops::kv_dtype_name(t)), t);
}

}  // namespace
}  // namespace attn

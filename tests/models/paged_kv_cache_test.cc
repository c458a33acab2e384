// models::runtime::PagedKvCache: copy-on-write after a fork and after a shared prefix, eviction of
// cached prefixes under a tiny pool (least recently used first), window layers giving blocks back,
// the byte accounting, exhaustion that changes nothing, and bad arguments. Every row written is a
// function of (sequence, layer, position), so reading it back through the tables shows whose it is.
#include <attn/core/f16.h>
#include <attn/models/runtime/kv_cache.h>
#include <attn/ops/attention.h>
#include <attn/ops/paged_attention.h>

#include <cstring>
#include <numeric>
#include <set>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using models::runtime::KvCacheConfig;
using models::runtime::PagedKvCache;

// The value of element (h, d) of the K row (V: negated) of position p on `layer` by writer `tag`.
float row_value(int tag, int64_t layer, int64_t p, int64_t h, int64_t d) {
  return static_cast<float>(tag * 1000 + layer * 100 + p) + 0.01f * static_cast<float>(h * 8 + d);
}

// Appends n positions (tokens from `tokens`) and writes every layer's rows, tagged.
bool append_rows(PagedKvCache& c, PagedKvCache::SeqId s, const int32_t* tokens, int64_t n, int tag) {
  const int64_t pos = c.length(s);
  if (!c.append(s, tokens, n)) return false;
  const auto& cfg = c.config();
  std::vector<float> k(static_cast<std::size_t>(n * cfg.kv_heads * cfg.head_dim)), v(k.size());
  for (int64_t l = 0; l < cfg.layers; ++l) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < cfg.kv_heads; ++h)
        for (int64_t d = 0; d < cfg.head_dim; ++d) {
          const auto o = static_cast<std::size_t>((i * cfg.kv_heads + h) * cfg.head_dim + d);
          k[o] = row_value(tag, l, pos + i, h, d);
          v[o] = -k[o];
        }
    c.write(s, l, pos, k.data(), v.data(), n);
  }
  c.commit(s);
  return true;
}

// Element (h, d) of the K (or V) row of position p on `layer` of sequence s, read through its table.
float read_row(const PagedKvCache& c, PagedKvCache::SeqId s, int64_t layer, int64_t p, int64_t h, int64_t d,
               bool value = false) {
  const ops::PagedKv kv = c.view();
  const int32_t b = c.table(s, layer).at(static_cast<std::size_t>(p / kv.block_tokens));
  EXPECT_GE(b, 0) << "position " << p << " on layer " << layer << " was released";
  const int64_t off = b * kv.block_stride + (value ? kv.kv_heads * kv.block_tokens * kv.head_dim : 0) +
                      (h * kv.block_tokens + p % kv.block_tokens) * kv.head_dim + d;
  if (kv.dtype == ops::KvDtype::q8) {  // q · d, d after the block's values
    const auto* base = static_cast<const char*>(kv.data) + b * kv.block_stride +
                       ops::q8_scales_offset(kv.kv_heads, kv.block_tokens, kv.head_dim);
    const int64_t row =
        (value ? kv.kv_heads * kv.block_tokens : 0) + h * kv.block_tokens + p % kv.block_tokens;
    float scale;
    std::memcpy(&scale, base + row * 4, 4);
    return static_cast<float>(static_cast<const int8_t*>(kv.data)[off]) * scale;
  }
  return kv.dtype == ops::KvDtype::f16 ? f16_to_f32(static_cast<const uint16_t*>(kv.data)[off])
                                       : static_cast<const float*>(kv.data)[off];
}

// Every row of positions [p0, p1) on every layer carries `tag` (K) and its negation (V).
// only_layer >= 0: that layer alone.
void expect_rows(const PagedKvCache& c, PagedKvCache::SeqId s, int64_t p0, int64_t p1, int tag,
                 int64_t only_layer = -1) {
  const auto& cfg = c.config();
  for (int64_t l = 0; l < cfg.layers; ++l)
    if (only_layer < 0 || l == only_layer)
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t h = 0; h < cfg.kv_heads; ++h)
          for (int64_t d = 0; d < cfg.head_dim; d += 3) {
            const float want = row_value(tag, l, p, h, d);
            float amax = 0.0f;  // q8: half a step of the row's scale
            for (int64_t e = 0; e < cfg.head_dim; ++e)
              amax = std::max(amax, std::abs(row_value(tag, l, p, h, e)));
            const float tol = cfg.dtype == ops::KvDtype::f16  ? 1e-3f * std::abs(want)
                              : cfg.dtype == ops::KvDtype::q8 ? amax / 254.0f * 1.001f
                                                              : 0.0f;
            ASSERT_NEAR(read_row(c, s, l, p, h, d), want, tol) << "layer " << l << " position " << p;
            ASSERT_NEAR(read_row(c, s, l, p, h, d, true), -want, tol) << "layer " << l << " position " << p;
          }
}

KvCacheConfig small_config(int64_t blocks, int64_t bt = 4, int64_t layers = 2,
                           ops::KvDtype dtype = ops::KvDtype::f32) {
  KvCacheConfig cfg;
  cfg.layers = layers;
  cfg.kv_heads = 2;
  cfg.head_dim = 8;
  cfg.block_tokens = bt;
  cfg.dtype = dtype;
  cfg.pool_bytes =
      blocks * (dtype == ops::KvDtype::q8 ? ops::q8_block_bytes(2, bt, 8)
                                          : 2 * 2 * bt * 8 * (dtype == ops::KvDtype::f16 ? 2 : 4));
  return cfg;
}

std::vector<int32_t> iota_tokens(int64_t n, int32_t start) {
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(PagedKvCache, ForkSharesBlocksAndCopiesOnWrite) {
  for (auto dtype : {ops::KvDtype::f32, ops::KvDtype::f16, ops::KvDtype::q8}) {
    PagedKvCache c(small_config(32, 4, 2, dtype));
    const auto a = c.create();
    const auto tok = iota_tokens(10, 1);
    ASSERT_TRUE(append_rows(c, a, tok.data(), 10, 1));
    const auto b = c.fork(a);
    EXPECT_EQ(c.length(b), 10);
    EXPECT_EQ(c.table(a, 0), c.table(b, 0));  // every block shared
    EXPECT_EQ(c.refcount(c.table(a, 0)[2]), 2);
    // Divergent writes into the shared partial block (positions 10, 11): each gets its own copy.
    ASSERT_TRUE(append_rows(c, a, tok.data(), 2, 1));
    ASSERT_TRUE(append_rows(c, b, tok.data(), 2, 2));
    for (int64_t l = 0; l < 2; ++l) {
      EXPECT_NE(c.table(a, l)[2], c.table(b, l)[2]) << "layer " << l;
      EXPECT_EQ(c.table(a, l)[0], c.table(b, l)[0]) << "layer " << l;  // full blocks stay shared
    }
    expect_rows(c, a, 0, 12, 1);
    expect_rows(c, b, 0, 10, 1);
    expect_rows(c, b, 10, 12, 2);
    c.free(a);
    expect_rows(c, b, 0, 10, 1);  // the parent's end takes nothing from the child
    EXPECT_THROW(c.length(a), Error);
  }
}

TEST(PagedKvCache, SharedPrefixDivergesCopyOnWrite) {
  PagedKvCache c(small_config(64));
  const auto prompt = iota_tokens(14, 100);  // 3 full blocks of 4, then 2
  const auto a = c.create();
  ASSERT_TRUE(append_rows(c, a, prompt.data(), 14, 1));
  // b shares the first 12 positions (3 full blocks), then diverges with its own tokens.
  auto other = prompt;
  other[13] = 7;
  const auto b = c.create();
  EXPECT_EQ(c.attach_prefix(b, other.data(), 14), 12);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(c.table(a, 0)[i], c.table(b, 0)[i]);
  ASSERT_TRUE(append_rows(c, b, other.data() + 12, 2, 2));
  expect_rows(c, b, 0, 12, 1);
  expect_rows(c, b, 12, 14, 2);
  expect_rows(c, a, 0, 14, 1);
  // A prefix that differs inside the second block matches only the first; one that differs in the
  // first matches nothing (the tokens are compared, not only the hashes).
  auto second = prompt;
  second[5] = 999;
  const auto d = c.create();
  EXPECT_EQ(c.attach_prefix(d, second.data(), 14), 4);
  auto first = prompt;
  first[0] = 99;
  const auto e = c.create();
  EXPECT_EQ(c.attach_prefix(e, first.data(), 14), 0);
  // Fewer tokens than a block: nothing to attach.
  const auto f = c.create();
  EXPECT_EQ(c.attach_prefix(f, prompt.data(), 3), 0);
}

TEST(PagedKvCache, EvictsLeastRecentlyUsedPrefixesUnderATinyPool) {
  PagedKvCache c(small_config(4, 4, 1));  // 4 blocks of 4 positions, one layer
  const auto p1 = iota_tokens(8, 0), p2 = iota_tokens(8, 50);
  for (int tag : {1, 2}) {
    const auto s = c.create();
    ASSERT_TRUE(append_rows(c, s, (tag == 1 ? p1 : p2).data(), 8, tag));
    c.free(s);
  }
  EXPECT_EQ(c.cached_blocks(), 4);
  EXPECT_EQ(c.accounting().cached, 4 * c.block_bytes());
  EXPECT_EQ(c.accounting().blocks_free, 0);
  // Use p1 again: p2 becomes the least recently used.
  const auto s1 = c.create();
  EXPECT_EQ(c.attach_prefix(s1, p1.data(), 8), 8);
  expect_rows(c, s1, 0, 8, 1);
  c.free(s1);
  // A new sequence needs 2 blocks: p2's two entries go (its last block first), p1's stay.
  const auto s = c.create();
  const auto p3 = iota_tokens(6, 200);
  ASSERT_TRUE(append_rows(c, s, p3.data(), 6, 3));
  expect_rows(c, s, 0, 6, 3);
  const auto t1 = c.create(), t2 = c.create();
  EXPECT_EQ(c.attach_prefix(t1, p1.data(), 8), 8);
  EXPECT_EQ(c.attach_prefix(t2, p2.data(), 8), 0);
  expect_rows(c, t1, 0, 8, 1);
  // Blocks read by live sequences are never evicted: the pool is full and nothing is evictable.
  const auto u = c.create();
  EXPECT_FALSE(c.append(u, nullptr, 1));
  expect_rows(c, t1, 0, 8, 1);
  expect_rows(c, s, 0, 6, 3);
}

TEST(PagedKvCache, ExhaustionChangesNothing) {
  PagedKvCache c(small_config(5, 4, 2));  // 5 blocks; a position on 2 layers needs 2
  const auto a = c.create(), b = c.create();
  ASSERT_TRUE(append_rows(c, a, nullptr, 7, 1));  // 2 blocks per layer: 4 taken
  const auto before = c.accounting();
  const auto table0 = c.table(a, 0);
  EXPECT_FALSE(c.append(b, nullptr, 1));  // needs 2, 1 free
  EXPECT_FALSE(c.append(a, nullptr, 2));  // crosses into a third block: needs 2
  EXPECT_EQ(c.length(a), 7);
  EXPECT_EQ(c.length(b), 0);
  EXPECT_EQ(c.table(a, 0), table0);
  EXPECT_TRUE(c.table(b, 0).empty());
  EXPECT_EQ(c.accounting().reserved, before.reserved);
  EXPECT_EQ(c.accounting().blocks_free, 1);
  expect_rows(c, a, 0, 7, 1);
  ASSERT_TRUE(append_rows(c, a, nullptr, 1, 1));  // fills the last block: no new one
  c.free(a);
  EXPECT_EQ(c.accounting().blocks_free, 5);  // no tokens given: nothing cached
  ASSERT_TRUE(append_rows(c, b, nullptr, 8, 2));
  expect_rows(c, b, 0, 8, 2);
}

TEST(PagedKvCache, WindowLayersGiveBlocksBack) {
  KvCacheConfig cfg = small_config(64, 4, 2);
  cfg.layer_windows = {0, 6};  // layer 1 sees 6 positions
  PagedKvCache c(cfg);
  const auto s = c.create();
  for (int64_t p = 0; p < 40; ++p) {
    ASSERT_TRUE(append_rows(c, s, nullptr, 1, 1));
    int64_t held = 0;
    for (int32_t b : c.table(s, 1)) held += b != PagedKvCache::kNoBlock;
    // The window of the query at p starts at p − 5: at most ceil(6 / 4) + 1 blocks.
    EXPECT_LE(held, 3) << "position " << p;
    EXPECT_EQ(static_cast<int64_t>(c.table(s, 0).size()), p / 4 + 1);
  }
  for (int32_t b : c.table(s, 0)) EXPECT_NE(b, PagedKvCache::kNoBlock);
  expect_rows(c, s, 0, 40, 1, 0);   // the global layer holds every position
  expect_rows(c, s, 34, 40, 1, 1);  // the windowed layer the last query's window
  // The attention of the last position over the windowed layer equals the contiguous one.
  const int64_t H = 4, D = 8;
  const Tensor q = testing::random_uniform({1, H, D}, 3);
  ops::PagedAttentionOptions opt;
  opt.window = 6;
  const ops::PagedSequence ps = c.attention_sequence(s, 1, 1);
  Tensor out = Tensor::zeros({1, H, D});
  ops::paged_attention(q.data<float>(), H, c.view(), {&ps, 1}, opt, out.data<float>());
  Tensor k = Tensor::zeros({1, 2, 6, D}), v = Tensor::zeros({1, 2, 6, D});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t d = 0; d < D; ++d) {
        k.data<float>()[(h * 6 + j) * D + d] = row_value(1, 1, 34 + j, h, d);
        v.data<float>()[(h * 6 + j) * D + d] = -row_value(1, 1, 34 + j, h, d);
      }
  AttentionOptions ao;
  ao.backend = Backend::reference;
  const Tensor want = attention(q.unsqueeze(2), k, v, ao).out;  // [1, H, 1, D]
  EXPECT_ALL_CLOSE(out, want.view({1, H, D}), testing::tol::kFusedForward);
}

TEST(PagedKvCache, AccountsBytes) {
  PagedKvCache c(small_config(100, 16, 2));
  const std::vector<int64_t> lengths = {1, 15, 16, 17, 40, 100};
  std::vector<PagedKvCache::SeqId> ids;
  int64_t positions = 0, blocks = 0;
  for (int64_t n : lengths) {
    ids.push_back(c.create());
    ASSERT_TRUE(append_rows(c, ids.back(), nullptr, n, 1));
    positions += n;
    blocks += (n + 15) / 16;
  }
  const auto acc = c.accounting();
  EXPECT_EQ(acc.pool, 100 * c.block_bytes());
  EXPECT_EQ(acc.reserved, 2 * blocks * c.block_bytes());
  EXPECT_EQ(acc.used, 2 * positions * c.token_bytes());
  EXPECT_EQ(acc.wasted, acc.reserved - acc.used);
  EXPECT_LT(acc.wasted,
            static_cast<int64_t>(lengths.size()) * 2 * c.block_bytes());  // < 1 block per seq·layer
  EXPECT_EQ(acc.free, acc.pool - acc.reserved);
  EXPECT_EQ(acc.free, acc.blocks_free * c.block_bytes());
  // A fork shares: nothing more is reserved until it writes.
  const auto f = c.fork(ids[4]);
  EXPECT_EQ(c.accounting().reserved, acc.reserved);
  ASSERT_TRUE(append_rows(c, f, nullptr, 1, 2));  // copies the shared partial block on both layers
  EXPECT_EQ(c.accounting().reserved, acc.reserved + 2 * c.block_bytes());
  for (auto id : ids) c.free(id);
  c.free(f);
  EXPECT_EQ(c.accounting().reserved, 0);
  EXPECT_EQ(c.accounting().free, c.accounting().pool);
}

TEST(PagedKvCache, WritesOneHeadAtATime) {
  for (auto dtype : {ops::KvDtype::f32, ops::KvDtype::f16, ops::KvDtype::q8}) {
    PagedKvCache c(small_config(16, 4, 2, dtype));
    const auto s = c.create();
    ASSERT_TRUE(append_rows(c, s, nullptr, 5, 1));
    ASSERT_TRUE(c.append(s, nullptr, 1));  // position 5, written head by head (as a decode step does)
    std::vector<float> k(8), v(8);
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 1; h >= 0; --h) {
        for (int64_t d = 0; d < 8; ++d) {
          k[static_cast<std::size_t>(d)] = row_value(1, l, 5, h, d);
          v[static_cast<std::size_t>(d)] = -k[static_cast<std::size_t>(d)];
        }
        c.write_head(s, l, 5, h, k.data(), v.data());
      }
    c.commit(s);
    expect_rows(c, s, 0, 6, 1);
    EXPECT_ERROR_CONTAINS(c.write_head(s, 0, 5, 0, k.data(), v.data()), {"position 5", "[6, 6)"});
    ASSERT_TRUE(c.append(s, nullptr, 1));
    EXPECT_ERROR_CONTAINS(c.write_head(s, 0, 6, 2, k.data(), v.data()), {"head in [0, 2)", "got 0, 2"});
  }
}

TEST(PagedKvCache, RejectsBadArguments) {
  EXPECT_ERROR_CONTAINS(PagedKvCache(small_config(0)),
                        {"pool_bytes must hold at least one block of 512 bytes", "got 0"});
  KvCacheConfig huge = small_config(8);
  huge.pool_bytes = int64_t{1} << 62;
  EXPECT_ERROR_CONTAINS(PagedKvCache{huge}, {"at most 2^31 - 1 blocks", "got 9007199254740992"});
  KvCacheConfig cfg = small_config(8);
  cfg.layer_windows = {0};
  EXPECT_ERROR_CONTAINS(PagedKvCache{cfg}, {"one entry per layer (2)", "got 1"});
  PagedKvCache c(small_config(8));
  const auto s = c.create();
  ASSERT_TRUE(append_rows(c, s, nullptr, 3, 1));
  ASSERT_TRUE(c.append(s, nullptr, 2));
  std::vector<float> k(2 * 2 * 8);
  EXPECT_ERROR_CONTAINS(c.write(s, 0, 2, k.data(), k.data(), 2),
                        {"[2, 4) must lie in the last append's [3, 5)"});
  EXPECT_ERROR_CONTAINS(c.write(s, 2, 3, k.data(), k.data(), 2), {"layer must be in [0, 2)", "got 2"});
  EXPECT_ERROR_CONTAINS(c.length(77), {"no sequence 77"});
  EXPECT_ERROR_CONTAINS(c.attach_prefix(s, nullptr, 0), {"must be empty", "holds 5"});
}

}  // namespace
}  // namespace attn

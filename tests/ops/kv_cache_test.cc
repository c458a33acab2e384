// ops::KvCache (full and sliding-window ring buffer) with cached_prompt_attention and
// cached_decode_attention against attn::attention over the whole sequence with the window mask
// (Backend::reference), for prompts split in chunks and then decode steps past the window.
#include <attn/ops/attention.h>
#include <attn/ops/kv_cache.h>

#include <cstring>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

struct KvCase {
  const char* name;
  int64_t H, Hkv, D, window, cap;
  std::vector<int64_t> chunks;  // prompt pass lengths, then 1 = decode steps
  bool ring = true;
};

class KvCacheTest : public ::testing::TestWithParam<KvCase> {};

TEST_P(KvCacheTest, MatchesWindowedAttentionOverTheWholeSequence) {
  const KvCase& c = GetParam();
  int64_t N = 0;
  for (int64_t l : c.chunks) N += l;
  const Tensor q = testing::random_uniform({N, c.H, c.D}, 1, -1, 1);
  const Tensor k = testing::random_uniform({N, c.Hkv, c.D}, 2, -1, 1);
  const Tensor v = testing::random_uniform({N, c.Hkv, c.D}, 3, -1, 1);
  const double scale = 0.3;
  // The oracle: the whole sequence at once.
  AttentionOptions ao;
  ao.scale = scale;
  ao.causal = true;
  if (c.window) ao.window_left = c.window - 1;
  ao.backend = Backend::reference;
  const AttentionResult want = attention(q.permute({1, 0, 2}).unsqueeze(0).contiguous(),
                                         k.permute({1, 0, 2}).unsqueeze(0).contiguous(),
                                         v.permute({1, 0, 2}).unsqueeze(0).contiguous(), ao);  // [1, H, N, D]
  ops::KvCache cache(c.Hkv, c.D, c.cap, c.window, c.ring);
  EXPECT_EQ(cache.slots(), c.window && c.ring ? c.window : c.cap);
  EXPECT_EQ(cache.bytes(), 2 * c.Hkv * cache.slots() * c.D * 4);
  std::vector<float> out(static_cast<std::size_t>(N * c.H * c.D)),
      scratch(static_cast<std::size_t>(cache.slots() * c.H));
  int64_t p = 0;
  for (int64_t L : c.chunks) {
    const float* qp = q.data<float>() + p * c.H * c.D;
    const float* kp = k.data<float>() + p * c.Hkv * c.D;
    const float* vp = v.data<float>() + p * c.Hkv * c.D;
    float* op = out.data() + p * c.H * c.D;
    if (L == 1) {
      cache.append(kp, vp, 1);
      const int64_t G = c.H / c.Hkv;
      for (int64_t h = 0; h < c.Hkv; ++h)
        ops::cached_decode_attention(cache, h, qp + h * G * c.D, G, static_cast<float>(scale), scratch.data(),
                                     op + h * G * c.D);
    } else {
      ops::cached_prompt_attention(cache, qp, kp, vp, L, c.H, scale, op);
    }
    p += L;
    EXPECT_EQ(cache.length(), p);
    EXPECT_EQ(cache.held(), std::min(p, cache.slots()));
  }
  const Tensor w = want.out.select(0, 0).permute({1, 0, 2}).contiguous();  // [N, H, D]
  const Tensor got = Tensor::from(out, {N, c.H, c.D});
  EXPECT_ALL_CLOSE(got, w, testing::tol::kFusedForward);
}

INSTANTIATE_TEST_SUITE_P(
    Table, KvCacheTest,
    ::testing::Values(KvCase{"full_prompt_then_steps", 4, 1, 16, 0, 40, {7, 1, 1, 1, 5, 1}},
                      KvCase{"window4_steps_past_it", 4, 1, 16, 4, 40, {3, 1, 1, 1, 1, 1, 1, 1}},
                      KvCase{"window5_long_prompt", 2, 2, 8, 5, 64, {13, 1, 1, 6, 1, 9, 1}},
                      KvCase{"window1", 2, 1, 8, 1, 16, {3, 1, 4, 1}},
                      KvCase{"window_equals_capacity", 2, 1, 8, 12, 12, {5, 1, 6}},
                      KvCase{"window4_kept_whole", 4, 1, 16, 4, 40, {3, 1, 1, 1, 1, 1, 6, 1, 1}, false}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(KvCacheErrors, WindowLargerThanTheContextAndOverflow) {
  EXPECT_ERROR_CONTAINS(ops::KvCache(1, 8, 16, 32), {"sliding window of 32", "context of 16"});
  ops::KvCache c(1, 4, 3, 2);
  std::vector<float> k(16), v(16);
  c.append(k.data(), v.data(), 3);
  EXPECT_ERROR_CONTAINS(c.append(k.data(), v.data(), 1), {"exceed the capacity of 3"});
  std::vector<float> out(16);
  EXPECT_ERROR_CONTAINS(c.gather(0, 2, out.data(), out.data()), {"not all held"});
}

TEST(KvCacheBytes, Gemma3ShapesAt8kAnd32k) {
  // Gemma 3 270M: 18 layers, 15 sliding (window 512) and 3 global, 1 kv head of 256.
  std::vector<int64_t> windows;
  for (int l = 0; l < 18; ++l) windows.push_back((l + 1) % 6 ? 512 : 0);
  const std::vector<int64_t> full(18, 0);
  EXPECT_EQ(ops::kv_cache_bytes(windows, 1, 256, 32768), 2 * (15 * 512 + 3 * 32768) * 256 * 4);
  EXPECT_EQ(ops::kv_cache_bytes(full, 1, 256, 32768), 2 * 18 * 32768 * 256 * 4);
  EXPECT_EQ(ops::kv_cache_bytes(windows, 1, 256, 256), 2 * 18 * 256 * 256 * 4);
}

}  // namespace
}  // namespace attn

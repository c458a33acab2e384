// The caching allocator behind tensor storage (src/core/allocator.h).
#include "core/allocator.h"

#include <attn/core/error.h>
#include <attn/core/tensor.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testing/testing.h"

namespace attn::core {
namespace {

constexpr std::size_t kBig = std::size_t{1} << 20;
constexpr std::size_t kNoLimit = std::size_t{1} << 40;

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % CachingAllocator::kAlignment == 0; }

TEST(Allocator, ModeFromEnvValue) {
  EXPECT_EQ(allocator_mode_from(nullptr, AllocatorMode::caching), AllocatorMode::caching);
  EXPECT_EQ(allocator_mode_from("", AllocatorMode::system), AllocatorMode::system);
  EXPECT_EQ(allocator_mode_from("system", AllocatorMode::caching), AllocatorMode::system);
  EXPECT_EQ(allocator_mode_from("caching", AllocatorMode::system), AllocatorMode::caching);
  EXPECT_ERROR_CONTAINS(allocator_mode_from("cuda", AllocatorMode::caching), {"ATTN_ALLOCATOR", "'cuda'"});
}

TEST(Allocator, SizeClassesRoundUpByAtMostAnEighth) {
  EXPECT_EQ(CachingAllocator::class_bytes(100), 100u);  // below the cached sizes: unchanged
  for (std::size_t b : {std::size_t{16} << 10, (std::size_t{16} << 10) + 1, std::size_t{100000},
                        std::size_t{1} << 20, (std::size_t{1} << 20) + 1, std::size_t{123456789}}) {
    const std::size_t c = CachingAllocator::class_bytes(b);
    EXPECT_GE(c, b);
    EXPECT_LE(c, b + b / 8) << b;
    EXPECT_EQ(c % CachingAllocator::kAlignment, 0u) << b;
    // Every size of a class maps to the same index, and the next byte up to the next class.
    EXPECT_EQ(CachingAllocator::class_index(b), CachingAllocator::class_index(c)) << b;
    EXPECT_EQ(CachingAllocator::class_index(c + 1), CachingAllocator::class_index(c) + 1) << b;
  }
}

TEST(Allocator, ReusesAFreedBlockOfTheSameClass) {
  CachingAllocator a(AllocatorMode::caching, kNoLimit);
  void* p = a.allocate(kBig);
  ASSERT_TRUE(aligned(p));
  std::memset(p, 0x5a, kBig);  // the whole requested size is writable
  a.deallocate(p, kBig);
  EXPECT_EQ(a.stats().cached_bytes, CachingAllocator::class_bytes(kBig));
  void* q = a.allocate(kBig - 1000);  // same class
  EXPECT_EQ(q, p);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
  void* r = a.allocate(kBig);  // the only cached block is in use: a fresh one
  EXPECT_NE(r, q);
  a.deallocate(q, kBig - 1000);
  a.deallocate(r, kBig);
  a.release_cached();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

TEST(Allocator, IndexBytesIsTheClassSize) {
  for (std::size_t b : {std::size_t{16} << 10, std::size_t{100000}, std::size_t{1} << 20,
                        (std::size_t{1} << 20) + 1, std::size_t{123456789}})
    EXPECT_EQ(CachingAllocator::index_bytes(CachingAllocator::class_index(b)),
              CachingAllocator::class_bytes(b))
        << b;
}

TEST(Allocator, ASmallerRequestTakesALargerIdleBlockUpToTwiceItsSize) {
  CachingAllocator a(AllocatorMode::caching, kNoLimit);
  const std::size_t big = kBig + kBig / 2;  // four classes above kBig's
  void* p = a.allocate(big);
  a.deallocate(p, big);
  void* q = a.allocate(kBig);  // no idle block of its own class: the larger one
  EXPECT_EQ(q, p);
  std::memset(q, 0x5a, kBig);
  EXPECT_EQ(a.stats().hits, 1u);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  a.deallocate(q, kBig);  // back to the larger block's class, counted at its size
  EXPECT_EQ(a.stats().cached_bytes, CachingAllocator::class_bytes(big));
  void* r = a.allocate(big);  // the larger block again, for a request of its own class
  EXPECT_EQ(r, p);
  a.deallocate(r, big);
  // More than twice the size is not handed out: a fresh block.
  const std::size_t small = big / 2 - (64 << 10) - 1000;  // nine classes below big's
  ASSERT_GT(CachingAllocator::class_bytes(big), 2 * CachingAllocator::class_bytes(small));
  void* s = a.allocate(small);
  EXPECT_NE(s, p);
  EXPECT_EQ(a.stats().misses, 2u);
  a.deallocate(s, small);
  // Its own class is preferred over a larger one.
  void* t = a.allocate(small);
  EXPECT_EQ(t, s);
  a.deallocate(t, small);
  a.release_cached();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

TEST(Allocator, AnImpossibleRequestThrowsFromTheTopClasses) {
  // Sizes in the top classes, where rounding up to a class would wrap around: an attn::Error (the
  // system's refusal, or a size past the address space), never a smaller block than asked for.
  CachingAllocator a(AllocatorMode::caching, kNoLimit);
  for (std::size_t b : {std::size_t{1} << 63, SIZE_MAX - 10, SIZE_MAX})
    EXPECT_THROW(a.allocate(b), attn::Error) << b;
  EXPECT_EQ(a.stats().hits, 0u);
}

TEST(Allocator, SmallBlocksAndZeroBytesAreAlignedAndNotCached) {
  CachingAllocator a(AllocatorMode::caching, kNoLimit);
  for (std::size_t b : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{1000}}) {
    void* p = a.allocate(b);
    EXPECT_TRUE(aligned(p)) << b;
    a.deallocate(p, b);
  }
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.stats().hits + a.stats().misses, 0u);
}

TEST(Allocator, KeepsAtMostTheLimitIdle) {
  CachingAllocator a(AllocatorMode::caching, CachingAllocator::class_bytes(kBig) * 2);
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(kBig));
  for (void* p : blocks) a.deallocate(p, kBig);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.cached_bytes, CachingAllocator::class_bytes(kBig) * 2);
  EXPECT_EQ(s.released, 3u);
}

TEST(Allocator, SystemModeCachesNothing) {
  CachingAllocator a(AllocatorMode::system, kNoLimit);
  void* p = a.allocate(kBig);
  EXPECT_TRUE(aligned(p));
  a.deallocate(p, kBig);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.hits, 0u);
}

TEST(Allocator, TwoThreadsHammeringKeepBlocksPrivate) {
  CachingAllocator a(AllocatorMode::caching, kNoLimit);
  // Each thread writes its id over its blocks, yields them back and checks that no
  // other thread wrote into a block while it held it.
  auto hammer = [&a](int id, bool* ok) {
    const std::size_t sizes[] = {std::size_t{20} << 10, std::size_t{64} << 10, std::size_t{300} << 10};
    for (int it = 0; it < 2000; ++it) {
      const std::size_t b = sizes[(it + id) % 3];
      auto* p = static_cast<unsigned char*>(a.allocate(b));
      if (!aligned(p)) *ok = false;
      std::memset(p, id, b);
      std::this_thread::yield();
      for (std::size_t i = 0; i < b; i += 509)
        if (p[i] != id) *ok = false;
      a.deallocate(p, b);
    }
  };
  bool ok1 = true, ok2 = true;
  std::thread t1(hammer, 1, &ok1), t2(hammer, 2, &ok2);
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1);
  EXPECT_TRUE(ok2);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.hits + s.misses, 4000u);
  EXPECT_GT(s.hits, 3000u);  // at most 2 threads × 3 sizes live: nearly every request reuses
}

TEST(Allocator, StorageUsesTheProcessAllocator) {
  CachingAllocator& a = storage_allocator();
  const uint64_t before = a.stats().hits + a.stats().misses;
  { Tensor t = Tensor::empty({512, 512}); }
  if (a.mode() == AllocatorMode::caching) {
    EXPECT_GT(a.stats().hits + a.stats().misses, before);
  } else {
    EXPECT_EQ(a.stats().hits + a.stats().misses, before);
  }
}

TEST(Allocator, ZerosAreZeroInAReusedBlock) {
  const Shape shape{300, 257};  // off the size classes, over the cached minimum
  const void* dirty_ptr = nullptr;
  {
    Tensor dirty = Tensor::empty(shape);
    float* p = dirty.data<float>();
    for (int64_t i = 0; i < dirty.numel(); ++i) p[i] = 1.5f;
    dirty_ptr = p;
  }
  Tensor z = Tensor::zeros(shape);
  if (storage_allocator().mode() == AllocatorMode::caching) {
    EXPECT_EQ(z.data<float>(), dirty_ptr);
  }
  EXPECT_TRUE(aligned(z.raw_data()));
  const float* p = z.data<float>();
  int64_t nonzero = 0;
  for (int64_t i = 0; i < z.numel(); ++i) nonzero += p[i] != 0.f;
  EXPECT_EQ(nonzero, 0);
}

// ATTN_ALLOCATOR is read once per process: the test runs itself again with it set.
TEST(Allocator, EnvSwitchChoosesTheMode) {
  if (const char* child = std::getenv("ATTN_ALLOCATOR_TEST_CHILD")) {
    const std::string want = child;
    if (want == "bad") {
      EXPECT_ERROR_CONTAINS(Tensor::empty({4}), {"ATTN_ALLOCATOR", "'bogus'"});
      return;
    }
    EXPECT_EQ(storage_allocator().mode(), want == "system" ? AllocatorMode::system : AllocatorMode::caching);
    const uint64_t before = storage_allocator().stats().misses;
    { Tensor t = Tensor::empty({512, 512}); }
    EXPECT_EQ(storage_allocator().stats().misses - before, want == "system" ? 0u : 1u);
    EXPECT_EQ(storage_allocator().stats().cached_bytes > 0, want != "system");
    return;
  }
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  for (const std::string mode : {"system", "caching", "bad"}) {
    const std::string value = mode == "bad" ? "bogus" : mode;
    const std::string cmd = "ATTN_ALLOCATOR=" + value + " ATTN_ALLOCATOR_TEST_CHILD=" + mode + " " + self +
                            " --gtest_filter=Allocator.EnvSwitchChoosesTheMode >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

}  // namespace
}  // namespace attn::core

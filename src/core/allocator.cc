// The caching allocator behind tensor storage (src/core/allocator.h).
#include "core/allocator.h"

#include <attn/core/error.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attn::core {
namespace {

// ---- a15 (issue 15, decode attention): transparent huge pages for large blocks: begin ----
// Blocks of at least kHugeMinBytes start on a 2 MiB boundary and ask Linux for transparent huge pages
// (madvise; a no-op where THP is off). Streaming a KV cache or a weight matrix from memory then crosses
// no 4 KiB page boundary, where the hardware prefetchers stop: one core's streaming read measured 9 GB/s
// on 4 KiB pages and 15.7 GB/s on huge pages (AMD EPYC, Zen 4). Only whole 2 MiB pages inside the block
// are marked, so no memory is added beyond the block itself.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeMinBytes = std::size_t{4} << 20;

void* system_allocate(std::size_t bytes) {
  const std::size_t a = CachingAllocator::kAlignment;
  ATTN_CHECK(bytes <= SIZE_MAX - a, "tensor: could not allocate ", bytes,
             " bytes (more than the address space)");
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + a - 1) / a * a;
  if (rounded < kHugeMinBytes) {
    void* p = std::aligned_alloc(a, rounded);
    ATTN_CHECK(p != nullptr, "tensor: could not allocate ", bytes, " bytes");
    return p;
  }
  void* p = nullptr;
  ATTN_CHECK(posix_memalign(&p, kHugePage, rounded) == 0 && p != nullptr, "tensor: could not allocate ",
             bytes, " bytes");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  (void)madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}
// ---- a15: end ----

int floor_log2(std::size_t x) { return 63 - __builtin_clzll(static_cast<unsigned long long>(x)); }

}  // namespace

AllocatorMode allocator_mode_from(const char* value, AllocatorMode fallback) {
  if (value == nullptr || *value == '\0') return fallback;
  const std::string v = value;
  if (v == "caching") return AllocatorMode::caching;
  if (v == "system") return AllocatorMode::system;
  throw Error("ATTN_ALLOCATOR: expected 'caching' or 'system'; got '" + v + "'");
}

std::size_t CachingAllocator::class_bytes(std::size_t bytes) {
  if (bytes < kMinCachedBytes) return bytes;
  const std::size_t step = (std::size_t{1} << floor_log2(bytes)) / kSubClasses;
  return (bytes + step - 1) / step * step;
}

std::size_t CachingAllocator::index_bytes(int index) {
  const int e = index / kSubClasses;
  const std::size_t step = (std::size_t{1} << e) / kSubClasses;
  return static_cast<std::size_t>(index % kSubClasses + kSubClasses) * step;
}

int CachingAllocator::class_index(std::size_t bytes) {
  const int e = floor_log2(bytes);
  const std::size_t step = (std::size_t{1} << e) / kSubClasses;
  const std::size_t units = (bytes + step - 1) / step;  // in [8, 16]
  return e * kSubClasses + static_cast<int>(units) - kSubClasses;
}

CachingAllocator::CachingAllocator(AllocatorMode mode, std::size_t limit_bytes)
    : mode_(mode), limit_(limit_bytes), free_(kClasses + 1) {}

CachingAllocator::~CachingAllocator() { release_cached(); }

void* CachingAllocator::allocate(std::size_t bytes) {
  // A size class rounds up by at most 1/8: past half the address space it would wrap around.
  ATTN_CHECK(bytes <= SIZE_MAX / 2, "tensor: could not allocate ", bytes,
             " bytes (more than the address space)");
  if (mode_ == AllocatorMode::system || bytes < kMinCachedBytes) return system_allocate(bytes);
  const int c = class_index(bytes);
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Its own class first, then the smallest idle block of the next classes up to twice the size
    // (kSubClasses classes): a training step whose batches differ in length asks for slightly
    // different sizes every step, and a block of a neighbouring class serves it without a fresh,
    // page-faulting allocation.
    for (int d = c; d <= std::min(c + kSubClasses, kClasses); ++d) {
      std::vector<void*>& list = free_[d];
      if (list.empty()) continue;
      void* p = list.back();
      list.pop_back();
      stats_.cached_bytes -= index_bytes(d);
      ++stats_.hits;
      if (d != c) larger_[p] = d;
      return p;
    }
    ++stats_.misses;
  }
  return system_allocate(class_bytes(bytes));
}

void CachingAllocator::deallocate(void* p, std::size_t bytes) {
  if (p == nullptr) return;
  if (mode_ == AllocatorMode::system || bytes < kMinCachedBytes) {
    std::free(p);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    int c = class_index(bytes);
    if (!larger_.empty()) {  // a block handed out for a smaller request goes back to its own class
      const auto it = larger_.find(p);
      if (it != larger_.end()) {
        c = it->second;
        larger_.erase(it);
      }
    }
    const std::size_t cb = index_bytes(c);
    if (stats_.cached_bytes + cb <= limit_) {
      free_[c].push_back(p);
      stats_.cached_bytes += cb;
      return;
    }
    ++stats_.released;
  }
  std::free(p);
}

void CachingAllocator::release_cached() {
  std::vector<std::vector<void*>> lists(kClasses + 1);
  {
    std::lock_guard<std::mutex> lk(mu_);
    lists.swap(free_);
    stats_.cached_bytes = 0;
  }
  for (auto& list : lists)
    for (void* p : list) std::free(p);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

CachingAllocator& storage_allocator() {
  static CachingAllocator* const a = [] {
#if defined(__SANITIZE_ADDRESS__)
    const AllocatorMode fallback = AllocatorMode::system;  // let ASan see every block
#else
    const AllocatorMode fallback = AllocatorMode::caching;
#endif
    const AllocatorMode mode = runtime_config().allocator.value_or(fallback);
    const auto limit_mb = static_cast<std::size_t>(runtime_config().allocator_cache_mb);
    return new CachingAllocator(mode, limit_mb << 20);  // never deleted: see the header
  }();
  return *a;
}

}  // namespace attn::core

// Tensor storage allocation: a caching allocator for large blocks.
//
// A training step allocates the same few hundred activation and gradient
// blocks every step and frees them again. From the system allocator every
// large block is a fresh mmap whose pages fault in on first touch (about 12%
// of a step). The caching allocator keeps freed blocks of at least
// kMinCachedBytes in per-size-class free lists and hands them out again, so
// after the first step the pages are already mapped.
//
//   - size classes: 8 per power of two (a block of its own class is at most 12.5% larger
//     than asked for); a request takes a free block of its own class, else the smallest free block of
//     the next 8 classes (at most twice its size: batches of different lengths ask for slightly
//     different sizes every step), which goes back to its own class when freed.
//   - bounded: at most cache_limit() idle bytes are kept (ATTN_ALLOCATOR_CACHE_MB,
//     default 2048); a block freed past the limit goes back to the system.
//     Blocks in use are not counted (they are the caller's memory).
//   - thread-safe (one mutex; a step does a few thousand allocations).
//   - blocks are 64-byte aligned and uninitialised (Tensor::zeros clears them).
//   - ATTN_ALLOCATOR=system (runtime_config(), read at the first allocation) turns the cache
//     off: every block comes from and returns to aligned_alloc/free, which is
//     what ASan needs to see use-after-free. ASan builds default to system.
//
// Internal (src/): the public API is attn::Tensor; tests include this header
// to check the allocator itself.
#pragma once

#include <attn/core/config.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace attn::core {

using attn::AllocatorMode;  // attn/core/config.h: caching or system

// The mode named by an ATTN_ALLOCATOR value: null or "" gives `fallback`,
// "caching" and "system" name themselves; anything else throws attn::Error.
AllocatorMode allocator_mode_from(const char* value, AllocatorMode fallback);

struct AllocatorStats {
  uint64_t hits = 0;             // requests served from a free list
  uint64_t misses = 0;           // cacheable requests that went to the system
  uint64_t released = 0;         // freed blocks returned to the system (over the limit)
  std::size_t cached_bytes = 0;  // idle bytes held in the free lists
};

class CachingAllocator {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kMinCachedBytes = std::size_t{16} << 10;

  // limit_bytes: the most idle bytes kept in the free lists.
  CachingAllocator(AllocatorMode mode, std::size_t limit_bytes);
  ~CachingAllocator();  // frees every idle block
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A 64-byte aligned block of at least `bytes` bytes (bytes == 0 is allowed);
  // throws attn::Error when the system has no memory left.
  void* allocate(std::size_t bytes);
  // Gives back a block from allocate(bytes), with the same `bytes`.
  void deallocate(void* p, std::size_t bytes);

  // Frees every idle block (the blocks in use are unaffected).
  void release_cached();
  AllocatorStats stats() const;
  AllocatorMode mode() const { return mode_; }
  std::size_t cache_limit() const { return limit_; }

  // The size a block of `bytes` is rounded up to, and its class index (for
  // bytes >= kMinCachedBytes).
  static std::size_t class_bytes(std::size_t bytes);
  static int class_index(std::size_t bytes);
  // The size of the blocks of class `index` (class_index(b) of a size b >= kMinCachedBytes):
  // index_bytes(class_index(b)) == class_bytes(b).
  static std::size_t index_bytes(int index);

 private:
  static constexpr int kSubClasses = 8;  // per power of two
  static constexpr int kClasses = 64 * kSubClasses;

  AllocatorMode mode_;
  std::size_t limit_;
  mutable std::mutex mu_;
  std::vector<std::vector<void*>> free_;  // [kClasses]: idle blocks of each class
  // Blocks in use that came from a larger class than their request's (allocate takes an idle block
  // of up to kSubClasses classes up): their class, so that deallocate returns them there.
  std::unordered_map<void*, int> larger_;
  AllocatorStats stats_;
};

// The process-wide allocator behind attn::Storage: the mode from ATTN_ALLOCATOR,
// the limit from ATTN_ALLOCATOR_CACHE_MB, both read at the first call. Never
// destroyed (tensors in static objects may outlive every other static).
CachingAllocator& storage_allocator();

}  // namespace attn::core

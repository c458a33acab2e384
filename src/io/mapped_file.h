// Internal to src/io: a whole regular file mapped read-only, shared by the
// safetensors and GGUF readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace attn::io_detail {

struct Mapping {
  const std::byte* data = nullptr;
  uint64_t size = 0;
};

// Opens `path`, checks it is a regular file of at least `min_size` bytes and
// maps it read-only (private). Errors read "<format>: cannot open '<path>': ..."
// or "<format>: <path>: <problem>"; a short file gives
// "file is N bytes; <too_small>". Release the mapping with unmap().
Mapping map_readonly(const std::string& path, const char* format, uint64_t min_size, const char* too_small);
void unmap(const Mapping& m);
// Drops this process's pages of [p, p + n) where the range lies inside m (whole pages only; no-op
// otherwise): reading them again maps them again from the file. The mapping is private and
// read-only, so nothing is lost.
void release_pages(const Mapping& m, const std::byte* p, uint64_t n);

}  // namespace attn::io_detail

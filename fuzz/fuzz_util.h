// Shared by the fuzz targets: the input as a file the readers can open, and a
// check that aborts (so libFuzzer records a crash) when an invariant fails.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace attn::fuzz {

// One in-memory file (memfd) reused for every input; its /proc path is what
// SafeTensorsFile::open and GgufFile::open map, so no library change is needed.
class MemFile {
 public:
  MemFile() {
    fd_ = memfd_create("attn-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  // Replaces the contents with data[0, size).
  const std::string& write(const uint8_t* data, std::size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    std::size_t done = 0;
    while (done < size) {
      const ssize_t k = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (k <= 0) std::abort();
      done += static_cast<std::size_t>(k);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// A property that must hold for every input; prints and aborts otherwise.
#define FUZZ_ASSERT(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "FUZZ_ASSERT failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                    \
      std::fprintf(stderr, "\n");                                                           \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

}  // namespace attn::fuzz

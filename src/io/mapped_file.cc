#include "io/mapped_file.h"

#include <attn/core/error.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace attn::io_detail {

Mapping map_readonly(const std::string& path, const char* format, uint64_t min_size, const char* too_small) {
  auto fail = [&](const std::string& problem) {
    throw Error(detail::concat(format, ": ", path, ": ", problem));
  };
  // O_NONBLOCK: opening a FIFO must not hang before the regular-file check below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(detail::concat(format, ": cannot open '", path, "': ", std::strerror(errno)));
  struct stat sb {};
  if (fstat(fd, &sb) != 0) {
    const std::string e = std::strerror(errno);
    ::close(fd);
    fail("cannot stat: " + e);
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    fail(S_ISDIR(sb.st_mode)    ? "not a regular file (expected one; found a directory)"
         : S_ISFIFO(sb.st_mode) ? "not a regular file (expected one; found a FIFO)"
         : S_ISCHR(sb.st_mode)  ? "not a regular file (expected one; found a character device)"
                                : "not a regular file (expected one; found another kind)");
  }
  Mapping m;
  m.size = static_cast<uint64_t>(sb.st_size);
  if (m.size < min_size) {
    ::close(fd);
    fail(detail::concat("file is ", m.size, " bytes; ", too_small));
  }
  void* p = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string map_error = p == MAP_FAILED ? std::strerror(errno) : "";
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) fail(detail::concat("cannot map ", m.size, " bytes: ", map_error));
  m.data = static_cast<const std::byte*>(p);
  return m;
}

void unmap(const Mapping& m) {
  if (m.data) munmap(const_cast<std::byte*>(m.data), m.size);
}

void release_pages(const Mapping& m, const std::byte* p, uint64_t n) {
  if (!m.data || p < m.data || n > m.size || p - m.data > static_cast<std::ptrdiff_t>(m.size - n)) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(p), e = a + n;
  const uintptr_t first = (a + page - 1) / page * page, last = e / page * page;
  if (first < last) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // advice
}

}  // namespace attn::io_detail

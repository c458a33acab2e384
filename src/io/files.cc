#include <attn/core/error.h>
#include <attn/io/files.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

namespace attn::io {

namespace {

std::string sys_error() { return std::strerror(errno); }

// Makes a completed rename durable. Best effort: some file systems refuse
// fsync on directories, and the data itself is already synced.
void sync_parent_dir(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& target, std::string who)
    : target_(target), who_(who.empty() ? std::string() : who + ": ") {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    path_ = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  throw Error(who_ + "cannot create the temporary file '" + path_ + "' for '" + target + "': " + sys_error());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

void AtomicFile::write(const void* data, std::size_t n) {
  ATTN_CHECK(fd_ >= 0 && !committed_, who_, "writing to '", target_, "' after commit");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::write(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) fail("writing");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

void AtomicFile::commit() {
  ATTN_CHECK(fd_ >= 0 && !committed_, who_, "'", target_, "' committed twice");
  if (::fsync(fd_) != 0) fail("syncing");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("closing");
  if (::rename(path_.c_str(), target_.c_str()) != 0)
    throw Error(who_ + "cannot rename '" + path_ + "' to '" + target_ + "': " + sys_error());
  committed_ = true;
  sync_parent_dir(target_);
}

void AtomicFile::fail(const char* what) const {
  throw Error(who_ + what + " '" + path_ + "' failed: " + sys_error() +
              " (the previous file, if any, is unchanged)");
}

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  ATTN_CHECK(f.good(), "cannot open ", what, " '", path, "' for reading");
  std::stringstream ss;
  ss << f.rdbuf();
  ATTN_CHECK(!f.bad(), "error reading ", what, " '", path, "'");
  return ss.str();
}

void write_file_atomically(const std::string& path, std::string_view data, const std::string& who) {
  AtomicFile f(path, who);
  f.write(data);
  f.commit();
}

}  // namespace attn::io

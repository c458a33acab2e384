#include <attn/core/error.h>
#include <attn/io/files.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <istream>
#include <optional>
#include <vector>

namespace attn::io {

namespace fs = std::filesystem;

namespace {

std::string sys_error() { return std::strerror(errno); }

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Makes a completed rename durable. Best effort: some file systems refuse
// fsync on directories, and the data itself is already synced.
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

void sync_parent_dir(const std::string& path) { sync_dir(dir_of(path)); }

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

// The file a write to `target` replaces: the target itself, or what its chain of symbolic links
// names; with its permission bits when it exists. Throws for anything but a regular file.
struct Resolved {
  std::string path;
  std::optional<mode_t> mode;
};

Resolved resolve_for_writing(const std::string& target, const std::string& who) {
  std::string p = target;
  for (int hops = 0; hops <= 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return {p, std::nullopt};
      throw Error(who + "cannot inspect '" + p + "' before writing '" + target + "': " + sys_error());
    }
    if (S_ISREG(st.st_mode)) return {p, st.st_mode & 07777};
    if (!S_ISLNK(st.st_mode))
      throw Error(
          who + "cannot write '" + target + "'" + (p != target ? " (the link names '" + p + "')" : "") +
          ": expected a regular file or a new name; found " + kind_of(st.st_mode) + " (nothing was written)");
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
    const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
    if (n < 0) throw Error(who + "cannot read the symbolic link '" + p + "': " + sys_error());
    const std::string link(buf.data(), static_cast<std::size_t>(n));
    p = !link.empty() && link[0] == '/' ? link : dir_of(p) + "/" + link;
  }
  throw Error(who + "cannot write '" + target + "': expected at most 40 symbolic links; found more");
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool pid_alive(long pid) {
  if (pid <= 0) return true;  // not ours to judge
  if (pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// If `file` is "<name><marker><pid>[.<n>]", its pid; else -1. Empty name: any prefix.
long stale_pid(std::string_view file, const std::string& name, std::string_view marker, bool counter) {
  std::size_t at;
  if (!name.empty()) {
    if (file.size() <= name.size() + marker.size() || file.substr(0, name.size()) != name ||
        file.substr(name.size(), marker.size()) != marker)
      return -1;
    at = name.size() + marker.size();
  } else {
    const std::size_t m = file.rfind(marker);
    if (m == std::string_view::npos || m == 0) return -1;
    at = m + marker.size();
  }
  std::string_view rest = file.substr(at);
  std::string_view pid = rest;
  if (counter) {
    const std::size_t dot = rest.find('.');
    if (dot == std::string_view::npos || !all_digits(rest.substr(dot + 1))) return -1;
    pid = rest.substr(0, dot);
  } else if (const std::size_t dot = rest.find('.'); dot != std::string_view::npos) {
    if (!all_digits(rest.substr(dot + 1))) return -1;
    pid = rest.substr(0, dot);
  }
  if (!all_digits(pid) || pid.size() > 9) return -1;
  return std::stol(std::string(pid));
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

std::string mib(uint64_t bytes) {
  return bytes % (uint64_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                          : std::to_string(bytes) + " bytes";
}

[[noreturn]] void too_large(const std::string& what, const std::string& path, uint64_t limit,
                            const std::string& found) {
  throw Error(detail::concat(what, " '", path, "' is too large: expected at most ", limit, " bytes (",
                             mib(limit), ", the input limit; attn --max-input-mb N raises it), found ",
                             found));
}

}  // namespace

AtomicFile::AtomicFile(const std::string& target, std::string who)
    : target_(target), who_(who.empty() ? std::string() : who + ": ") {
  const Resolved r = resolve_for_writing(target, who_);
  target_ = r.path;
  remove_stale_temporaries(dir_of(target_), base_of(target_));
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    path_ = target_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      if (r.mode && ::fchmod(fd_, *r.mode) != 0) fail("setting the permissions of");
      return;
    }
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
    errno = 0;
    const ssize_t k = ::write(fd_, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k == 0 && errno == 0) errno = ENOSPC;  // a write of nothing: the device is full
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

namespace {
std::atomic<uint64_t> g_read_limit{kDefaultReadLimit};
}  // namespace

uint64_t default_read_limit() { return g_read_limit.load(std::memory_order_relaxed); }

void set_default_read_limit(uint64_t max_bytes) {
  g_read_limit.store(max_bytes ? max_bytes : kDefaultReadLimit, std::memory_order_relaxed);
}

std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const uint64_t limit = max_bytes ? max_bytes : default_read_limit();
  // O_NONBLOCK: opening a FIFO without a writer must not hang; reads block again below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(detail::concat("cannot open ", what, " '", path, "' for reading: ", sys_error()));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(detail::concat("cannot inspect ", what, " '", path, "': ", sys_error()));
  if (S_ISDIR(st.st_mode)) throw Error(detail::concat(what, " '", path, "' is a directory; expected a file"));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string out;
  if (S_ISREG(st.st_mode)) {
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size > limit) too_large(what, path, limit, std::to_string(size) + " bytes");
    out.reserve(static_cast<std::size_t>(size));
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) throw Error(detail::concat("error reading ", what, " '", path, "': ", sys_error()));
    if (k == 0) break;
    if (out.size() + static_cast<uint64_t>(k) > limit)
      too_large(what, path, limit, "more than " + std::to_string(limit) + " bytes");
    out.append(buf, static_cast<std::size_t>(k));
  }
  return out;
}

std::string read_stream(std::istream& in, const std::string& what, uint64_t max_bytes) {
  const uint64_t limit = max_bytes ? max_bytes : default_read_limit();
  std::string out;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const auto k = static_cast<uint64_t>(in.gcount());
    if (out.size() + k > limit)
      throw Error(detail::concat(what, " is too large: expected at most ", limit, " bytes (", mib(limit),
                                 ", the input limit; attn --max-input-mb N raises it), found more"));
    out.append(buf, static_cast<std::size_t>(k));
  }
  ATTN_CHECK(!in.bad(), "error reading ", what);
  return out;
}

bool read_line(std::istream& in, std::string& line, const std::string& what, uint64_t max_bytes) {
  const uint64_t limit = max_bytes ? max_bytes : default_read_limit();
  line.clear();
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = sb ? sb->sbumpc() : std::char_traits<char>::eof();
    if (c == std::char_traits<char>::eof()) {
      if (!any) in.setstate(std::ios::eofbit | std::ios::failbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (line.size() >= limit)
      throw Error(detail::concat(what, ": a line is too long: expected at most ", limit, " bytes (",
                                 mib(limit),
                                 ", the input limit; attn --max-input-mb N raises it), found more"));
    line.push_back(static_cast<char>(c));
  }
}

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(detail::concat("cannot open ", what, " '", path, "': ", sys_error()));
  if (!S_ISREG(st.st_mode))
    throw Error(detail::concat(what, " '", path, "': expected a regular file; found ", kind_of(st.st_mode)));
}

void write_file_atomically(const std::string& path, std::string_view data, const std::string& who) {
  AtomicFile f(path, who);
  f.write(data);
  f.commit();
}

int remove_stale_temporaries(const std::string& dir, const std::string& name) {
  int removed = 0;
  for (const std::string& f : list_dir(dir)) {
    long pid = stale_pid(f, name, ".tmp.", true);
    if (pid < 0) pid = stale_pid(f, name, ".new.", false);
    if (pid < 0 || pid_alive(pid)) continue;
    const std::string p = dir + "/" + f;
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(p.c_str()) == 0) ++removed;
  }
  return removed;
}

StagedFolder::StagedFolder(const std::string& target, std::string who)
    : who_(who.empty() ? std::string() : who + ": ") {
  std::error_code ec;
  fs::path t = fs::absolute(fs::path(target), ec).lexically_normal();
  if (!t.has_filename()) t = t.parent_path();
  if (const fs::path c = fs::weakly_canonical(t, ec); !ec) t = c;
  target_ = t.string();
  struct stat st {};
  if (::stat(target_.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw Error(who_ + "cannot write the folder '" + target + "': expected a folder or a new name; found " +
                (S_ISREG(st.st_mode) ? "a file" : kind_of(st.st_mode)));
  const std::string parent = t.parent_path().string(), name = t.filename().string();
  for (const std::string& f : list_dir(parent)) {
    long pid = stale_pid(f, name, ".staging.", false);
    if (pid < 0) pid = stale_pid(f, name, ".old.", false);
    if (pid < 0 || pid_alive(pid)) continue;
    fs::remove_all(fs::path(parent) / f, ec);
  }
  if (S_ISDIR(st.st_mode)) remove_stale_temporaries(target_);
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    staging_ =
        target_ + ".staging." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
    if (::mkdir(staging_.c_str(), 0777) == 0) return;
    if (errno != EEXIST) break;
  }
  throw Error(who_ + "cannot create the staging folder '" + staging_ + "' for '" + target +
              "': " + sys_error());
}

StagedFolder::~StagedFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

std::string StagedFolder::path(const std::string& name) const { return staging_ + "/" + name; }

void StagedFolder::commit() {
  ATTN_CHECK(!committed_, who_, "'", target_, "' committed twice");
  std::error_code ec;
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (exists) {
    // Keep what the previous folder holds beyond this run's files.
    for (const std::string& f : list_dir(target_)) {
      const fs::path src = fs::path(target_) / f, dst = fs::path(staging_) / f;
      if (fs::exists(fs::symlink_status(dst, ec))) continue;
      if (fs::is_regular_file(fs::symlink_status(src, ec))) {
        fs::create_hard_link(src, dst, ec);
        if (ec) fs::copy_file(src, dst, ec);
      } else {
        fs::copy(src, dst, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
      }
      if (ec)
        throw Error(who_ + "cannot keep '" + src.string() + "' in the new folder: " + ec.message() +
                    " (the previous folder is unchanged)");
    }
  }
  sync_dir(staging_);
  if (!exists) {
    if (::rename(staging_.c_str(), target_.c_str()) != 0)
      throw Error(who_ + "cannot rename '" + staging_ + "' to '" + target_ + "': " + sys_error());
  } else if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(staging_, ec);  // the previous folder, now under the staging name
  } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
    const std::string old = target_ + ".old." + std::to_string(::getpid());
    if (::rename(target_.c_str(), old.c_str()) != 0)
      throw Error(who_ + "cannot rename '" + target_ + "' to '" + old + "': " + sys_error());
    if (::rename(staging_.c_str(), target_.c_str()) != 0) {
      const std::string e = sys_error();
      (void)::rename(old.c_str(), target_.c_str());
      throw Error(who_ + "cannot rename '" + staging_ + "' to '" + target_ + "': " + e);
    }
    fs::remove_all(old, ec);
  } else {
    throw Error(who_ + "cannot swap '" + staging_ + "' with '" + target_ + "': " + sys_error() +
                " (the previous folder is unchanged)");
  }
  committed_ = true;
  sync_parent_dir(target_);
}

}  // namespace attn::io

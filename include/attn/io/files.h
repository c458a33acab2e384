// Whole files: read_file, and files written so that neither a reader nor a crash ever sees a half-written
// one: the bytes go to a fresh temporary file in the same directory, which is
// fsynced, closed and renamed over the target; the directory is then fsynced
// (best effort). On any error, or when an AtomicFile is destroyed without
// commit(), the temporary file is removed and the previous target (if any) is
// unchanged.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace attn::io {

class AtomicFile {
 public:
  // `who` prefixes error messages ("safetensors", ...; empty: no prefix, for
  // callers whose errors are already prefixed, like the CLI's).
  AtomicFile(const std::string& target, std::string who);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // fsync, close, rename over the target, fsync the directory.
  void commit();

 private:
  std::string target_, who_, path_;
  int fd_ = -1;
  bool committed_ = false;
  [[noreturn]] void fail(const char* what) const;
};

// The whole file as bytes; `what` names it in errors ("cannot open <what> '<path>' for reading").
std::string read_file(const std::string& path, const std::string& what);

// The whole file in one call.
void write_file_atomically(const std::string& path, std::string_view data, const std::string& who = "");

}  // namespace attn::io

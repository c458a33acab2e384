// Whole files: read_file (bounded), files written so that neither a reader nor a crash ever sees a
// half-written one, and folders of output files that appear all at once.
//
// Writing (AtomicFile, write_file_atomically): the bytes go to a fresh temporary file
// "<target>.tmp.<pid>.<n>" in the same directory, which is fsynced, closed and renamed over the
// target; the directory is then fsynced (best effort). On any error, or when an AtomicFile is
// destroyed without commit(), the temporary file is removed and the previous target (if any) is
// unchanged. What may be replaced:
//   - a regular file: replaced; the new file keeps its permission bits (a 0600 file stays 0600);
//   - a symbolic link: followed (up to 40 links), and the file it names is replaced atomically
//     in the link target's directory; the link itself stays a link;
//   - anything else (a directory, a character or block device, a FIFO, a socket): refused with
//     attn::Error before anything is written ("expected a regular file or a new name; found a
//     character device");
//   - nothing: a new file is created with mode 0666 minus the umask.
// Temporary files "<target>.tmp.<pid>.<n>" left by a killed process (its pid no longer alive)
// are removed by the next AtomicFile for the same target.
//
// Reading (read_file, read_stream, read_line): at most max_bytes; 0 = the process's default limit,
// default_read_limit(): 256 MiB (kDefaultReadLimit) unless set_default_read_limit changed it (the
// attn command's `--max-input-mb N`). A larger input throws attn::Error naming the limit and the
// size found. read_file opens without
// blocking (a FIFO with no writer does not hang the open) and refuses a directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
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

inline constexpr uint64_t kDefaultReadLimit = uint64_t{256} << 20;

// The default limit of read_file, read_stream and read_line in bytes (kDefaultReadLimit unless set).
uint64_t default_read_limit();
// Sets it for the whole process (thread-safe); 0 restores kDefaultReadLimit.
void set_default_read_limit(uint64_t max_bytes);

// The whole file as bytes, at most max_bytes (0: default_read_limit()); `what` names it in errors
// ("cannot open <what> '<path>' for reading: <reason>", "<what> '<path>' is larger than the limit").
std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes = 0);

// All of a stream (stdin) as bytes, at most max_bytes (0: default_read_limit()).
std::string read_stream(std::istream& in, const std::string& what, uint64_t max_bytes = 0);

// One line of a stream (interactive standard input) without its '\n', like std::getline, but a line
// longer than max_bytes (0: default_read_limit()) throws instead of filling memory. False at the end.
bool read_line(std::istream& in, std::string& line, const std::string& what, uint64_t max_bytes = 0);

// Throws unless `path` is a regular file, without opening it (a FIFO is never opened, so this never
// blocks): "<what> '<path>': expected a regular file; found a FIFO" / "cannot open ...: <reason>".
void require_regular_file(const std::string& path, const std::string& what);

// The whole file in one call.
void write_file_atomically(const std::string& path, std::string_view data, const std::string& who = "");

// A folder of output files (a training run's folder) that appears all at once or not at all.
// Files are written into a staging folder "<target>.staging.<pid>" next to the target (path(name)
// names one); commit() swaps it with the target in one rename (renameat2 RENAME_EXCHANGE; on a
// file system without it, two renames, and a crash between them leaves the previous folder as
// "<target>.old.<pid>") and removes the previous folder. Entries of the previous folder the new
// one does not have are kept (hard-linked or copied into the new folder before the swap). Destroyed
// without commit(), the staging folder is removed and the target is unchanged. The constructor
// removes what killed runs left in the same place: "<target>.staging.<pid>" and
// "<target>.old.<pid>" folders beside it, and "*.new.<pid>" and "*.tmp.<pid>.<n>" files in it,
// whose pid is no longer alive.
class StagedFolder {
 public:
  StagedFolder(const std::string& target, std::string who);
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  ~StagedFolder();

  // Where to write the output file `name` before commit().
  std::string path(const std::string& name) const;
  const std::string& staging() const { return staging_; }
  void commit();

 private:
  std::string target_, who_, staging_;
  bool committed_ = false;
};

// Removes the files "<dir>/<name>.tmp.<pid>.<n>" and "<dir>/<name>.new.<pid>" (any name when
// `name` is empty) whose pid is no longer alive; returns how many were removed. Best effort.
int remove_stale_temporaries(const std::string& dir, const std::string& name = "");

}  // namespace attn::io

// safetensors: read (memory-mapped, validated) and write (atomic) tensor files.
//
// File layout (https://huggingface.co/docs/safetensors):
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  UTF-8 JSON object, optionally padded at the end with spaces:
//              {"__metadata__": {"key": "value", ...},            (optional)
//               "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   [rest]     the data section; offsets are relative to its start, little-endian
//
// Reading: SafeTensorsFile::open maps the file read-only and validates the
// whole header before anything is used: N within the file and at most
// kMaxHeaderBytes; valid UTF-8; a JSON object; each entry has exactly dtype,
// shape and data_offsets; known dtype; non-negative integer sizes whose
// product (in elements and bytes) does not overflow; 0 <= begin <= end <=
// data section size; end − begin == numel × dtype size; the non-empty ranges
// of different tensors do not overlap (gaps between them are allowed); the
// optional "__metadata__" is a map of strings to strings. Every error is an
// attn::Error naming the file, the tensor and the expected vs actual values.
// The file must not be truncated or rewritten in place while open (the
// mapping would fault); our own writer replaces files atomically, so files it
// writes are safe to rewrite while a reader holds the old version.
//
// Writing: save_safetensors writes the tensors in the caller's order (header
// and data section alike), pads the header with spaces so the data section
// starts at a multiple of 8 bytes, and replaces `path` atomically: it writes a
// temporary file in the same directory, fsyncs it, renames it over `path` and
// fsyncs the directory. An interrupted or failed save leaves any previous
// file untouched; on error the temporary file is removed.
#pragma once

#include <attn/core/tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace attn::io {

// The element types of a safetensors file that attn understands.
enum class StDType { F64, F32, F16, BF16, I64, I32, U8, BOOL };

const char* st_dtype_name(StDType t);  // "F32", "BF16", ...
std::size_t st_dtype_size(StDType t);  // bytes per element
// The attn dtype that holds this type exactly: F16 → none, BOOL → u8.
std::optional<DType> exact_dtype(StDType t);
// The safetensors type for an attn dtype (f32 → F32, u8 → U8, ...).
StDType st_dtype_of(DType t);

// Header entries are limited so a hostile length cannot make us parse or
// allocate gigabytes.
inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MiB

using Metadata = std::map<std::string, std::string>;

struct TensorInfo {
  std::string name;
  StDType dtype = StDType::F32;
  Shape shape;  // may be [] (a scalar, one element) or contain 0
  int64_t numel = 0;
  uint64_t begin = 0;  // byte offsets into the data section: [begin, end)
  uint64_t end = 0;
};

class SafeTensorsFile {
 public:
  // Maps and validates `path`; throws attn::Error on any problem.
  static SafeTensorsFile open(const std::string& path);

  const std::string& path() const;
  // Tensor names in header order.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // Throws, naming the file and the tensor, when `name` is absent.
  const TensorInfo& info(const std::string& name) const;
  // A new contiguous tensor holding a copy of the data, converted to `to`.
  // Any source converts to a float dtype (f32, f64, bf16; integers may round);
  // integer dtypes (i32, i64, u8) take integer or BOOL sources whose values fit,
  // and never float sources. BOOL reads as 0/1 (any nonzero byte is true).
  Tensor load(const std::string& name, DType to = DType::f32) const;
  // The stored little-endian bytes, valid while this object (or a copy) lives.
  std::span<const std::byte> bytes(const std::string& name) const;
  // The "__metadata__" map (empty when the header has none).
  const Metadata& metadata() const;
  uint64_t file_size() const;
  uint64_t header_size() const;  // N

 private:
  struct State;
  std::shared_ptr<const State> state_;
  explicit SafeTensorsFile(std::shared_ptr<const State> s) : state_(std::move(s)) {}
};

// Writes f32, f64, bf16, i64, i32 and u8 tensors (stored as F32, F64, BF16,
// I64, I32, U8). Non-contiguous tensors are written in row-major order.
// Names must be non-empty, unique and not "__metadata__".
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const Metadata& metadata = {});

// Lower level: tensors given as raw little-endian bytes of any StDType (F16
// and BOOL included). `data` holds numel(shape) × st_dtype_size(dtype) bytes.
struct RawTensor {
  std::string name;
  StDType dtype = StDType::F32;
  Shape shape;
  const void* data = nullptr;
};
void save_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors,
                          const Metadata& metadata = {});

}  // namespace attn::io

// GGUF: read (memory-mapped, validated) the model files of llama.cpp / ggml.
//
// File layout (versions 2 and 3; all integers little-endian):
//   "GGUF"            4-byte magic
//   u32 version       2 or 3 (3 only adds big-endian files, which attn rejects)
//   u64 n_tensors, u64 n_kv
//   n_kv × metadata   string key, u32 value type, value
//   n_tensors × info  string name, u32 n_dims, u64 dims[n_dims] (innermost first),
//                     u32 ggml type, u64 offset (relative to the data section)
//   padding           to a multiple of `general.alignment` (default 32)
//   data section      tensor data; each offset is a multiple of the alignment
// A string is a u64 byte length followed by that many bytes (no terminator).
// A value is one of u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string, or an
// array: u32 element type, u64 count, then the elements.
//
// GgufFile::open maps the file read-only and validates all of it before
// anything is used: the magic; the version; counts within sane limits (and
// never more entries than bytes left in the file); every string and array
// length within the file; known value types; bools 0 or 1; unique, non-empty
// keys and tensor names (keys and names valid UTF-8); general.alignment, when
// present, a u32 power of two; per tensor: n_dims <= 4, dims >= 0 whose
// product and byte size do not overflow, a known ggml type, the innermost
// dim a multiple of the type's block size, the offset aligned and the bytes
// inside the data section, no two tensors overlapping. Every error is an
// attn::Error naming the file, the key or tensor, and expected vs actual.
//
// Strings are stored as bytes: values are not required to be valid UTF-8
// (keys and tensor names are). Nested arrays (an array of arrays) are
// rejected: no model attn reads uses them.
//
// The file must not be truncated or rewritten in place while open.
#pragma once

#include <attn/core/tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn::io {

// Metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* gguf_type_name(GgufType t);  // "u32", "string", ...

// Tensor element types (ggml_type), numbered as in the file. Only those attn
// dequantizes are named; any other id from ggml's list with a known block
// layout still validates (its size is checked) and reports its ggml name, but
// load() rejects it.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};
// "F32", "Q4_1", "Q6_K", ... for any id ggml defines; "?" otherwise.
const char* ggml_type_name(GgmlType t);
// Elements per block and bytes per block; 0 for ids ggml does not define.
int64_t ggml_block_elems(GgmlType t);
int64_t ggml_block_bytes(GgmlType t);
// True for the types load() and dequantize() handle:
// F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K.
bool ggml_can_dequantize(GgmlType t);

// Block layouts (32 elements per quantized block; d, m are IEEE halves):
//   Q8_0 (34 bytes): d, int8 q[32];           x[i] = d·q[i]
//   Q4_0 (18 bytes): d, u8 qs[16];            x[i] = d·(lo(qs[i]) − 8), x[i+16] = d·(hi(qs[i]) − 8)
//   Q4_1 (20 bytes): d, m, u8 qs[16];         x[i] = d·lo(qs[i]) + m,   x[i+16] = d·hi(qs[i]) + m
//   Q5_0 (22 bytes): d, u32 qh, u8 qs[16];    x[i] = d·((lo(qs[i]) | bit i of qh << 4) − 16),
//                                             x[i+16] = d·((hi(qs[i]) | bit i+16 of qh << 4) − 16)
//   Q5_1 (24 bytes): d, m, u32 qh, u8 qs[16]; the same 5-bit quants q, x = d·q + m
// with lo = the low nibble, hi = the high nibble, i in [0, 16).
// K-quants: super-blocks of 256 elements, sub-blocks j of 32 (Q6_K: scales per 16):
//   Q4_K (144 bytes): d, dmin, u8 scales[12], u8 qs[128];  6-bit scale sc[j] and min mn[j] packed in
//                     `scales` (ggml's get_scale_min_k4); sub-block j = 2c + h (c in [0, 4)) takes the
//                     low (h = 0) or high (h = 1) nibbles of qs[32c .. 32c+31]:
//                     x = (d·sc[j])·q − (dmin·mn[j])
//   Q5_K (176 bytes): d, dmin, scales[12], u8 qh[32], qs[128]; as Q4_K with bit j of qh[l] as the
//                     fifth bit of element l of sub-block j
//   Q6_K (210 bytes): u8 ql[128], u8 qh[64], i8 scales[16], d; element e = 128h + 32t + l
//                     (h in [0, 2), t in [0, 4), l in [0, 32)): q = (nibble t/2 of ql[64h + 32(t%2) + l])
//                     | ((qh[32h + l] >> 2t) & 3) << 4, x = (d·scales[e / 16])·(q − 32)
// Every product and difference is one f32 operation in this order (no fused multiply-add), the
// arithmetic of the gguf Python package's numpy dequantizer, so the results are bit-identical to it.
// Dequantizes `n` elements (a multiple of the block size) starting at block
// `src` to `dst`. Throws for types ggml_can_dequantize() rejects.
// src: [n / block_elems blocks of block_bytes], dst: [n]
void dequantize(GgmlType type, const std::byte* src, int64_t n, float* dst);

inline constexpr uint64_t kGgufDefaultAlignment = 32;
// Limits that stop a hostile header from making us allocate or loop for long.
inline constexpr uint64_t kGgufMaxTensors = 1u << 20;
inline constexpr uint64_t kGgufMaxKeys = 1u << 20;
inline constexpr uint64_t kGgufMaxStringBytes = 1u << 30;

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  Shape dims;   // as stored: innermost (fastest-varying) first, ggml's ne[0], ne[1], ...
  Shape shape;  // attn's row-major shape: dims reversed (outermost first)
  int64_t numel = 0;
  uint64_t offset = 0;  // byte offset into the data section
  uint64_t bytes = 0;   // numel / block_elems × block_bytes
};

// A quantized (or plain) tensor as stored, for kernels that work on blocks.
// Each row (shape's last dim, ggml's ne[0]) is row_blocks whole blocks.
struct GgufTensorView {
  const std::byte* data = nullptr;  // valid while the GgufFile (or a copy) lives
  GgmlType type = GgmlType::F32;
  Shape shape;              // row-major, outermost first
  int64_t n_blocks = 0;     // total blocks
  int64_t row_blocks = 0;   // blocks per row
  int64_t block_elems = 0;  // elements per block
  int64_t block_bytes = 0;  // bytes per block
};

class GgufFile {
 public:
  // Maps and validates `path`; throws attn::Error on any problem.
  static GgufFile open(const std::string& path);

  const std::string& path() const;
  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t file_size() const;
  uint64_t data_offset() const;  // file offset of the data section

  // ---- metadata ----
  std::vector<std::string> keys() const;  // file order
  bool has(std::string_view key) const;
  // Type of a key's value; throws (naming the file) when the key is absent.
  GgufType type(std::string_view key) const;
  // For array values: element type and length. Throws for non-arrays.
  GgufType array_type(std::string_view key) const;
  uint64_t array_size(std::string_view key) const;

  // Typed getters: each throws when the key is absent or its type differs,
  // naming the file, the key, and the expected and actual types.
  uint8_t get_u8(std::string_view key) const;
  int8_t get_i8(std::string_view key) const;
  uint16_t get_u16(std::string_view key) const;
  int16_t get_i16(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  // Any integer type (u8..i64) whose value fits in int64 — writers disagree on
  // u32 vs i32 vs u64 for counts and ids.
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;  // fallback when absent
  // Typed getters for a model's hyperparameters, one wording for every architecture:
  // an integer > 0 (any integer type); throws naming the file and the key when absent or not > 0.
  int64_t get_positive(std::string_view key) const;
  // A real number stored as f32, f64 or any integer type; `fallback` when absent; throws naming the
  // key for another type.
  double get_real(std::string_view key, double fallback) const;
  // tokenizer.chat_template: the model's Jinja chat template (text::ChatTemplate renders it); nullopt
  // when the file has none. Throws when the key holds something other than a string.
  std::optional<std::string> chat_template() const;

  // Arrays. get_int_array takes any integer element type (values must fit in
  // int64), get_float_array f32 or f64 elements; the others need the exact type.
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<bool> get_bool_array(std::string_view key) const;

  // ---- tensors ----
  std::vector<std::string> tensor_names() const;  // file order
  bool has_tensor(std::string_view name) const;
  // Throws, naming the file and the tensor, when `name` is absent.
  const GgufTensorInfo& tensor(std::string_view name) const;
  // A new contiguous f32 tensor in attn's row-major shape, dequantized.
  Tensor load(std::string_view name) const;
  // The stored blocks without conversion.
  GgufTensorView view(std::string_view name) const;
  // Gives back this process's memory for the whole pages of [p, p + n) when they lie in the file's
  // mapping (no-op otherwise), e.g. blocks a caller has copied into another layout: a later read maps
  // them again from the file.
  void release_pages(const std::byte* p, uint64_t n) const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
  explicit GgufFile(std::shared_ptr<const State> s) : state_(std::move(s)) {}
};

}  // namespace attn::io

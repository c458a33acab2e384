#include <attn/core/f16.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "io/mapped_file.h"

namespace attn::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

// ---- dtypes ----------------------------------------------------------------------

namespace {

struct DTypeEntry {
  StDType t;
  const char* name;
  std::size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {StDType::F64, "F64", 8}, {StDType::F32, "F32", 4}, {StDType::F16, "F16", 2}, {StDType::BF16, "BF16", 2},
    {StDType::I64, "I64", 8}, {StDType::I32, "I32", 4}, {StDType::U8, "U8", 1},   {StDType::BOOL, "BOOL", 1},
};

bool is_float(StDType t) {
  return t == StDType::F64 || t == StDType::F32 || t == StDType::F16 || t == StDType::BF16;
}

std::string known_dtypes() {
  std::string s;
  for (const auto& e : kDTypes) s += std::string(s.empty() ? "" : ", ") + e.name;
  return s;
}

// a * b for non-negative values; false on int64 overflow.
bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace

const char* st_dtype_name(StDType t) {
  for (const auto& e : kDTypes)
    if (e.t == t) return e.name;
  return "?";
}

std::size_t st_dtype_size(StDType t) {
  for (const auto& e : kDTypes)
    if (e.t == t) return e.size;
  return 0;
}

std::optional<DType> exact_dtype(StDType t) {
  switch (t) {
    case StDType::F64:
      return DType::f64;
    case StDType::F32:
      return DType::f32;
    case StDType::BF16:
      return DType::bf16;
    case StDType::I64:
      return DType::i64;
    case StDType::I32:
      return DType::i32;
    case StDType::U8:
    case StDType::BOOL:
      return DType::u8;
    case StDType::F16:
      return std::nullopt;
  }
  return std::nullopt;
}

StDType st_dtype_of(DType t) {
  switch (t) {
    case DType::f32:
      return StDType::F32;
    case DType::f64:
      return StDType::F64;
    case DType::bf16:
      return StDType::BF16;
    case DType::i32:
      return StDType::I32;
    case DType::i64:
      return StDType::I64;
    case DType::u8:
      return StDType::U8;
  }
  throw Error(detail::concat("safetensors: no safetensors dtype for attn dtype ", dtype_name(t)));
}

// ---- reader ------------------------------------------------------------------------

struct SafeTensorsFile::State {
  std::string path;
  const std::byte* map = nullptr;
  uint64_t size = 0;
  uint64_t header_size = 0;
  std::vector<TensorInfo> infos;
  std::unordered_map<std::string, std::size_t> index;
  Metadata metadata;

  const std::byte* data_section() const { return map + 8 + header_size; }

  ~State() { io_detail::unmap({map, size}); }
};

namespace {

using json::Value;

// The shared prefix of every error message about one file.
struct Where {
  const std::string& path;
  template <typename... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw Error(detail::concat("safetensors: ", path, ": ", std::forward<Parts>(parts)...));
  }
};

TensorInfo parse_entry(const Where& w, const std::string& name, const Value& v, uint64_t data_bytes) {
  TensorInfo info;
  info.name = name;
  const std::string t = "tensor '" + name + "': ";
  if (!v.is_object())
    w.fail(t, "expected an object with dtype, shape and data_offsets; got JSON ", json::type_name(v.type()));
  for (const auto& [key, unused] : v.members())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      w.fail(t, "unexpected key \"", key, "\" (expected only dtype, shape and data_offsets)");

  const Value* dt = v.find("dtype");
  if (!dt) w.fail(t, "missing \"dtype\"");
  if (!dt->is_string()) w.fail(t, "\"dtype\" must be a string; got ", json::dump(*dt));
  bool known = false;
  for (const auto& e : kDTypes)
    if (dt->as_string() == e.name) info.dtype = e.t, known = true;
  if (!known) w.fail(t, "unknown dtype \"", dt->as_string(), "\" (supported: ", known_dtypes(), ")");

  const Value* sh = v.find("shape");
  if (!sh) w.fail(t, "missing \"shape\"");
  if (!sh->is_array()) w.fail(t, "\"shape\" must be an array of sizes; got ", json::dump(*sh));
  // The product of the non-zero sizes must fit too, even when a size is 0: a
  // tensor's strides multiply them (innermost first), so [0, 2^62, 4] would
  // overflow there although it has no elements.
  int64_t nonzero = 1;
  bool has_zero = false;
  for (std::size_t d = 0; d < sh->size(); ++d) {
    const Value& s = sh->at(d);
    if (!s.is_integer() || s.as_int64() < 0)
      w.fail(t, "shape[", d, "] must be a non-negative integer; got ", json::dump(s));
    info.shape.push_back(s.as_int64());
    has_zero = has_zero || s.as_int64() == 0;
    if (s.as_int64() != 0 && !mul_ok(nonzero, s.as_int64(), &nonzero))
      w.fail(t, "shape ", shape_str(info.shape), "... has more elements than fit in int64",
             has_zero ? " (not counting its size-0 dims)" : "");
  }
  const int64_t numel = has_zero ? 0 : nonzero;
  info.numel = numel;
  int64_t nbytes = 0;
  if (!mul_ok(numel, static_cast<int64_t>(st_dtype_size(info.dtype)), &nbytes))
    w.fail(t, "shape ", shape_str(info.shape), " × ", st_dtype_size(info.dtype), " bytes overflows int64");

  const Value* off = v.find("data_offsets");
  if (!off) w.fail(t, "missing \"data_offsets\"");
  if (!off->is_array() || off->size() != 2)
    w.fail(t, "\"data_offsets\" must be an array [begin, end]; got ", json::dump(*off));
  for (std::size_t i = 0; i < 2; ++i)
    if (!off->at(i).is_integer() || off->at(i).as_int64() < 0)
      w.fail(t, "data_offsets[", i, "] must be a non-negative integer; got ", json::dump(off->at(i)));
  info.begin = static_cast<uint64_t>(off->at(0).as_int64());
  info.end = static_cast<uint64_t>(off->at(1).as_int64());
  if (info.begin > info.end)
    w.fail(t, "data_offsets [", info.begin, ", ", info.end, "] must have begin <= end");
  if (info.end > data_bytes)
    w.fail(t, "data_offsets end ", info.end, " is past the end of the data section (", data_bytes,
           " bytes; the file is truncated or the offsets are wrong)");
  if (info.end - info.begin != static_cast<uint64_t>(nbytes))
    w.fail(t, "data_offsets [", info.begin, ", ", info.end, "] hold ", info.end - info.begin,
           " bytes; expected ", nbytes, " = ", numel, " elements of ", st_dtype_name(info.dtype), " (",
           st_dtype_size(info.dtype), " bytes each) for shape ", shape_str(info.shape));
  return info;
}

void check_overlaps(const Where& w, const std::vector<TensorInfo>& infos) {
  std::vector<const TensorInfo*> ranges;
  for (const TensorInfo& t : infos)
    if (t.end > t.begin) ranges.push_back(&t);
  std::sort(ranges.begin(), ranges.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  const TensorInfo* reach = nullptr;  // the range ending furthest so far
  for (const TensorInfo* t : ranges) {
    if (reach && t->begin < reach->end)
      w.fail("tensors '", reach->name, "' (bytes [", reach->begin, ", ", reach->end, ")) and '", t->name,
             "' (bytes [", t->begin, ", ", t->end, ")) overlap in the data section");
    if (!reach || t->end > reach->end) reach = t;
  }
}

}  // namespace

SafeTensorsFile SafeTensorsFile::open(const std::string& path) {
  auto st = std::make_shared<State>();
  st->path = path;
  const Where w{st->path};
  const io_detail::Mapping m =
      io_detail::map_readonly(path, "safetensors", 8, "expected at least 8 (the header length)");
  st->map = m.data;
  st->size = m.size;

  uint64_t n = 0;
  std::memcpy(&n, st->map, 8);
  if (n > kMaxHeaderBytes)
    w.fail("header length ", n, " exceeds the limit of ", kMaxHeaderBytes,
           " bytes (100 MiB); not a safetensors file?");
  if (n > st->size - 8)
    w.fail("header length ", n, " runs past the end of the file (", st->size, " bytes, so at most ",
           st->size - 8, " bytes of header)");
  st->header_size = n;
  const std::string_view header(reinterpret_cast<const char*>(st->map) + 8, n);
  const std::size_t bad = json::find_invalid_utf8(header);
  if (bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x",
                  static_cast<unsigned>(static_cast<unsigned char>(header[bad])));
    w.fail("header is not valid UTF-8: byte ", byte, " at header offset ", bad, " (file offset ", bad + 8,
           ")");
  }
  Value root;
  try {
    root = json::parse(header);
  } catch (const Error& e) {
    w.fail("header is not valid JSON (offsets count from the header start, file offset 8): ", e.what());
  }
  if (!root.is_object()) w.fail("header must be a JSON object; got JSON ", json::type_name(root.type()));

  const uint64_t data_bytes = st->size - 8 - n;
  for (const auto& [name, v] : root.members()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        w.fail("\"__metadata__\" must be an object of strings; got JSON ", json::type_name(v.type()));
      for (const auto& [key, val] : v.members()) {
        if (!val.is_string())
          w.fail("\"__metadata__\" value for \"", key, "\" must be a string; got ", json::dump(val));
        st->metadata[key] = val.as_string();
      }
      continue;
    }
    st->index.emplace(name, st->infos.size());
    st->infos.push_back(parse_entry(w, name, v, data_bytes));
  }
  check_overlaps(w, st->infos);
  return SafeTensorsFile(std::move(st));
}

const std::string& SafeTensorsFile::path() const { return state_->path; }

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(state_->infos.size());
  for (const TensorInfo& t : state_->infos) out.push_back(t.name);
  return out;
}

bool SafeTensorsFile::contains(const std::string& name) const { return state_->index.count(name) != 0; }

const TensorInfo& SafeTensorsFile::info(const std::string& name) const {
  const auto it = state_->index.find(name);
  if (it == state_->index.end()) {
    std::string some;
    const std::size_t show = std::min<std::size_t>(state_->infos.size(), 8);
    for (std::size_t i = 0; i < show; ++i)
      some += std::string(i ? ", " : "") + "'" + state_->infos[i].name + "'";
    if (show < state_->infos.size()) some += ", ...";
    Where{state_->path}.fail("no tensor named '", name, "' (the file has ", state_->infos.size(), " tensors",
                             show ? ": " : "", some, ")");
  }
  return state_->infos[it->second];
}

std::span<const std::byte> SafeTensorsFile::bytes(const std::string& name) const {
  const TensorInfo& t = info(name);
  return {state_->data_section() + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

const Metadata& SafeTensorsFile::metadata() const { return state_->metadata; }
uint64_t SafeTensorsFile::file_size() const { return state_->size; }
uint64_t SafeTensorsFile::header_size() const { return state_->header_size; }

namespace {

template <typename T>
T read_at(const std::byte* p, int64_t i) {
  T x;
  std::memcpy(&x, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return x;
}

// Calls put(i, x) for every element, x in the source's own C++ type (float,
// double, int64_t, ...), so each conversion rounds once. One switch per tensor.
template <typename Put>
void for_each_value(const std::byte* p, StDType t, int64_t n, Put&& put) {
  auto loop = [&](auto read) {
    for (int64_t i = 0; i < n; ++i) put(i, read(i));
  };
  switch (t) {
    case StDType::F64:
      loop([p](int64_t i) { return read_at<double>(p, i); });
      break;
    case StDType::F32:
      loop([p](int64_t i) { return read_at<float>(p, i); });
      break;
    case StDType::F16:
      loop([p](int64_t i) { return f16_to_f32(read_at<uint16_t>(p, i)); });
      break;
    case StDType::BF16:
      loop([p](int64_t i) { return bf16::to_float(read_at<uint16_t>(p, i)); });
      break;
    case StDType::I64:
      loop([p](int64_t i) { return read_at<int64_t>(p, i); });
      break;
    case StDType::I32:
      loop([p](int64_t i) { return read_at<int32_t>(p, i); });
      break;
    case StDType::U8:
      loop([p](int64_t i) { return read_at<uint8_t>(p, i); });
      break;
    case StDType::BOOL:
      loop([p](int64_t i) { return static_cast<uint8_t>(read_at<uint8_t>(p, i) != 0); });
      break;
  }
}

int64_t read_int(const std::byte* p, StDType t, int64_t i) {
  switch (t) {
    case StDType::I64:
      return read_at<int64_t>(p, i);
    case StDType::I32:
      return read_at<int32_t>(p, i);
    case StDType::U8:
      return read_at<uint8_t>(p, i);
    case StDType::BOOL:
      return read_at<uint8_t>(p, i) != 0 ? 1 : 0;
    default:
      return 0;  // float sources are rejected before
  }
}

template <typename T>
void store_ints(const Where& w, const std::string& name, const std::byte* src, StDType st, int64_t n, T* dst,
                DType to) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = read_int(src, st, i);
    if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<int64_t>(std::numeric_limits<T>::max()))
      w.fail("tensor '", name, "': element ", i, " is ", x, ", which does not fit in ", dtype_name(to));
    dst[i] = static_cast<T>(x);
  }
}

}  // namespace

Tensor SafeTensorsFile::load(const std::string& name, DType to) const {
  const TensorInfo& t = info(name);
  const Where w{state_->path};
  const std::byte* src = state_->data_section() + t.begin;
  const int64_t n = t.numel;
  const bool int_target = to == DType::i32 || to == DType::i64 || to == DType::u8;
  if (int_target && is_float(t.dtype))
    w.fail("tensor '", name, "': cannot load ", st_dtype_name(t.dtype), " data as ", dtype_name(to),
           " (float to integer conversion is not supported; load as f32 or f64)");
  Tensor out = Tensor::empty(t.shape, to);
  if (n == 0) return out;
  if (exact_dtype(t.dtype) == to && t.dtype != StDType::BOOL) {
    std::memcpy(out.raw_data(), src, static_cast<std::size_t>(t.end - t.begin));
    return out;
  }
  switch (to) {
    case DType::f32: {
      float* dst = out.data<float>();
      for_each_value(src, t.dtype, n, [dst](int64_t i, auto x) { dst[i] = static_cast<float>(x); });
      break;
    }
    case DType::f64: {
      double* dst = out.data<double>();
      for_each_value(src, t.dtype, n, [dst](int64_t i, auto x) { dst[i] = static_cast<double>(x); });
      break;
    }
    case DType::bf16: {
      uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
      for_each_value(src, t.dtype, n,
                     [dst](int64_t i, auto x) { dst[i] = bf16::from_float(static_cast<float>(x)); });
      break;
    }
    case DType::i32:
      store_ints(w, name, src, t.dtype, n, out.data<int32_t>(), to);
      break;
    case DType::i64:
      store_ints(w, name, src, t.dtype, n, out.data<int64_t>(), to);
      break;
    case DType::u8:
      store_ints(w, name, src, t.dtype, n, out.data<uint8_t>(), to);
      break;
  }
  return out;
}

// ---- writer ------------------------------------------------------------------------

void save_safetensors_raw(const std::string& path, const std::vector<RawTensor>& tensors,
                          const Metadata& metadata) {
  const std::string where = "safetensors: saving '" + path + "': ";
  // Members are appended directly (names are checked unique here), so building
  // the header stays linear in the number of tensors.
  std::vector<Value::Member> members;
  members.reserve(tensors.size() + 1);
  if (!metadata.empty()) {
    std::vector<Value::Member> m;
    for (const auto& [k, v] : metadata) m.emplace_back(k, Value::string(v));
    members.emplace_back("__metadata__", Value::object(std::move(m)));
  }
  std::unordered_set<std::string> seen;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    ATTN_CHECK(!t.name.empty(), where, "tensor names must be non-empty");
    ATTN_CHECK(t.name != "__metadata__", where, "\"__metadata__\" is reserved and cannot name a tensor");
    ATTN_CHECK(seen.insert(t.name).second, where, "tensor name '", t.name, "' appears twice");
    int64_t numel = 1, nbytes = 0;
    Value shape = Value::array();
    for (int64_t s : t.shape) {
      ATTN_CHECK(s >= 0, where, "tensor '", t.name, "': sizes must be >= 0; got shape ", shape_str(t.shape));
      ATTN_CHECK(mul_ok(numel, s, &numel), where, "tensor '", t.name, "': shape ", shape_str(t.shape),
                 " overflows int64");
      shape.push_back(Value::integer(s));
    }
    ATTN_CHECK(mul_ok(numel, static_cast<int64_t>(st_dtype_size(t.dtype)), &nbytes), where, "tensor '",
               t.name, "': shape ", shape_str(t.shape), " overflows int64 bytes");
    ATTN_CHECK(nbytes == 0 || t.data != nullptr, where, "tensor '", t.name, "': no data pointer for ", nbytes,
               " bytes");
    ATTN_CHECK(static_cast<uint64_t>(nbytes) <= static_cast<uint64_t>(INT64_MAX) - offset, where,
               "the data section would exceed 2^63 bytes at tensor '", t.name, "'");
    std::vector<Value::Member> entry;
    entry.emplace_back("dtype", Value::string(st_dtype_name(t.dtype)));
    entry.emplace_back("shape", std::move(shape));
    entry.emplace_back("data_offsets", Value::array({Value::integer(static_cast<int64_t>(offset)),
                                                     Value::integer(static_cast<int64_t>(offset + nbytes))}));
    members.emplace_back(t.name, Value::object(std::move(entry)));
    sizes.push_back(static_cast<uint64_t>(nbytes));
    offset += static_cast<uint64_t>(nbytes);
  }
  std::string text;
  try {
    text = json::dump(Value::object(std::move(members)));
  } catch (const Error& e) {
    throw Error(where + e.what());
  }
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data section starts 8-byte aligned
  ATTN_CHECK(text.size() <= kMaxHeaderBytes, where, "the header would be ", text.size(),
             " bytes; the limit is ", kMaxHeaderBytes);
  const uint64_t n = text.size();

  AtomicFile tmp(path, "safetensors");
  tmp.write(&n, 8);
  tmp.write(text.data(), text.size());
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i]) tmp.write(tensors[i].data, static_cast<std::size_t>(sizes[i]));
  tmp.commit();
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const Metadata& metadata) {
  std::vector<Tensor> keep;  // contiguous copies of strided inputs
  keep.reserve(tensors.size());
  std::vector<RawTensor> raw;
  raw.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(t.defined(), "safetensors: saving '", path, "': tensor '", name, "' is undefined");
    keep.push_back(t.contiguous());
    raw.push_back({name, st_dtype_of(t.dtype()), t.shape(), keep.back().raw_data()});
  }
  save_safetensors_raw(path, raw, metadata);
}

}  // namespace attn::io

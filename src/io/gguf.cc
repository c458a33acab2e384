#include <attn/core/f16.h>
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

#include "io/mapped_file.h"

namespace attn::io {

static_assert(std::endian::native == std::endian::little,
              "GGUF data is little-endian; a big-endian host would need byte swapping");

// ---- types -----------------------------------------------------------------------

namespace {

struct ValueTypeEntry {
  GgufType t;
  const char* name;
  uint64_t size;  // bytes of a scalar; 0 for string and array
};
constexpr ValueTypeEntry kValueTypes[] = {
    {GgufType::u8, "u8", 1},       {GgufType::i8, "i8", 1},        {GgufType::u16, "u16", 2},
    {GgufType::i16, "i16", 2},     {GgufType::u32, "u32", 4},      {GgufType::i32, "i32", 4},
    {GgufType::f32, "f32", 4},     {GgufType::boolean, "bool", 1}, {GgufType::string, "string", 0},
    {GgufType::array, "array", 0}, {GgufType::u64, "u64", 8},      {GgufType::i64, "i64", 8},
    {GgufType::f64, "f64", 8},
};

const ValueTypeEntry* find_value_type(uint32_t id) {
  for (const auto& e : kValueTypes)
    if (static_cast<uint32_t>(e.t) == id) return &e;
  return nullptr;
}

bool is_int_type(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::u16:
    case GgufType::i16:
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::u64:
    case GgufType::i64:
      return true;
    default:
      return false;
  }
}

// ggml's tensor types with their block layouts (elements, bytes per block).
// Only the sizes matter here; dequantize() handles the first six.
struct GgmlTypeEntry {
  uint32_t id;
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
};
constexpr GgmlTypeEntry kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},
};

const GgmlTypeEntry* find_ggml_type(uint32_t id) {
  for (const auto& e : kGgmlTypes)
    if (e.id == id) return &e;
  return nullptr;
}

bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

template <typename T>
T load_le(const std::byte* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  const ValueTypeEntry* e = find_value_type(static_cast<uint32_t>(t));
  return e ? e->name : "?";
}

const char* ggml_type_name(GgmlType t) {
  const GgmlTypeEntry* e = find_ggml_type(static_cast<uint32_t>(t));
  return e ? e->name : "?";
}

int64_t ggml_block_elems(GgmlType t) {
  const GgmlTypeEntry* e = find_ggml_type(static_cast<uint32_t>(t));
  return e ? e->block_elems : 0;
}

int64_t ggml_block_bytes(GgmlType t) {
  const GgmlTypeEntry* e = find_ggml_type(static_cast<uint32_t>(t));
  return e ? e->block_bytes : 0;
}

bool ggml_can_dequantize(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
  }
  return false;
}

namespace {
// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
void scale_min_k4(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K (qh == nullptr) and Q5_K: one super-block of 256.
void dequant_k45(const std::byte* blk, const uint8_t* scales, const uint8_t* qh, const uint8_t* qs,
                 float* out) {
  const float d = f16_to_f32(load_le<uint16_t>(blk));
  const float dmin = f16_to_f32(load_le<uint16_t>(blk + 2));
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    scale_min_k4(j, scales, &sc, &mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0xf;
      if (qh) v |= ((qh[l] >> j) & 1) << 4;
      const float p = dl * static_cast<float>(v);
      out[32 * j + l] = p - ml;
    }
  }
}
}  // namespace

void dequantize(GgmlType type, const std::byte* src, int64_t n, float* dst) {
  ATTN_CHECK(ggml_can_dequantize(type), "gguf: cannot dequantize tensor type ", ggml_type_name(type), " (id ",
             static_cast<uint32_t>(type),
             "); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K");
  const int64_t be = ggml_block_elems(type);
  const int64_t bb = ggml_block_bytes(type);
  ATTN_CHECK(n >= 0 && n % be == 0, "gguf: dequantize ", ggml_type_name(type), ": element count ", n,
             " must be a non-negative multiple of the block size ", be);
  const int64_t blocks = n / be;
  switch (type) {
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = src + b * bb;
        const bool q51 = type == GgmlType::Q5_1;
        const float d = f16_to_f32(load_le<uint16_t>(blk));
        const float m = q51 ? f16_to_f32(load_le<uint16_t>(blk + 2)) : 0.0f;
        const uint32_t qh = load_le<uint32_t>(blk + (q51 ? 4 : 2));
        const auto* qs = reinterpret_cast<const uint8_t*>(blk + (q51 ? 8 : 6));
        float* out = dst + b * 32;
        for (int i = 0; i < 32; ++i) {
          const int lo = (i < 16 ? qs[i] : qs[i - 16] >> 4) & 0x0f;
          const int q = lo | static_cast<int>(((qh >> i) & 1u) << 4);
          if (q51) {
            const float p = d * static_cast<float>(q);
            out[i] = p + m;
          } else {
            out[i] = d * static_cast<float>(q - 16);
          }
        }
      }
      return;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = src + b * bb;
        const auto* scales = reinterpret_cast<const uint8_t*>(blk + 4);
        const bool q5 = type == GgmlType::Q5_K;
        const auto* qh = q5 ? reinterpret_cast<const uint8_t*>(blk + 16) : nullptr;
        const auto* qs = reinterpret_cast<const uint8_t*>(blk + (q5 ? 48 : 16));
        dequant_k45(blk, scales, qh, qs, dst + b * 256);
      }
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = src + b * bb;
        const auto* ql = reinterpret_cast<const uint8_t*>(blk);
        const auto* qh = reinterpret_cast<const uint8_t*>(blk + 128);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
        const float d = f16_to_f32(load_le<uint16_t>(blk + 208));
        float* out = dst + b * 256;
        for (int e = 0; e < 256; ++e) {
          const int h = e / 128, t = (e % 128) / 32, l = e % 32;
          const int lo = (ql[64 * h + 32 * (t % 2) + l] >> (4 * (t / 2))) & 0xf;
          const int q = lo | (((qh[32 * h + l] >> (2 * t)) & 3) << 4);
          const float dl = d * static_cast<float>(sc[e / 16]);
          out[e] = dl * static_cast<float>(q - 32);
        }
      }
      return;
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_le<uint16_t>(src + 2 * i));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16::to_float(load_le<uint16_t>(src + 2 * i));
      return;
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = src + b * bb;
        const float d = f16_to_f32(load_le<uint16_t>(blk));
        const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
        float* out = dst + b * 32;
        for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i]);
      }
      return;
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = src + b * bb;
        const float d = f16_to_f32(load_le<uint16_t>(blk));
        const auto* qs = reinterpret_cast<const uint8_t*>(blk + 2);
        float* out = dst + b * 32;
        for (int i = 0; i < 16; ++i) {
          out[i] = d * static_cast<float>((qs[i] & 0x0f) - 8);
          out[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
        }
      }
      return;
    case GgmlType::Q4_1:
      for (int64_t b = 0; b < blocks; ++b) {
        const std::byte* blk = src + b * bb;
        const float d = f16_to_f32(load_le<uint16_t>(blk));
        const float m = f16_to_f32(load_le<uint16_t>(blk + 2));
        const auto* qs = reinterpret_cast<const uint8_t*>(blk + 4);
        float* out = dst + b * 32;
        for (int i = 0; i < 16; ++i) {
          out[i] = d * static_cast<float>(qs[i] & 0x0f) + m;
          out[i + 16] = d * static_cast<float>(qs[i] >> 4) + m;
        }
      }
      return;
  }
}

// ---- reader ------------------------------------------------------------------------

namespace {

struct KeyValue {
  std::string key;
  GgufType type = GgufType::u8;
  const std::byte* value = nullptr;       // scalars: the value; arrays: the first element
  std::string_view str;                   // string values
  GgufType elem = GgufType::u8;           // arrays: element type
  uint64_t count = 0;                     // arrays: element count
  std::vector<std::string_view> strings;  // arrays of strings
};

}  // namespace

struct GgufFile::State {
  std::string path;
  const std::byte* map = nullptr;
  uint64_t size = 0;
  uint32_t version = 0;
  uint64_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<KeyValue> kvs;
  std::map<std::string, std::size_t, std::less<>> kv_index;
  std::vector<GgufTensorInfo> tensors;
  std::map<std::string, std::size_t, std::less<>> tensor_index;

  const KeyValue& find_kv(std::string_view key) const;
  const KeyValue& typed(std::string_view key, GgufType want) const;
  const KeyValue& array_of(std::string_view key) const;

  ~State() { io_detail::unmap({map, size}); }
};

namespace {

struct Where {
  const std::string& path;
  template <typename... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw Error(detail::concat("gguf: ", path, ": ", std::forward<Parts>(parts)...));
  }
};

// Bounds-checked sequential reads over the mapped file.
class Cursor {
 public:
  Cursor(const Where& w, const std::byte* base, uint64_t size) : w_(w), base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const std::byte* here() const { return base_ + pos_; }

  // `ctx` and `what` name the item for the error message ("key 'a.b'", "value").
  void need(uint64_t n, std::string_view ctx, std::string_view what) const {
    if (n > left())
      w_.fail("truncated: ", ctx, ctx.empty() ? "" : ": ", what, " at offset ", pos_, " needs ", n,
              " bytes but only ", left(), " remain in the ", size_, "-byte file");
  }
  template <typename T>
  T read(std::string_view ctx, std::string_view what) {
    need(sizeof(T), ctx, what);
    T x = load_le<T>(base_ + pos_);
    pos_ += sizeof(T);
    return x;
  }
  void skip(uint64_t n, std::string_view ctx, std::string_view what) {
    need(n, ctx, what);
    pos_ += n;
  }
  std::string_view read_string(std::string_view ctx, std::string_view what) {
    const uint64_t start = pos_;
    const uint64_t n = read<uint64_t>(ctx, what);
    if (n > left() || n > kGgufMaxStringBytes)
      w_.fail(ctx, ctx.empty() ? "" : ": ", what, " at offset ", start, " has length ", n,
              ", which runs past the end of the file (", left(), " bytes remain)");
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const Where& w_;
  const std::byte* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

std::string hex_byte(unsigned char c) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

void check_utf8(const Where& w, std::string_view s, std::string_view what) {
  const std::size_t bad = json::find_invalid_utf8(s);
  if (bad != std::string_view::npos)
    w.fail(what, " is not valid UTF-8: byte ", hex_byte(static_cast<unsigned char>(s[bad])), " at index ",
           bad);
}

void read_value(const Where& w, Cursor& c, KeyValue& kv) {
  const std::string ctx = "key '" + kv.key + "'";
  const uint32_t type_id = c.read<uint32_t>(ctx, "value type");
  const ValueTypeEntry* vt = find_value_type(type_id);
  if (!vt) w.fail(ctx, ": unknown value type ", type_id, " (expected 0..12)");
  kv.type = vt->t;
  if (kv.type == GgufType::string) {
    kv.str = c.read_string(ctx, "string value");
    return;
  }
  if (kv.type != GgufType::array) {
    c.need(vt->size, ctx, "value");
    kv.value = c.here();
    if (kv.type == GgufType::boolean) {
      const auto b = static_cast<uint8_t>(*kv.value);
      if (b > 1) w.fail(ctx, ": bool value must be 0 or 1; got ", static_cast<unsigned>(b));
    }
    c.skip(vt->size, ctx, "value");
    return;
  }
  const uint32_t elem_id = c.read<uint32_t>(ctx, "array element type");
  const ValueTypeEntry* et = find_value_type(elem_id);
  if (!et) w.fail(ctx, ": unknown array element type ", elem_id, " (expected 0..12)");
  if (et->t == GgufType::array) w.fail(ctx, ": nested arrays (array of arrays) are not supported");
  kv.elem = et->t;
  const uint64_t count_at = c.pos();
  kv.count = c.read<uint64_t>(ctx, "array length");
  // Each element takes at least 8 bytes (strings) or its scalar size.
  const uint64_t min_elem = et->t == GgufType::string ? 8 : et->size;
  if (kv.count > c.left() / min_elem)
    w.fail(ctx, ": array length ", kv.count, " at offset ", count_at, " needs at least ", min_elem,
           " bytes per ", et->name, " element, but only ", c.left(), " bytes remain in the file");
  kv.value = c.here();
  if (et->t == GgufType::string) {
    kv.strings.reserve(kv.count);
    for (uint64_t i = 0; i < kv.count; ++i) kv.strings.push_back(c.read_string(ctx, "array string"));
  } else {
    c.skip(kv.count * et->size, ctx, "array data");
    if (et->t == GgufType::boolean)
      for (uint64_t i = 0; i < kv.count; ++i) {
        const auto b = static_cast<uint8_t>(kv.value[i]);
        if (b > 1) w.fail(ctx, ": bool array element ", i, " must be 0 or 1; got ", static_cast<unsigned>(b));
      }
  }
}

GgufTensorInfo read_tensor_info(const Where& w, Cursor& c, uint64_t index) {
  GgufTensorInfo t;
  const std::string ictx = "tensor info #" + std::to_string(index);
  const std::string_view name = c.read_string(ictx, "name");
  if (name.empty()) w.fail(ictx, ": empty tensor name");
  check_utf8(w, name, ictx + " name");
  t.name = std::string(name);
  const std::string ctx = "tensor '" + t.name + "'";
  const uint32_t n_dims = c.read<uint32_t>(ctx, "n_dims");
  if (n_dims > 4) w.fail(ctx, ": n_dims is ", n_dims, "; expected at most 4");
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t v = c.read<uint64_t>(ctx, "dims");
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      w.fail(ctx, ": dims[", d, "] = ", v, " does not fit in int64");
    t.dims.push_back(static_cast<int64_t>(v));
    if (!mul_ok(numel, static_cast<int64_t>(v), &numel))
      w.fail(ctx, ": dims ", shape_str(t.dims), "... have more elements than fit in int64");
  }
  t.shape.assign(t.dims.rbegin(), t.dims.rend());
  t.numel = numel;
  const uint32_t type_id = c.read<uint32_t>(ctx, "type");
  const GgmlTypeEntry* gt = find_ggml_type(type_id);
  if (!gt) w.fail(ctx, ": unknown ggml tensor type ", type_id);
  t.type = static_cast<GgmlType>(type_id);
  const int64_t ne0 = t.dims.empty() ? 1 : t.dims[0];
  if (ne0 % gt->block_elems != 0)
    w.fail(ctx, ": type ", gt->name, " stores blocks of ", gt->block_elems,
           " elements, but the innermost dim (ne[0]) is ", ne0, ", not a multiple of it");
  int64_t bytes = 0;
  if (!mul_ok(numel / gt->block_elems, gt->block_bytes, &bytes))
    w.fail(ctx, ": dims ", shape_str(t.dims), " of ", gt->name, " need more bytes than fit in int64");
  t.bytes = static_cast<uint64_t>(bytes);
  t.offset = c.read<uint64_t>(ctx, "offset");
  return t;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  auto st = std::make_shared<State>();
  st->path = path;
  const Where w{st->path};
  const io_detail::Mapping m = io_detail::map_readonly(
      path, "gguf", 24, "a GGUF header needs at least 24 (magic, version, two counts)");
  st->map = m.data;
  st->size = m.size;

  Cursor c(w, st->map, st->size);
  const std::string_view magic(reinterpret_cast<const char*>(st->map), 4);
  if (magic != "GGUF") {
    std::string got;
    for (char ch : magic) {
      if (!got.empty()) got.push_back(' ');
      got.append(hex_byte(static_cast<unsigned char>(ch)));
    }
    w.fail("bad magic: expected \"GGUF\" (0x47 0x47 0x55 0x46); got ", got);
  }
  c.skip(4, "", "magic");
  st->version = c.read<uint32_t>("", "version");
  if (st->version != 2 && st->version != 3) {
    if (st->version == 0x03000000u || st->version == 0x02000000u)
      w.fail("version field reads ", st->version, ": a big-endian GGUF file, which attn does not read");
    w.fail("unsupported version ", st->version, "; expected 2 or 3");
  }
  const uint64_t n_tensors = c.read<uint64_t>("", "tensor count");
  const uint64_t n_kv = c.read<uint64_t>("", "metadata count");
  if (n_kv > kGgufMaxKeys)
    w.fail("metadata count ", n_kv, " exceeds the limit of ", kGgufMaxKeys, " entries");
  if (n_tensors > kGgufMaxTensors)
    w.fail("tensor count ", n_tensors, " exceeds the limit of ", kGgufMaxTensors, " tensors");
  // A key/value takes at least 12 bytes (key length, value type), a tensor info 24.
  if (n_kv > c.left() / 12)
    w.fail("truncated or corrupt: metadata count ", n_kv, " needs at least ", n_kv * 12, " bytes but only ",
           c.left(), " remain after the 24-byte header");

  st->kvs.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    KeyValue kv;
    const std::string ictx = "metadata entry #" + std::to_string(i);
    const std::string_view key = c.read_string(ictx, "key");
    if (key.empty()) w.fail(ictx, ": empty key");
    check_utf8(w, key, ictx + " key");
    kv.key = std::string(key);
    if (st->kv_index.count(kv.key)) w.fail("duplicate metadata key '", kv.key, "'");
    read_value(w, c, kv);
    st->kv_index.emplace(kv.key, st->kvs.size());
    st->kvs.push_back(std::move(kv));
  }

  if (const auto it = st->kv_index.find("general.alignment"); it != st->kv_index.end()) {
    const KeyValue& kv = st->kvs[it->second];
    if (kv.type != GgufType::u32)
      w.fail("key 'general.alignment' must be a u32; got ", gguf_type_name(kv.type));
    const uint32_t a = load_le<uint32_t>(kv.value);
    if (a == 0 || (a & (a - 1)) != 0) w.fail("key 'general.alignment' must be a power of two; got ", a);
    st->alignment = a;
  }

  if (n_tensors > c.left() / 24)
    w.fail("truncated or corrupt: tensor count ", n_tensors, " needs at least ", n_tensors * 24,
           " bytes of tensor infos but only ", c.left(), " remain at offset ", c.pos());
  st->tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t = read_tensor_info(w, c, i);
    if (st->tensor_index.count(t.name)) w.fail("duplicate tensor name '", t.name, "'");
    st->tensor_index.emplace(t.name, st->tensors.size());
    st->tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t a = st->alignment;
  const uint64_t end_of_infos = c.pos();
  st->data_offset = end_of_infos + (a - end_of_infos % a) % a;
  const uint64_t data_bytes = st->data_offset <= st->size ? st->size - st->data_offset : 0;
  for (const GgufTensorInfo& t : st->tensors) {
    const std::string ctx = "tensor '" + t.name + "'";
    if (t.offset % a != 0) w.fail(ctx, ": offset ", t.offset, " is not a multiple of the alignment ", a);
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      w.fail(ctx, ": bytes [", t.offset, ", ", t.offset + t.bytes, ") of the data section (", t.numel,
             " elements of ", ggml_type_name(t.type), " = ", t.bytes,
             " bytes) run past its end: the data section starts at file offset ", st->data_offset,
             " and holds ", data_bytes, " bytes (the file is ", st->size, " bytes; truncated?)");
  }
  // No two non-empty tensors may share bytes.
  std::vector<const GgufTensorInfo*> ranges;
  for (const GgufTensorInfo& t : st->tensors)
    if (t.bytes > 0) ranges.push_back(&t);
  std::sort(ranges.begin(), ranges.end(), [](const GgufTensorInfo* x, const GgufTensorInfo* y) {
    return x->offset != y->offset ? x->offset < y->offset : x->bytes < y->bytes;
  });
  const GgufTensorInfo* reach = nullptr;
  for (const GgufTensorInfo* t : ranges) {
    if (reach && t->offset < reach->offset + reach->bytes)
      w.fail("tensors '", reach->name, "' (bytes [", reach->offset, ", ", reach->offset + reach->bytes,
             ")) and '", t->name, "' (bytes [", t->offset, ", ", t->offset + t->bytes,
             ")) overlap in the data section");
    if (!reach || t->offset + t->bytes > reach->offset + reach->bytes) reach = t;
  }
  return GgufFile(std::move(st));
}

const std::string& GgufFile::path() const { return state_->path; }
uint32_t GgufFile::version() const { return state_->version; }
uint64_t GgufFile::alignment() const { return state_->alignment; }
uint64_t GgufFile::file_size() const { return state_->size; }
uint64_t GgufFile::data_offset() const { return state_->data_offset; }

// ---- metadata access ----------------------------------------------------------------

const KeyValue& GgufFile::State::find_kv(std::string_view key) const {
  const auto it = kv_index.find(key);
  if (it == kv_index.end())
    Where{path}.fail("no metadata key '", key, "' (the file has ", kvs.size(), " keys)");
  return kvs[it->second];
}

const KeyValue& GgufFile::State::typed(std::string_view key, GgufType want) const {
  const KeyValue& kv = find_kv(key);
  if (kv.type != want)
    Where{path}.fail("key '", key, "': expected a ", gguf_type_name(want), " value; got ",
                     gguf_type_name(kv.type));
  return kv;
}

const KeyValue& GgufFile::State::array_of(std::string_view key) const {
  const KeyValue& kv = find_kv(key);
  if (kv.type != GgufType::array)
    Where{path}.fail("key '", key, "': expected an array; got a ", gguf_type_name(kv.type));
  return kv;
}

namespace {

// An integer of type t at p, widened; false when a u64 does not fit in int64.
bool read_int(GgufType t, const std::byte* p, int64_t* out) {
  switch (t) {
    case GgufType::u8:
      *out = load_le<uint8_t>(p);
      return true;
    case GgufType::i8:
      *out = load_le<int8_t>(p);
      return true;
    case GgufType::u16:
      *out = load_le<uint16_t>(p);
      return true;
    case GgufType::i16:
      *out = load_le<int16_t>(p);
      return true;
    case GgufType::u32:
      *out = load_le<uint32_t>(p);
      return true;
    case GgufType::i32:
      *out = load_le<int32_t>(p);
      return true;
    case GgufType::i64:
      *out = load_le<int64_t>(p);
      return true;
    case GgufType::u64: {
      const uint64_t v = load_le<uint64_t>(p);
      *out = static_cast<int64_t>(v);
      return v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    }
    default:
      return false;
  }
}

uint64_t scalar_size(GgufType t) { return find_value_type(static_cast<uint32_t>(t))->size; }

}  // namespace

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  for (const KeyValue& kv : state_->kvs) out.push_back(kv.key);
  return out;
}

bool GgufFile::has(std::string_view key) const { return state_->kv_index.count(key) != 0; }
GgufType GgufFile::type(std::string_view key) const { return state_->find_kv(key).type; }
GgufType GgufFile::array_type(std::string_view key) const { return state_->array_of(key).elem; }
uint64_t GgufFile::array_size(std::string_view key) const { return state_->array_of(key).count; }

#define ATTN_GGUF_GETTER(fn, T, tag) \
  T GgufFile::fn(std::string_view key) const { return load_le<T>(state_->typed(key, GgufType::tag).value); }
ATTN_GGUF_GETTER(get_u8, uint8_t, u8)
ATTN_GGUF_GETTER(get_i8, int8_t, i8)
ATTN_GGUF_GETTER(get_u16, uint16_t, u16)
ATTN_GGUF_GETTER(get_i16, int16_t, i16)
ATTN_GGUF_GETTER(get_u32, uint32_t, u32)
ATTN_GGUF_GETTER(get_i32, int32_t, i32)
ATTN_GGUF_GETTER(get_u64, uint64_t, u64)
ATTN_GGUF_GETTER(get_i64, int64_t, i64)
ATTN_GGUF_GETTER(get_f32, float, f32)
ATTN_GGUF_GETTER(get_f64, double, f64)
#undef ATTN_GGUF_GETTER

bool GgufFile::get_bool(std::string_view key) const {
  return load_le<uint8_t>(state_->typed(key, GgufType::boolean).value) != 0;
}

std::string GgufFile::get_string(std::string_view key) const {
  return std::string(state_->typed(key, GgufType::string).str);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const KeyValue& kv = state_->find_kv(key);
  if (!is_int_type(kv.type))
    Where{state_->path}.fail("key '", key, "': expected an integer value; got ", gguf_type_name(kv.type));
  int64_t v = 0;
  if (!read_int(kv.type, kv.value, &v))
    Where{state_->path}.fail("key '", key, "': u64 value ", load_le<uint64_t>(kv.value),
                             " does not fit in int64");
  return v;
}

int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

int64_t GgufFile::get_positive(std::string_view key) const {
  if (!has(key)) Where{state_->path}.fail("missing metadata key '", key, "'");
  const int64_t v = get_int(key);
  if (v <= 0) Where{state_->path}.fail("'", key, "' must be > 0, got ", v);
  return v;
}

double GgufFile::get_real(std::string_view key, double fallback) const {
  if (!has(key)) return fallback;
  const GgufType t = type(key);
  if (t == GgufType::f32) return get_f32(key);
  if (t == GgufType::f64) return get_f64(key);
  if (t == GgufType::string || t == GgufType::array || t == GgufType::boolean)
    Where{state_->path}.fail("'", key, "' must be a number (f32, f64 or an integer), got ",
                             gguf_type_name(t));
  return static_cast<double>(get_int(key));
}

std::optional<std::string> GgufFile::chat_template() const {
  if (!has("tokenizer.chat_template")) return std::nullopt;
  return get_string("tokenizer.chat_template");
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const KeyValue& kv = state_->array_of(key);
  if (kv.elem != GgufType::string)
    Where{state_->path}.fail("key '", key, "': expected an array of string; got an array of ",
                             gguf_type_name(kv.elem));
  return {kv.strings.begin(), kv.strings.end()};
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const KeyValue& kv = state_->array_of(key);
  if (!is_int_type(kv.elem))
    Where{state_->path}.fail("key '", key, "': expected an array of integers; got an array of ",
                             gguf_type_name(kv.elem));
  const uint64_t es = scalar_size(kv.elem);
  std::vector<int64_t> out(kv.count);
  for (uint64_t i = 0; i < kv.count; ++i)
    if (!read_int(kv.elem, kv.value + i * es, &out[i]))
      Where{state_->path}.fail("key '", key, "': element ", i, " (u64 ", load_le<uint64_t>(kv.value + i * es),
                               ") does not fit in int64");
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const KeyValue& kv = state_->array_of(key);
  std::vector<double> out(kv.count);
  if (kv.elem == GgufType::f32) {
    for (uint64_t i = 0; i < kv.count; ++i) out[i] = load_le<float>(kv.value + 4 * i);
  } else if (kv.elem == GgufType::f64) {
    for (uint64_t i = 0; i < kv.count; ++i) out[i] = load_le<double>(kv.value + 8 * i);
  } else {
    Where{state_->path}.fail("key '", key, "': expected an array of f32 or f64; got an array of ",
                             gguf_type_name(kv.elem));
  }
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const KeyValue& kv = state_->array_of(key);
  if (kv.elem != GgufType::i32)
    Where{state_->path}.fail("key '", key, "': expected an array of i32; got an array of ",
                             gguf_type_name(kv.elem));
  std::vector<int32_t> out(kv.count);
  if (kv.count) std::memcpy(out.data(), kv.value, kv.count * 4);
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const KeyValue& kv = state_->array_of(key);
  if (kv.elem != GgufType::f32)
    Where{state_->path}.fail("key '", key, "': expected an array of f32; got an array of ",
                             gguf_type_name(kv.elem));
  std::vector<float> out(kv.count);
  if (kv.count) std::memcpy(out.data(), kv.value, kv.count * 4);
  return out;
}

std::vector<bool> GgufFile::get_bool_array(std::string_view key) const {
  const KeyValue& kv = state_->array_of(key);
  if (kv.elem != GgufType::boolean)
    Where{state_->path}.fail("key '", key, "': expected an array of bool; got an array of ",
                             gguf_type_name(kv.elem));
  std::vector<bool> out(kv.count);
  for (uint64_t i = 0; i < kv.count; ++i) out[i] = load_le<uint8_t>(kv.value + i) != 0;
  return out;
}

// ---- tensors ------------------------------------------------------------------------

std::vector<std::string> GgufFile::tensor_names() const {
  std::vector<std::string> out;
  for (const GgufTensorInfo& t : state_->tensors) out.push_back(t.name);
  return out;
}

bool GgufFile::has_tensor(std::string_view name) const { return state_->tensor_index.count(name) != 0; }

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const auto it = state_->tensor_index.find(name);
  if (it == state_->tensor_index.end()) {
    std::string some;
    const std::size_t show = std::min<std::size_t>(state_->tensors.size(), 8);
    for (std::size_t i = 0; i < show; ++i)
      some += std::string(i ? ", " : "") + "'" + state_->tensors[i].name + "'";
    if (show < state_->tensors.size()) some += ", ...";
    Where{state_->path}.fail("no tensor named '", name, "' (the file has ", state_->tensors.size(),
                             " tensors", show ? ": " : "", some, ")");
  }
  return state_->tensors[it->second];
}

GgufTensorView GgufFile::view(std::string_view name) const {
  const GgufTensorInfo& t = tensor(name);
  GgufTensorView v;
  v.data = state_->map + state_->data_offset + t.offset;
  v.type = t.type;
  v.shape = t.shape;
  v.block_elems = ggml_block_elems(t.type);
  v.block_bytes = ggml_block_bytes(t.type);
  v.n_blocks = t.numel / v.block_elems;
  v.row_blocks = (t.dims.empty() ? 1 : t.dims[0]) / v.block_elems;
  return v;
}

void GgufFile::release_pages(const std::byte* p, uint64_t n) const {
  io_detail::release_pages({state_->map, state_->size}, p, n);
}

Tensor GgufFile::load(std::string_view name) const {
  const GgufTensorInfo& t = tensor(name);
  if (!ggml_can_dequantize(t.type))
    Where{state_->path}.fail("tensor '", name, "': cannot load type ", ggml_type_name(t.type), " (id ",
                             static_cast<uint32_t>(t.type),
                             "); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K");
  Tensor out = Tensor::empty(t.shape, DType::f32);
  if (t.numel > 0)
    dequantize(t.type, state_->map + state_->data_offset + t.offset, t.numel, out.data<float>());
  return out;
}

}  // namespace attn::io

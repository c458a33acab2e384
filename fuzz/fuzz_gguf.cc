// Fuzzes GgufFile: open (header, metadata of every value type, tensor infos,
// alignment, data section bounds, overlaps), every typed getter on every key,
// and view() + load() (dequantize) of every tensor.
#include <attn/core/error.h>
#include <attn/io/gguf.h>

#include <cstring>

#include "fuzz_util.h"

using namespace attn;

namespace {

template <typename F>
void may_throw(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

void read_every_getter(const io::GgufFile& g, const std::string& key) {
  // Every getter, whatever the type: the wrong ones must throw attn::Error.
  may_throw([&] { g.get_u8(key); });
  may_throw([&] { g.get_i8(key); });
  may_throw([&] { g.get_u16(key); });
  may_throw([&] { g.get_i16(key); });
  may_throw([&] { g.get_u32(key); });
  may_throw([&] { g.get_i32(key); });
  may_throw([&] { g.get_u64(key); });
  may_throw([&] { g.get_i64(key); });
  may_throw([&] { g.get_f32(key); });
  may_throw([&] { g.get_f64(key); });
  may_throw([&] { g.get_bool(key); });
  may_throw([&] { g.get_string(key); });
  may_throw([&] { g.get_int(key); });
  may_throw([&] { g.array_type(key); });
  may_throw([&] {
    const uint64_t n = g.array_size(key);
    FUZZ_ASSERT(n <= g.file_size(), "array '%s' of %llu elements in a %llu-byte file", key.c_str(),
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(g.file_size()));
  });
  may_throw([&] { g.get_string_array(key); });
  may_throw([&] { g.get_int_array(key); });
  may_throw([&] { g.get_float_array(key); });
  may_throw([&] { g.get_i32_array(key); });
  may_throw([&] { g.get_f32_array(key); });
  may_throw([&] { g.get_bool_array(key); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const io::GgufFile g = io::GgufFile::open(path);
    FUZZ_ASSERT(g.alignment() > 0 && (g.alignment() & (g.alignment() - 1)) == 0, "alignment %llu",
                static_cast<unsigned long long>(g.alignment()));
    for (const std::string& key : g.keys()) {
      FUZZ_ASSERT(g.has(key), "key '%s' listed but not found", key.c_str());
      g.type(key);
      read_every_getter(g, key);
    }
    may_throw([&] {
      g.get_int(
          "\x01"
          "absent",
          7);
    });
    for (const std::string& name : g.tensor_names()) {
      const io::GgufTensorInfo& t = g.tensor(name);
      FUZZ_ASSERT(t.offset <= g.file_size() && t.bytes <= g.file_size() - t.offset,
                  "tensor '%s' bytes outside the file", name.c_str());
      const io::GgufTensorView v = g.view(name);
      FUZZ_ASSERT(v.n_blocks * v.block_bytes == static_cast<int64_t>(t.bytes), "tensor '%s' view size",
                  name.c_str());
      unsigned sum = 0;
      for (uint64_t i = 0; i < t.bytes; ++i) sum += static_cast<unsigned>(v.data[i]);
      (void)sum;
      may_throw([&] {
        const Tensor x = g.load(name);
        FUZZ_ASSERT(x.numel() == t.numel, "load '%s' element count", name.c_str());
      });
    }
  } catch (const Error& e) {
    FUZZ_ASSERT(std::strlen(e.what()) > 0, "empty error message");
  }
  return 0;
}

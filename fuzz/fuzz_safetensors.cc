// Fuzzes SafeTensorsFile: open (header length, JSON header, entries,
// offsets, overlaps) and then every accessor on every tensor it accepted.
// Only attn::Error may escape the library; anything else (another exception,
// a sanitizer report, an allocation over libFuzzer's limit) is a finding.
#include <attn/core/error.h>
#include <attn/io/safetensors.h>

#include <cstring>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const io::SafeTensorsFile f = io::SafeTensorsFile::open(path);
    FUZZ_ASSERT(f.header_size() + 8 <= f.file_size(), "header %llu, file %llu",
                static_cast<unsigned long long>(f.header_size()),
                static_cast<unsigned long long>(f.file_size()));
    for (const auto& [k, v] : f.metadata()) (void)k.size(), (void)v.size();
    for (const std::string& name : f.names()) {
      const io::TensorInfo& t = f.info(name);
      const auto bytes = f.bytes(name);
      FUZZ_ASSERT(bytes.size() == static_cast<std::size_t>(t.numel) * io::st_dtype_size(t.dtype),
                  "tensor '%s': %zu bytes for %lld elements", name.c_str(), bytes.size(),
                  static_cast<long long>(t.numel));
      // Touch every byte so ASan sees any read outside the mapping.
      unsigned sum = 0;
      for (std::byte b : bytes) sum += static_cast<unsigned>(b);
      (void)sum;
      for (DType to : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::i32, DType::u8}) {
        try {
          const Tensor x = f.load(name, to);
          FUZZ_ASSERT(x.numel() == t.numel, "load '%s': %lld elements, expected %lld", name.c_str(),
                      static_cast<long long>(x.numel()), static_cast<long long>(t.numel));
        } catch (const Error&) {
        }
      }
    }
    try {
      f.info("\x01no such tensor");
      FUZZ_ASSERT(false, "info() of an absent name did not throw");
    } catch (const Error&) {
    }
  } catch (const Error& e) {
    FUZZ_ASSERT(std::strlen(e.what()) > 0, "empty error message");
  }
  return 0;
}

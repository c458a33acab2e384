// Fuzzes the GGUF tokenizer metadata (tokenizer.ggml.*) through
// ByteBpeTokenizer::from_gguf, then encodes and decodes a few fixed texts
// with whatever vocabulary the file describes. Seed: tests/io/data/gguf_tokenizer_tiny.gguf.
#include <attn/core/error.h>
#include <attn/io/gguf.h>
#include <attn/text/bpe_bytes.h>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const io::GgufFile g = io::GgufFile::open(path);
    const text::ByteBpeTokenizer t = text::ByteBpeTokenizer::from_gguf(g);
    for (int32_t id : {t.bos_id(), t.eos_id(), t.pad_id()})
      FUZZ_ASSERT(id >= -1 && id < t.vocab_size(), "special id %d outside [-1, %lld)", id,
                  static_cast<long long>(t.vocab_size()));
    for (const char* s : {"Hello world, the thing's 12345 tokens!\n", " aaa  bbb\t\t\u4e2d\u6587 ",
                          "<|endoftext|>x<|im_start|>", ""}) {
      try {
        const std::vector<int32_t> ids = t.encode(s, false, true);
        for (int32_t id : ids) FUZZ_ASSERT(id >= 0 && id < t.vocab_size(), "id %d out of range", id);
        (void)t.decode(ids, true);
        (void)t.decode(ids, false);
      } catch (const Error&) {
      }
    }
    for (int32_t id = -2; id < 4 && id < t.vocab_size() + 2; ++id) {
      try {
        (void)t.id_to_token(id);
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  return 0;
}

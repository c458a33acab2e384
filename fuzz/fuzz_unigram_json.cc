// Fuzzes the Hugging Face tokenizer.json reader of the unigram tokenizer
// (UnigramTokenizer::from_tokenizer_json, text/unigram.h): the JSON, the component checks, the
// base64 charsmap and its darts-clone trie walk; then encode/decode of fixed texts on what it
// accepted. Seed: fuzz/seeds/unigram_json/tiny.json. Only attn::Error may escape the library.
#include <attn/core/error.h>
#include <attn/text/unigram.h>

#include <cstring>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const text::UnigramTokenizer tok = text::UnigramTokenizer::from_tokenizer_json(path, 16);
    for (const char* s : {"", " a  b ", "ab\xef\xbd\x81 e\xcc\x81", "<s>a</s><mask>", "\xf4\x8f\xbf\xbf"}) {
      bool cut = false;
      const std::vector<int32_t> ids = tok.encode(s, true, true, &cut);
      FUZZ_ASSERT(static_cast<int64_t>(ids.size()) <= tok.max_length(), "over max_length");
      for (int32_t id : ids) FUZZ_ASSERT(id >= 0 && id < tok.vocab_size(), "id %d out of range", id);
      (void)tok.decode(ids);
    }
  } catch (const Error& e) {
    FUZZ_ASSERT(std::strlen(e.what()) > 0, "empty error message");
  }
  return 0;
}

// Fuzzes the Hugging Face tokenizer.json reader of the decoder tokenizers (text::load_tokenizer,
// ByteBpeTokenizer::from_tokenizer_json, text/decoder_tokenizer.h): the JSON, the model / added
// tokens / normalizer / pre-tokenizer / post-processor / decoder checks; then encode/decode of fixed
// texts on what it accepted. Seeds: fuzz/seeds/bpe_json/ (tiny byte-level and SentencePiece-style
// files). Only attn::Error may escape the library.
#include <attn/core/error.h>
#include <attn/text/decoder_tokenizer.h>

#include <cstring>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const auto tok = text::load_tokenizer(path);
    for (const char* s :
         {"", " a  b\n\n", "ab\xef\xbd\x81 e\xcc\x81 123", "<s>a</s><|x|> ", "\xf4\x8f\xbf\xbf 'S"}) {
      for (const bool special : {false, true}) {
        const std::vector<int32_t> ids = tok->encode(s, tok->add_bos() && tok->bos_id() >= 0, special);
        for (int32_t id : ids) FUZZ_ASSERT(id >= 0 && id < tok->vocab_size(), "id %d out of range", id);
        (void)tok->decode(ids, special);
      }
    }
  } catch (const Error& e) {
    FUZZ_ASSERT(std::strlen(e.what()) > 0, "empty error message");
  }
  return 0;
}

// Fuzzes the text-side file readers: Vocab::load (vocab.h), BpeTokenizer::load
// (bpe.h, "attn-bpe 1") and WordPieceTokenizer::from_vocab_file (vocab.txt,
// e.g. without [UNK]). The first byte picks the reader, the rest is the file.
// Whatever loads must then encode and decode a fixed text without crashing.
#include <attn/core/error.h>
#include <attn/text/bpe.h>
#include <attn/text/vocab.h>
#include <attn/text/wordpiece.h>

#include "fuzz_util.h"

using namespace attn;

namespace {

constexpr const char* kText = "Hello, wörld! the 中文 text [CLS] ##a aa";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static fuzz::MemFile file;
  const std::string& path = file.write(data + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const text::Vocab v = text::Vocab::load(path);
        FUZZ_ASSERT(v.size() > text::Vocab::kNumSpecial, "loaded a vocabulary of %lld tokens",
                    static_cast<long long>(v.size()));
        for (int32_t id = 0; id < v.size(); ++id)
          FUZZ_ASSERT(v.id(v.token(id)) == id, "id %d round trip", id);
        break;
      }
      case 1: {
        const text::BpeTokenizer t = text::BpeTokenizer::load(path);
        const std::vector<int32_t> ids = t.encode(kText);
        for (int32_t id : ids) FUZZ_ASSERT(id >= 0 && id < t.vocab().size(), "bpe id %d out of range", id);
        (void)t.decode(ids);
        (void)t.tokenize(kText);
        break;
      }
      case 2: {
        const text::WordPieceTokenizer t = text::WordPieceTokenizer::from_vocab_file(path);
        FUZZ_ASSERT(t.token_to_id(t.options().unk_token) >= 0, "a WordPiece vocabulary without [UNK]");
        const std::vector<int32_t> ids = t.tokenize_ids(kText);
        for (int32_t id : ids)
          FUZZ_ASSERT(id >= 0 && id < t.vocab_size(), "wordpiece id %d out of range", id);
        (void)t.decode(ids);
        try {
          (void)t.encode(kText);  // needs [CLS] and [SEP]
        } catch (const Error&) {
        }
        break;
      }
    }
  } catch (const Error&) {
  }
  return 0;
}

// Fuzzes the WordPiece tokenizer on a small fixed vocabulary. The first byte
// picks the options (lower-casing, accents, CJK splitting, length limits);
// the rest is the text (split in two at the first 0xFF for encode_pair).
#include <attn/core/error.h>
#include <attn/text/wordpiece.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "fuzz_util.h"

using namespace attn;
using text::WordPieceTokenizer;

namespace {

const std::vector<std::string>& vocab() {
  static const std::vector<std::string> v = {
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un",  "##aff", "##able",   ",",   "!",
      "cafe",  "中",    "国",    "a",     "##b",    "##c",   "x",     "##y", "'",     "s",        "ος",  "σ",
      "ο",     "##σ",   "(",     ")",     "ß",      "i",     "-",     "aa",  "##a",   "naive",    "##ο", "##",
      "#",     "[",     "]",     "##[",   "é",      "İ",     "ǅ",     "ﬁ",   "𝔸",     "\xcc\x81",
  };
  return v;
}

void check(const WordPieceTokenizer& t, const text::Encoding& e, int64_t limit, bool truncate) {
  FUZZ_ASSERT(e.ids.size() == e.type_ids.size() && e.ids.size() == e.attention_mask.size() &&
                  e.ids.size() == e.tokens.size(),
              "encoding vectors of different lengths");
  if (truncate)
    FUZZ_ASSERT(static_cast<int64_t>(e.ids.size()) <= limit, "%zu tokens > max_length %lld", e.ids.size(),
                static_cast<long long>(limit));
  for (std::size_t i = 0; i < e.ids.size(); ++i) {
    FUZZ_ASSERT(e.ids[i] >= 0 && e.ids[i] < t.vocab_size(), "id %d out of range", e.ids[i]);
    FUZZ_ASSERT(t.id_to_token(e.ids[i]) == e.tokens[i], "token text differs from its id");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  text::WordPieceOptions o;
  o.lowercase = flags & 1;
  if (flags & 2) o.strip_accents = (flags & 4) != 0;
  o.handle_chinese_chars = (flags & 8) == 0;
  o.clean_text = (flags & 16) == 0;
  o.max_input_chars_per_word = (flags & 32) ? 3 : 100;
  o.max_length = (flags & 64) ? 2 + flags % 5 : 512;  // 2..6: [CLS] [SEP] plus a few
  static const WordPieceTokenizer base = WordPieceTokenizer::from_vocab(vocab(), {});
  // One tokenizer per options byte, built once (building one per input costs more than the run).
  static std::map<uint8_t, WordPieceTokenizer> cache;
  auto it = cache.find(flags);
  if (it == cache.end()) it = cache.emplace(flags, WordPieceTokenizer::from_vocab(vocab(), o)).first;
  const WordPieceTokenizer& t = it->second;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const std::vector<std::string> pieces = t.tokenize(text);
    const std::vector<int32_t> ids = t.tokenize_ids(text);
    FUZZ_ASSERT(pieces.size() == ids.size(), "tokenize and tokenize_ids disagree");
    for (std::size_t i = 0; i < ids.size(); ++i)
      FUZZ_ASSERT(ids[i] >= 0 && t.id_to_token(ids[i]) == pieces[i] ||
                      (ids[i] == t.token_to_id("[UNK]") && t.token_to_id(pieces[i]) < 0),
                  "piece %zu", i);
    (void)t.pre_tokenize(text);
    for (bool truncate : {true, false}) {
      text::Encoding e = t.encode(text, true, truncate);
      check(t, e, o.max_length, truncate);
      const std::size_t before = e.ids.size();
      t.pad(e, o.max_length + 3);
      check(t, e, 0, false);
      FUZZ_ASSERT(e.ids.size() == std::max<std::size_t>(before, o.max_length + 3), "pad: %zu -> %zu", before,
                  e.ids.size());
      (void)t.decode(e.ids, flags & 128);
    }
    const std::size_t cut = text.find('\xff');
    if (cut == std::string_view::npos) {
      const std::size_t half = text.size() / 2;
      check(t, t.encode_pair(text.substr(0, half), text.substr(half), true), o.max_length, true);
    } else {
      check(t, t.encode_pair(text.substr(0, cut), text.substr(cut + 1), true), o.max_length, true);
    }
    (void)base.tokenize(text);
  } catch (const Error&) {
  }
  return 0;
}

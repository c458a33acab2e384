// Fuzzes the byte-level BPE tokenizer (text/bpe_bytes.h) on a small
// vocabulary built here: all 256 byte symbols, a few merges (some of whose
// results are not tokens, to exercise the fallback), control and
// user-defined special tokens. The first byte picks the pre-tokenizer and
// flags; the rest is the text. Properties for valid UTF-8 text:
//   - decode(encode(s)) == s (specials rendered), with and without parse_special;
//   - the pre-tokenized words concatenate back to s;
//   - every id is in range.
#include <attn/core/error.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/utf8.h>

#include <string_view>

#include "fuzz_util.h"

using namespace attn;
using text::BpeTokenType;
using text::ByteBpeTokenizer;

namespace {

std::string sym(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) text::append_utf8(s, text::byte_to_unicode(b));
  return s;
}

ByteBpeTokenizer make(text::PreTokenizer pre) {
  text::ByteBpeVocab v;
  v.pre = pre;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(sym(std::string(1, static_cast<char>(b))));
    v.types.push_back(BpeTokenType::normal);
  }
  // Merges in rank order; "Ġth" is deliberately not a token (fallback path).
  const char* merges[][2] = {{" ", "t"},  {"h", "e"},           {" t", "he"}, {"i", "n"},
                             {"in", "g"}, {"e", "r"},           {" ", "a"},   {" t", "h"},
                             {"1", "2"},  {"\xe4\xb8", "\xad"}, {"a", "a"}};
  for (const auto& m : merges) {
    v.merges.push_back(sym(m[0]) + " " + sym(m[1]));
    const std::string merged = sym(std::string(m[0]) + m[1]);
    if (merged != sym(" th")) {
      v.tokens.push_back(merged);
      v.types.push_back(BpeTokenType::normal);
    }
  }
  v.tokens.push_back("<|endoftext|>");
  v.types.push_back(BpeTokenType::control);
  v.eos_id = v.bos_id = static_cast<int32_t>(v.tokens.size()) - 1;
  v.tokens.push_back("<|end|>");
  v.types.push_back(BpeTokenType::control);
  v.tokens.push_back("<user>");
  v.types.push_back(BpeTokenType::user_defined);
  v.tokens.push_back("<unk>");
  v.types.push_back(BpeTokenType::unknown);
  v.unk_id = static_cast<int32_t>(v.tokens.size()) - 1;
  return ByteBpeTokenizer::from_vocab(std::move(v));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const ByteBpeTokenizer gpt2 = make(text::PreTokenizer::gpt2);
  static const ByteBpeTokenizer smollm = make(text::PreTokenizer::smollm);
  const ByteBpeTokenizer& t = (data[0] & 1) ? smollm : gpt2;
  const std::string_view s(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool valid = text::check_utf8(s).ok();
  try {
    std::string joined;
    for (const std::string& w : t.pre_tokenize(s)) {
      FUZZ_ASSERT(!w.empty(), "empty pre-token");
      joined += w;
    }
    FUZZ_ASSERT(joined == s, "pre-tokens do not concatenate to the text");
    for (bool parse_special : {true, false}) {
      const std::vector<int32_t> ids = t.encode(s, (data[0] & 2) != 0, parse_special);
      for (int32_t id : ids) FUZZ_ASSERT(id >= 0 && id < t.vocab_size(), "id %d out of range", id);
      std::string back = t.decode(ids, true);
      if (data[0] & 2) back = back.substr(std::string_view("<|endoftext|>").size());
      FUZZ_ASSERT(back == s, "decode(encode(s)) != s (parse_special=%d)", parse_special);
      (void)t.decode(ids, false);
    }
    FUZZ_ASSERT(valid, "encode accepted invalid UTF-8");
  } catch (const Error&) {
    FUZZ_ASSERT(!valid, "attn::Error on valid UTF-8 text");
  }
  // Arbitrary ids: decode must throw attn::Error for those out of range.
  std::vector<int32_t> ids;
  for (std::size_t i = 1; i + 1 < size; i += 2)
    ids.push_back(static_cast<int16_t>(data[i] | data[i + 1] << 8));
  try {
    (void)t.decode(ids);
  } catch (const Error&) {
  }
  return 0;
}

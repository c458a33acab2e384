// Fuzzes the strict UTF-8 decoder (text/utf8.h) against its own properties
// and against json::find_invalid_utf8, which implements the same rules:
//   - check_utf8 and find_invalid_utf8 agree on the first bad byte;
//   - decode_utf8 throws attn::Error exactly when check_utf8 reports a problem;
//   - encode_utf8(decode_utf8(s)) == s for valid s;
//   - describe_utf8_error never reads outside the input.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/text/utf8.h>

#include <string_view>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const text::Utf8Check c = text::check_utf8(bytes);
  const std::size_t j = json::find_invalid_utf8(bytes);
  if (c.ok()) {
    FUZZ_ASSERT(j == std::string_view::npos, "json rejects at %zu what text accepts", j);
    FUZZ_ASSERT(c.offset == size, "ok check at offset %zu of %zu", c.offset, size);
    const std::u32string cps = text::decode_utf8(bytes);
    FUZZ_ASSERT(text::encode_utf8(cps) == bytes, "round trip differs");
    for (char32_t cp : cps) FUZZ_ASSERT(text::code_point_name(cp).size() >= 6, "code point name");
  } else {
    FUZZ_ASSERT(j == c.offset, "json says %zu, text says %zu (%s)", j, c.offset,
                text::utf8_problem_name(c.problem));
    FUZZ_ASSERT(c.offset < size && c.length >= 1 && c.offset + c.length <= size, "bad span %zu+%zu of %zu",
                c.offset, c.length, size);
    const std::string msg = text::describe_utf8_error(bytes, c, {"fuzz.txt", 3, 100});
    FUZZ_ASSERT(!msg.empty(), "empty description");
    bool threw = false;
    try {
      text::decode_utf8(bytes);
    } catch (const Error&) {
      threw = true;
    }
    FUZZ_ASSERT(threw, "decode_utf8 accepted what check_utf8 rejects at %zu", c.offset);
  }
  (void)text::strip_bom(bytes);
  // append_utf8 on arbitrary 32-bit values: throws for surrogates and > U+10FFFF only.
  if (size >= 4) {
    char32_t cp = 0;
    for (int i = 0; i < 4; ++i) cp = cp << 8 | data[i];
    std::string out;
    bool threw = false;
    try {
      text::append_utf8(out, cp);
    } catch (const Error&) {
      threw = true;
    }
    const bool valid = cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    FUZZ_ASSERT(threw != valid, "append_utf8(U+%X): threw=%d", static_cast<unsigned>(cp), threw);
    if (valid) FUZZ_ASSERT(text::decode_utf8(out) == std::u32string(1, cp), "append_utf8 round trip");
  }
  return 0;
}

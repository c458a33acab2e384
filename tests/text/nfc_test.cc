// NFC (text/unicode_ucd.h ucd::nfc, Qwen2's normalizer): canonical composition after NFD, with the
// cases that trip implementations up. Expected values from Python's unicodedata.normalize("NFC", ...)
// (Unicode 14, the version of the tables).
#include <gtest/gtest.h>

#include <string>

#include "text/unicode_ucd.h"

namespace attn::text::ucd {
namespace {

TEST(Nfc, ComposesAsPythonDoes) {
  const std::pair<std::u32string, std::u32string> cases[] = {
      {U"e\u0301", U"\u00e9"},              // the common case
      {U"\u1100\u1161\u11a8", U"\uac01"},   // Hangul L + V + T
      {U"\uac00\u11a8", U"\uac01"},         // Hangul LV + T
      {U"d\u0307\u0323", U"\u1e0d\u0307"},  // marks reordered, then the lower class composes
      {U"\u1e0b\u0323", U"\u1e0d\u0307"},   // a composite decomposed and recomposed otherwise
      {U"\u0958", U"\u0915\u093c"},         // a composition exclusion stays decomposed
      {U"\u212b", U"\u00c5"},               // a singleton (ANGSTROM SIGN) becomes Å
      {U"a\u0301\u0301", U"\u00e1\u0301"},  // the second acute is blocked
      {U"\u0301a", U"\u0301a"},             // a leading mark has no starter
      {U"A\u030a\u0327", U"\u00c5\u0327"},  // not blocked by a lower class
      {U"\u00e9\u4e2d\U0001F600", U"\u00e9\u4e2d\U0001F600"},  // already NFC
      {U"", U""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(nfc(in), want) << encode_utf8(in);
}

// NFC is idempotent and equals NFC of its NFD, on every code point below U+3400 followed by a mark.
TEST(Nfc, IdempotentOverTheBmpStart) {
  for (char32_t c = 1; c < 0x3400; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::u32string s = {c, 0x0301, 0x0323};
    const std::u32string once = nfc(s);
    EXPECT_EQ(nfc(once), once) << static_cast<uint32_t>(c);
    EXPECT_EQ(nfc(nfd(s)), once) << static_cast<uint32_t>(c);
  }
}

}  // namespace
}  // namespace attn::text::ucd

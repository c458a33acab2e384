// Display width of UTF-8 text in a terminal, for aligning table columns that
// mix ASCII with CJK (each Han character or fullwidth form takes two columns).
//
// Header-only so that tests can include it without linking the CLI.
//
// Rules (a compact form of Unicode's East Asian Width property, UAX #11, and
// of what wcwidth() returns in a UTF-8 locale):
//  * Wide (W) and Fullwidth (F) characters count 2: Hangul Jamo, CJK radicals,
//    symbols and punctuation (U+3000..), kana, CJK ideographs (all planes 2-3
//    too), Yi, Hangul syllables, compatibility ideographs, vertical and small
//    forms, fullwidth ASCII and signs (U+FF01..FF60, U+FFE0..FFE6), and the
//    common emoji blocks.
//  * Combining marks, zero-width spaces/joiners, variation selectors and
//    control characters count 0.
//  * Everything else counts 1, including East Asian "Ambiguous" characters
//    such as · × √ █ (as wcwidth does; terminals set to treat ambiguous
//    characters as wide will show those wider).
//  * A byte that does not start a valid UTF-8 sequence counts 1 (a terminal
//    shows a replacement character there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attn::text {

// Decodes the UTF-8 sequence at s[i]; returns the code point and advances i.
// Invalid or truncated sequences yield U+FFFD and advance by one byte.
inline char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong encodings, surrogates and values past U+10FFFF are invalid.
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

// Columns one code point occupies: 0, 1 or 2.
inline int code_point_width(char32_t c) {
  struct Range {
    char32_t lo, hi;
  };
  static constexpr Range kZero[] = {
      {0x0000, 0x001F}, {0x007F, 0x009F}, {0x0300, 0x036F},   {0x0483, 0x0489},   {0x0591, 0x05BD},
      {0x0610, 0x061A}, {0x064B, 0x065F}, {0x0E31, 0x0E31},   {0x0E34, 0x0E3A},   {0x0E47, 0x0E4E},
      {0x1160, 0x11FF}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF},   {0x200B, 0x200F},   {0x2028, 0x202E},
      {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0x302A, 0x302D},   {0x3099, 0x309A},   {0xFE00, 0xFE0F},
      {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0x1F3FB, 0x1F3FF}, {0xE0000, 0xE0FFF},
  };
  static constexpr Range kWide[] = {
      {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},   {0x23F0, 0x23F0},
      {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},   {0x2648, 0x2653},   {0x267F, 0x267F},
      {0x2693, 0x2693},   {0x26A1, 0x26A1},   {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},
      {0x26CE, 0x26CE},   {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
      {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},   {0x2728, 0x2728},
      {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},   {0x2757, 0x2757},   {0x2795, 0x2797},
      {0x27B0, 0x27B0},   {0x27BF, 0x27BF},   {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},
      {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
      {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
      {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4}, {0x17000, 0x18AFF}, {0x1B000, 0x1B2FF},
      {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF}, {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F251},
      {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD},
      {0x30000, 0x3FFFD},
  };
  auto in = [c](const auto& table) {
    for (const Range& r : table)
      if (c >= r.lo && c <= r.hi) return true;
    return false;
  };
  if (c < 0x7F && c >= 0x20) return 1;  // printable ASCII: the common case
  if (in(kZero)) return 0;
  if (in(kWide)) return 2;
  return 1;
}

// Columns the UTF-8 string occupies in a terminal.
inline int display_width(std::string_view s) {
  int w = 0;
  for (std::size_t i = 0; i < s.size();) w += code_point_width(next_code_point(s, i));
  return w;
}

enum class Align { left, right, center };

// Pads `s` with spaces to `width` display columns (never truncates).
inline std::string pad(std::string_view s, int width, Align align = Align::left) {
  const int gap = width - display_width(s);
  if (gap <= 0) return std::string(s);
  int left = 0;
  if (align == Align::right) left = gap;
  if (align == Align::center) left = gap / 2;
  return std::string(left, ' ') + std::string(s) + std::string(gap - left, ' ');
}

}  // namespace attn::text

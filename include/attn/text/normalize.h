// Text normalisation and character classes shared by the readers and the
// tokenizers. Everything works on code points (decode with utf8.h first).
//
// normalize() does, in this order:
//   1. drops control characters (Cc other than whitespace), U+FEFF (a BOM in
//      the middle of text) and the zero-width space U+200B;
//   2. optionally maps full-width ASCII variants U+FF01..U+FF5E to U+0021..U+007E
//      (U+FF0C '，' -> ',', U+FF21 'Ａ' -> 'A'); the ideographic space U+3000
//      is whitespace and handled in step 4 either way;
//   3. optionally lower-cases ASCII A-Z (no other scripts are case-mapped);
//   4. collapses every run of whitespace (is_space) into one U+0020 and trims
//      both ends.
// The result is idempotent: normalize(normalize(x)) == normalize(x).
#pragma once

#include <string>
#include <string_view>

namespace attn::text {

struct NormalizeOptions {
  bool fullwidth_to_ascii = false;  // step 2
  bool lowercase_ascii = false;     // step 3
};

std::u32string normalize(std::u32string_view text, const NormalizeOptions& options = {});
// Decodes (strictly; errors name "<string>"), normalises and re-encodes.
std::string normalize_utf8(std::string_view text, const NormalizeOptions& options = {});

// Unicode White_Space: \t \n \v \f \r, space, U+0085, U+00A0, U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_space(char32_t c);
// Cc other than whitespace, U+FEFF and U+200B: removed by normalize().
bool is_dropped_control(char32_t c);
bool is_ascii_alnum(char32_t c);
// CJK Unified Ideographs (base block, extensions A..H) and the compatibility
// ideographs: one token each in the Chinese character tokenizer.
bool is_cjk_ideograph(char32_t c);
// ASCII punctuation, General Punctuation U+2000..U+206F (outside whitespace),
// CJK Symbols and Punctuation U+3001..U+303F, the full-width punctuation of
// U+FF01..U+FF65 and the Latin-1 punctuation U+00A1..U+00BF.
bool is_punctuation(char32_t c);

}  // namespace attn::text

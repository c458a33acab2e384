// Strict UTF-8: bytes <-> Unicode code points.
//
// Decoding never lets invalid input through. The five ways a byte string can
// be ill-formed each have a name (Utf8Problem) and every error is an
// attn::Error naming the file, the 1-based line, the byte offset within the
// line and within the file, and the offending bytes, e.g.
//   "utf8: neg.txt line 12, byte 7 of the line (byte 2051 of the file):
//    overlong encoding (bytes c0 af)".
// Well-formed means (RFC 3629): the shortest encoding of a scalar value in
// [U+0000, U+10FFFF] that is not a surrogate (U+D800..U+DFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attn::text {

enum class Utf8Problem {
  none,
  unexpected_continuation,  // 0x80..0xBF where a sequence must start
  invalid_byte,             // 0xF8..0xFF: never valid in UTF-8
  truncated,                // a lead byte not followed by enough continuation bytes
  overlong,                 // a longer encoding than needed (includes 0xC0, 0xC1 leads)
  surrogate,                // U+D800..U+DFFF
  too_large,                // above U+10FFFF (includes 0xF5..0xF7 leads)
};

// "unexpected continuation byte", "invalid byte", "truncated sequence", ...
const char* utf8_problem_name(Utf8Problem p);

// The first ill-formed sequence of a byte string.
struct Utf8Check {
  Utf8Problem problem = Utf8Problem::none;
  std::size_t offset = 0;  // byte offset of the bad sequence (bytes.size() when none)
  std::size_t length = 0;  // bytes that belong to it (at least 1)
  bool ok() const { return problem == Utf8Problem::none; }
};
Utf8Check check_utf8(std::string_view bytes);

// Where a byte string came from, for error messages.
struct Location {
  std::string_view file = "<string>";
  int64_t line = 1;         // 1-based line number of bytes[0]
  int64_t file_offset = 0;  // byte offset of bytes[0] within the file
};

// Builds the message for a problem found at `bytes[check.offset]`, counting
// the lines inside `bytes` (so a whole file can be checked in one call).
std::string describe_utf8_error(std::string_view bytes, const Utf8Check& check, const Location& where);

// Throws attn::Error (see describe_utf8_error) unless `bytes` is well-formed.
void require_utf8(std::string_view bytes, const Location& where = {});

// Strict decoding; throws attn::Error on the first ill-formed sequence.
std::u32string decode_utf8(std::string_view bytes, const Location& where = {});

// "U+4E2D".
std::string code_point_name(char32_t cp);

// Appends one code point; throws for surrogates and values above U+10FFFF.
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view cps);

// Length of the longest prefix of `bytes` that does not end inside a UTF-8
// sequence: a lead byte whose continuation bytes are still missing (at most
// 3 bytes) is cut off; anything else is kept. What a stream of decoded tokens
// may show once generation stops (a character split over tokens is never
// shown half).
std::size_t complete_utf8_prefix(std::string_view bytes);

// Appends `bytes` to `out` as well-formed UTF-8: each ill-formed sequence becomes U+FFFD, one per
// maximal subpart (Unicode's "substitution of maximal subparts", as llama.cpp and Hugging Face decode
// model output): a stray continuation byte, a byte that never starts a sequence (C0, C1, F5..FF) and
// the longest prefix of a sequence that can still be valid before a byte that cannot continue it
// (so E0 80 is two U+FFFD: 80 cannot follow E0). Returns the bytes consumed: all of them when
// `final`; else an incomplete sequence at the end that could still become a character is left for
// the next call (at most 3 bytes).
std::size_t append_valid_utf8(std::string& out, std::string_view bytes, bool final);
// `bytes` with every ill-formed sequence replaced as above (the end included).
std::string to_valid_utf8(std::string_view bytes);

// The UTF-8 byte order mark EF BB BF (U+FEFF at the start of a file).
bool starts_with_bom(std::string_view bytes);
// `bytes` without a leading BOM (unchanged when there is none).
std::string_view strip_bom(std::string_view bytes);

}  // namespace attn::text

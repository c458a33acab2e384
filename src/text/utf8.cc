#include <attn/core/error.h>
#include <attn/text/utf8.h>

#include <cstdio>

namespace attn::text {
namespace {

bool is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

// Examines the sequence starting at p[0] (n > 0 bytes available). Returns the
// code point through `cp` and the sequence length through `len`.
Utf8Problem examine(const unsigned char* p, std::size_t n, char32_t* cp, std::size_t* len) {
  const unsigned char b0 = p[0];
  *len = 1;
  if (b0 < 0x80) {
    *cp = b0;
    return Utf8Problem::none;
  }
  if (is_cont(b0)) return Utf8Problem::unexpected_continuation;
  if (b0 >= 0xF8) return Utf8Problem::invalid_byte;
  std::size_t need;
  char32_t v;
  char32_t min;
  if (b0 < 0xE0) {
    need = 2, v = b0 & 0x1F, min = 0x80;
  } else if (b0 < 0xF0) {
    need = 3, v = b0 & 0x0F, min = 0x800;
  } else {
    need = 4, v = b0 & 0x07, min = 0x10000;
  }
  std::size_t have = 1;
  while (have < need && have < n && is_cont(p[have])) {
    v = (v << 6) | (p[have] & 0x3F);
    ++have;
  }
  *len = have;
  if (have < need) return Utf8Problem::truncated;
  if (v < min) return Utf8Problem::overlong;
  if (v >= 0xD800 && v <= 0xDFFF) return Utf8Problem::surrogate;
  if (v > 0x10FFFF) return Utf8Problem::too_large;
  *cp = v;
  return Utf8Problem::none;
}

}  // namespace

const char* utf8_problem_name(Utf8Problem p) {
  switch (p) {
    case Utf8Problem::none:
      return "no problem";
    case Utf8Problem::unexpected_continuation:
      return "unexpected continuation byte";
    case Utf8Problem::invalid_byte:
      return "invalid byte (0xF8..0xFF never occur in UTF-8)";
    case Utf8Problem::truncated:
      return "truncated sequence";
    case Utf8Problem::overlong:
      return "overlong encoding";
    case Utf8Problem::surrogate:
      return "encoded surrogate (U+D800..U+DFFF)";
    case Utf8Problem::too_large:
      return "code point above U+10FFFF";
  }
  return "?";
}

Utf8Check check_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  while (i < bytes.size()) {
    if (p[i] < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    char32_t cp;
    std::size_t len;
    const Utf8Problem problem = examine(p + i, bytes.size() - i, &cp, &len);
    if (problem != Utf8Problem::none) return {problem, i, len};
    i += len;
  }
  return {Utf8Problem::none, bytes.size(), 0};
}

std::string describe_utf8_error(std::string_view bytes, const Utf8Check& check, const Location& where) {
  int64_t line = where.line;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < check.offset && i < bytes.size(); ++i) {
    if (bytes[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  std::string hex;
  for (std::size_t i = 0; i < check.length && check.offset + i < bytes.size(); ++i) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(bytes[check.offset + i]));
    if (!hex.empty()) hex += ' ';
    hex += buf;
  }
  const bool at_end = check.problem == Utf8Problem::truncated && check.offset + check.length == bytes.size();
  return detail::concat("utf8: ", where.file, " line ", line, ", byte ", check.offset - line_start,
                        " of the line (byte ", where.file_offset + static_cast<int64_t>(check.offset),
                        " of the file): ", utf8_problem_name(check.problem), " (bytes ", hex, ")",
                        at_end ? " at the end of the input" : "");
}

void require_utf8(std::string_view bytes, const Location& where) {
  const Utf8Check c = check_utf8(bytes);
  if (!c.ok()) throw Error(describe_utf8_error(bytes, c, where));
}

std::u32string decode_utf8(std::string_view bytes, const Location& where) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  while (i < bytes.size()) {
    char32_t cp;
    std::size_t len;
    const Utf8Problem problem = examine(p + i, bytes.size() - i, &cp, &len);
    if (problem != Utf8Problem::none) throw Error(describe_utf8_error(bytes, {problem, i, len}, where));
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string code_point_name(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  return buf;
}

void append_utf8(std::string& out, char32_t cp) {
  ATTN_CHECK(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF), "utf8: cannot encode ", code_point_name(cp),
             ": not a Unicode scalar value (surrogate or above U+10FFFF)");
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size() * 3);
  for (const char32_t cp : cps) append_utf8(out, cp);
  return out;
}

bool starts_with_bom(std::string_view bytes) { return bytes.substr(0, 3) == "\xEF\xBB\xBF"; }

std::string_view strip_bom(std::string_view bytes) {
  return starts_with_bom(bytes) ? bytes.substr(3) : bytes;
}

std::size_t complete_utf8_prefix(std::string_view s) {
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

namespace {

// A lead byte's sequence length and the range its second byte must be in (length 0: no lead).
struct Utf8Lead {
  int len;
  unsigned char lo, hi;
};
Utf8Lead utf8_lead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlong
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogate
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlong
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

std::size_t append_valid_utf8(std::string& out, std::string_view s, bool final) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const Utf8Lead lead = utf8_lead(static_cast<unsigned char>(s[i]));
    if (lead.len == 1) {
      std::size_t j = i + 1;
      while (j < n && static_cast<unsigned char>(s[j]) < 0x80) ++j;
      out.append(s.substr(i, j - i));
      i = j;
      continue;
    }
    if (lead.len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    std::size_t k = 1;  // bytes of the sequence that are well-formed so far
    while (k < static_cast<std::size_t>(lead.len) && i + k < n) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lead.lo : 0x80) || c > (k == 1 ? lead.hi : 0xBF)) break;
      ++k;
    }
    if (k == static_cast<std::size_t>(lead.len)) {
      out.append(s.substr(i, k));
    } else if (i + k == n && !final) {
      return i;  // the sequence may still complete
    } else {
      out += kReplacement;  // one maximal subpart
    }
    i += k;
  }
  return n;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_valid_utf8(out, bytes, true);
  return out;
}

}  // namespace attn::text

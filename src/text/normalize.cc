#include <attn/text/normalize.h>
#include <attn/text/utf8.h>

namespace attn::text {

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_dropped_control(char32_t c) {
  if (is_space(c)) return false;
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0xFEFF || c == 0x200B;
}

bool is_ascii_alnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) ||    // CJK Unified Ideographs
         (c >= 0x3400 && c <= 0x4DBF) ||    // extension A
         (c >= 0x20000 && c <= 0x2A6DF) ||  // extension B
         (c >= 0x2A700 && c <= 0x2EBEF) ||  // extensions C, D, E, F
         (c >= 0x30000 && c <= 0x323AF) ||  // extensions G, H
         (c >= 0xF900 && c <= 0xFAFF) ||    // compatibility ideographs
         (c >= 0x2F800 && c <= 0x2FA1F);    // compatibility supplement
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) return c > 0x20 && c < 0x7F && !is_ascii_alnum(c);
  if (c >= 0xA1 && c <= 0xBF) return true;
  if (c >= 0x2000 && c <= 0x206F) return !is_space(c) && !is_dropped_control(c);
  if (c >= 0x3001 && c <= 0x303F) return true;
  if (c >= 0xFF01 && c <= 0xFF65) {
    // Full-width digits and letters are not punctuation.
    return !((c >= 0xFF10 && c <= 0xFF19) || (c >= 0xFF21 && c <= 0xFF3A) || (c >= 0xFF41 && c <= 0xFF5A));
  }
  return false;
}

std::u32string normalize(std::u32string_view text, const NormalizeOptions& options) {
  std::u32string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char32_t c : text) {
    if (is_dropped_control(c)) continue;
    if (options.fullwidth_to_ascii && c >= 0xFF01 && c <= 0xFF5E) c -= 0xFEE0;
    if (options.lowercase_ascii && c >= 'A' && c <= 'Z') c += 'a' - 'A';
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(U' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

std::string normalize_utf8(std::string_view text, const NormalizeOptions& options) {
  return encode_utf8(normalize(decode_utf8(text), options));
}

}  // namespace attn::text

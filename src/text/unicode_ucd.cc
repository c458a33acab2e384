#include "text/unicode_ucd.h"

#include <attn/core/error.h>
#include <attn/io/json.h>

#include <algorithm>
#include <utility>

namespace attn::text::ucd {

namespace {

template <typename Range>
const Range* find_range(const Range* table, int n, char32_t c) {
  const Range* end = table + n;
  const Range* it = std::upper_bound(table, end, c, [](char32_t x, const Range& r) { return x < r.first; });
  if (it == table) return nullptr;
  --it;
  return c <= it->last ? it : nullptr;
}

const MapEntry* find_entry(const MapEntry* table, int n, char32_t c) {
  const MapEntry* end = table + n;
  const MapEntry* it =
      std::lower_bound(table, end, c, [](const MapEntry& e, char32_t x) { return e.cp < x; });
  return it != end && it->cp == c ? it : nullptr;
}

// Hangul syllable decomposition (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
              kSCount = kLCount * kNCount;

}  // namespace

Cat category(char32_t c) {
  const CategoryRange* r = find_range(kCategoryRanges, kCategoryRangeCount, c);
  return r ? static_cast<Cat>(r->cat) : Cat::Cn;
}

bool is_white_space(char32_t c) {
  return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

uint8_t combining_class(char32_t c) {
  const CccRange* r = find_range(kCccRanges, kCccRangeCount, c);
  return r ? r->ccc : 0;
}

void decompose(char32_t c, std::u32string& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const int s = static_cast<int>(c - kSBase);
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const MapEntry* e = find_entry(kDecompIndex, kDecompCount, c)) {
    out.append(kDecompData + e->offset, e->length);  // stored fully decomposed
    return;
  }
  out.push_back(c);
}

std::u32string nfd(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) decompose(c, out);
  // Canonical ordering: stable-sort each run of non-starters by combining class.
  for (std::size_t i = 0; i < out.size();) {
    if (combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < out.size() && combining_class(out[j]) != 0) ++j;
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i),
                     out.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  return out;
}

namespace {

// The primary composite of (a, b), or 0 (Hangul L+V and LV+T algorithmically).
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const CompPair* end = kCompPairs + kCompPairCount;
  const CompPair* it = std::lower_bound(kCompPairs, end, std::pair{a, b}, [](const CompPair& p, auto key) {
    return p.first != key.first ? p.first < key.first : p.second < key.second;
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::u32string nfc(std::u32string_view s) {
  const std::u32string d = nfd(s);
  std::u32string out;
  out.reserve(d.size());
  std::size_t starter = std::u32string::npos;  // index in `out` of the last starter
  int last_class = -1;                         // class of the last character kept after the starter
  for (const char32_t c : d) {
    const int cls = combining_class(c);
    // Not blocked: c directly follows the starter, or c is a mark and every mark kept since the
    // starter has a lower class (canonical order makes the last one the highest).
    if (starter != std::u32string::npos && (last_class == -1 || (cls != 0 && last_class < cls))) {
      if (const char32_t comp = compose_pair(out[starter], c); comp != 0) {
        out[starter] = comp;
        continue;
      }
    }
    if (cls == 0) {
      starter = out.size();
      last_class = -1;
    } else {
      last_class = cls;
    }
    out.push_back(c);
  }
  return out;
}

void to_lower(char32_t c, std::u32string& out) {
  if (c < 128) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (const MapEntry* e = find_entry(kLowerIndex, kLowerCount, c)) {
    out.append(kLowerData + e->offset, e->length);
    return;
  }
  out.push_back(c);
}

std::u32string decode_utf8(std::string_view s, const char* what, std::vector<std::size_t>* offsets) {
  const std::size_t bad = json::find_invalid_utf8(s);
  if (bad != std::string_view::npos) {
    const char* hex = "0123456789abcdef";
    const auto b = static_cast<unsigned char>(s[bad]);
    throw Error(
        detail::concat(what, ": invalid UTF-8 at byte ", bad, " (byte 0x", hex[b >> 4], hex[b & 15], ")"));
  }
  std::u32string out;
  out.reserve(s.size());
  if (offsets) offsets->clear();
  for (std::size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if (offsets) offsets->push_back(i);
    out.push_back(c);
    i += static_cast<std::size_t>(len);
  }
  return out;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(c, out);
  return out;
}

}  // namespace attn::text::ucd

// Checks for texts written in two languages (lang_checks.h).
#include "testing/lang_checks.h"

#include <algorithm>

namespace attn::testing {
namespace {

// Replaces the characters that write numbers in other ways by ASCII: full-width digits ０-９,
// the full-width point ． and percent ％, and the minus signs − (U+2212) and － (U+FF0D).
std::string ascii_numbers(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0xEF && i + 2 < s.size()) {  // U+FF00..U+FFFF: EF BC xx / EF BD xx
      const auto b1 = static_cast<unsigned char>(s[i + 1]), b2 = static_cast<unsigned char>(s[i + 2]);
      if (b1 == 0xBC && b2 >= 0x90 && b2 <= 0x99) {  // ０..９ = U+FF10..U+FF19
        out += static_cast<char>('0' + (b2 - 0x90));
        i += 3;
        continue;
      }
      if (b1 == 0xBC && b2 == 0x8E)
        out += '.', i += 3;  // ．U+FF0E
      else if (b1 == 0xBC && b2 == 0x85)
        out += '%', i += 3;  // ％ U+FF05
      else if (b1 == 0xBC && b2 == 0x8D)
        out += '-', i += 3;  // － U+FF0D
      else
        out.append(s, i, 3), i += 3;
      continue;
    }
    if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x88 &&
        static_cast<unsigned char>(s[i + 2]) == 0x92) {  // − U+2212
      out += '-';
      i += 3;
      continue;
    }
    out += s[i++];
  }
  return out;
}

bool digit(char c) { return c >= '0' && c <= '9'; }
bool ascii_alnum(char c) { return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

}  // namespace

std::vector<std::string> numbers_in(const std::string& text) {
  const std::string s = ascii_numbers(text);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    if (!digit(s[i])) {
      ++i;
      continue;
    }
    std::string n;
    if (i > 0 && s[i - 1] == '-' && (i < 2 || !ascii_alnum(s[i - 2]))) n += '-';
    std::size_t j = i;
    while (j < s.size() && digit(s[j])) n += s[j++];
    // Thousands: ",ddd" not followed by another digit.
    while (j + 3 < s.size() && s[j] == ',' && digit(s[j + 1]) && digit(s[j + 2]) && digit(s[j + 3]) &&
           (j + 4 >= s.size() || !digit(s[j + 4])))
      n.append(s, j + 1, 3), j += 4;
    if (j + 1 < s.size() && s[j] == '.' && digit(s[j + 1])) {
      n += s[j++];
      while (j < s.size() && digit(s[j])) n += s[j++];
    }
    if (j + 1 < s.size() && (s[j] == 'e' || s[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < s.size() && (s[k] == '-' || s[k] == '+')) ++k;
      if (k < s.size() && digit(s[k])) {
        n.append(s, j, k - j);
        j = k;
        while (j < s.size() && digit(s[j])) n += s[j++];
      }
    }
    if (j < s.size() && s[j] == '%') n += s[j++];
    out.push_back(n);
    i = j;
  }
  return out;
}

// An English word: ASCII letters only (an inner ' or - allowed), at least two of them, once
// surrounding brackets, quotes and punctuation are taken off ("(step", "weights,", "don't").
// Single letters are not counted: they are the formulas' variables (Q, K, V, N, h, x).
static bool english_word(std::string t) {
  auto strip = [](char c) {
    return c == '(' || c == ')' || c == '"' || c == '\'' || c == ',' || c == '.' || c == ';' || c == ':' ||
           c == '!' || c == '?' || c == '[' || c == ']';
  };
  while (!t.empty() && strip(t.front())) t.erase(0, 1);
  while (!t.empty() && strip(t.back())) t.pop_back();
  if (t.size() < 2) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool inner = (c == '\'' || c == '-') && i > 0 && i + 1 < t.size();
    if (!letter && !inner) return false;
  }
  return true;
}

// The runs of three or more English words in a row (tokens split at ASCII whitespace) outside
// `code spans`: an untranslated phrase or sentence. Identifiers and commands do not form runs:
// "attn::attention", "options.capture.enabled", "--multi-head", "fp32", "W_Q" are not words.
std::vector<std::string> english_runs(const std::string& text) {
  std::string s;
  bool code = false;
  for (const char c : text) {
    if (c == '`') {
      code = !code;
      s += ' ';
    } else {
      s += code ? ' ' : c;
    }
  }
  std::vector<std::string> runs, run;
  auto flush = [&] {
    if (run.size() >= 3) {
      std::string r;
      for (const auto& w : run) r += (r.empty() ? "" : " ") + w;
      runs.push_back(r);
    }
    run.clear();
  };
  std::string tok;
  auto end_token = [&] {
    if (tok.empty()) return;
    if (english_word(tok))
      run.push_back(tok);
    else
      flush();
    tok.clear();
  };
  for (const char c : s) {
    if (c == ' ' || c == '\n' || c == '\t') {
      end_token();
      if (c == '\n') flush();  // a run does not cross lines
    } else {
      tok += c;
    }
  }
  end_token();
  flush();
  return runs;
}

std::vector<std::string> sorted_numbers_in(const std::string& text) {
  std::vector<std::string> v = numbers_in(text);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace attn::testing

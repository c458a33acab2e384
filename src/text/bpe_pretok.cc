// The byte-level BPE pre-tokenizers (src/text/bpe_pretok.h).
#include "text/bpe_pretok.h"

#include "text/unicode_ucd.h"

namespace attn::text::pretok {
namespace {

bool is_ws(char32_t c) { return ucd::is_white_space(c); }
bool is_l(char32_t c) { return ucd::is_letter(c); }
bool is_n(char32_t c) { return ucd::is_number(c); }
bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }
bool is_other(char32_t c) { return !is_ws(c) && !is_l(c) && !is_n(c); }

// The end of the run of `pred` characters starting at q.
template <class Pred>
std::size_t run_end(const std::u32string& cps, std::size_t q, std::size_t end, Pred pred) {
  while (q < end && pred(cps[q])) ++q;
  return q;
}

// Length of the contraction 's 't 'm 'd 're 've 'll at pos (0: none); `fold` matches case-insensitively
// as (?i:...) does under Unicode case folding (ſ U+017F folds to s).
std::size_t contraction(const std::u32string& cps, std::size_t pos, std::size_t end, bool fold) {
  if (cps[pos] != '\'' || pos + 1 >= end) return 0;
  const auto low = [fold](char32_t c) -> char32_t {
    if (!fold) return c;
    if (c >= 'A' && c <= 'Z') return c + 32;
    return c == 0x17F ? U's' : c;
  };
  const char32_t a = low(cps[pos + 1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= end) return 0;
  const char32_t b = low(cps[pos + 2]);
  return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

// \s+(?!\S)|\s+ at pos (a whitespace character): the run, less its last character when a
// non-space follows and the run is longer than one.
std::size_t trailing_space(const std::u32string& cps, std::size_t pos, std::size_t end) {
  std::size_t q = run_end(cps, pos, end, is_ws);
  if (q < end && q - pos > 1) --q;
  return q;
}

}  // namespace

void split_gpt2(const std::u32string& cps, std::size_t begin, std::size_t end, Ranges& out) {
  std::size_t pos = begin;
  while (pos < end) {
    std::size_t q;
    if (const std::size_t n = contraction(cps, pos, end, false); n > 0) {
      q = pos + n;
    } else {
      // ' ?' then a run of one class.
      const std::size_t p = (cps[pos] == ' ' && pos + 1 < end) ? pos + 1 : pos;
      const char32_t d = cps[p];
      if (is_l(d))
        q = run_end(cps, p, end, is_l);
      else if (is_n(d))
        q = run_end(cps, p, end, is_n);
      else if (!is_ws(d))
        q = run_end(cps, p, end, is_other);
      else
        q = trailing_space(cps, pos, end);
    }
    out.emplace_back(pos, q);
    pos = q;
  }
}

void split_llama3(const std::u32string& cps, std::size_t begin, std::size_t end, int max_digits,
                  Ranges& out) {
  std::size_t pos = begin;
  while (pos < end) {
    const char32_t c = cps[pos];
    std::size_t q = pos;
    if (const std::size_t n = contraction(cps, pos, end, true); n > 0) {
      q = pos + n;
    } else if (is_l(c)) {  // [^\r\n\p{L}\p{N}]?\p{L}+ with the optional part empty
      q = run_end(cps, pos, end, is_l);
    } else if (!is_crlf(c) && !is_n(c) && pos + 1 < end && is_l(cps[pos + 1])) {  // one prefix character
      q = run_end(cps, pos + 1, end, is_l);
    } else if (is_n(c)) {  // \p{N}{1,max_digits}
      while (q < end && q - pos < static_cast<std::size_t>(max_digits) && is_n(cps[q])) ++q;
    } else if (is_other(c) || (c == ' ' && pos + 1 < end && is_other(cps[pos + 1]))) {
      // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
      q = run_end(cps, c == ' ' ? pos + 1 : pos, end, is_other);
      q = run_end(cps, q, end, is_crlf);
    } else {
      // Whitespace. \s*[\r\n]+ : up to and including the last CR/LF of the run, if it has one.
      const std::size_t ws = run_end(cps, pos, end, is_ws);
      std::size_t last_nl = ws;
      for (std::size_t k = pos; k < ws; ++k)
        if (is_crlf(cps[k])) last_nl = k;
      q = last_nl < ws ? last_nl + 1 : trailing_space(cps, pos, end);
    }
    out.emplace_back(pos, q);
    pos = q;
  }
}

}  // namespace attn::text::pretok

// Corpus BLEU as sacreBLEU 2.x computes it (see bleu.h). Written from the
// description of the metric and of sacreBLEU's tokenizers; the test compares
// against the Python package on fixed outputs.
#include <attn/core/error.h>
#include <attn/text/bleu.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace attn::text {
namespace {

// Python's str.isspace() (what str.split() and str.strip() use).
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// sacreBLEU's _UCODE_RANGES as Python evaluates them (see bleu.h for the two
// ranges whose escapes were written with five hex digits).
bool zh_char(char32_t c) {
  static constexpr char32_t kRanges[][2] = {
      {0x3400, 0x4DB5}, {0x4E00, 0x9FA5}, {0x9FA6, 0x9FBB}, {0xF900, 0xFA2D}, {0xFA30, 0xFA6A},
      {0xFA70, 0xFAD9}, {0x2001, 0x2A6D},  // '\u20000'..'\u2a6d6': ('\u2000' '0') < c <= ('\u2a6d' '6')
      {0x2F81, 0x2FA1},                    // '\u2f800'..'\u2fa1d'
      {0xFF00, 0xFFEF}, {0x2E80, 0x2EFF}, {0x3000, 0x303F}, {0x31C0, 0x31EF}, {0x2F00, 0x2FDF},
      {0x2FF0, 0x2FFF}, {0x3100, 0x312F}, {0x31A0, 0x31BF}, {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F},
      {0x2600, 0x26FF}, {0x2700, 0x27BF}, {0x3200, 0x32FF}, {0x3300, 0x33FF},
  };
  for (const auto& r : kRanges)
    if (c >= r[0] && c <= r[1]) return true;
  return false;
}

bool digit(char32_t c) { return c >= '0' && c <= '9'; }

// [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and space except ' , - .
bool split_punct(char32_t c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// One re.sub pass of a two-character pattern: scans left to right, and after
// a match continues behind it (Python's non-overlapping matching).
template <typename Match, typename Emit>
std::u32string sub2(const std::u32string& s, Match match, Emit emit) {
  std::u32string out;
  out.reserve(s.size() + 16);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

// sacreBLEU's TokenizerRegexp, then ' '.join(line.split()).
std::u32string regex_rules(const std::u32string& line) {
  std::u32string s;
  s.reserve(line.size() * 2);
  for (char32_t c : line) {
    if (split_punct(c)) {
      s += U' ';
      s += c;
      s += U' ';
    } else {
      s += c;
    }
  }
  const auto dot_comma = [](char32_t c) { return c == '.' || c == ','; };
  // ([^0-9])([\.,]) -> \1 \2 (space)
  s = sub2(
      s, [&](char32_t a, char32_t b) { return !digit(a) && dot_comma(b); },
      [](std::u32string& o, char32_t a, char32_t b) { o += a, o += U' ', o += b, o += U' '; });
  // ([\.,])([^0-9]) -> (space)\1 \2
  s = sub2(
      s, [&](char32_t a, char32_t b) { return dot_comma(a) && !digit(b); },
      [](std::u32string& o, char32_t a, char32_t b) { o += U' ', o += a, o += U' ', o += b; });
  // ([0-9])(-) -> \1 \2 (space)
  s = sub2(
      s, [](char32_t a, char32_t b) { return digit(a) && b == '-'; },
      [](std::u32string& o, char32_t a, char32_t b) { o += a, o += U' ', o += b, o += U' '; });
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) {
    while (i < s.size() && py_space(s[i])) ++i;
    if (i == s.size()) break;
    if (!out.empty()) out += U' ';
    while (i < s.size() && !py_space(s[i])) out += s[i++];
  }
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

std::u32string tokenize_cps(std::string_view segment, BleuTokenizer t) {
  std::u32string cps = decode_utf8(segment);
  // sacreBLEU: sent.rstrip() before any tokenizer.
  while (!cps.empty() && py_space(cps.back())) cps.pop_back();
  switch (t) {
    case BleuTokenizer::none:  // the line as it is; n-grams split it on whitespace
      return cps;
    case BleuTokenizer::v13a: {
      std::string s = encode_utf8(cps);
      replace_all(s, "<skipped>", "");
      replace_all(s, "-\n", "");
      replace_all(s, "\n", " ");
      if (s.find('&') != std::string::npos) {
        replace_all(s, "&quot;", "\"");
        replace_all(s, "&amp;", "&");
        replace_all(s, "&lt;", "<");
        replace_all(s, "&gt;", ">");
      }
      std::u32string padded(1, U' ');  // f' {line} '
      padded += decode_utf8(s);
      padded += U' ';
      return regex_rules(padded);
    }
    case BleuTokenizer::zh: {
      std::size_t b = 0;
      while (b < cps.size() && py_space(cps[b])) ++b;  // line.strip()
      std::u32string s;
      s.reserve(cps.size() * 3);
      for (std::size_t i = b; i < cps.size(); ++i) {
        if (zh_char(cps[i])) {
          s += U' ';
          s += cps[i];
          s += U' ';
        } else {
          s += cps[i];
        }
      }
      return regex_rules(s);
    }
  }
  return cps;
}

using Ngram = std::u32string;  // tokens joined by U+0000 (never inside a token after tokenisation)

// n-gram counts of orders 1..max_order; returns the token count.
int64_t count_ngrams(const std::u32string& tokenized, int max_order, std::map<Ngram, int64_t>& counts) {
  std::vector<std::u32string> toks;  // line.split()
  for (std::size_t i = 0; i < tokenized.size();) {
    while (i < tokenized.size() && py_space(tokenized[i])) ++i;
    std::size_t j = i;
    while (j < tokenized.size() && !py_space(tokenized[j])) ++j;
    if (j > i) toks.push_back(tokenized.substr(i, j - i));
    i = j;
  }
  const int64_t n_tok = static_cast<int64_t>(toks.size());
  for (int n = 1; n <= max_order; ++n) {
    for (int64_t i = 0; i + n <= n_tok; ++i) {
      Ngram g;
      for (int k = 0; k < n; ++k) {
        if (k) g += U'\0';
        g += toks[i + k];
      }
      ++counts[g];
    }
  }
  return n_tok;
}

int order_of(const Ngram& g) { return 1 + static_cast<int>(std::count(g.begin(), g.end(), U'\0')); }

}  // namespace

const char* bleu_tokenizer_name(BleuTokenizer t) {
  switch (t) {
    case BleuTokenizer::none:
      return "none";
    case BleuTokenizer::v13a:
      return "13a";
    case BleuTokenizer::zh:
      return "zh";
  }
  return "?";
}

BleuTokenizer parse_bleu_tokenizer(std::string_view name) {
  if (name == "none") return BleuTokenizer::none;
  if (name == "13a") return BleuTokenizer::v13a;
  if (name == "zh") return BleuTokenizer::zh;
  throw Error(detail::concat("bleu: unknown tokenizer '", name, "'; expected one of: none, 13a, zh"));
}

std::string bleu_tokenize(std::string_view segment, BleuTokenizer tokenizer) {
  return encode_utf8(tokenize_cps(segment, tokenizer));
}

std::string BleuScore::describe() const {
  std::string p;
  char buf[64];
  for (std::size_t i = 0; i < precisions.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.1f", i ? "/" : "", precisions[i]);
    p += buf;
  }
  char out[256];
  std::snprintf(out, sizeof out, "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
                score, p.c_str(), bp, ratio(), static_cast<long long>(sys_len),
                static_cast<long long>(ref_len));
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references, const BleuOptions& options) {
  ATTN_CHECK(!references.empty(), "bleu: expected at least one reference stream; got none");
  ATTN_CHECK(options.max_order >= 1 && options.max_order <= 16, "bleu: max_order must be in [1, 16]; got ",
             options.max_order);
  for (std::size_t r = 0; r < references.size(); ++r)
    ATTN_CHECK(references[r].size() == hypotheses.size(), "bleu: reference stream ", r, " has ",
               references[r].size(), " segments; expected ", hypotheses.size(), " (one per hypothesis)");
  const int N = options.max_order;
  const auto prep = [&](const std::string& s, const char* what, std::size_t stream, std::size_t seg) {
    const Utf8Check c = check_utf8(s);
    ATTN_CHECK(c.ok(), "bleu: ", what,
               stream == SIZE_MAX ? std::string() : " stream " + std::to_string(stream), " segment ", seg,
               ": invalid UTF-8 (", utf8_problem_name(c.problem), " at byte ", c.offset, ")");
    if (!options.lowercase) return tokenize_cps(s, options.tokenizer);
    std::string low = s;
    for (char& ch : low)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return tokenize_cps(low, options.tokenizer);
  };
  BleuScore out;
  out.correct.assign(N, 0);
  out.total.assign(N, 0);
  out.precisions.assign(N, 0.0);
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    std::map<Ngram, int64_t> ref_max;
    std::vector<int64_t> ref_lens;
    for (std::size_t r = 0; r < references.size(); ++r) {
      std::map<Ngram, int64_t> counts;
      ref_lens.push_back(count_ngrams(prep(references[r][i], "reference", r, i), N, counts));
      for (const auto& [g, c] : counts) ref_max[g] = std::max(ref_max[g], c);
    }
    std::map<Ngram, int64_t> hyp;
    const int64_t hyp_len = count_ngrams(prep(hypotheses[i], "hypothesis", SIZE_MAX, i), N, hyp);
    int64_t closest = -1, best_diff = -1;
    for (int64_t len : ref_lens) {
      const int64_t diff = std::llabs(hyp_len - len);
      if (best_diff < 0 || diff < best_diff || (diff == best_diff && len < closest))
        best_diff = diff, closest = len;
    }
    out.sys_len += hyp_len;
    out.ref_len += closest;
    for (const auto& [g, c] : hyp) {
      const int n = order_of(g) - 1;
      out.total[n] += c;
      if (const auto it = ref_max.find(g); it != ref_max.end()) out.correct[n] += std::min(c, it->second);
    }
  }
  out.bp = 1.0;
  if (out.sys_len < out.ref_len)
    out.bp = out.sys_len > 0 ? std::exp(1.0 - static_cast<double>(out.ref_len) / out.sys_len) : 0.0;
  if (std::all_of(out.correct.begin(), out.correct.end(), [](int64_t c) { return c == 0; })) return out;
  double smooth = 1.0, log_sum = 0.0;
  for (int n = 0; n < N; ++n) {
    if (out.total[n] == 0) {
      // sacreBLEU stops here: this and every higher order keep precision 0 (log floored).
      for (int m = n; m < N; ++m) log_sum += -9999999999.0;
      break;
    }
    if (out.correct[n] == 0) {
      smooth *= 2;
      out.precisions[n] = 100.0 / (smooth * static_cast<double>(out.total[n]));
    } else {
      out.precisions[n] = 100.0 * static_cast<double>(out.correct[n]) / static_cast<double>(out.total[n]);
    }
    log_sum += std::log(out.precisions[n]);
  }
  out.score = out.bp * std::exp(log_sum / N);
  return out;
}

}  // namespace attn::text

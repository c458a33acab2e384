#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/text/bpe.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <queue>
#include <sstream>
#include <unordered_map>

namespace attn::text {
namespace {

constexpr char32_t kSpaceCp = 0x2581;

uint64_t pair_key(int32_t l, int32_t r) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
}
int32_t key_left(uint64_t k) { return static_cast<int32_t>(k >> 32); }
int32_t key_right(uint64_t k) { return static_cast<int32_t>(k & 0xFFFFFFFFu); }

bool stands_alone(char32_t c) { return is_punctuation(c) || is_cjk_ideograph(c) || c == kSpaceCp; }

// Merges every non-overlapping occurrence of (l, r), left to right, into `merged`.
void merge_pair(std::vector<int32_t>& s, int32_t l, int32_t r, int32_t merged) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < s.size(); ++out) {
    if (i + 1 < s.size() && s[i] == l && s[i + 1] == r) {
      s[out] = merged;
      i += 2;
    } else {
      s[out] = s[i];
      i += 1;
    }
  }
  s.resize(out);
}

}  // namespace

std::vector<std::vector<std::string>> bpe_pretokenize(std::string_view text, bool lowercase) {
  NormalizeOptions norm;
  norm.lowercase_ascii = lowercase;
  const std::u32string cps = normalize(decode_utf8(text), norm);
  std::vector<std::vector<std::string>> words;
  bool space = false;
  std::size_t i = 0;
  while (i < cps.size()) {
    if (cps[i] == U' ') {
      space = true;
      ++i;
      continue;
    }
    std::vector<std::string> word;
    if (space) word.emplace_back(kSpaceToken);
    space = false;
    const auto push = [&word](char32_t c) {
      std::string s;
      append_utf8(s, c);
      word.push_back(std::move(s));
    };
    if (stands_alone(cps[i])) {
      push(cps[i++]);
    } else {
      while (i < cps.size() && cps[i] != U' ' && !stands_alone(cps[i])) push(cps[i++]);
    }
    words.push_back(std::move(word));
  }
  return words;
}

BpeTokenizer BpeTokenizer::train(const std::vector<std::string>& texts, const BpeOptions& options) {
  ATTN_CHECK(options.min_pair_count >= 1, "bpe: min_pair_count must be >= 1; got ", options.min_pair_count);
  ATTN_CHECK(options.min_char_count >= 1, "bpe: min_char_count must be >= 1; got ", options.min_char_count);
  // Word frequencies (std::map: word ids do not depend on hashing).
  std::map<std::string, int64_t> word_freq;
  for (const std::string& t : texts) {
    for (const auto& word : bpe_pretokenize(t, options.lowercase)) {
      std::string key;
      for (const std::string& s : word) key += s;
      ++word_freq[key];
    }
  }
  ATTN_CHECK(!word_freq.empty(), "bpe: empty vocabulary: the ", texts.size(),
             " training texts hold no words");
  std::map<char32_t, int64_t> char_count;
  std::vector<std::u32string> word_chars;
  std::vector<int64_t> freq;
  for (const auto& [key, f] : word_freq) {
    word_chars.push_back(decode_utf8(key));
    freq.push_back(f);
    for (const char32_t c : word_chars.back()) char_count[c] += f;
  }

  BpeTokenizer tok;
  tok.lowercase_ = options.lowercase;
  std::vector<std::string> tokens = Vocab::special_tokens();
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& [c, n] : char_count) {
    if (n < options.min_char_count) continue;
    std::string s;
    append_utf8(s, c);
    tok.alphabet_.push_back(s);
    ids.emplace(s, static_cast<int32_t>(tokens.size()));
    tokens.push_back(s);
  }
  ATTN_CHECK(!tok.alphabet_.empty(),
             "bpe: empty vocabulary: no character occurs min_char_count=", options.min_char_count, " times");
  ATTN_CHECK(static_cast<int64_t>(tokens.size()) <= options.vocab_size,
             "bpe: vocab_size=", options.vocab_size, " is smaller than the 6 special tokens plus the ",
             tok.alphabet_.size(), "-character alphabet; raise vocab_size or min_char_count");

  // Words as symbol ids; characters outside the alphabet are [UNK] and never merge.
  std::vector<std::vector<int32_t>> words(word_chars.size());
  for (std::size_t w = 0; w < words.size(); ++w) {
    for (const char32_t c : word_chars[w]) {
      std::string s;
      append_utf8(s, c);
      const auto it = ids.find(s);
      words[w].push_back(it == ids.end() ? Vocab::kUnk : it->second);
    }
  }

  std::unordered_map<uint64_t, int64_t> counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  const auto for_pairs = [](const std::vector<int32_t>& s, auto&& fn) {
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] != Vocab::kUnk && s[i + 1] != Vocab::kUnk) fn(pair_key(s[i], s[i + 1]));
    }
  };
  for (std::size_t w = 0; w < words.size(); ++w) {
    for_pairs(words[w], [&](uint64_t k) {
      counts[k] += freq[w];
      where[k].push_back(static_cast<int32_t>(w));
    });
  }

  // Max-heap on (count, then the smaller pair in byte order).
  struct Entry {
    int64_t count;
    uint64_t key;
  };
  const auto lower_priority = [&tokens](const Entry& a, const Entry& b) {
    if (a.count != b.count) return a.count < b.count;
    const std::string& al = tokens[key_left(a.key)];
    const std::string& bl = tokens[key_left(b.key)];
    if (al != bl) return al > bl;
    return tokens[key_right(a.key)] > tokens[key_right(b.key)];
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(lower_priority)> heap(lower_priority);
  for (const auto& [k, c] : counts) heap.push({c, k});

  while (static_cast<int64_t>(tokens.size()) < options.vocab_size) {
    while (!heap.empty()) {
      const auto it = counts.find(heap.top().key);
      if (it != counts.end() && it->second == heap.top().count) break;
      heap.pop();  // stale
    }
    if (heap.empty() || heap.top().count < options.min_pair_count) break;
    const uint64_t key = heap.top().key;
    heap.pop();
    const int32_t l = key_left(key), r = key_right(key);
    std::string merged_str = tokens[l] + tokens[r];
    int32_t merged;
    if (const auto it = ids.find(merged_str); it != ids.end()) {
      merged = it->second;
    } else {
      merged = static_cast<int32_t>(tokens.size());
      ids.emplace(merged_str, merged);
      tokens.push_back(merged_str);
    }
    tok.merges_.emplace_back(tokens[l], tokens[r]);

    std::vector<int32_t> affected = std::move(where[key]);
    where.erase(key);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    std::vector<uint64_t> touched;
    for (const int32_t w : affected) {
      std::vector<int32_t>& s = words[w];
      bool has = false;
      for (std::size_t i = 0; i + 1 < s.size() && !has; ++i) has = s[i] == l && s[i + 1] == r;
      if (!has) continue;
      for_pairs(s, [&](uint64_t k) {
        counts[k] -= freq[w];
        touched.push_back(k);
      });
      merge_pair(s, l, r, merged);
      for_pairs(s, [&](uint64_t k) {
        counts[k] += freq[w];
        touched.push_back(k);
        where[k].push_back(w);
      });
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const uint64_t k : touched) {
      const auto it = counts.find(k);
      if (it->second <= 0) {
        counts.erase(it);
      } else {
        heap.push({it->second, k});
      }
    }
  }
  tok.finish("train");
  return tok;
}

void BpeTokenizer::finish(const char* what) {
  std::vector<std::string> tokens = alphabet_;
  std::unordered_map<std::string, int32_t> ids;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    ATTN_CHECK(ids.emplace(tokens[i], Vocab::kNumSpecial + static_cast<int32_t>(i)).second, "bpe: ", what,
               ": alphabet character '", tokens[i], "' appears twice");
  }
  merge_table_.clear();
  for (std::size_t m = 0; m < merges_.size(); ++m) {
    const auto& [left, right] = merges_[m];
    const auto li = ids.find(left), ri = ids.find(right);
    ATTN_CHECK(li != ids.end() && ri != ids.end(), "bpe: ", what, ": merge #", m + 1, " ('", left, "' '",
               right, "') uses a symbol that neither the alphabet nor an earlier merge defines");
    std::string merged = left + right;
    int32_t result;
    if (const auto it = ids.find(merged); it != ids.end()) {
      result = it->second;
    } else {
      result = Vocab::kNumSpecial + static_cast<int32_t>(tokens.size());
      ids.emplace(merged, result);
      tokens.push_back(std::move(merged));
    }
    const bool fresh =
        merge_table_.emplace(pair_key(li->second, ri->second), Merge{static_cast<int32_t>(m), result}).second;
    ATTN_CHECK(fresh, "bpe: ", what, ": merge #", m + 1, " ('", left, "' '", right,
               "') repeats an earlier merge");
  }
  vocab_ = Vocab::from_tokens(tokens);
}

std::vector<int32_t> BpeTokenizer::encode_word(const std::vector<std::string>& symbols) const {
  std::vector<int32_t> s(symbols.size());
  for (std::size_t i = 0; i < symbols.size(); ++i) s[i] = vocab_.id(symbols[i]);
  while (s.size() > 1) {
    const Merge* best = nullptr;
    uint64_t best_key = 0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const auto it = merge_table_.find(pair_key(s[i], s[i + 1]));
      if (it != merge_table_.end() && (best == nullptr || it->second.rank < best->rank)) {
        best = &it->second;
        best_key = it->first;
      }
    }
    if (best == nullptr) break;
    merge_pair(s, key_left(best_key), key_right(best_key), best->result);
  }
  return s;
}

std::vector<std::string> BpeTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (const auto& word : bpe_pretokenize(text, lowercase_)) {
    // Each symbol of `word` is one character and a known token is the
    // concatenation of the symbols it covers, so [UNK] can show the original.
    std::size_t at = 0;
    for (const int32_t id : encode_word(word)) {
      if (id == Vocab::kUnk) {
        out.push_back(word[at++]);
      } else {
        out.push_back(vocab_.token(id));
        at += decode_utf8(out.back()).size();
      }
    }
  }
  return out;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  for (const auto& word : bpe_pretokenize(text, lowercase_)) {
    const std::vector<int32_t> ids = encode_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (Vocab::is_special(id) && id != Vocab::kUnk) continue;
    out += vocab_.token(id);
  }
  // The space marker becomes a space.
  std::string result;
  result.reserve(out.size());
  for (std::size_t i = 0; i < out.size();) {
    if (out.compare(i, kSpaceToken.size(), kSpaceToken) == 0) {
      result += ' ';
      i += kSpaceToken.size();
    } else {
      result += out[i++];
    }
  }
  return result;
}

void BpeTokenizer::save(const std::string& path) const {
  {
    std::ostringstream out;
    out << "attn-bpe 1\nlowercase " << (lowercase_ ? 1 : 0) << "\nalphabet " << alphabet_.size() << '\n';
    for (const std::string& c : alphabet_) out << c << '\n';
    out << "merges " << merges_.size() << '\n';
    for (const auto& [l, r] : merges_) out << l << ' ' << r << '\n';
    io::write_file_atomically(path, out.str(), "bpe");
  }
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  const std::string bytes = io::read_file(path, "bpe: tokenizer");
  ATTN_CHECK(!bytes.empty(), "bpe: '", path, "' is empty");
  require_utf8(bytes, {path, 1, 0});
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < bytes.size();) {
    std::size_t end = bytes.find('\n', start);
    ATTN_CHECK(end != std::string::npos, "bpe: '", path, "' line ", lines.size() + 1,
               ": the last line has no '\\n' (file truncated?)");
    lines.push_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  std::size_t at = 0;
  const auto next = [&](const char* expected) -> const std::string& {
    ATTN_CHECK(at < lines.size(), "bpe: '", path, "' ends after line ", lines.size(), "; expected ",
               expected);
    return lines[at++];
  };
  const auto count_after = [&](const std::string& line, const std::string& word) -> int64_t {
    ATTN_CHECK(line.rfind(word + " ", 0) == 0, "bpe: '", path, "' line ", at, ": expected '", word,
               " <count>'; got '", line, "'");
    const std::string num = line.substr(word.size() + 1);
    ATTN_CHECK(!num.empty() && num.size() < 10 && num.find_first_not_of("0123456789") == std::string::npos,
               "bpe: '", path, "' line ", at, ": expected a count after '", word, "'; got '", num, "'");
    return std::stoll(num);
  };
  ATTN_CHECK(next("the header 'attn-bpe 1'") == "attn-bpe 1", "bpe: '", path,
             "' line 1: expected the header 'attn-bpe 1'; got '", lines[0], "'");
  const std::string& lc = next("'lowercase 0|1'");
  ATTN_CHECK(lc == "lowercase 0" || lc == "lowercase 1", "bpe: '", path,
             "' line 2: expected 'lowercase 0' or 'lowercase 1'; got '", lc, "'");
  BpeTokenizer tok;
  tok.lowercase_ = lc == "lowercase 1";
  const int64_t n_alpha = count_after(next("'alphabet <n>'"), "alphabet");
  for (int64_t i = 0; i < n_alpha; ++i) {
    const std::string& c = next("an alphabet character");
    const std::u32string cps = decode_utf8(c, {path, static_cast<int64_t>(at), 0});
    ATTN_CHECK(cps.size() == 1 && !is_space(cps[0]), "bpe: '", path, "' line ", at,
               ": expected one non-space character of the alphabet; got '", c, "'");
    tok.alphabet_.push_back(c);
  }
  ATTN_CHECK(n_alpha > 0, "bpe: '", path, "' line 3: empty vocabulary (alphabet 0)");
  const int64_t n_merges = count_after(next("'merges <m>'"), "merges");
  for (int64_t i = 0; i < n_merges; ++i) {
    const std::string& m = next("a merge '<left> <right>'");
    const std::size_t sp = m.find(' ');
    ATTN_CHECK(
        sp != std::string::npos && sp > 0 && sp + 1 < m.size() && m.find(' ', sp + 1) == std::string::npos,
        "bpe: '", path, "' line ", at, ": expected '<left> <right>' (two symbols, one space); got '", m, "'");
    tok.merges_.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  ATTN_CHECK(at == lines.size(), "bpe: '", path, "' line ", at + 1, ": unexpected content after the ",
             n_merges, " merges");
  tok.finish(("load '" + path + "'").c_str());
  return tok;
}

}  // namespace attn::text

namespace attn::text {

BpeTokenizer BpeTokenizer::from_parts(bool lowercase, std::vector<std::string> alphabet,
                                      std::vector<std::pair<std::string, std::string>> merges,
                                      const char* what) {
  ATTN_CHECK(!alphabet.empty(), "bpe: ", what, ": empty vocabulary (alphabet 0)");
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    const std::u32string cps = decode_utf8(alphabet[i]);
    ATTN_CHECK(cps.size() == 1 && !is_space(cps[0]), "bpe: ", what, ": alphabet entry ", i,
               ": expected one non-space character; got '", alphabet[i], "'");
  }
  for (std::size_t m = 0; m < merges.size(); ++m)
    ATTN_CHECK(!merges[m].first.empty() && !merges[m].second.empty(), "bpe: ", what, ": merge #", m + 1,
               " has an empty symbol");
  BpeTokenizer tok;
  tok.lowercase_ = lowercase;
  tok.alphabet_ = std::move(alphabet);
  tok.merges_ = std::move(merges);
  tok.finish(what);
  return tok;
}

}  // namespace attn::text

// Splitting sentences without spaces into words (include/attn/text/segment.h).
#include <attn/core/error.h>
#include <attn/text/segment.h>
#include <attn/text/utf8.h>

#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

namespace attn::text {
namespace {

bool in(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

// Letters and digits that make up a Latin word or a number: ASCII, Latin-1 and
// Latin Extended letters, Greek and Cyrillic, and the full-width forms.
bool is_word_char(char32_t cp) {
  if (in(cp, U'0', U'9') || in(cp, U'a', U'z') || in(cp, U'A', U'Z') || cp == U'_') return true;
  if (in(cp, 0xC0, 0x24F) && cp != 0xD7 && cp != 0xF7) return true;
  if (in(cp, 0x370, 0x3FF) || in(cp, 0x400, 0x4FF)) return true;
  return in(cp, 0xFF10, 0xFF19) || in(cp, 0xFF21, 0xFF3A) || in(cp, 0xFF41, 0xFF5A);
}

bool is_digit(char32_t cp) { return in(cp, U'0', U'9') || in(cp, 0xFF10, 0xFF19); }

bool is_space(char32_t cp) {
  return cp == U' ' || cp == U'\t' || cp == U'\n' || cp == U'\r' || cp == 0x3000 || cp == 0xA0;
}

// Combining marks and variation selectors stay with the character before them.
bool is_mark(char32_t cp) {
  return in(cp, 0x300, 0x36F) || in(cp, 0xFE00, 0xFE0F) || cp == 0x200D || in(cp, 0x1AB0, 0x1AFF);
}

enum class Kind { space, cjk, word, other };

Kind kind_of(char32_t cp) {
  if (is_space(cp)) return Kind::space;
  if (is_cjk(cp)) return Kind::cjk;
  if (is_word_char(cp)) return Kind::word;
  return Kind::other;
}

// The pieces of `cps`: CJK runs are handed to `cjk_run` (which appends words),
// Latin words and numbers stay whole (an inner '.', ',' between digits or an
// apostrophe between letters keeps the word together), other characters alone.
template <typename CjkRun>
std::vector<std::string> split_with(const std::u32string& cps, CjkRun&& cjk_run) {
  std::vector<std::string> out;
  std::size_t i = 0;
  const std::size_t n = cps.size();
  while (i < n) {
    const Kind k = kind_of(cps[i]);
    std::size_t j = i + 1;
    if (k == Kind::space) {
      i = j;
      continue;
    }
    if (k == Kind::cjk) {
      while (j < n && (is_cjk(cps[j]) || is_mark(cps[j]))) ++j;
      cjk_run(cps.substr(i, j - i), out);
    } else if (k == Kind::word) {
      while (j < n) {
        if (is_word_char(cps[j]) || is_mark(cps[j])) {
          ++j;
        } else if (j + 1 < n && (cps[j] == U'.' || cps[j] == U',') && is_digit(cps[j - 1]) &&
                   is_digit(cps[j + 1])) {
          j += 2;
        } else if (j + 1 < n && (cps[j] == U'\'' || cps[j] == 0x2019) && !is_digit(cps[j - 1]) &&
                   is_word_char(cps[j + 1]) && !is_digit(cps[j + 1])) {
          j += 2;
        } else {
          break;
        }
      }
      out.push_back(encode_utf8(cps.substr(i, j - i)));
    } else {
      while (j < n && is_mark(cps[j])) ++j;
      out.push_back(encode_utf8(cps.substr(i, j - i)));
    }
    i = j;
  }
  return out;
}

void by_character(const std::u32string& run, std::vector<std::string>& out) {
  std::size_t i = 0;
  while (i < run.size()) {
    std::size_t j = i + 1;
    while (j < run.size() && is_mark(run[j])) ++j;
    out.push_back(encode_utf8(run.substr(i, j - i)));
    i = j;
  }
}

}  // namespace

bool is_cjk(char32_t cp) {
  return in(cp, 0x4E00, 0x9FFF) || in(cp, 0x3400, 0x4DBF) || in(cp, 0xF900, 0xFAFF) ||
         in(cp, 0x20000, 0x2EBEF) || in(cp, 0x30000, 0x323AF) || in(cp, 0x3040, 0x30FF) ||
         in(cp, 0x31F0, 0x31FF) || in(cp, 0xAC00, 0xD7AF) || cp == 0x3005 || cp == 0x3007;
}

bool has_cjk(std::string_view text) {
  for (const char32_t cp : decode_utf8(text))
    if (is_cjk(cp)) return true;
  return false;
}

std::vector<std::string> split_characters(std::string_view text) {
  return split_with(decode_utf8(text), by_character);
}

// ---- the dictionary ----------------------------------------------------------------

void WordDictionary::add(const std::u32string& word, int64_t freq) {
  auto [it, fresh] = freq_.emplace(word, freq);
  if (!fresh) {
    // A word listed twice keeps its last frequency (as jieba reads it); a word
    // first met as a prefix gets its own.
    if (it->second == 0) ++words_;
    total_ -= it->second;
    it->second = freq;
  } else {
    ++words_;
  }
  total_ += freq;
  for (std::size_t len = word.size() - 1; len >= 1; --len) {
    const auto [p, added] = freq_.emplace(word.substr(0, len), 0);
    if (!added) break;  // this prefix and all shorter ones are present
  }
}

WordDictionary WordDictionary::from_entries(const std::vector<std::pair<std::string, int64_t>>& entries,
                                            const std::string& name) {
  WordDictionary d;
  d.path_ = name;
  for (const auto& [w, f] : entries) {
    ATTN_CHECK(!w.empty() && f > 0, "dictionary ", name, ": expected a word and a frequency > 0; got '", w,
               "' ", f);
    d.add(decode_utf8(w), f);
  }
  ATTN_CHECK(d.total_ > 0, "dictionary ", name, ": expected at least one word; got none");
  d.log_total_ = std::log(static_cast<double>(d.total_));
  return d;
}

WordDictionary WordDictionary::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ATTN_CHECK(in.good(), "dictionary: cannot read '", path,
             "' (expected a jieba dict.txt: word frequency [tag])");
  WordDictionary d;
  d.path_ = path;
  d.freq_.reserve(600000);
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string word, freq_text;
    fields >> word >> freq_text;
    int64_t freq = -1;
    std::size_t used = 0;
    try {
      freq = std::stoll(freq_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ATTN_CHECK(!freq_text.empty() && used == freq_text.size() && freq >= 0, "dictionary ", path, " line ",
               line_no, ": expected 'word frequency [tag]' with a whole frequency >= 0; got '", line, "'");
    const std::u32string cps = decode_utf8(word, {path, line_no, 0});
    if (freq > 0) d.add(cps, freq);
  }
  ATTN_CHECK(d.total_ > 0, "dictionary ", path,
             ": expected at least one word with a frequency > 0; got none");
  d.log_total_ = std::log(static_cast<double>(d.total_));
  return d;
}

int64_t WordDictionary::frequency(std::u32string_view word) const {
  const auto it = freq_.find(std::u32string(word));
  return it == freq_.end() ? 0 : it->second;
}

std::vector<std::string> WordDictionary::cut_run(const std::u32string& run) const {
  const std::size_t n = run.size();
  // dag[k]: the ends e (exclusive) of the dictionary words run[k, e); always k + 1.
  std::vector<std::vector<std::size_t>> dag(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::u32string piece;
    for (std::size_t e = k; e < n; ++e) {
      piece += run[e];
      const auto it = freq_.find(piece);
      if (it == freq_.end()) break;
      if (it->second > 0) dag[k].push_back(e + 1);
    }
    if (dag[k].empty() || dag[k].front() != k + 1) dag[k].insert(dag[k].begin(), k + 1);
  }
  // best[k]: the largest log-probability of cutting run[k, n); next[k]: where its first word ends.
  std::vector<double> best(n + 1, 0.0);
  std::vector<std::size_t> next(n + 1, n);
  for (std::size_t k = n; k-- > 0;) {
    best[k] = -INFINITY;
    for (const std::size_t e : dag[k]) {
      const int64_t f = frequency(std::u32string_view(run).substr(k, e - k));
      const double score = std::log(static_cast<double>(f > 0 ? f : 1)) - log_total_ + best[e];
      // Ties go to the longer word (the later end), as jieba's max over (score, end) does.
      if (score > best[k] || (score == best[k] && e > next[k])) {
        best[k] = score;
        next[k] = e;
      }
    }
  }
  std::vector<std::string> out;
  for (std::size_t k = 0; k < n; k = next[k]) out.push_back(encode_utf8(run.substr(k, next[k] - k)));
  return out;
}

std::vector<std::string> WordDictionary::cut(std::string_view text) const {
  return split_with(decode_utf8(text), [this](const std::u32string& run, std::vector<std::string>& out) {
    for (std::string& w : cut_run(run)) out.push_back(std::move(w));
  });
}

std::optional<std::string> find_jieba_dictionary() {
  for (const char* p : {"/usr/lib/python3/dist-packages/jieba/dict.txt", "/usr/share/python3-jieba/dict.txt",
                        "/usr/share/jieba/dict.txt"}) {
    std::ifstream f(p);
    if (f.good()) return std::string(p);
  }
  return std::nullopt;
}

const char* split_method_label(SplitMethod m, bool chinese) {
  switch (m) {
    case SplitMethod::spaces:
      return chinese ? "按空格切分" : "split on spaces";
    case SplitMethod::characters:
      return chinese ? "按字切分" : "split by character";
    case SplitMethod::dictionary:
      return chinese ? "按词切分（jieba 词典）" : "split into words (jieba dictionary)";
  }
  return "";
}

const char* split_method_name(SplitMethod m) {
  switch (m) {
    case SplitMethod::spaces:
      return "spaces";
    case SplitMethod::characters:
      return "characters";
    case SplitMethod::dictionary:
      return "jieba";
  }
  return "";
}

namespace {

// Dictionaries by path, loaded once (about 0.5 s for jieba's 350 000 words).
const WordDictionary& cached_dictionary(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<WordDictionary>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[path];
  if (!slot) slot = std::make_unique<WordDictionary>(WordDictionary::load(path));
  return *slot;
}

}  // namespace

SentenceSplit segment_sentence(std::string_view sentence, const SplitOptions& options) {
  SentenceSplit s;
  require_utf8(sentence);
  if (sentence.find(' ') != std::string_view::npos || !has_cjk(sentence)) {
    std::size_t i = 0;
    while (i < sentence.size()) {
      const std::size_t j = std::min(sentence.find(' ', i), sentence.size());
      if (j > i) s.words.emplace_back(sentence.substr(i, j - i));
      i = j + 1;
    }
    return s;
  }
  std::optional<std::string> dict;
  if (options.dictionary.empty())
    dict = find_jieba_dictionary();
  else if (options.dictionary != "none")
    dict = options.dictionary;
  if (dict) {
    s.words = cached_dictionary(*dict).cut(sentence);
    s.method = SplitMethod::dictionary;
    s.dictionary = *dict;
  } else {
    s.words = split_characters(sentence);
    s.method = SplitMethod::characters;
  }
  return s;
}

}  // namespace attn::text

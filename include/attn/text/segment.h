// Splitting a sentence into words for teaching (`attn explain --sentence`, the
// tutorial, the viewer's demo) when it is typed without spaces, as Chinese is.
//
//   - by character: every CJK character is a word; Latin words and numbers
//     ("GPU", "3.5", "don't") stay whole; each punctuation mark is its own word;
//     white space only separates;
//   - by words: the same, but every run of CJK characters is cut into the words
//     of a dictionary in jieba's dict.txt format ("word frequency [tag]" a line)
//     by maximum probability: the DAG of every dictionary word starting at each
//     character, then dynamic programming from the end of the run on
//     log(frequency) − log(total); a character in no word counts as frequency 1.
//     Debian's python3-jieba ships such a dictionary (find_jieba_dictionary);
//     only the file is read, no Python runs.
//
// A sentence that has spaces is split on them and nothing else (the way the
// teaching commands always took it); see segment_sentence.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::text {

// Han ideographs (with extensions and compatibility forms), kana, Hangul syllables.
bool is_cjk(char32_t cp);
// True when `text` (UTF-8) holds at least one CJK character.
bool has_cjk(std::string_view text);

// By character (see above). Throws attn::Error on invalid UTF-8.
std::vector<std::string> split_characters(std::string_view text);

// A word-frequency dictionary in jieba's dict.txt format.
class WordDictionary {
 public:
  // Reads `path`; throws attn::Error naming the file and the 1-based line of a
  // malformed entry (no frequency, a negative or non-numeric one, invalid UTF-8)
  // or when the file holds no word.
  static WordDictionary load(const std::string& path);
  // From entries in memory (tests): word -> frequency (> 0).
  static WordDictionary from_entries(const std::vector<std::pair<std::string, int64_t>>& entries,
                                     const std::string& name = "<memory>");

  // The maximum-probability cut of `text`: CJK runs into dictionary words,
  // everything else as split_characters does.
  std::vector<std::string> cut(std::string_view text) const;

  int64_t frequency(std::u32string_view word) const;  // 0 when absent
  std::size_t size() const { return words_; }
  const std::string& path() const { return path_; }

 private:
  void add(const std::u32string& word, int64_t freq);
  std::vector<std::string> cut_run(const std::u32string& run) const;
  // Every dictionary word with its frequency, and every proper prefix with 0
  // (the walk along a character's DAG stops at the first absent prefix).
  std::unordered_map<std::u32string, int64_t> freq_;
  double log_total_ = 0;
  int64_t total_ = 0;
  std::size_t words_ = 0;
  std::string path_;
};

// Where Debian's python3-jieba puts its dictionary
// (/usr/lib/python3/dist-packages/jieba/dict.txt, /usr/share/python3-jieba/dict.txt),
// or nullopt when it is not installed.
std::optional<std::string> find_jieba_dictionary();

enum class SplitMethod {
  spaces,      // the sentence had spaces: split on them
  characters,  // no spaces, CJK inside, no dictionary: by character
  dictionary,  // no spaces, CJK inside: by words of the dictionary
};
// "split on spaces" / "按空格切分", "split by character" / "按字切分",
// "split into words (jieba dictionary)" / "按词切分（jieba 词典）".
const char* split_method_label(SplitMethod m, bool chinese);
const char* split_method_name(SplitMethod m);  // "spaces" | "characters" | "jieba"

struct SentenceSplit {
  std::vector<std::string> words;
  SplitMethod method = SplitMethod::spaces;
  std::string dictionary;  // the dictionary's path when method == dictionary
};

struct SplitOptions {
  // The dictionary for CJK text without spaces: "" = find_jieba_dictionary();
  // "none" = split by character even when a dictionary is installed; else a path
  // (throws when it cannot be read).
  std::string dictionary;
};
// A sentence as the teaching commands take it: with spaces, split on runs of
// spaces; without spaces and with CJK, by words (a dictionary was found) or by
// character; otherwise one word. Dictionaries are loaded once per path and kept.
SentenceSplit segment_sentence(std::string_view sentence, const SplitOptions& options = {});

}  // namespace attn::text

// Vocabulary: token string <-> id, with fixed special tokens.
//
// Ids 0..5 are always the special tokens, in this order:
//   0 [PAD]  padding (what batches are filled with; a loss ignores it)
//   1 [UNK]  any token that is not in the vocabulary
//   2 [CLS]  classification summary position (prefix of every classifier input)
//   3 [SEP]  separator between two segments
//   4 <s>    begin of sequence (translation / language-model targets)
//   5 </s>   end of sequence
// Ordinary tokens follow from id 6 on, most frequent first (ties: byte order
// of the token), so the same counts always give the same ids.
//
// File format (save/load): UTF-8 text, one token per line, line i (0-based)
// holds the token with id i, lines end with '\n'. The first six lines must be
// the special tokens above. Tokens are non-empty and contain no '\n' or '\r';
// duplicates are an error naming the line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::text {

// Occurrence counts of tokens in training text (std::map: deterministic order).
using TokenCounts = std::map<std::string, int64_t, std::less<>>;

struct VocabOptions {
  int64_t min_freq = 1;  // tokens seen fewer times are left out (they become [UNK])
  int64_t max_size = 0;  // upper bound on size() including the 6 specials; 0 = no bound
};

class Vocab {
 public:
  static constexpr int32_t kPad = 0;
  static constexpr int32_t kUnk = 1;
  static constexpr int32_t kCls = 2;
  static constexpr int32_t kSep = 3;
  static constexpr int32_t kBos = 4;
  static constexpr int32_t kEos = 5;
  static constexpr int32_t kNumSpecial = 6;
  // "[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>".
  static const std::vector<std::string>& special_tokens();

  Vocab() = default;  // empty (size 0): not usable until built or loaded

  // The specials followed by the tokens with count >= min_freq, most frequent
  // first, cut to max_size. Throws when no ordinary token is left (an empty
  // vocabulary), when max_size leaves no room for one, or when a counted
  // token is a special token, empty or contains a line break.
  static Vocab build(const TokenCounts& counts, const VocabOptions& options = {});
  // The specials followed by `tokens` in the given order (e.g. BPE merges).
  // Throws on duplicates, on specials among `tokens` or on an empty list.
  static Vocab from_tokens(const std::vector<std::string>& tokens);

  static Vocab load(const std::string& path);
  void save(const std::string& path) const;  // written atomically (io::write_file_atomically)

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }
  // Id of `token`, or kUnk when absent.
  int32_t id(std::string_view token) const;
  bool contains(std::string_view token) const;
  // Token of `id`; throws when id is out of range.
  const std::string& token(int32_t id) const;
  const std::vector<std::string>& tokens() const { return tokens_; }
  static bool is_special(int32_t id) { return id >= 0 && id < kNumSpecial; }

  bool operator==(const Vocab& other) const { return tokens_ == other.tokens_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;

  void add(std::string token, const char* what);
};

}  // namespace attn::text

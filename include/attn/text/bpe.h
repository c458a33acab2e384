// English subword tokenizer: byte-pair encoding (Sennrich et al. 2016) over
// Unicode characters, trained on a corpus.
//
// Pre-tokenisation (before any merge): normalise (whitespace collapsed,
// optional ASCII lower-casing), then cut into words: a run of characters that
// are neither whitespace nor punctuation is one word, every punctuation mark
// (is_punctuation) and every CJK ideograph is a word of its own. A word that
// follows a space starts with the symbol kSpaceToken (U+2581), so merges can
// learn "▁the" and decode() can put the spaces back. Merges never cross words.
//
// Training: the alphabet is every character seen (at least min_char_count
// times), sorted by code point; then, repeatedly, the most frequent adjacent
// pair of symbols (counted over words weighted by word frequency) is merged
// into a new symbol. Ties go to the pair whose left symbol, then right symbol,
// is smallest in byte order, so training is deterministic. It stops when the
// vocabulary (6 specials + alphabet + merged symbols) reaches vocab_size or
// no pair occurs min_pair_count times.
//
// Encoding a word applies the learned merges in the order they were learned
// (lowest rank first among the pairs present). Characters outside the
// alphabet become [UNK]. decode(encode(x)) == normalize(x) when every
// character of x is in the alphabet (and x has no literal U+2581).
//
// File format (save/load), UTF-8, '\n' line ends:
//   attn-bpe 1
//   lowercase 0|1
//   alphabet <n>       followed by n lines, one character each
//   merges <m>         followed by m lines "<left> <right>"
// Ids: 0..5 specials (vocab.h), then the alphabet, then each merge result
// that is not already a token, in merge order.
#pragma once

#include <attn/text/tokenizer.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attn::text {

struct BpeOptions {
  int64_t vocab_size = 8000;   // including the 6 specials and the alphabet
  bool lowercase = true;       // lower-case ASCII before everything else
  int64_t min_pair_count = 2;  // stop merging when the best pair is rarer
  int64_t min_char_count = 1;  // rarer characters stay out of the alphabet ([UNK])
};

// Splits normalised text into pre-tokenised words (each a list of one-character
// symbols, the first one kSpaceToken when a space preceded the word).
std::vector<std::vector<std::string>> bpe_pretokenize(std::string_view text, bool lowercase);

class BpeTokenizer : public Tokenizer {
 public:
  static BpeTokenizer train(const std::vector<std::string>& texts, const BpeOptions& options);
  static BpeTokenizer load(const std::string& path);
  // From the parts that save() writes (e.g. kept in a model file's JSON); the
  // same checks as load(), errors name `what`.
  static BpeTokenizer from_parts(bool lowercase, std::vector<std::string> alphabet,
                                 std::vector<std::pair<std::string, std::string>> merges,
                                 const char* what = "from_parts");
  void save(const std::string& path) const;  // written atomically (io::write_file_atomically)

  std::vector<std::string> tokenize(std::string_view text) const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  const Vocab& vocab() const override { return vocab_; }

  bool lowercase() const { return lowercase_; }
  const std::vector<std::string>& alphabet() const { return alphabet_; }
  const std::vector<std::pair<std::string, std::string>>& merges() const { return merges_; }

 private:
  BpeTokenizer() = default;
  // Rebuilds vocab_ and the merge table from alphabet_ and merges_.
  void finish(const char* what);
  std::vector<int32_t> encode_word(const std::vector<std::string>& symbols) const;

  bool lowercase_ = true;
  std::vector<std::string> alphabet_;
  std::vector<std::pair<std::string, std::string>> merges_;
  Vocab vocab_;
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merge_table_;  // (left id << 32 | right id) -> merge
};

}  // namespace attn::text

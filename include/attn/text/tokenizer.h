// Tokenizers: text -> token strings -> ids, and back.
//
// Tokenizer is the interface the batching code uses. Two implementations:
//   CharTokenizer (this file): Chinese by character, as BERT's Chinese models.
//   BpeTokenizer (bpe.h): English subwords by byte-pair encoding.
// encode() never adds special tokens ([CLS], <s>, ...): batching does that.
// decode() skips special ids.
#pragma once

#include <attn/text/normalize.h>
#include <attn/text/vocab.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token strings of `text` (UTF-8; invalid UTF-8 throws). Tokens outside the
  // vocabulary are returned as they are; encode() maps them to [UNK].
  virtual std::vector<std::string> tokenize(std::string_view text) const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual const Vocab& vocab() const = 0;
};

// The token that stands for one space when CharTokenizerOptions::keep_spaces
// is set: U+2581 LOWER ONE EIGHTH BLOCK, as in SentencePiece. A literal
// U+2581 in the input is tokenised the same way, so it decodes as a space.
inline constexpr std::string_view kSpaceToken = "\xE2\x96\x81";

struct CharTokenizerOptions {
  NormalizeOptions normalize;      // applied by tokenize() before splitting
  bool group_ascii_alnum = false;  // "abc123" -> one token; false: "a" "b" "c" "1" "2" "3"
  bool keep_spaces = false;        // a space becomes kSpaceToken; false: spaces only separate
};

// Splits normalised text into: one token per CJK ideograph; one per
// punctuation mark or other symbol; runs of ASCII letters/digits as one
// token or one per character (group_ascii_alnum); every other character
// (kana, Latin letters with accents, emoji, ...) one token each.
//
// Round trip: with keep_spaces, decode(encode(x)) == normalize(x) whenever
// every token of x is in the vocabulary. Without keep_spaces, decode() puts
// a space only between two ASCII letters/digits tokens (so "hello world"
// survives in grouped mode) and spaces elsewhere are lost, as in BERT.
class CharTokenizer : public Tokenizer {
 public:
  CharTokenizer(Vocab vocab, const CharTokenizerOptions& options = {});

  // Counts the tokens of `texts` and builds the vocabulary from them.
  static CharTokenizer train(const std::vector<std::string>& texts, const CharTokenizerOptions& options,
                             const VocabOptions& vocab_options = {});
  static TokenCounts count(const std::vector<std::string>& texts, const CharTokenizerOptions& options);

  std::vector<std::string> tokenize(std::string_view text) const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  const Vocab& vocab() const override { return vocab_; }
  const CharTokenizerOptions& options() const { return options_; }

 private:
  Vocab vocab_;
  CharTokenizerOptions options_;
};

// Splits into tokens with the rules above (no vocabulary needed).
std::vector<std::string> char_tokenize(std::string_view text, const CharTokenizerOptions& options);

}  // namespace attn::text

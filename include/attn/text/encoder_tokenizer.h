// The tokenizer interface of the pretrained encoders (models/bert.h): what the
// BERT path needs from a tokenizer, whatever its algorithm. Two implementations:
//   WordPieceTokenizer (wordpiece.h)  BERT / all-MiniLM-L6-v2: [CLS] text [SEP]
//   UnigramTokenizer   (unigram.h)    XLM-R / multilingual-e5: <s> text </s>
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

class EncoderTokenizer {
 public:
  virtual ~EncoderTokenizer() = default;
  // The ids the model reads for one text: the model's start token, the text's
  // pieces, the end token; cut to at most `max_length` tokens (specials
  // included, the end token kept) when longer; `truncated` (optional) tells.
  // Throws attn::Error on invalid UTF-8 and max_length < 2.
  virtual std::vector<int32_t> encode_for_model(std::string_view text, int64_t max_length,
                                                bool* truncated = nullptr) const = 0;
  // The vocabulary string of an id (throws when out of range).
  virtual const std::string& id_to_token(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t unk_id() const = 0;
  // "wordpiece", "unigram": for messages.
  virtual const char* kind() const = 0;
};

// Share of unknown pieces among a sequence's non-special ids (first and last
// id excluded when `has_specials`); 0 for no pieces.
double unknown_share(const std::vector<int32_t>& ids, int32_t unk_id, bool has_specials = true);

}  // namespace attn::text

// The SentencePiece-style tokenizer GGUF calls `llama` (tokenizer.ggml.model == "llama": Gemma 3,
// Llama 2, Mistral), matching llama.cpp's SPM tokenizer on the same file.
//
// encode(text):
//   1. Special tokens written literally in the text become their ids, longest text first: token
//      types CONTROL and UNKNOWN only when parse_special is true, USER_DEFINED always (Gemma's
//      newline and tab runs are user-defined tokens).
//   2. Each remaining piece of raw text: a space prepended when add_space_prefix (the file's
//      tokenizer.ggml.add_space_prefix; false for Gemma 3) and the piece follows a special token or
//      starts the text; every ' ' replaced by U+2581 (▁); split into UTF-8 characters; then
//      repeatedly the adjacent pair whose concatenation is a token with the highest score is merged
//      (ties: the leftmost pair), until no adjacent pair forms a token.
//   3. Each final symbol is its token; a symbol that is no token (a character outside the
//      vocabulary) is re-split along the merges that formed it, and whatever is still no token is
//      written as its bytes, <0xXX> byte tokens (byte fallback).
//   add_bos prepends bos_id.
// decode(ids) turns ▁ back into spaces and byte tokens into their bytes; control tokens are
// rendered as their text when render_special, else omitted. Invalid UTF-8 input throws.
#pragma once

#include <attn/io/gguf.h>
#include <attn/text/text_piece.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::text {

namespace specials {
struct ByteRange;
}

enum class SpmTokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6
};

struct SpmVocab {
  std::vector<std::string> tokens;  // id → piece (UTF-8, ▁ for spaces; "<0xXX>" for byte tokens)
  std::vector<float> scores;        // id → score (merge priority)
  std::vector<SpmTokenType> types;  // id → type
  int32_t bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;
  bool add_bos = true;
  bool add_space_prefix = true;
};

class SpmTokenizer {
 public:
  // Validates (non-empty pieces, one score and type per token, special ids in range, every byte
  // having a <0xXX> token); throws attn::Error naming the problem.
  static SpmTokenizer from_vocab(SpmVocab vocab);
  // Reads tokenizer.ggml.{model,tokens,scores,token_type,bos_token_id,eos_token_id,
  // padding_token_id,unknown_token_id,add_bos_token,add_space_prefix}; the model must be "llama".
  static SpmTokenizer from_gguf(const io::GgufFile& file);

  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.tokens.size()); }
  const SpmVocab& vocab() const { return vocab_; }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  bool add_bos() const { return vocab_.add_bos; }
  int32_t token_to_id(std::string_view piece) const;  // -1 when absent
  const std::string& id_to_token(int32_t id) const;
  SpmTokenType type(int32_t id) const;

  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = true) const;
  // The pieces' text joined and encoded as above, CONTROL and UNKNOWN token strings becoming their
  // ids only inside pieces that allow_special (a chat template's markers, never a user's message).
  std::vector<int32_t> encode(const TextPieces& pieces, bool add_bos) const;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;
  // The text of one token as decode gives it (a byte token: its one byte).
  std::string piece_text(int32_t id, bool render_special = false) const;

 private:
  SpmVocab vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<int32_t> specials_;  // special token ids, longest text first
  int32_t byte_ids_[256] = {};

  void encode_raw(std::string_view raw, std::vector<int32_t>& out) const;
  std::vector<int32_t> encode_split(std::string_view text, const std::vector<specials::ByteRange>& allowed,
                                    bool add_bos) const;
};

}  // namespace attn::text

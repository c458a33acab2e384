// Byte-level BPE (GPT-2 style) as stored in GGUF metadata with
// tokenizer.ggml.model == "gpt2" — SmolLM2's tokenizer — matching llama.cpp's
// tokenization of the same file; and every merge-list BPE of a Hugging Face
// tokenizer.json (from_tokenizer_json, matching the `tokenizers` library):
// byte-level (GPT-2, SmolLM, Llama 3, Qwen2) and SentencePiece-style with byte
// fallback (Llama 2, Mistral, Phi-3, Gemma: byte_level false). docs/tokenizers.md.
//
// encode(text):
//   1. Special tokens (token type CONTROL, USER_DEFINED or UNKNOWN) written
//      literally in the text become their ids, longest token first; CONTROL
//      and UNKNOWN only when parse_special is true.
//      (from tokenizer.json: Hugging Face's matching instead: leftmost match,
//      longest there, with each added token's lstrip / rstrip / single_word.)
//   2. The rest is pre-tokenized, by hand over code points (no std::regex):
//      for PreTokenizer::smollm every number character (\p{N}) is first split
//      off on its own; then each piece is split by GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      or, for llama3 and qwen2 (qwen2: \p{N} instead of \p{N}{1,3}),
//        (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//        | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//      (\s = the Unicode White_Space property, \p{L}/\p{N} = general category L*/N*).
//      With nfc (Qwen2's normalizer) each piece is NFC-normalized first.
//   3. Each word's UTF-8 bytes are mapped to printable code points (GPT-2's
//      byte↔unicode table), then merged pairwise: repeatedly the adjacent
//      pair with the lowest merge rank, leftmost first, until no pair has a
//      rank. Each resulting symbol is a vocabulary token.
// decode(ids) maps the tokens' code points back to bytes (control tokens
// rendered as their text when render_special), so decode(encode(s)) == s for
// any valid UTF-8 `s` without special-token text. Invalid UTF-8 input throws
// attn::Error with the byte offset.
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

// GPT-2's byte → code point table: printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100.. in increasing byte order.
char32_t byte_to_unicode(uint8_t b);
// The inverse; -1 for code points that no byte maps to.
int unicode_to_byte(char32_t c);

enum class PreTokenizer {
  gpt2,    // GPT-2's pattern only (GGUF pre "gpt2")
  smollm,  // each \p{N} split off first, then GPT-2's pattern (GGUF pre "smollm")
  llama3,  // Llama 3's pattern (GGUF pre "llama-bpe", "llama3", "llama-v3")
  qwen2,   // Qwen2's pattern: Llama 3's with single digits (GGUF pre "qwen2", "deepseek-r1-qwen")
};

// The pre-tokenizer a GGUF tokenizer.ggml.pre names; throws attn::Error naming the supported ones.
PreTokenizer pre_tokenizer_from_gguf_name(const std::string& name);
const char* pre_tokenizer_name(PreTokenizer p);

// Where a SentencePiece-style BPE (byte_level false) puts the ▁ that stands for a leading space.
enum class SpacePrefix {
  none,              // nowhere
  every_piece,       // Prepend("▁") normalizer: before every piece of text between added tokens
  metaspace_always,  // Metaspace prepend_scheme "always": the same unless the piece starts with ▁
  metaspace_first,   // Metaspace prepend_scheme "first": only the piece at the start of the text
};

// Flags of a tokenizer.json added token (ByteBpeVocab::added_flags).
inline constexpr uint8_t kAddedLstrip = 1, kAddedRstrip = 2, kAddedSingleWord = 4;

// Token types as in GGUF tokenizer.ggml.token_type (llama.cpp's numbering).
enum class BpeTokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6
};

struct ByteBpeVocab {
  std::vector<std::string> tokens;  // id → token text (in byte↔unicode space for normal tokens)
  std::vector<BpeTokenType> types;  // empty: all normal
  std::vector<std::string> merges;  // "left right", rank = index
  PreTokenizer pre = PreTokenizer::gpt2;
  int32_t bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;
  bool add_bos = false;

  // Hugging Face tokenizer.json semantics (set by from_tokenizer_json; the defaults are the GGUF path's).
  bool byte_level = true;  // false: SentencePiece-style: ' ' → ▁, characters as symbols, byte fallback
  SpacePrefix space_prefix = SpacePrefix::none;  // byte_level false
  bool metaspace_split = false;      // byte_level false: each ▁ starts a new word (Metaspace split)
  bool byte_fallback = false;        // byte_level false: a character not in the vocabulary → <0xXX> tokens
  bool fuse_unk = false;             // consecutive unknown characters → one unk_id
  bool strip_decoded_space = false;  // decode drops the first leading space (Strip / Metaspace decoder)
  bool decode_bytes = true;          // byte_level false: <0xXX> tokens decode to their byte (ByteFallback
                                     // decoder); false: to their text, as a decoder without it does
  bool nfc = false;                  // NFC normalizer (Qwen2)
  bool ignore_merges = false;        // a word that is a token is that one token (Llama 3)
  bool hf_added_tokens = false;      // step 1 with Hugging Face's matching and added_flags
  std::vector<uint8_t>
      added_flags;  // per token (empty: none): kAddedLstrip | kAddedRstrip | kAddedSingleWord
};

class ByteBpeTokenizer {
 public:
  // Validates the vocabulary (non-empty tokens, one type per token, merges of
  // the form "left right", special ids in range); throws attn::Error naming
  // the problem. A merged symbol that is not a token falls back to its single
  // byte symbols (then to unk_id; with neither, encode throws).
  static ByteBpeTokenizer from_vocab(ByteBpeVocab vocab);
  // Reads tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,
  // eos_token_id,padding_token_id,unknown_token_id,add_bos_token}. The model
  // must be "gpt2"; pre "smollm" (and the other llama.cpp names using the same
  // split) selects PreTokenizer::smollm, "gpt2"/"default"/absent gpt2, others throw.
  static ByteBpeTokenizer from_gguf(const io::GgufFile& file);
  // A Hugging Face tokenizer.json whose model is BPE: vocab, merges ("a b" strings or ["a", "b"]
  // lists), added_tokens (special → control, else user-defined; lstrip/rstrip/single_word),
  // normalizer (none, NFC; Prepend ▁ + Replace " " → ▁ for SentencePiece-style), pre_tokenizer
  // (ByteLevel; Sequence [Digits individual, ByteLevel]; Sequence [Split(GPT-2 | Llama 3 | Qwen2
  // pattern), ByteLevel]; Metaspace; none), post_processor (ByteLevel, TemplateProcessing
  // "<bos> $A" or "$A", Sequence of these) and decoder. bos/eos/pad/unk come from the post-processor,
  // the model's unk_token and, when it exists, tokenizer_config.json in the same folder. Anything
  // else is refused with an attn::Error naming the field and what is supported.
  static ByteBpeTokenizer from_tokenizer_json(const std::string& path);

  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.tokens.size()); }
  const ByteBpeVocab& vocab() const { return vocab_; }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  int32_t pad_id() const { return vocab_.pad_id; }
  // -1 when absent.
  int32_t token_to_id(std::string_view token) const;
  const std::string& id_to_token(int32_t id) const;

  // Step 2 only: the words as UTF-8 substrings of `text`.
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  // Steps 1–3. add_bos prepends bos_id (throws when there is none).
  std::vector<int32_t> encode(std::string_view text, bool add_bos = false, bool parse_special = true) const;
  // The pieces' text joined and encoded as above, with CONTROL and UNKNOWN token strings becoming
  // their ids only where they lie inside pieces that allow_special (a chat template's markers);
  // elsewhere (a user's message) they are text. Pre-tokenization runs over the joined text, so the ids
  // equal encode(joined, add_bos, true) when no piece without allow_special holds a special string.
  std::vector<int32_t> encode(const TextPieces& pieces, bool add_bos = false) const;
  // The bytes of the tokens; control/unknown tokens as their text when
  // render_special, else omitted.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = true) const;

 private:
  ByteBpeVocab vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> ranks_;  // "left right" → rank
  std::vector<int32_t> specials_;                   // special token ids, longest text first
  int32_t byte_ids_[256] = {};                      // byte → its <0xXX> token, -1 (byte_fallback)

  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  void spm_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_symbols(std::string& s, std::vector<std::size_t>& cuts) const;
  void encode_piece(std::string_view piece, bool at_start, std::vector<int32_t>& out) const;
  std::vector<int32_t> encode_split(std::string_view text, const std::vector<specials::ByteRange>& allowed,
                                    bool add_bos) const;
};

}  // namespace attn::text

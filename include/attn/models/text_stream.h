// Generated token ids as streamed text (issue 40): the one place that turns a decoder's tokens into
// the pieces a reader sees, for `attn generate`, `attn chat`, the Python package and `attn serve`.
//
// Every piece is valid UTF-8 and never splits a character: bytes that could still complete a
// character are held back, ill-formed sequences become U+FFFD (one per maximal subpart,
// text::append_valid_utf8), and at the end of generation an unfinished character becomes U+FFFD too.
// With stop strings, text that could still be the start of one is held back; the reply ends before
// the first stop string found (which is not returned).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::models {

class TextStream {
 public:
  // The bytes of a token sequence (the tokenizer's decode, control tokens not rendered). Appending ids
  // must only append bytes (true of byte-level BPE and SentencePiece decoding).
  using Decode = std::function<std::string(const std::vector<int32_t>&)>;
  explicit TextStream(Decode decode, std::vector<std::string> stop = {});

  // Adds a generated token; returns the text that became final (possibly empty). Once a stop string
  // is found it returns what precedes it and stopped() turns true; later calls return "".
  std::string push(int32_t id);
  // Generation ended: returns the text still held back (an unfinished character as U+FFFD).
  std::string finish();

  bool stopped() const { return stopped_; }
  // Every piece returned so far, joined.
  const std::string& text() const { return text_; }

 private:
  std::string advance(bool final);

  Decode decode_;
  std::vector<std::string> stop_;
  std::vector<int32_t> ids_;
  std::string clean_;         // the decoded bytes so far as valid UTF-8
  std::size_t consumed_ = 0;  // decoded bytes turned into clean_
  std::string text_;          // the prefix of clean_ returned
  bool stopped_ = false;
};

}  // namespace attn::models

// Text for the character language model of `attn train lm` / `attn generate`:
// reading a UTF-8 file (plain text or fortune format), the tokenizer stored in
// the task model, and ids <-> text pieces.
//
// Token stream: every entry (a fortune between '%' lines, or a paragraph of a
// plain file between blank lines) is preceded by </s>; each of its lines is
// the line's characters followed by the newline token U+21B5 "↵". So a prompt
// starts with </s> (the start of an entry) and generation ends at </s>.
#pragma once

#include <attn/io/json.h>
#include <attn/text/tokenizer.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::cli {

inline constexpr const char* kNewlineToken = "\xE2\x86\xB5";  // U+21B5

struct LmText {
  std::string format;                             // "plain" or "fortune"
  std::vector<std::vector<std::string>> entries;  // entries, each a list of lines
  int64_t lines = 0;                              // lines read from the file
};

// format: "auto" (fortune when a line is exactly "%" or holds an ESC byte), "plain" or
// "fortune" (ANSI colour codes and '%' separator lines removed). Throws attn::Error naming
// the file and line of invalid UTF-8, and when the file cannot be read or holds no text.
LmText read_lm_text(const std::string& path, const std::string& format);

// Character tokenizer options of the language model (spaces kept as U+2581).
text::CharTokenizerOptions lm_tokenizer_options();

// The tokenizer from the vocabulary in a task model's data ("vocab": the ordinary tokens).
text::CharTokenizer lm_tokenizer(const json::Value& data);

// Ids of one entry (or a prompt): </s>, then each line's ids followed by the newline id
// (the last line of a prompt gets no newline when newline_after_last is false).
std::vector<int64_t> lm_encode(const text::CharTokenizer& tok, const std::vector<std::string>& lines,
                               bool newline_after_last);

// The text of one generated id: "\n" for the newline token, " " for U+2581, "" for specials.
std::string lm_piece(const text::CharTokenizer& tok, int64_t id);

}  // namespace attn::cli

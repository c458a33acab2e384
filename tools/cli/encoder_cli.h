// Helpers shared by the sentence-encoder commands (embed_cmd.cc: embed,
// similarity, search) and `attn attention` (attention_cmd.cc).
#pragma once

#include <attn/models/bert.h>

#include <string>
#include <vector>

#include "args.h"

namespace attn::cli::encoder {

// Splits raw arguments into positional texts and options for Args: "--name value"
// pairs stay together (from the specs' metavars), "-o FILE" becomes "--output FILE",
// "-" is a positional, and everything after "--" is positional.
struct SplitArgs {
  std::vector<std::string> options;
  std::vector<std::string> positionals;
};
SplitArgs split_args(const std::vector<std::string>& raw, const std::vector<OptionSpec>& specs);

// The all-MiniLM-L6-v2 encoder (or the BERT folder `dir`), loaded once per process.
const models::SentenceEncoder& load_encoder(const std::string& dir);

// The non-empty lines of `text` (a trailing "\r" dropped) with their 1-based line numbers.
struct Line {
  int64_t number;
  std::string text;
};
std::vector<Line> nonempty_lines(const std::string& text);

// Shortest decimal that reads back as the same float.
std::string float_str(float v);

}  // namespace attn::cli::encoder

// Argument splitting shared by the sentence-encoder commands (embed_cmd.cc:
// embed, similarity, search) and `attn attention` (attention_cmd.cc). Their work
// is library code: include/attn/tasks/embed.h and include/attn/viz/attention.h.
#pragma once

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

}  // namespace attn::cli::encoder

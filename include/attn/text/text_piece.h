// A piece of prompt text and whether special-token strings inside it may become special tokens.
// Chat templates produce pieces: the template's own markers allow them, message content never does,
// so a user cannot forge a role turn by typing "<|im_start|>".
#pragma once

#include <string>
#include <vector>

namespace attn::text {

struct TextPiece {
  std::string text;
  bool allow_special = false;  // true: special-token strings in `text` become their control tokens
};

using TextPieces = std::vector<TextPiece>;

// The pieces' text joined (for display; encode the pieces themselves).
inline std::string join_pieces(const TextPieces& pieces) {
  std::string out;
  for (const TextPiece& p : pieces) out += p.text;
  return out;
}

}  // namespace attn::text

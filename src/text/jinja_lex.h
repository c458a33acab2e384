// The Jinja engine's tokens (src/text/jinja_lex.cc). Not a public header.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja_internal.h"

namespace attn::text::jinja::detail {

enum class Tok { text, block_begin, block_end, var_begin, var_end, name, string, integer, number, op, eof };

struct Token {
  Tok kind = Tok::eof;
  std::string text;  // text bytes, a name, a decoded string literal, a number's digits, an operator
  int line = 0, col = 0;
};

std::vector<Token> lex_template(std::string_view source, const std::string& name);

}  // namespace attn::text::jinja::detail

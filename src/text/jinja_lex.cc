// The Jinja engine's lexer (include/attn/text/jinja.h): template text and tags, with Jinja2's
// whitespace rules as transformers configures them (trim_blocks, lstrip_blocks, '-' and '+' markers,
// one trailing newline dropped, newlines normalised to \n).
#include "jinja_lex.h"

#include <attn/text/utf8.h>

#include <algorithm>
#include <cstring>

namespace attn::text::jinja::detail {

std::string where(const std::string& name, int line, int col) {
  std::string s = "template '" + name + "' line " + std::to_string(line);
  if (col > 0) s += " column " + std::to_string(col);
  return s + ": ";
}

namespace {

bool is_space_at(std::string_view s, std::size_t i, std::size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *len = 1;
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  }
  // Multi-byte whitespace: U+0085, U+00A0, U+1680, U+2000-200A, U+2028/9, U+202F, U+205F, U+3000.
  std::size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 0;
  if (n == 0 || i + n > s.size()) return false;
  char32_t cp = c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *len = n;
  return is_py_space(cp);
}

std::string rstrip_ws(std::string_view s) {
  // Scan forward, remembering where the trailing whitespace run starts.
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = 1;
    const bool sp = is_space_at(s, i, &n);
    i += n;
    if (!sp) end = i;
  }
  return std::string(s.substr(0, end));
}

std::size_t skip_ws(std::string_view s, std::size_t i) {
  std::size_t n = 1;
  while (i < s.size() && is_space_at(s, i, &n)) i += n;
  return i;
}

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& name) : name_(name) {
    // Newlines normalised to \n and one trailing newline dropped (keep_trailing_newline=False).
    src_.reserve(src.size());
    for (std::size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        src_ += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        src_ += src[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    bool line_start = true;  // Jinja's line_starting: the last tag's end ended a line
    while (true) {
      std::size_t t = pos;
      int kind = 0;  // '{' var, '%' block, '#' comment
      while ((t = src_.find('{', t)) != std::string::npos) {
        const char c = t + 1 < src_.size() ? src_[t + 1] : 0;
        if (c == '{' || c == '%' || c == '#') {
          kind = src_[t + 1];
          break;
        }
        ++t;
      }
      const std::size_t data_begin = pos;
      std::string data = src_.substr(data_begin, (kind ? t : src_.size()) - data_begin);
      if (kind) {
        const char mod = t + 2 < src_.size() ? src_[t + 2] : 0;
        if (mod == '-') {
          data = rstrip_ws(data);
        } else if (mod != '+' && kind != '{') {
          const std::size_t nl = data.rfind('\n');
          const std::size_t l = nl == std::string::npos ? 0 : nl + 1;
          if (nl != std::string::npos || line_start) {
            bool only_ws = l < data.size();
            for (std::size_t i = l; i < data.size(); ++i) {
              std::size_t n = 1;
              if (!is_space_at(data, i, &n)) only_ws = false;
              i += n - 1;
            }
            if (only_ws) data.resize(l);
          }
        }
      }
      if (!data.empty()) push(Tok::text, std::move(data), data_begin);
      if (!kind) break;
      const std::size_t after_open = t + 2 + ((src_[t + 2] == '-' || src_[t + 2] == '+') ? 1 : 0);
      std::size_t end = 0;
      char end_mod = 0;
      if (kind == '#') {
        end = src_.find("#}", after_open);
        if (end == std::string::npos && after_open >= src_.size())
          break;  // a bare "{#" ends it, as in Jinja2
        if (end == std::string::npos) fail(t, "missing end of comment tag '#}'");
        // "-#}" / "+#}": the marker is the character before "#}" (when it is not the opener's).
        if (end > after_open && (src_[end - 1] == '-' || src_[end - 1] == '+')) end_mod = src_[end - 1];
        pos = end + 2;
      } else {
        push(kind == '{' ? Tok::var_begin : Tok::block_begin, "", t);
        pos = lex_tag(after_open, kind, &end_mod);
        if (kind == '%') pos = maybe_raw(pos, &end_mod);
      }
      if (kind != '{' && end_mod == 0 && pos < src_.size() && src_[pos] == '\n') ++pos;  // trim_blocks
      if (end_mod == '-') {  // "-%}" strips the whitespace that follows
        const std::size_t next = skip_ws(src_, pos);
        line_start = next > pos && src_[next - 1] == '\n';
        pos = next;
      } else {
        line_start = pos > 0 && src_[pos - 1] == '\n' && kind != '{';
      }
    }
    push(Tok::eof, "", src_.size());
    return std::move(toks_);
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    const auto [line, col] = line_col(at);
    throw Error(where(name_, line, col) + what);
  }
  std::pair<int, int> line_col(std::size_t at) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(at - line_starts_[line - 1] + 1)};
  }
  void push(Tok k, std::string text, std::size_t at) {
    const auto [line, col] = line_col(at);
    toks_.push_back(Token{k, std::move(text), line, col});
  }

  // Lexes a tag's expression tokens up to its end marker; returns the offset after the marker.
  std::size_t lex_tag(std::size_t i, int kind, char* end_mod) {
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;
    while (true) {
      while (i < src_.size()) {
        std::size_t n = 1;
        if (!is_space_at(src_, i, &n)) break;
        i += n;
      }
      if (i >= src_.size()) fail(i, std::string("missing end of tag '") + close + "}'");
      if (depth == 0) {
        for (char m : {'-', '+'}) {
          if ((m == '-' || kind == '%') && src_.compare(i, 3, std::string{m, close, '}'}) == 0) {
            *end_mod = m;
            push(kind == '{' ? Tok::var_end : Tok::block_end, "", i);
            return i + 3;
          }
        }
        if (src_.compare(i, 2, std::string{close, '}'}) == 0) {
          *end_mod = 0;
          push(kind == '{' ? Tok::var_end : Tok::block_end, "", i);
          return i + 2;
        }
      }
      i = lex_token(i, &depth);
    }
  }

  std::size_t lex_token(std::size_t i, int* depth) {
    const char c = src_[i];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
      push(Tok::name, src_.substr(i, j - i), i);
      return j;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(i);
    if (c == '\'' || c == '"') return lex_string(i);
    static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
    for (const char* op : ops) {
      const std::size_t n = std::strlen(op);
      if (src_.compare(i, n, op) == 0) {
        if (n == 1 && std::strchr("([{", op[0])) ++*depth;
        if (n == 1 && std::strchr(")]}", op[0])) {
          if (*depth == 0) fail(i, std::string("unexpected '") + op + "'");
          --*depth;
        }
        push(Tok::op, op, i);
        return i + n;
      }
    }
    std::size_t n = 1;
    (void)is_space_at(src_, i, &n);
    fail(i, "unexpected character '" + src_.substr(i, std::max<std::size_t>(n, 1)) + "' in a tag");
  }

  std::size_t lex_number(std::size_t i) {
    std::size_t j = i;
    const auto digits = [&] {
      while (j < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
    };
    digits();
    bool real = false;
    if (j + 1 < src_.size() && src_[j] == '.' && std::isdigit(static_cast<unsigned char>(src_[j + 1]))) {
      real = true;
      ++j;
      digits();
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        real = true;
        j = k;
        digits();
      }
    }
    std::string text;
    for (std::size_t k = i; k < j; ++k)
      if (src_[k] != '_') text += src_[k];
    push(real ? Tok::number : Tok::integer, text, i);
    return j;
  }

  // A string literal with Python's escapes (Jinja2 decodes them with unicode-escape).
  std::size_t lex_string(std::size_t i) {
    const char q = src_[i];
    std::string out;
    std::size_t j = i + 1;
    while (true) {
      if (j >= src_.size()) fail(i, "unterminated string literal");
      const char c = src_[j];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) fail(i, "unterminated string literal");
      j = escape(j, out);
    }
    push(Tok::string, std::move(out), i);
    return j + 1;
  }

  std::size_t escape(std::size_t j, std::string& out) {
    const char e = src_[j + 1];
    const auto hex = [&](std::size_t at, int n) -> char32_t {
      if (at + static_cast<std::size_t>(n) > src_.size()) fail(j, "truncated escape in a string literal");
      char32_t v = 0;
      for (int k = 0; k < n; ++k) {
        const char h = src_[at + static_cast<std::size_t>(k)];
        if (!std::isxdigit(static_cast<unsigned char>(h))) fail(j, "bad escape in a string literal");
        v = v * 16 + static_cast<char32_t>(
                         std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      return v;
    };
    switch (e) {
      case 'n':
        out += '\n';
        return j + 2;
      case 't':
        out += '\t';
        return j + 2;
      case 'r':
        out += '\r';
        return j + 2;
      case '\\':
        out += '\\';
        return j + 2;
      case '\'':
        out += '\'';
        return j + 2;
      case '"':
        out += '"';
        return j + 2;
      case 'a':
        out += '\a';
        return j + 2;
      case 'b':
        out += '\b';
        return j + 2;
      case 'f':
        out += '\f';
        return j + 2;
      case 'v':
        out += '\v';
        return j + 2;
      case '\n':
        return j + 2;  // line continuation
      case 'x':
        append_cp(out, hex(j + 2, 2), j);
        return j + 4;
      case 'u':
        append_cp(out, hex(j + 2, 4), j);
        return j + 6;
      case 'U':
        append_cp(out, hex(j + 2, 8), j);
        return j + 10;
      case 'N':
        fail(j, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = 0;
          std::size_t k = j + 1;
          for (int n = 0; n < 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n, ++k)
            v = v * 8 + static_cast<char32_t>(src_[k] - '0');
          append_cp(out, v, j);
          return k;
        }
        out += '\\';  // unknown escapes stay as written
        return j + 1;
    }
  }

  void append_cp(std::string& out, char32_t cp, std::size_t at) const {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(at, "escape is not a Unicode scalar value");
    append_utf8(out, cp);
  }

  // After a block tag that is `raw`: its body up to {% endraw %} is one text token.
  std::size_t maybe_raw(std::size_t pos, char* end_mod) {
    const std::size_t n = toks_.size();
    if (n < 3 || toks_[n - 3].kind != Tok::block_begin || toks_[n - 2].kind != Tok::name ||
        toks_[n - 2].text != "raw")
      return pos;
    const std::size_t body_begin = *end_mod == '-' ? skip_ws(src_, pos) : pos;  // no trim_blocks here
    std::size_t s = body_begin;
    while ((s = src_.find("{%", s)) != std::string::npos) {
      std::size_t k = s + 2;
      char open_mod = 0;
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) open_mod = src_[k++];
      k = skip_ws(src_, k);
      if (src_.compare(k, 6, "endraw") == 0) {
        std::string body = src_.substr(body_begin, s - body_begin);
        if (open_mod == '-') body = rstrip_ws(body);
        toks_.resize(n - 3);  // raw leaves only its text
        if (!body.empty()) push(Tok::text, std::move(body), body_begin);
        k = skip_ws(src_, k + 6);
        *end_mod = 0;
        if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) *end_mod = src_[k++];
        if (src_.compare(k, 2, "%}") != 0) fail(k, "expected '%}' after endraw");
        return k + 2;
      }
      s += 2;
    }
    fail(pos, "missing {% endraw %}");
  }

  std::string src_;
  const std::string& name_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> lex_template(std::string_view source, const std::string& name) {
  return Lexer(source, name).run();
}

}  // namespace attn::text::jinja::detail

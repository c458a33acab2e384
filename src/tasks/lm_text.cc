// The text of the character language model (include/attn/tasks/lm.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/tasks/lm.h>
#include <attn/text/utf8.h>
#include <attn/text/vocab.h>

#include <fstream>
#include <sstream>

namespace attn::tasks {
namespace {

// Removes ANSI escape sequences: ESC '[' parameters final-byte (e.g. "\x1b[32m", "\x1b[m").
std::string strip_ansi(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == ';')) ++j;
      i = j < s.size() ? j : s.size();  // skip the final byte too
      continue;
    }
    out += s[i];
  }
  return out;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

LmText read_lm_text(const std::string& path, const std::string& format) {
  ATTN_CHECK(format == "auto" || format == "plain" || format == "fortune",
             "--format must be auto, plain or fortune; got '", format, "'");
  std::istringstream f(io::read_file(path, "text file"));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    text::Location where;
    where.file = path;
    where.line = static_cast<int64_t>(lines.size()) + 1;
    text::require_utf8(lines.empty() ? text::strip_bom(line) : std::string_view(line), where);
    lines.push_back(lines.empty() ? std::string(text::strip_bom(line)) : line);
  }
  ATTN_CHECK(!f.bad(), "error reading '", path, "'");
  LmText t;
  t.lines = static_cast<int64_t>(lines.size());
  t.format = format;
  if (format == "auto") {
    t.format = "plain";
    for (const auto& l : lines)
      if (l == "%" || l.find('\x1b') != std::string::npos) t.format = "fortune";
  }
  std::vector<std::string> cur;
  auto flush = [&] {
    while (!cur.empty() && blank(cur.back())) cur.pop_back();
    if (!cur.empty()) t.entries.push_back(cur);
    cur.clear();
  };
  for (const auto& raw : lines) {
    if (t.format == "fortune") {
      if (raw == "%") {
        flush();
        continue;
      }
      const std::string l = strip_ansi(raw);
      if (cur.empty() && blank(l)) continue;
      cur.push_back(l);
    } else {
      if (blank(raw)) {
        flush();
        continue;
      }
      cur.push_back(raw);
    }
  }
  flush();
  ATTN_CHECK(!t.entries.empty(), "text file '", path, "' holds no text (", t.lines, " lines, format ",
             t.format, ")");
  return t;
}

text::CharTokenizerOptions lm_tokenizer_options() {
  text::CharTokenizerOptions o;
  o.keep_spaces = true;
  return o;
}

text::CharTokenizer lm_tokenizer(const json::Value& data) {
  const json::Value* v = data.find("vocab");
  ATTN_CHECK(v != nullptr && v->is_array(),
             "the model file's data has no \"vocab\" array (not a language model?)");
  std::vector<std::string> tokens;
  for (const auto& x : v->items()) tokens.push_back(x.as_string());
  return text::CharTokenizer(text::Vocab::from_tokens(tokens), lm_tokenizer_options());
}

std::vector<int64_t> lm_encode(const text::CharTokenizer& tok, const std::vector<std::string>& lines,
                               bool newline_after_last) {
  std::vector<int64_t> ids = {text::Vocab::kEos};
  const int64_t nl = tok.vocab().id(kNewlineToken);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    for (int32_t id : tok.encode(lines[i])) ids.push_back(id);
    if (i + 1 < lines.size() || newline_after_last) ids.push_back(nl);
  }
  return ids;
}

std::string lm_piece(const text::CharTokenizer& tok, int64_t id) {
  if (text::Vocab::is_special(static_cast<int32_t>(id))) return "";
  const std::string& s = tok.vocab().token(static_cast<int32_t>(id));
  if (s == kNewlineToken) return "\n";
  if (s == text::kSpaceToken) return " ";
  return s;
}

}  // namespace attn::tasks

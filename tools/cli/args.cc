#include "args.h"

#include <attn/core/error.h>
#include <attn/text/width.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace attn::cli {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::string known_options(const std::vector<OptionSpec>& specs) {
  std::string s;
  for (const auto& o : specs) s += (s.empty() ? "--" : ", --") + o.name;
  return s;
}

}  // namespace

Args::Args(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    ATTN_CHECK(a.size() > 2 && a.compare(0, 2, "--") == 0, "expected an option starting with '--' (one of ",
               known_options(specs), "); got '", a, "'");
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const auto& o : specs)
      if (o.name == name) spec = &o;
    ATTN_CHECK(spec != nullptr, "unknown option '--", name, "'; expected one of ", known_options(specs));
    ATTN_CHECK(!has(name), "option --", name, " given twice; expected it at most once");
    if (spec->metavar.empty()) {
      ATTN_CHECK(!inline_value, "option --", name, " is a flag and takes no value; got '", a, "'");
    } else if (!inline_value) {
      ATTN_CHECK(i + 1 < args.size(), "option --", name, " needs a value (", spec->metavar,
                 "); got nothing after it");
      value = args[++i];
    }
    values_[name] = value;
    order_.push_back(name);
  }
}

const std::string& Args::str(const std::string& name) const {
  const auto it = values_.find(name);
  ATTN_CHECK(it != values_.end(), "option --", name, " is required here; it was not given");
  return it->second;
}

int64_t parse_integer(const std::string& text, const std::string& what) {
  const std::string t = trim(text);
  int64_t v = 0;
  const char* end = t.data() + t.size();
  const auto [p, ec] = std::from_chars(t.data(), end, v);
  ATTN_CHECK(!t.empty() && ec == std::errc() && p == end, what, ": expected a whole number; got '", text,
             "'");
  return v;
}

double parse_number(const std::string& text, const std::string& what) {
  const std::string t = trim(text);
  ATTN_CHECK(!t.empty(), what, ": expected a number; got an empty value");
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  ATTN_CHECK(end == t.c_str() + t.size() && errno != ERANGE && std::isfinite(v), what,
             ": expected a finite number; got '", text, "'");
  return v;
}

int64_t Args::integer(const std::string& name, int64_t lo, int64_t hi) const {
  const int64_t v = parse_integer(str(name), "--" + name);
  ATTN_CHECK(v >= lo && v <= hi, "--", name, " must be in [", lo, ", ", hi, "]; got ", v);
  return v;
}

std::vector<double> Args::numbers(const std::string& name) const {
  const std::string& text = str(name);
  std::vector<double> out;
  std::size_t start = 0;
  for (int item = 1;; ++item) {
    const auto comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    ATTN_CHECK(!trim(part).empty(), "--", name, ": expected a comma-separated list of numbers such as ",
               "0.2,2.5,0.8; item ", item, " of '", text, "' is empty");
    out.push_back(parse_number(part, "--" + name + " item " + std::to_string(item)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> Args::words(const std::string& name, char sep) const {
  const std::string& text = str(name);
  std::vector<std::string> out;
  if (sep == ' ') {
    std::size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      std::size_t j = i;
      while (j < text.size() && text[j] != ' ' && text[j] != '\t') ++j;
      if (j > i) out.push_back(text.substr(i, j - i));
      i = j;
    }
    ATTN_CHECK(!out.empty(), "--", name, ": expected space-separated words; got '", text, "'");
    return out;
  }
  std::size_t start = 0;
  for (int item = 1;; ++item) {
    const auto cut = text.find(sep, start);
    const std::string part =
        trim(text.substr(start, cut == std::string::npos ? std::string::npos : cut - start));
    ATTN_CHECK(!part.empty(), "--", name, ": expected a '", std::string(1, sep), "'-separated list; item ",
               item, " of '", text, "' is empty");
    out.push_back(part);
    if (cut == std::string::npos) break;
    start = cut + 1;
  }
  return out;
}

std::string format_options(const std::vector<OptionSpec>& specs) {
  return format_options(specs, teach::Lang::en);
}

std::string format_options(const std::vector<OptionSpec>& specs, teach::Lang lang) {
  int w = 0;
  std::vector<std::string> heads;
  for (const auto& o : specs) {
    heads.push_back("--" + o.name + (o.metavar.empty() ? "" : " " + o.metavar));
    w = std::max(w, text::display_width(heads.back()));
  }
  std::string s;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    s += "  " + text::pad(heads[i], w) + "  ";
    // Help text may hold '\n'; continuation lines align under the first.
    const std::string& help =
        lang == teach::Lang::zh && !specs[i].help_zh.empty() ? specs[i].help_zh : specs[i].help;
    for (const char c : help) {
      s += c;
      if (c == '\n') s += std::string(static_cast<std::size_t>(w) + 4, ' ');
    }
    s += '\n';
  }
  return s;
}

}  // namespace attn::cli

// Reading and checking answers of `attn quiz`, and the text of expected answers.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "quiz_internal.h"

namespace attn::teach::quiz {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Text without the spaces, hyphens and underscores inside it ("encoder-only" = "encoder only").
std::string squash(const std::string& s) {
  std::string o;
  for (const char c : s)
    if (c != ' ' && c != '-' && c != '_' && c != '\t') o += c;
  return o;
}

bool is_yes(const std::string& s) {
  for (const char* y : {"yes", "y", "true", "是", "是的", "对", "对的", "正确", "没错"})
    if (s == y) return true;
  return false;
}
bool is_no(const std::string& s) {
  for (const char* n : {"no", "n", "false", "否", "不", "不是", "错", "不对", "错误", "错的"})
    if (s == n) return true;
  return false;
}

Verdict invalid(std::string why) {
  Verdict v;
  v.error = std::move(why);
  return v;
}

// A finite decimal number taking the whole text, or nullopt.
std::optional<double> read_number(const std::string& t) {
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A whole number in [0, max] taking the whole text, or -1.
int64_t read_position(const std::string& t, int64_t max) {
  if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int64_t v = std::stoll(t);
  return v >= 0 && v <= max ? v : -1;
}

Verdict check_number(const Question& q, std::string t) {
  const Lang lang = q.lang;
  // "约 0.24", "≈0.24", "~0.24": an approximate answer is an answer.
  for (const char* p : {"大约", "约为", "约", "≈", "~", "about "})
    if (starts_with(t, p)) t = trim(t.substr(std::string(p).size()));
  if (q.decimals == 0) {  // counts: allow 1,234,567 and 1_234_567
    t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ',' || c == '_' || c == ' '; }),
            t.end());
  }
  double percent = 1;  // "24%" is 0.24
  if (q.decimals > 0 && !t.empty() && t.back() == '%') {
    t = trim(t.substr(0, t.size() - 1));
    percent = 0.01;
  }
  const auto v = read_number(t);
  if (!v) {
    // The examples must not give the answer away.
    std::string why = lang == Lang::zh
                          ? std::string("应为") + (q.decimals == 0 ? "整数，例如 1,024" : "数字，例如 0.25") +
                                "；收到的是“" + t + "”"
                          : std::string("expected ") +
                                (q.decimals == 0 ? "a whole number such as 1,024" : "a number such as 0.25") +
                                "; got '" + t + "'";
    if (q.decimals > 0 && t.find(',') != std::string::npos)
      why += tr(lang, " (write decimals with a dot: 0.25)", "（小数点请用“.”：0.25）");
    return invalid(why);
  }
  Verdict r;
  r.valid = true;
  const double got = *v * percent;
  const double tol = q.rel_tol > 0 ? q.rel_tol * std::fabs(q.number) : q.abs_tol;
  r.correct = std::fabs(got - q.number) <= tol * (1 + 1e-9);  // a hair of slack for decimal input
  return r;
}

Verdict check_positions(const Question& q, std::string t) {
  const Lang lang = q.lang;
  // "0到3", "0至3", "0~3" are ranges, as "0-3" is.
  for (const std::string range : {"到", "至"})
    for (auto p = t.find(range); p != std::string::npos; p = t.find(range))
      t.replace(p, range.size(), 1, '-');
  std::replace(t.begin(), t.end(), '~', '-');
  std::set<int64_t> got;
  std::string item;
  auto flush = [&]() -> std::string {
    if (item.empty()) return "";
    std::string a = item, b = item;
    if (const auto dots = item.find(".."); dots != std::string::npos) {
      a = item.substr(0, dots), b = item.substr(dots + 2);
    } else if (const auto dash = item.find('-'); dash != std::string::npos) {
      a = item.substr(0, dash), b = item.substr(dash + 1);
    }
    const int64_t lo = read_position(a, q.max_position), hi = read_position(b, q.max_position);
    if (lo < 0 || hi < 0 || lo > hi)
      return lang == Lang::zh
                 ? "“" + item + "”不是 0.." + std::to_string(q.max_position) + " 中的位置或位置范围"
                 : "'" + item + "' is not a position or range of positions in 0.." +
                       std::to_string(q.max_position);
    for (int64_t p = lo; p <= hi; ++p) got.insert(p);
    item.clear();
    return "";
  };
  for (const char c : t) {
    if (c == ',' || c == ' ' || c == '\t' || c == ';') {
      if (auto e = flush(); !e.empty()) return invalid(e);
    } else {
      item += c;
    }
  }
  if (auto e = flush(); !e.empty()) return invalid(e);
  if (got.empty())
    return invalid(tr(lang, "expected positions such as 0-2 or 1,3; got nothing",
                      "应为位置，例如 0-2 或 1,3；什么也没收到"));
  Verdict r;
  r.valid = true;
  r.correct = std::vector<int64_t>(got.begin(), got.end()) == q.positions;
  return r;
}

Verdict check_choice(const Question& q, const std::string& t) {
  std::string s = lower(t);
  while (!s.empty() && s.back() == '.') s.pop_back();  // "b." and "b。"
  for (const char* p : {"答案是", "答案", "选项", "选"})
    if (starts_with(s, p)) s = trim(s.substr(std::string(p).size()));
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  if (s.size() == 2 && s.back() == ')') s.pop_back();
  int got = -1;
  if (s.size() == 1 && s[0] >= 'a' && s[0] < 'a' + static_cast<int>(q.choices.size())) got = s[0] - 'a';
  // 是/对/yes and 否/错/no stand for the choices that have "yes" or "no" among their aliases.
  const std::string canon = is_yes(s) ? "yes" : is_no(s) ? "no" : squash(s);
  for (std::size_t i = 0; i < q.choices.size() && got < 0; ++i) {
    if (canon == squash(lower(q.choices[i].text))) got = static_cast<int>(i);
    for (const auto& a : q.choices[i].aliases)
      if (canon == squash(lower(a))) got = static_cast<int>(i);
  }
  if (got < 0) {
    const char last = static_cast<char>('a' + q.choices.size() - 1);
    return invalid(q.lang == Lang::zh
                       ? std::string("应为字母 a..") + last + " 之一（或选项的文字）；收到的是“" + t + "”"
                       : std::string("expected one of the letters a..") + last +
                             " (or a choice's text); got '" + t + "'");
  }
  Verdict r;
  r.valid = true;
  r.correct = got == q.answer;
  return r;
}

// One code point from UTF-8 at s[i] (advancing i); invalid bytes pass as themselves.
uint32_t next_code_point(const std::string& s, std::size_t& i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80 || i + 1 >= s.size()) return s[i++] & 0xFF;
  if ((c & 0xE0) == 0xC0 && (b(i + 1) & 0xC0) == 0x80) {
    const uint32_t cp = ((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu);
    i += 2;
    return cp;
  }
  if ((c & 0xF0) == 0xE0 && i + 2 < s.size() && (b(i + 1) & 0xC0) == 0x80 && (b(i + 2) & 0xC0) == 0x80) {
    const uint32_t cp = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu);
    i += 3;
    return cp;
  }
  return s[i++] & 0xFF;
}

}  // namespace

std::string normalize_answer(const std::string& answer) {
  std::string out;
  for (std::size_t i = 0; i < answer.size();) {
    const std::size_t start = i;
    const uint32_t cp = next_code_point(answer, i);
    if (cp >= 0xFF01 && cp <= 0xFF5E) {
      out += static_cast<char>(cp - 0xFF01 + 0x21);  // full-width ０．７６ －３ ，％ Ａ -> ASCII
    } else if (cp == 0x3000) {
      out += ' ';  // the ideographic space
    } else if (cp == 0x3001) {
      out += ',';  // 、 the enumeration comma: "0、2、3"
    } else if (cp == 0x3002) {
      out += '.';  // 。
    } else if (cp == 0x2212 || cp == 0x2013 || cp == 0x2014 || cp == 0x2010) {
      out += '-';  // the minus sign and dashes
    } else {
      out.append(answer, start, i - start);
    }
  }
  return trim(out);
}

Verdict check(const Question& q, const std::string& answer) {
  std::string t = normalize_answer(answer);
  // A sentence-final 。 or ！ is not part of the answer (。 reads as '.' after normalize_answer).
  if (q.form != Form::choice && ends_with(t, "."))
    if (q.form == Form::positions || answer.find("\xE3\x80\x82") != std::string::npos)
      t = trim(t.substr(0, t.size() - 1));
  if (t.empty())
    return invalid(tr(q.lang, "the answer is empty; expected ", "答案为空；应为") + q.how_to_answer());
  switch (q.form) {
    case Form::number:
      return check_number(q, t);
    case Form::positions:
      return check_positions(q, t);
    case Form::choice:
      return check_choice(q, t);
  }
  return invalid("unknown answer form");
}

// ---- expected answers as text ---------------------------------------------------------

std::string Question::key() const {
  switch (form) {
    case Form::number:
      return fixed(number, decimals);
    case Form::positions:
      return positions_text(positions);
    case Form::choice:
      return std::string(1, static_cast<char>('a' + answer));
  }
  return "";
}

std::string Question::tolerance_text() const {
  if (form != Form::number) return tr(lang, "exact", "须完全一致");
  if (rel_tol > 0) {
    char b[48];
    std::snprintf(b, sizeof b, lang == Lang::zh ? "相对误差 %g%% 以内" : "within %g%%", rel_tol * 100);
    return b;
  }
  return abs_tol > 0 ? "±" + fixed(abs_tol, decimals) : tr(lang, "exact", "须完全一致");
}

std::string Question::how_to_answer() const {
  const bool yes_no =
      form == Form::choice && choices.size() == 2 &&
      std::find(choices[0].aliases.begin(), choices[0].aliases.end(), "yes") != choices[0].aliases.end();
  if (yes_no) return tr(lang, "yes or no (or a / b)", "是或否（也可写 对 / 错、a / b）");
  const std::string last(1, static_cast<char>('a' + std::max<std::size_t>(choices.size(), 1) - 1));
  if (lang == Lang::zh) {
    switch (form) {
      case Form::number:
        if (decimals == 0)
          return rel_tol > 0 ? "一个整数（可写逗号或 1.23e9），" + tolerance_text() + "即算对"
                             : "一个整数（可写逗号），须完全一致";
        return "一个保留 " + std::to_string(decimals) + " 位小数的数，误差 " + tolerance_text() +
               " 以内即算对";
      case Form::positions:
        return "从 0 开始数的位置，写成列表或范围（如 0-2、0,1,2 或 0、1、2），须与答案集合完全一致";
      case Form::choice:
        return "字母 a.." + last + "（或选项的文字）";
    }
    return "";
  }
  switch (form) {
    case Form::number:
      if (decimals == 0)
        return rel_tol > 0 ? "a whole number (commas or 1.23e9 allowed); accepted " + tolerance_text()
                           : "a whole number (commas allowed); must be exact";
      return "a number to " + std::to_string(decimals) + " decimals; accepted within " + tolerance_text();
    case Form::positions:
      return "positions counted from 0, as a list or range (e.g. 0-2 or 0,1,2); must be exactly that set";
    case Form::choice:
      return "a letter a.." + last + " (or the choice's text)";
  }
  return "";
}

json::Value Question::expected_json() const {
  switch (form) {
    case Form::number:
      return jv(number);
    case Form::positions:
      return integers(positions);
    case Form::choice:
      return jv(choices[static_cast<std::size_t>(answer)].text);
  }
  return json::Value();
}

// ---- text helpers ---------------------------------------------------------------------

std::string list_text(const std::vector<double>& v, int decimals) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fixed(v[i], decimals);
  return s + "]";
}

std::string positions_text(const std::vector<int64_t>& p) {
  std::string s;
  for (std::size_t i = 0; i < p.size();) {
    std::size_t j = i;
    while (j + 1 < p.size() && p[j + 1] == p[j] + 1) ++j;
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(p[i]));
    if (j > i) {
      s.push_back('-');
      s.append(std::to_string(p[j]));
    }
    i = j + 1;
  }
  return s;
}

std::string indent_lines(const std::string& s, const std::string& indent) {
  std::string out;
  bool start = true;
  for (const char c : s) {
    if (start && c != '\n') out += indent;
    out += c;
    start = c == '\n';
  }
  return out;
}

}  // namespace attn::teach::quiz

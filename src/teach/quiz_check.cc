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

Verdict invalid(std::string why) {
  Verdict v;
  v.error = std::move(why);
  return v;
}

Verdict check_number(const Question& q, std::string t) {
  if (q.decimals == 0) {  // counts: allow 1,234,567 and 1_234_567
    t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ',' || c == '_' || c == ' '; }),
            t.end());
  }
  const auto v = read_number(t);
  if (!v) {
    // The examples must not give the answer away.
    std::string why = std::string("expected ") +
                      (q.decimals == 0 ? "a whole number such as 1,024" : "a number such as 0.25") +
                      "; got '" + t + "'";
    if (q.decimals > 0 && t.find(',') != std::string::npos) why += " (write decimals with a dot: 0.25)";
    return invalid(why);
  }
  Verdict r;
  r.valid = true;
  const double tol = q.rel_tol > 0 ? q.rel_tol * std::fabs(q.number) : q.abs_tol;
  r.correct = std::fabs(*v - q.number) <= tol * (1 + 1e-9);  // a hair of slack for decimal input
  return r;
}

Verdict check_positions(const Question& q, const std::string& t) {
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
      return "'" + item + "' is not a position or range of positions in 0.." + std::to_string(q.max_position);
    for (int64_t p = lo; p <= hi; ++p) got.insert(p);
    item.clear();
    return "";
  };
  for (const char c : t) {
    if (c == ',' || c == ' ' || c == '\t') {
      if (auto e = flush(); !e.empty()) return invalid(e);
    } else {
      item += c;
    }
  }
  if (auto e = flush(); !e.empty()) return invalid(e);
  if (got.empty()) return invalid("expected positions such as 0-2 or 1,3; got nothing");
  Verdict r;
  r.valid = true;
  r.correct = std::vector<int64_t>(got.begin(), got.end()) == q.positions;
  return r;
}

Verdict check_choice(const Question& q, const std::string& t) {
  std::string s = lower(t);
  if (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  if (s.size() == 2 && s.back() == ')') s.pop_back();
  int got = -1;
  if (s.size() == 1 && s[0] >= 'a' && s[0] < 'a' + static_cast<int>(q.choices.size())) got = s[0] - 'a';
  for (std::size_t i = 0; i < q.choices.size() && got < 0; ++i) {
    if (s == lower(q.choices[i].text)) got = static_cast<int>(i);
    for (const auto& a : q.choices[i].aliases)
      if (s == a) got = static_cast<int>(i);
  }
  if (got < 0) {
    const char last = static_cast<char>('a' + q.choices.size() - 1);
    return invalid(std::string("expected one of the letters a..") + last + " (or a choice's text); got '" +
                   t + "'");
  }
  Verdict r;
  r.valid = true;
  r.correct = got == q.answer;
  return r;
}

}  // namespace

Verdict check(const Question& q, const std::string& answer) {
  const std::string t = trim(answer);
  if (t.empty()) return invalid("the answer is empty; expected " + q.how_to_answer());
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
  if (form != Form::number) return "exact";
  if (rel_tol > 0) {
    char b[32];
    std::snprintf(b, sizeof b, "within %g%%", rel_tol * 100);
    return b;
  }
  return abs_tol > 0 ? "±" + fixed(abs_tol, decimals) : "exact";
}

std::string Question::how_to_answer() const {
  switch (form) {
    case Form::number:
      if (decimals == 0)
        return rel_tol > 0 ? "a whole number (commas or 1.23e9 allowed); accepted " + tolerance_text()
                           : "a whole number (commas allowed); must be exact";
      return "a number to " + std::to_string(decimals) + " decimals; accepted within " + tolerance_text();
    case Form::positions:
      return "positions counted from 0, as a list or range (e.g. 0-2 or 0,1,2); must be exactly that set";
    case Form::choice:
      return std::string("a letter a..") + static_cast<char>('a' + choices.size() - 1) +
             " (or the choice's text)";
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

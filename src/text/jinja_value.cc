// Values of the Jinja engine (include/attn/text/jinja.h): construction, Python's str() / repr(),
// transformers' tojson, equality, and Python's view of UTF-8 strings as code points.
#include <attn/io/json.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "jinja_internal.h"
#include "unicode_ucd.h"

namespace attn::text::jinja {

using detail::DictData;
using detail::ListData;
using detail::StrData;

namespace {
const std::string& empty_string() {
  static const std::string e;
  return e;
}
}  // namespace

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.i_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::number;
  v.d_ = d;
  return v;
}
Value Value::text(std::string s) { return from_str(detail::make_str(std::move(s), true)); }
Value Value::input(std::string s) { return from_str(detail::make_str(std::move(s), false)); }
Value Value::from_str(std::shared_ptr<const StrData> s) {
  Value v;
  v.kind_ = Kind::string;
  v.s_ = std::move(s);
  return v;
}
Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::list;
  v.l_ = std::make_shared<ListData>();
  int depth = 0;
  for (const Value& e : items) {
    depth = std::max(depth, detail::value_depth(e));
    v.l_->has_namespace = v.l_->has_namespace || detail::holds_namespace(e);
  }
  ATTN_CHECK(depth < detail::kMaxValueDepth, "a list would nest deeper than ", detail::kMaxValueDepth,
             " levels");
  v.l_->depth = depth + 1;
  v.l_->items = std::move(items);
  return v;
}
Value Value::tuple(std::vector<Value> items) {
  return detail::make_seq(std::move(items), detail::Seq::tuple);
}
Value Value::dict() { return from_dict(std::make_shared<DictData>()); }
Value Value::from_dict(std::shared_ptr<DictData> m) {
  Value v;
  v.kind_ = Kind::dict;
  v.m_ = std::move(m);
  return v;
}
Value Value::from_func(std::shared_ptr<const detail::FuncData> f) {
  Value v;
  v.kind_ = Kind::function;
  v.f_ = std::move(f);
  return v;
}
Value Value::undefined_named(std::string name) {
  Value v;
  v.s_ = detail::make_str(std::move(name), true);
  return v;
}
const std::string& Value::undefined_name() const { return s_ ? s_->text : empty_string(); }

Value Value::from_json(const json::Value& j, bool trusted) {
  switch (j.type()) {
    case json::Type::null:
      return none();
    case json::Type::boolean:
      return boolean(j.as_bool());
    case json::Type::number:
      return j.is_integer() ? integer(j.as_int64()) : number(j.as_double());
    case json::Type::string:
      return trusted ? text(j.as_string()) : input(j.as_string());
    case json::Type::array: {
      Value l = list();
      for (const json::Value& e : j.items()) l.push_back(from_json(e, trusted));
      return l;
    }
    case json::Type::object: {
      Value d = dict();
      for (const auto& [k, e] : j.members()) d.set(k, from_json(e, trusted));
      return d;
    }
  }
  return Value();
}

const std::string& Value::str() const { return kind_ == Kind::string && s_ ? s_->text : empty_string(); }
bool Value::str_trusted() const { return kind_ == Kind::string && s_ && s_->all_trusted(); }
const std::vector<Value>& Value::items() const {
  static const std::vector<Value> none;
  return kind_ == Kind::list ? l_->items : none;
}
const std::vector<std::pair<std::string, Value>>& Value::entries() const {
  static const std::vector<std::pair<std::string, Value>> none;
  return kind_ == Kind::dict ? m_->items : none;
}
const Value* Value::find(std::string_view key) const { return kind_ == Kind::dict ? m_->find(key) : nullptr; }
void Value::push_back(Value v) {
  ATTN_CHECK(kind_ == Kind::list, "jinja::Value::push_back: expected a list; got ", detail::kind_name(kind_));
  const int depth = detail::value_depth(v);
  ATTN_CHECK(depth < detail::kMaxValueDepth, "a list would nest deeper than ", detail::kMaxValueDepth,
             " levels");
  l_->depth = std::max(l_->depth, depth + 1);
  l_->has_namespace = l_->has_namespace || detail::holds_namespace(v);
  l_->items.push_back(std::move(v));
}
void Value::set(const std::string& key, Value v) {
  ATTN_CHECK(kind_ == Kind::dict, "jinja::Value::set: expected a dict; got ", detail::kind_name(kind_));
  m_->set(key, std::move(v));
}

namespace detail {

std::shared_ptr<const StrData> make_str(std::string text, bool trusted) {
  auto s = std::make_shared<StrData>();
  if (!text.empty()) s->runs.push_back({text.size(), trusted});
  s->text = std::move(text);
  return s;
}

std::shared_ptr<const StrData> concat_str(const StrData& a, const StrData& b) {
  auto s = std::make_shared<StrData>();
  s->text.reserve(a.text.size() + b.text.size());
  s->text = a.text;
  s->text += b.text;
  s->runs = a.runs;
  for (const Run& r : b.runs) {
    if (!s->runs.empty() && s->runs.back().trusted == r.trusted)
      s->runs.back().len += r.len;
    else
      s->runs.push_back(r);
  }
  return s;
}

const Value* DictData::find(std::string_view key) const {
  const auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &items[it->second].second;
}
int value_depth(const Value& v) {
  if (v.is_list()) return v.list_data()->depth;
  if (v.is_dict()) return v.dict_data()->depth;
  return 0;
}

bool holds_namespace(const Value& v) {
  if (v.is_list()) return v.list_data()->has_namespace;
  if (v.is_dict()) return v.dict_data()->is_namespace || v.dict_data()->has_namespace;
  return false;
}

void DictData::set(const std::string& key, Value v) {
  const int d = value_depth(v);
  ATTN_CHECK(d < kMaxValueDepth, "a dict would nest deeper than ", kMaxValueDepth, " levels");
  const bool ns = holds_namespace(v);
  ATTN_CHECK(!is_namespace || !ns, "a namespace cannot hold a namespace (attribute '", key, "')");
  depth = std::max(depth, d + 1);
  has_namespace = has_namespace || ns;
  const auto it = index.find(key);
  if (it != index.end()) {
    items[it->second].second = std::move(v);
    return;
  }
  index.emplace(key, items.size());
  items.emplace_back(key, std::move(v));
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::undefined:
      return "undefined";
    case Value::Kind::none:
      return "none";
    case Value::Kind::boolean:
      return "bool";
    case Value::Kind::integer:
      return "int";
    case Value::Kind::number:
      return "float";
    case Value::Kind::string:
      return "string";
    case Value::Kind::list:
      return "list";
    case Value::Kind::dict:
      return "dict";
    case Value::Kind::function:
      return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return false;
    case Value::Kind::boolean:
      return v.as_bool();
    case Value::Kind::integer:
      return v.as_int() != 0;
    case Value::Kind::number:
      return v.as_double() != 0;
    case Value::Kind::string:
      return !v.str().empty();
    case Value::Kind::list:
      return !v.items().empty() || v.list_data()->seq == Seq::generator;  // a generator is always true
    case Value::Kind::dict:
      return !v.entries().empty();
    case Value::Kind::function:
      return true;
  }
  return false;
}

// Python's repr(float): the shortest digits that round-trip; scientific below 1e-4 and from 1e16.
std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. -1.2345e+17
  const std::size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp10 = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + eb;
  }
  if (exp10 < 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-exp10 - 1), '0');
    out += digits;
    return out;
  }
  const std::size_t int_len = static_cast<std::size_t>(exp10) + 1;
  if (digits.size() <= int_len) {
    out += digits;
    out.append(int_len - digits.size(), '0');
    out += ".0";
    return out;
  }
  out.append(digits, 0, int_len);
  out += '.';
  out.append(digits, int_len, std::string::npos);
  return out;
}

namespace {

void repr_string(std::string& out, const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  out += q;
}

const char* seq_name(Seq s) {
  switch (s) {
    case Seq::dict_items:
      return "dict_items";
    case Seq::dict_keys:
      return "dict_keys";
    case Seq::dict_values:
      return "dict_values";
    default:
      return "";
  }
}

void repr_into(std::string& out, const Value& v, bool top) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return;
    case Value::Kind::none:
      out += "None";
      return;
    case Value::Kind::boolean:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::number:
      out += python_float(v.as_double());
      return;
    case Value::Kind::string:
      if (top)
        out += v.str();
      else
        repr_string(out, v.str());
      return;
    case Value::Kind::list: {
      const Seq seq = v.list_data()->seq;
      if (seq == Seq::generator)
        throw Error(
            "printing the result of map / select / reject / items (a generator in Jinja2) is not supported; "
            "apply |list first");
      const bool tuple = seq == Seq::tuple;
      const bool view = !tuple && seq != Seq::list;
      if (view) out += std::string(seq_name(seq)) + "(";
      out += tuple ? '(' : '[';
      bool first = true;
      for (const Value& e : v.items()) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, e, false);
      }
      if (tuple && v.items().size() == 1) out += ',';
      out += tuple ? ')' : ']';
      if (view) out += ')';
      return;
    }
    case Value::Kind::dict: {
      out += v.dict_data()->is_namespace ? "<Namespace " : "{";
      bool first = true;
      for (const auto& [k, e] : v.entries()) {
        if (!first) out += ", ";
        first = false;
        repr_string(out, k);
        out += ": ";
        repr_into(out, e, false);
      }
      out += v.dict_data()->is_namespace ? ">" : "}";
      return;
    }
    case Value::Kind::function:
      out += "<function " + v.func_data()->name + ">";
      return;
  }
}

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v, false);
  return out;
}

bool all_trusted(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::string:
      return v.str_trusted();
    case Value::Kind::list:
      for (const Value& e : v.items())
        if (!all_trusted(e)) return false;
      return true;
    case Value::Kind::dict:
      for (const auto& [k, e] : v.entries())
        if (!all_trusted(e)) return false;
      return true;
    default:
      return true;
  }
}

std::shared_ptr<const StrData> to_str(const Value& v) {
  if (v.is_string()) return v.str_data();
  std::string out;
  repr_into(out, v, true);
  return make_str(std::move(out), all_trusted(v));
}

namespace {

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void newline_indent(std::string& out, int indent, int level) {
  out += '\n';
  out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
}

}  // namespace

void to_json(std::string& out, const Value& v, int indent, bool sort_keys, int level) {
  ATTN_CHECK(level < 512, "tojson: the value nests deeper than 512 levels");
  switch (v.kind()) {
    case Value::Kind::none:
      out += "null";
      return;
    case Value::Kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::number: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : python_float(d);
      return;
    }
    case Value::Kind::string:
      json_string(out, v.str());
      return;
    case Value::Kind::list: {
      if (!subscriptable(v))
        throw Error(std::string("tojson: a ") +
                    (seq_of(v) == Seq::generator ? "generator" : seq_name(seq_of(v))) +
                    " is not JSON serializable; apply |list first");
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const Value& e : v.items()) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline_indent(out, indent, level + 1);
        to_json(out, e, indent, sort_keys, level + 1);
      }
      if (indent >= 0) newline_indent(out, indent, level);
      out += ']';
      return;
    }
    case Value::Kind::dict: {
      if (v.entries().empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> order;
      for (const auto& e : v.entries()) order.push_back(&e);
      if (sort_keys)
        std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      bool first = true;
      for (const auto* e : order) {
        if (!first) out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline_indent(out, indent, level + 1);
        json_string(out, e->first);
        out += ": ";
        to_json(out, e->second, indent, sort_keys, level + 1);
      }
      if (indent >= 0) newline_indent(out, indent, level);
      out += '}';
      return;
    }
    case Value::Kind::undefined:
    case Value::Kind::function:
      throw Error(::attn::detail::concat("tojson: a value of type ", kind_name(v.kind()),
                                         " is not JSON serializable"));
  }
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  const auto numeric = [](const Value& v) {
    return v.kind() == K::integer || v.kind() == K::number || v.kind() == K::boolean;
  };
  if (numeric(a) && numeric(b)) {
    const auto as_d = [](const Value& v) {
      return v.kind() == K::number    ? v.as_double()
             : v.kind() == K::integer ? double(v.as_int())
                                      : v.as_bool();
    };
    if (a.kind() != K::number && b.kind() != K::number) {
      const auto as_i = [](const Value& v) {
        return v.kind() == K::integer ? v.as_int() : int64_t(v.as_bool());
      };
      return as_i(a) == as_i(b);
    }
    return as_d(a) == as_d(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::undefined:
    case K::none:
      return true;
    case K::string:
      return a.str() == b.str();
    case K::list: {
      if (a.list_data() == b.list_data()) return true;
      if (a.list_data()->seq != b.list_data()->seq || a.list_data()->seq == Seq::generator) return false;
      if (a.items().size() != b.items().size()) return false;
      for (std::size_t i = 0; i < a.items().size(); ++i)
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case K::dict: {
      if (a.dict_data() == b.dict_data()) return true;
      if (a.dict_data()->is_namespace || b.dict_data()->is_namespace) return false;
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, e] : a.entries()) {
        const Value* o = b.find(k);
        if (!o || !values_equal(e, *o)) return false;
      }
      return true;
    }
    case K::function:
      return a.func_data() == b.func_data();
    default:
      return false;
  }
}

// ---- UTF-8 as Python code points. Bytes that are not valid UTF-8 count as one code point each.

namespace {
std::size_t sequence_length(std::string_view s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}
char32_t decode_at(std::string_view s, std::size_t i, std::size_t n) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (n == 1) return c;
  char32_t cp = c & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}
template <typename F>
void for_each_cp(std::string_view s, F&& f) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    f(i, n, decode_at(s, i, n));
    i += n;
  }
}
}  // namespace

std::vector<std::size_t> code_point_starts(std::string_view s) {
  std::vector<std::size_t> starts;
  for_each_cp(s, [&](std::size_t i, std::size_t, char32_t) { starts.push_back(i); });
  return starts;
}
std::size_t code_point_count(std::string_view s) {
  std::size_t n = 0;
  for_each_cp(s, [&](std::size_t, std::size_t, char32_t) { ++n; });
  return n;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::string py_strip(std::string_view s, std::string_view chars, bool has_chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (has_chars) for_each_cp(chars, [&](std::size_t, std::size_t, char32_t c) { set.push_back(c); });
  const auto strip_it = [&](char32_t c) {
    return has_chars ? std::find(set.begin(), set.end(), c) != set.end() : is_py_space(c);
  };
  struct Cp {
    std::size_t at, len;
    char32_t c;
  };
  std::vector<Cp> cps;
  for_each_cp(s, [&](std::size_t i, std::size_t n, char32_t c) { cps.push_back({i, n, c}); });
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b].c)) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1].c)) --e;
  if (b == e) return {};
  return std::string(s.substr(cps[b].at, cps[e - 1].at + cps[e - 1].len - cps[b].at));
}

std::string py_lower(std::string_view s) {
  std::u32string out;
  for_each_cp(s, [&](std::size_t, std::size_t, char32_t c) { ucd::to_lower(c, out); });
  std::string r;
  for (char32_t c : out) append_utf8(r, c);
  return r;
}

namespace {
// Upper case as the inverse of the lowercase table (simple mappings), plus ß -> SS.
const std::unordered_map<char32_t, char32_t>& upper_table() {
  static const std::unordered_map<char32_t, char32_t> table = [] {
    std::unordered_map<char32_t, char32_t> t;
    std::u32string low;
    for (char32_t c = 0; c < 0x20000; ++c) {
      low.clear();
      ucd::to_lower(c, low);
      if (low.size() == 1 && low[0] != c && !t.count(low[0])) t.emplace(low[0], c);
    }
    for (char32_t c = 'a'; c <= 'z'; ++c) t[c] = c - 32;
    return t;
  }();
  return table;
}
}  // namespace

std::string py_upper(std::string_view s) {
  const auto& t = upper_table();
  std::string r;
  for_each_cp(s, [&](std::size_t, std::size_t, char32_t c) {
    if (c == 0xDF) {
      r += "SS";
      return;
    }
    const auto it = t.find(c);
    append_utf8(r, it == t.end() ? c : it->second);
  });
  return r;
}

}  // namespace detail
}  // namespace attn::text::jinja

#include <attn/core/error.h>
#include <attn/io/json.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>

namespace attn::json {

const char* type_name(Type t) {
  switch (t) {
    case Type::null:
      return "null";
    case Type::boolean:
      return "boolean";
    case Type::number:
      return "number";
    case Type::string:
      return "string";
    case Type::array:
      return "array";
    case Type::object:
      return "object";
  }
  return "?";
}

// ---- Value -------------------------------------------------------------------

Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::boolean;
  v.bool_ = b;
  return v;
}

Value Value::number(double d) {
  ATTN_CHECK(std::isfinite(d), "json: numbers must be finite (JSON has no NaN or Infinity); got ", d);
  Value v;
  v.type_ = Type::number;
  v.num_ = d;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::number;
  v.is_int_ = true;
  v.int_ = i;
  v.num_ = static_cast<double>(i);
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::string;
  v.str_ = std::move(s);
  return v;
}

Value Value::array(std::vector<Value> items) {
  Value v;
  v.type_ = Type::array;
  v.items_ = std::move(items);
  return v;
}

Value Value::object(std::vector<Member> members) {
  Value v;
  v.type_ = Type::object;
  v.members_ = std::move(members);
  return v;
}

#define ATTN_JSON_EXPECT(t) \
  ATTN_CHECK(type_ == (t), "json: expected a value of type ", type_name(t), "; got ", type_name(type_))

bool Value::as_bool() const {
  ATTN_JSON_EXPECT(Type::boolean);
  return bool_;
}

double Value::as_double() const {
  ATTN_JSON_EXPECT(Type::number);
  return num_;
}

int64_t Value::as_int64() const {
  ATTN_JSON_EXPECT(Type::number);
  ATTN_CHECK(is_int_, "json: expected an integer that fits in int64; got ", dump(*this));
  return int_;
}

const std::string& Value::as_string() const {
  ATTN_JSON_EXPECT(Type::string);
  return str_;
}

const std::vector<Value>& Value::items() const {
  ATTN_JSON_EXPECT(Type::array);
  return items_;
}

const std::vector<Value::Member>& Value::members() const {
  ATTN_JSON_EXPECT(Type::object);
  return members_;
}

std::size_t Value::size() const {
  if (type_ == Type::array) return items_.size();
  if (type_ == Type::object) return members_.size();
  return 0;
}

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::object) return nullptr;
  for (const Member& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  ATTN_JSON_EXPECT(Type::object);
  const Value* v = find(key);
  ATTN_CHECK(v != nullptr, "json: object has no member \"", key, "\"");
  return *v;
}

const Value& Value::at(std::size_t index) const {
  ATTN_JSON_EXPECT(Type::array);
  ATTN_CHECK(index < items_.size(), "json: array index ", index, " out of range [0, ", items_.size(), ")");
  return items_[index];
}

void Value::push_back(Value v) {
  ATTN_JSON_EXPECT(Type::array);
  items_.push_back(std::move(v));
}

void Value::set(std::string key, Value v) {
  ATTN_JSON_EXPECT(Type::object);
  for (Member& m : members_)
    if (m.first == key) {
      m.second = std::move(v);
      return;
    }
  members_.emplace_back(std::move(key), std::move(v));
}

#undef ATTN_JSON_EXPECT

bool Value::operator==(const Value& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::null:
      return true;
    case Type::boolean:
      return bool_ == o.bool_;
    case Type::number:
      return is_int_ && o.is_int_ ? int_ == o.int_ : num_ == o.num_;
    case Type::string:
      return str_ == o.str_;
    case Type::array:
      return items_ == o.items_;
    case Type::object:
      return members_ == o.members_;
  }
  return false;
}

// ---- UTF-8 -------------------------------------------------------------------

namespace {

// Length of the well-formed UTF-8 sequence starting at p (Unicode table 3-7),
// or 0 when the bytes there are not one.
std::size_t utf8_sequence(const unsigned char* p, std::size_t avail) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c == 0xe0) {
    n = 3, lo = 0xa0;
  } else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) {
    n = 3;
  } else if (c == 0xed) {
    n = 3, hi = 0x9f;  // excludes the surrogates U+D800..U+DFFF
  } else if (c == 0xf0) {
    n = 4, lo = 0x90;
  } else if (c >= 0xf1 && c <= 0xf3) {
    n = 4;
  } else if (c == 0xf4) {
    n = 4, hi = 0x8f;  // nothing above U+10FFFF
  } else {
    return 0;  // 0x80..0xc1 (continuation or overlong lead) and 0xf5..0xff
  }
  if (avail < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return n;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace

std::size_t find_invalid_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const std::size_t n = utf8_sequence(p + i, bytes.size() - i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

// ---- parser ------------------------------------------------------------------

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& o) : s_(text), opts_(o) {}

  Value document() {
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("expected the end of the document after the top-level value");
    return v;
  }

 private:
  std::string_view s_;
  ParseOptions opts_;
  std::size_t pos_ = 0;

  // What sits at pos_, for error messages.
  std::string got() const {
    if (pos_ >= s_.size()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    char buf[16];
    if (c >= 0x21 && c < 0x7f)
      std::snprintf(buf, sizeof buf, "'%c'", c);
    else
      std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  [[noreturn]] void fail(const std::string& expected) const { fail_at(pos_, expected, got()); }
  // `got` quotes the input: at most its first ~40 bytes (a 100,000-digit number is not echoed whole),
  // cut before a UTF-8 character that would not fit.
  [[noreturn]] void fail_at(std::size_t at, const std::string& expected, const std::string& got) const {
    constexpr std::size_t kQuote = 40;
    std::string shown = got;
    if (shown.size() > kQuote) {
      std::size_t cut = kQuote;
      while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
      shown = shown.substr(0, cut) + "... (" + std::to_string(got.size()) + " bytes)";
    }
    throw Error(detail::concat("json: at byte ", at, ": ", expected, "; got ", shown));
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  bool peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  Value value(int depth) {
    if (pos_ >= s_.size()) fail("expected a value (object, array, string, number, true, false or null)");
    switch (s_[pos_]) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"':
        return Value::string(string());
      case 't':
        literal("true");
        return Value::boolean(true);
      case 'f':
        literal("false");
        return Value::boolean(false);
      case 'n':
        literal("null");
        return Value();
      default:
        if (s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')) return number();
        fail("expected a value (object, array, string, number, true, false or null)");
    }
  }

  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) fail(detail::concat("expected '", word, "'"));
    pos_ += word.size();
  }

  void check_depth(int depth) {
    if (depth > opts_.max_depth)
      fail(detail::concat("expected nesting of at most ", opts_.max_depth, " arrays/objects"));
  }

  Value object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Value obj = Value::object();
    std::unordered_set<std::string> keys;
    skip_ws();
    if (peek('}')) {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_ws();
      if (!peek('"')) fail("expected '\"' to start an object key");
      const std::size_t key_at = pos_;
      std::string key = string();
      if (!keys.insert(key).second)
        fail_at(key_at, "expected unique object keys", "duplicate key \"" + key + "\"");
      skip_ws();
      if (!peek(':')) fail("expected ':' after an object key");
      ++pos_;
      skip_ws();
      Value v = value(depth);
      obj.members_.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (peek(',')) {
        ++pos_;
        continue;
      }
      if (peek('}')) {
        ++pos_;
        return obj;
      }
      fail("expected ',' or '}' after an object member");
    }
  }

  Value array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Value arr = Value::array();
    skip_ws();
    if (peek(']')) {
      ++pos_;
      return arr;
    }
    while (true) {
      skip_ws();
      arr.items_.push_back(value(depth));
      skip_ws();
      if (peek(',')) {
        ++pos_;
        continue;
      }
      if (peek(']')) {
        ++pos_;
        return arr;
      }
      fail("expected ',' or ']' after an array element");
    }
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Four hex digits after "\u"; pos_ is at the first digit.
  uint32_t hex4() {
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = pos_ < s_.size() ? hex_value(s_[pos_]) : -1;
      if (h < 0) fail("expected four hex digits after \\u");
      cp = cp * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    return cp;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("expected '\"' to close the string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("expected an escape (\\n, \\t, \\u00XX, ...) for a control character in a string");
      if (c == '\\') {
        const std::size_t esc_at = pos_;
        ++pos_;
        if (pos_ >= s_.size()) fail("expected an escape character after '\\'");
        const char e = s_[pos_++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xdc00 && cp <= 0xdfff)
              fail_at(esc_at, "expected a high surrogate (\\uD800-\\uDBFF) before a low surrogate",
                      "a lone low surrogate");
            if (cp >= 0xd800 && cp <= 0xdbff) {
              if (s_.substr(pos_, 2) != "\\u")
                fail_at(esc_at, "expected a low surrogate \\uDC00-\\uDFFF after a high surrogate",
                        "a lone high surrogate");
              pos_ += 2;
              const std::size_t lo_at = pos_;
              const uint32_t lo = hex4();
              if (lo < 0xdc00 || lo > 0xdfff)
                fail_at(lo_at, "expected a low surrogate \\uDC00-\\uDFFF after a high surrogate",
                        detail::concat("\\u", s_.substr(lo_at, 4)));
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            append_utf8(out, cp);
            break;
          }
          default:
            pos_ = esc_at + 1;
            fail("expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
        }
        continue;
      }
      if (c < 0x80) {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      const std::size_t n =
          utf8_sequence(reinterpret_cast<const unsigned char*>(s_.data()) + pos_, s_.size() - pos_);
      if (n == 0) fail("expected valid UTF-8 in a string");
      out.append(s_.data() + pos_, n);
      pos_ += n;
    }
  }

  Value number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t d0 = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d0;
    };
    if (peek('-')) ++pos_;
    if (peek('0')) {
      ++pos_;
      if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
        fail("expected no leading zeros in a number");
    } else if (digits() == 0) {
      fail("expected a digit in a number");
    }
    bool integral = true;
    if (peek('.')) {
      integral = false;
      ++pos_;
      if (digits() == 0) fail("expected a digit after the decimal point");
    }
    if (peek('e') || peek('E')) {
      integral = false;
      ++pos_;
      if (peek('+') || peek('-')) ++pos_;
      if (digits() == 0) fail("expected a digit in the exponent");
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    if (integral) {
      int64_t i = 0;
      const auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc() && r.ptr == e) return Value::integer(i);
      // Too large for int64: keep it as a double.
    }
    double d = 0;
    const auto r = std::from_chars(b, e, d);
    if (r.ec != std::errc() || r.ptr != e || !std::isfinite(d))
      fail_at(start, "expected a number within the range of a double", std::string(b, e));
    return Value::number(d);
  }
};

Value parse(std::string_view text, const ParseOptions& options) { return Parser(text, options).document(); }

// ---- writer ------------------------------------------------------------------

namespace {

void dump_string(std::string& out, std::string_view s) {
  const std::size_t bad = find_invalid_utf8(s);
  ATTN_CHECK(bad == std::string::npos, "json: cannot write a string that is not valid UTF-8 (bad byte at ",
             bad, " of ", s.size(), ")");
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
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
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<std::size_t>(indent) * level, ' ');
}

void dump_value(std::string& out, const Value& v, int indent, int level, bool inline_scalars = false) {
  switch (v.type()) {
    case Type::null:
      out += "null";
      return;
    case Type::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Type::number: {
      if (!v.is_integer()) return write_number(out, v.as_double());
      char buf[32];
      const auto r = std::to_chars(buf, buf + sizeof buf, v.as_int64());
      out.append(buf, r.ptr);
      return;
    }
    case Type::string:
      dump_string(out, v.as_string());
      return;
    case Type::array: {
      out += '[';
      const auto& items = v.items();
      bool flat = inline_scalars && indent >= 0;
      for (const Value& item : items) flat = flat && !item.is_array() && !item.is_object();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += flat ? ", " : ",";
        if (!flat) newline(out, indent, level + 1);
        dump_value(out, items[i], indent, level + 1, inline_scalars);
      }
      if (!items.empty() && !flat) newline(out, indent, level);
      out += ']';
      return;
    }
    case Type::object: {
      out += '{';
      const auto& members = v.members();
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, level + 1);
        dump_string(out, members[i].first);
        out += indent < 0 ? ":" : ": ";
        dump_value(out, members[i].second, indent, level + 1, inline_scalars);
      }
      if (!members.empty()) newline(out, indent, level);
      out += '}';
      return;
    }
  }
}

}  // namespace

void write_string(std::string& out, std::string_view s) { dump_string(out, s); }

void write_number(std::string& out, double d) {
  ATTN_CHECK(std::isfinite(d), "json: cannot write ", d, ": JSON has no NaN or infinity");
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, r.ptr);
}

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_value(out, v, indent, 0);
  return out;
}

std::string dump(const Value& v, const DumpOptions& options) {
  std::string out;
  dump_value(out, v, options.indent, 0, options.scalar_arrays_inline);
  return out;
}

}  // namespace attn::json

// A small JSON reader and writer (RFC 8259) for file headers and configs:
// the safetensors header, Hugging Face config.json, fixture metadata.
//
// Parsing is strict: one value per document (surrounded by optional
// whitespace), no comments, no trailing commas, no NaN/Infinity, no duplicate
// object keys, strings must be valid UTF-8 (no overlong forms, no surrogate
// code points, nothing above U+10FFFF) and \u escapes must pair surrogates.
// Nesting is limited (default 128 levels) so hostile input cannot exhaust the
// stack. Every error is an attn::Error naming the byte offset and what was
// expected, e.g.
//   "json: at byte 17: expected ',' or '}' after an object member; got 'x'".
//
// Numbers keep both a double and, when the literal is an integer that fits,
// an exact int64 (tensor sizes and byte offsets must not pass through double).
// Objects keep their members in document order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::json {

enum class Type { null, boolean, number, string, array, object };

// "null", "boolean", "number", "string", "array", "object".
const char* type_name(Type t);

class Value {
 public:
  using Member = std::pair<std::string, Value>;

  Value() = default;  // null
  static Value boolean(bool b);
  static Value number(double d);    // throws if not finite (JSON has no NaN/Inf)
  static Value integer(int64_t i);  // exact
  static Value string(std::string s);
  static Value array(std::vector<Value> items = {});
  static Value object(std::vector<Member> members = {});

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_number() const { return type_ == Type::number; }
  // A number written without fraction or exponent that fits in int64.
  bool is_integer() const { return type_ == Type::number && is_int_; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  // Typed access; each throws attn::Error naming the expected and actual type.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int64() const;  // only for is_integer() values
  const std::string& as_string() const;
  const std::vector<Value>& items() const;     // array elements
  const std::vector<Member>& members() const;  // object members, document order

  // Number of array elements or object members (0 for scalars).
  std::size_t size() const;
  // Object member lookup: nullptr when absent (or when this is not an object).
  const Value* find(std::string_view key) const;
  // Object member lookup that throws when the key is absent.
  const Value& at(std::string_view key) const;
  // Array element; throws when out of range.
  const Value& at(std::size_t index) const;

  // Building. push_back needs an array, set an object (replaces an existing key).
  void push_back(Value v);
  void set(std::string key, Value v);

  bool operator==(const Value& other) const;

 private:
  Type type_ = Type::null;
  bool bool_ = false;
  bool is_int_ = false;
  double num_ = 0;
  int64_t int_ = 0;
  std::string str_;
  std::vector<Value> items_;
  std::vector<Member> members_;

  friend class Parser;
};

struct ParseOptions {
  int max_depth = 128;  // nesting of arrays and objects
};

// Parses exactly one JSON document. Throws attn::Error with the byte offset.
Value parse(std::string_view text, const ParseOptions& options = {});

// Serialises compactly (indent < 0) or pretty-printed with `indent` spaces.
// Strings are written as UTF-8 with only '"', '\\' and control characters
// escaped; doubles use the shortest form that reads back exactly.
std::string dump(const Value& v, int indent = -1);

// The layout of the command-line tools' JSON output: pretty-printed with
// `indent` spaces, except that an array holding only scalars stays on one line
// ("[0.1, 0.9]": a matrix reads as rows); NaN and infinities are written as null
// and -0 as 0.
std::string dump_rows(const Value& v, int indent = 2);

// The writer's two primitives, for code that streams JSON without building a
// Value: a quoted, escaped string (throws on invalid UTF-8) and the shortest
// decimal form that reads back as the same double (throws on NaN/Inf, which
// JSON cannot represent).
void write_string(std::string& out, std::string_view s);
void write_number(std::string& out, double d);

// Checks that `bytes` is well-formed UTF-8 (same rules as the parser).
// Returns the offset of the first bad byte, or npos when valid.
std::size_t find_invalid_utf8(std::string_view bytes);

}  // namespace attn::json

// A small JSON value and writer for `attn explain --json`.
//
// Objects keep their keys in insertion order. Strings are UTF-8 and written
// with the escapes RFC 8259 requires (quote, backslash, control characters);
// non-ASCII text is written as is. Doubles are written with the fewest digits
// that read back to the same double; NaN and infinities, which JSON cannot
// represent, are written as null.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attn::cli {

class Json {
 public:
  enum class Kind { null, boolean, integer, number, string, array, object };

  Json() = default;  // null
  Json(bool b) : kind_(Kind::boolean), b_(b) {}
  Json(int v) : kind_(Kind::integer), i_(v) {}
  Json(int64_t v) : kind_(Kind::integer), i_(v) {}
  Json(double v) : kind_(Kind::number), d_(v) {}
  Json(const char* s) : kind_(Kind::string), s_(s) {}
  Json(std::string s) : kind_(Kind::string), s_(std::move(s)) {}

  static Json array();
  static Json object();
  static Json numbers(const std::vector<double>& v);
  static Json integers(const std::vector<int64_t>& v);
  static Json strings(const std::vector<std::string>& v);
  // Row-major matrix [rows, cols] as an array of row arrays.
  static Json matrix(const std::vector<double>& v, int64_t rows, int64_t cols);

  Kind kind() const { return kind_; }

  // Arrays: appends. Objects: sets (replacing an existing key). Both return *this.
  Json& push(Json v);
  Json& set(const std::string& key, Json v);

  // Compact when indent < 0, else pretty-printed with `indent` spaces per level.
  std::string dump(int indent = 2) const;

 private:
  void write(std::string& out, int indent, int depth) const;

  Kind kind_ = Kind::null;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Json> items_;        // array items / object values
  std::vector<std::string> keys_;  // object keys, parallel to items_
};

// Appends `s` as a JSON string literal (with quotes) to `out`.
void write_json_string(std::string& out, const std::string& s);
// The shortest decimal that reads back as `v` ("null" for NaN/inf).
std::string json_number(double v);

}  // namespace attn::cli

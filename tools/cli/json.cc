#include "json.h"

#include <attn/core/error.h>
#include <attn/io/json.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace attn::cli {

Json Json::array() {
  Json j;
  j.kind_ = Kind::array;
  return j;
}

Json Json::object() {
  Json j;
  j.kind_ = Kind::object;
  return j;
}

Json Json::numbers(const std::vector<double>& v) {
  Json j = array();
  for (double x : v) j.push(x);
  return j;
}

Json Json::integers(const std::vector<int64_t>& v) {
  Json j = array();
  for (int64_t x : v) j.push(x);
  return j;
}

Json Json::strings(const std::vector<std::string>& v) {
  Json j = array();
  for (const auto& s : v) j.push(s);
  return j;
}

Json Json::matrix(const std::vector<double>& v, int64_t rows, int64_t cols) {
  ATTN_CHECK(static_cast<int64_t>(v.size()) == rows * cols, "json: matrix of ", rows, " x ", cols, " needs ",
             rows * cols, " values; got ", v.size());
  Json j = array();
  for (int64_t r = 0; r < rows; ++r)
    j.push(numbers(std::vector<double>(v.begin() + r * cols, v.begin() + (r + 1) * cols)));
  return j;
}

Json& Json::push(Json v) {
  ATTN_CHECK(kind_ == Kind::array, "json: push() needs an array");
  items_.push_back(std::move(v));
  return *this;
}

Json& Json::set(const std::string& key, Json v) {
  ATTN_CHECK(kind_ == Kind::object, "json: set(\"", key, "\") needs an object");
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) {
      items_[i] = std::move(v);
      return *this;
    }
  keys_.push_back(key);
  items_.push_back(std::move(v));
  return *this;
}

void write_json_string(std::string& out, const std::string& s) { attn::json::write_string(out, s); }

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == 0) return "0";  // also for -0
  std::string out;
  attn::json::write_number(out, v);
  return out;
}

void Json::write(std::string& out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out += std::string(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (kind_) {
    case Kind::null:
      out += "null";
      return;
    case Kind::boolean:
      out += b_ ? "true" : "false";
      return;
    case Kind::integer:
      out += std::to_string(i_);
      return;
    case Kind::number:
      out += json_number(d_);
      return;
    case Kind::string:
      write_json_string(out, s_);
      return;
    case Kind::array: {
      if (items_.empty()) {
        out += "[]";
        return;
      }
      // Arrays of scalars stay on one line: matrices read as rows.
      bool flat = true;
      for (const Json& j : items_) flat = flat && j.kind_ != Kind::array && j.kind_ != Kind::object;
      out += '[';
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i) out += flat && indent >= 0 ? ", " : ",";
        if (!flat) newline(depth + 1);
        items_[i].write(out, indent, depth + 1);
      }
      if (!flat) newline(depth);
      out += ']';
      return;
    }
    case Kind::object: {
      if (items_.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        write_json_string(out, keys_[i]);
        out += indent >= 0 ? ": " : ":";
        items_[i].write(out, indent, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

}  // namespace attn::cli

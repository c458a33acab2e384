// What every teaching function (explain modes, quiz, attribution) returns:
// the text a person reads and the same content as JSON for programs.
#pragma once

#include <attn/io/json.h>

#include <string>

namespace attn::teach {

struct Report {
  std::string text;                          // UTF-8, tables aligned by display width
  json::Value json = json::Value::object();  // the same numbers, for `--json`
};

// A JSON document as the teaching commands print it (`--json`): two spaces of
// indent, arrays of numbers or strings on one line (a matrix reads as rows).
// Throws attn::Error for NaN or infinities (JSON cannot hold them).
std::string json_text(const json::Value& v);

}  // namespace attn::teach

// Small helpers of the parity tests that read reference dumps (python/reference/*): a JSON list of
// token ids as a vector, and a test string in a printable form for failure messages.
#pragma once

#include <attn/io/json.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace attn::testing {

// A JSON array of whole numbers (token ids) as int32.
inline std::vector<int32_t> ids_of(const json::Value& v) {
  std::vector<int32_t> out;
  for (const json::Value& x : v.items()) out.push_back(static_cast<int32_t>(x.as_int64()));
  return out;
}

// Control bytes as \xNN, cut to 160 bytes: a test string as a failure message shows it.
inline std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out.size() > 160 ? out.substr(0, 160) + "..." : out;
}

}  // namespace attn::testing

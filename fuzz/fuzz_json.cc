// Fuzzes json::parse (and find_invalid_utf8). Properties checked for every
// document that parses: dump() succeeds and parse(dump(v)) == v, compact and
// pretty-printed.
#include <attn/core/error.h>
#include <attn/io/json.h>

#include <string_view>

#include "fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)json::find_invalid_utf8(text);
  json::ParseOptions options;
  options.max_depth = size > 0 ? 1 + data[0] % 160 : 128;  // also the depth limit's edge
  json::Value v;
  try {
    v = json::parse(text, options);
  } catch (const Error&) {
    return 0;
  }
  const std::string compact = json::dump(v);
  const std::string pretty = json::dump(v, 2);
  json::ParseOptions deep;
  deep.max_depth = 1000;
  FUZZ_ASSERT(json::parse(compact, deep) == v, "compact round trip differs: %s", compact.c_str());
  FUZZ_ASSERT(json::parse(pretty, deep) == v, "pretty round trip differs: %s", pretty.c_str());
  FUZZ_ASSERT(json::find_invalid_utf8(compact) == std::string_view::npos, "dump wrote invalid UTF-8");
  return 0;
}

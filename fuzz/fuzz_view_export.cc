// Fuzzes the attention-export reader (src/viz/export.cc):
// parse_export on arbitrary bytes; for exports it accepts, the weights match
// the token counts, are finite and >= 0, export_json reads back the same, and
// the terminal heatmap renders every set (a few layers and heads).
#include <attn/core/error.h>
#include <attn/viz/export.h>
#include <attn/viz/view.h>

#include <cmath>
#include <string_view>

#include "fuzz_util.h"

using namespace attn;
namespace view = attn::viz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  view::Export e;
  try {
    e = view::parse_export(text);
  } catch (const Error&) {
    return 0;
  }
  FUZZ_ASSERT(!e.sets.empty(), "accepted an export without attention");
  for (const view::AttentionSet& s : e.sets) {
    FUZZ_ASSERT(!s.layers.empty(), "set %s without layers", s.key.c_str());
    for (const view::Layer& l : s.layers) {
      FUZZ_ASSERT(l.rows == static_cast<int64_t>(s.row_tokens.size()) &&
                      l.cols == static_cast<int64_t>(s.col_tokens.size()),
                  "layer shape disagrees with the tokens");
      FUZZ_ASSERT(l.w.size() == static_cast<std::size_t>(l.heads * l.rows * l.cols), "weights size");
      for (double w : l.w) FUZZ_ASSERT(std::isfinite(w) && w >= 0, "weight %g accepted", w);
    }
  }
  const std::string json = view::export_json(e);
  const view::Export back = view::parse_export(json);
  FUZZ_ASSERT(view::export_json(back) == json, "export_json round trip differs");
  for (const view::AttentionSet& s : e.sets)
    for (int64_t layer = -1; layer <= 1; ++layer)
      for (int64_t head = -1; head <= 1; ++head) {
        view::TerminalOptions o;
        o.set = s.key;
        o.layer = layer;
        o.head = head;
        try {
          (void)view::terminal_heatmap(e, o);
        } catch (const Error&) {
        }
      }
  try {
    (void)e.set("no_such_set");
  } catch (const Error&) {
  }
  return 0;
}

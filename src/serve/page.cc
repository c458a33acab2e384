// GET /: the page where a person types a text and sees a served model's attention. The form sends
// the text to GET /view, which answers with the viewer page of `attn view` (src/viz/page.html)
// holding that text's exact attention.
#include <attn/io/json.h>

#include <string>
#include <utility>
#include <vector>

#include "serve/impl.h"

namespace attn::serve::detail {
namespace {

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string index_html(const std::vector<std::pair<std::string, std::string>>& models) {
  std::string options;
  for (const auto& [id, kind] : models)
    options += "<option value=\"" + html_escape(id) + "\">" + html_escape(id) + " (" + html_escape(kind) +
               ")</option>";
  std::string page =
      R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>attn serve: attention</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 46em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } textarea { width: 100%; font: inherit; padding: .4em; box-sizing: border-box; }
select, button { font: inherit; padding: .3em .6em; } .row { margin: .8em 0; } .note { color: #666; font-size: .9em; }
code { background: #f3f3f3; padding: 0 .2em; }
</style></head><body>
<h1>See a model's attention</h1>
<p>Type a text; the server runs the model on it and shows the exact attention weights of every layer and head
(captured from the attention kernel), in the viewer of <code>attn view</code>.</p>
<form id="form" method="get" action="/view">
<div class="row"><label for="model">Model</label>
<select id="model" name="model">)" +
      options + R"(</select></div>
<div class="row"><textarea id="text" name="text" rows="4" placeholder="The cat sat on the mat." required></textarea></div>
<div class="row"><button id="show" type="submit">Show attention</button></div>
</form>
<p class="note" id="status">)" +
      std::string(models.empty() ? "The models are still loading; reload in a moment."
                                 : "Keep it short: attention is captured for short texts only.") +
      R"(</p>
<p class="note">The same from code: <code>POST /v1/attention {"model": ..., "input": ...}</code> returns the
export as JSON; any request to <code>/v1/embeddings</code>, <code>/v1/chat/completions</code> or
<code>/v1/classify</code> may add <code>"attention": {"layers": [0], "heads": [0, 1]}</code>.</p>
</body></html>
)";
  return page;
}

}  // namespace attn::serve::detail
